"""sysFlag bits of a message (RocketMQ's ``MessageSysFlag``) and helpers to read them.

Two rules of the transaction type are decided here and nowhere else (the C modules spell them
once too, in ``_native/record.h``, and export their constants: ``tests/unit/test_native_constants.py``):

* :func:`gets_queue_unit` -- a record that is not a transaction, or its commit, gets a
  consume-queue unit (and a queue offset, and a delay-level rewrite); a prepared or
  rolled-back one does not (RocketMQ's ``CommitLogDispatcherBuildConsumeQueue``);
* :func:`gets_index_entries` -- every record but a rolled-back one gets index entries
  (``CommitLogDispatcherBuildIndex``).
"""

__all__ = [
    "COMPRESSED_FLAG", "MULTI_TAGS_FLAG", "TRANSACTION_NOT_TYPE", "TRANSACTION_PREPARED_TYPE",
    "TRANSACTION_COMMIT_TYPE", "TRANSACTION_ROLLBACK_TYPE", "TRANSACTION_MASK",
    "BORNHOST_V6_FLAG", "STOREHOSTADDRESS_V6_FLAG", "NEED_UNWRAP_FLAG", "INNER_BATCH_FLAG",
    "COMPRESSION_TYPE_MASK", "COMPRESSION_LZ4_TYPE", "COMPRESSION_ZSTD_TYPE", "COMPRESSION_ZLIB_TYPE",
    "transaction_value", "reset_transaction_value", "describe",
    "QUEUE_UNIT_TYPES", "INDEX_ENTRY_TYPES", "gets_queue_unit", "gets_index_entries",
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

#: the transaction types whose records get a consume-queue unit (see :func:`gets_queue_unit`)
QUEUE_UNIT_TYPES = (TRANSACTION_NOT_TYPE, TRANSACTION_COMMIT_TYPE)
#: the transaction types whose records get index entries (see :func:`gets_index_entries`)
INDEX_ENTRY_TYPES = (TRANSACTION_NOT_TYPE, TRANSACTION_PREPARED_TYPE, TRANSACTION_COMMIT_TYPE)

_TXN_NAMES = {0x0: "NOT", 0x4: "PREPARED", 0x8: "COMMIT", 0xC: "ROLLBACK"}
_COMPRESSION_NAMES = {0x0: "ZLIB", 0x100: "LZ4", 0x200: "ZSTD", 0x300: "ZLIB"}


def transaction_value(sys_flag: int) -> int:
    """The transaction type bits (``MessageSysFlag.getTransactionValue``)."""
    return sys_flag & TRANSACTION_MASK


def gets_queue_unit(sys_flag: int) -> bool:
    """Does a record of this sysFlag get a consume-queue unit?  Not a transaction, or its commit:
    yes; prepared or rolled back: no (and no queue offset of its own, and no delay rewrite)."""
    return sys_flag & TRANSACTION_MASK in QUEUE_UNIT_TYPES


def gets_index_entries(sys_flag: int) -> bool:
    """Does a record of this sysFlag get index entries?  Every one but a rolled-back transaction's."""
    return sys_flag & TRANSACTION_MASK != TRANSACTION_ROLLBACK_TYPE


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
