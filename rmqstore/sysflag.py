"""sysFlag bits of a message (RocketMQ's ``MessageSysFlag``) and helpers to read them."""

__all__ = [
    "COMPRESSED_FLAG", "MULTI_TAGS_FLAG", "TRANSACTION_NOT_TYPE", "TRANSACTION_PREPARED_TYPE",
    "TRANSACTION_COMMIT_TYPE", "TRANSACTION_ROLLBACK_TYPE", "TRANSACTION_MASK",
    "BORNHOST_V6_FLAG", "STOREHOSTADDRESS_V6_FLAG", "NEED_UNWRAP_FLAG", "INNER_BATCH_FLAG",
    "COMPRESSION_TYPE_MASK", "COMPRESSION_LZ4_TYPE", "COMPRESSION_ZSTD_TYPE", "COMPRESSION_ZLIB_TYPE",
    "transaction_value", "reset_transaction_value", "is_transaction_half", "describe",
]

COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700
COMPRESSION_LZ4_TYPE = 0x100
COMPRESSION_ZSTD_TYPE = 0x200
COMPRESSION_ZLIB_TYPE = 0x300

_TXN_NAMES = {0x0: "NOT", 0x4: "PREPARED", 0x8: "COMMIT", 0xC: "ROLLBACK"}
_COMPRESSION_NAMES = {0x0: "ZLIB", 0x100: "LZ4", 0x200: "ZSTD", 0x300: "ZLIB"}


def transaction_value(sys_flag: int) -> int:
    """The transaction type bits (``MessageSysFlag.getTransactionValue``)."""
    return sys_flag & TRANSACTION_MASK


def is_transaction_half(sys_flag: int) -> bool:
    """True for a prepared or rolled-back transaction message: a record RocketMQ writes to the
    commitlog but gives no consume-queue unit (its queue offset does not advance)."""
    return sys_flag & TRANSACTION_MASK in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)


def reset_transaction_value(sys_flag: int, txn_type: int) -> int:
    return (sys_flag & ~TRANSACTION_MASK) | txn_type


def describe(sys_flag: int) -> list[str]:
    """Human names of the bits set, e.g. ``['COMPRESSED(ZLIB)', 'TXN_PREPARED']``."""
    names = []
    if sys_flag & COMPRESSED_FLAG:
        names.append(f"COMPRESSED({_COMPRESSION_NAMES[sys_flag & COMPRESSION_TYPE_MASK]})")
    if sys_flag & MULTI_TAGS_FLAG:
        names.append("MULTI_TAGS")
    txn = transaction_value(sys_flag)
    if txn:
        names.append("TXN_" + _TXN_NAMES[txn])
    if sys_flag & BORNHOST_V6_FLAG:
        names.append("BORNHOST_V6")
    if sys_flag & STOREHOSTADDRESS_V6_FLAG:
        names.append("STOREHOST_V6")
    if sys_flag & NEED_UNWRAP_FLAG:
        names.append("NEED_UNWRAP")
    if sys_flag & INNER_BATCH_FLAG:
        names.append("INNER_BATCH")
    return names
