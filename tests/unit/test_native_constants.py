"""Every constant a compiled module exports is Python's: one value, two spellings, checked equal.

The C modules spell the record's layout, limits and sysFlag bits in ``rmqstore/_native/record.h``
(and a few of their own); each exports them -- ``LAYOUT`` (record positions) and ``CONSTANTS``
(the rest) -- and this test holds each one to the Python value it stands for.  A constant that C
exports and this table does not name fails too: every number C decides by is checked, none is
only assumed.
"""

from __future__ import annotations

import pytest

from conftest import compiled_module
from rmqstore.format import layout, sysflag
from rmqstore.common import native
from rmqstore.engine.dispatch import SCHEDULE_TOPIC
from rmqstore.format.walk import MIN_RECORD_SIZE
from rmqstore.remoting import frame

#: each name C exports in CONSTANTS -> Python's value of it
PYTHON = {
    "MESSAGE_MAGIC_CODE": layout.MESSAGE_MAGIC_CODE,
    "MESSAGE_MAGIC_CODE_V2": layout.MESSAGE_MAGIC_CODE_V2,
    "BLANK_MAGIC_CODE": layout.BLANK_MAGIC_CODE,
    "BORNHOST_V6_FLAG": sysflag.BORNHOST_V6_FLAG,
    "STOREHOSTADDRESS_V6_FLAG": sysflag.STOREHOSTADDRESS_V6_FLAG,
    "TRANSACTION_MASK": sysflag.TRANSACTION_MASK,
    "TRANSACTION_NOT_TYPE": sysflag.TRANSACTION_NOT_TYPE,
    "TRANSACTION_PREPARED_TYPE": sysflag.TRANSACTION_PREPARED_TYPE,
    "TRANSACTION_COMMIT_TYPE": sysflag.TRANSACTION_COMMIT_TYPE,
    "TRANSACTION_ROLLBACK_TYPE": sysflag.TRANSACTION_ROLLBACK_TYPE,
    "MAX_TOPIC_BYTES_V1": layout.MAX_TOPIC_BYTES_V1,
    "MAX_PROPERTIES_BYTES": layout.MAX_PROPERTIES_BYTES,
    "END_FILE_MIN_BLANK_LENGTH": layout.END_FILE_MIN_BLANK_LENGTH,
    "MIN_RECORD_SIZE": MIN_RECORD_SIZE,
    "CONSUME_QUEUE_UNIT_SIZE": layout.CONSUME_QUEUE_UNIT.size,
    "INDEX_HEADER_SIZE": layout.INDEX_HEADER.size,
    "INDEX_SLOT_SIZE": layout.INDEX_SLOT.size,
    "INDEX_ENTRY_SIZE": layout.INDEX_ENTRY.size,
    "SCHEDULE_TOPIC": SCHEDULE_TOPIC,
    "MAX_FRAME_LENGTH": frame.MAX_FRAME_LENGTH,
    "BINARY_HEADER_FIXED_SIZE": frame._BINARY_FIXED.size,
    "RPC_TYPE_RESPONSE": frame.RPC_TYPE_RESPONSE,
}

#: each position C exports in LAYOUT -> Python's (the layout table's)
POSITIONS = {
    "TOTALSIZE": layout.message_field_position("total_size"),
    "MAGICCODE": layout.message_field_position("magic_code"),
    "BODYCRC": layout.message_field_position("body_crc"),
    "QUEUEID": layout.message_field_position("queue_id"),
    "FLAG": layout.message_field_position("flag"),
    "QUEUEOFFSET": layout.QUEUE_OFFSET_POSITION,
    "PHYSICALOFFSET": layout.PHYSICAL_OFFSET_POSITION,
    "SYSFLAG": layout.SYSFLAG_POSITION,
    "BORNTIMESTAMP": layout.message_field_position("born_timestamp"),
    "BORNHOST": layout.message_field_position("born_host"),
    "STORETIMESTAMP": layout.store_timestamp_position(0),
    "STORETIMESTAMP_V6": layout.store_timestamp_position(sysflag.BORNHOST_V6_FLAG),
    "BODYLENGTH": layout.message_field_position("body"),
    "BODYLENGTH_V6": layout.message_field_position("body", sysflag.BORNHOST_V6_FLAG
                                                   | sysflag.STOREHOSTADDRESS_V6_FLAG),
}

#: the modules that decide nothing by the record (the group commit's gate)
NO_CONSTANTS = {"_cwait"}
#: the modules with constants of their own but none of the record's (the remoting codec)
NO_RECORD = {"_cframe"}


@pytest.mark.parametrize("name", sorted(native.MODULES))
def test_every_exported_c_constant_is_pythons(name):
    mod = compiled_module(name)
    if name in NO_CONSTANTS:
        assert not hasattr(mod, "CONSTANTS") and not hasattr(mod, "LAYOUT")
        return
    constants = mod.CONSTANTS
    unknown = sorted(set(constants) - set(PYTHON))
    assert not unknown, f"rmqstore.{name} exports constants with no Python counterpart here: {unknown}"
    assert constants == {k: PYTHON[k] for k in constants}
    if name in NO_RECORD:
        return
    # every module reading records shares record.h's constants
    assert {"MESSAGE_MAGIC_CODE", "TRANSACTION_MASK", "MAX_PROPERTIES_BYTES"} <= set(constants)
    layout_positions = getattr(mod, "LAYOUT", {})
    assert set(layout_positions) <= set(POSITIONS)
    assert layout_positions == {k: POSITIONS[k] for k in layout_positions}


def test_the_tables_here_name_python_values_that_exist():
    """The Python side of each pair is what the record and the rules say (not a copy of C's)."""
    assert PYTHON["MAX_PROPERTIES_BYTES"] == layout.LENGTH_LIMITS["str16"] == 2**15 - 1
    assert PYTHON["MAX_TOPIC_BYTES_V1"] == layout.LENGTH_LIMITS["str8"] == 2**7 - 1
    assert POSITIONS["BODYLENGTH"] == 84 and POSITIONS["STORETIMESTAMP_V6"] == 68
