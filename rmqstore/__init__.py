"""rmqstore: Apache RocketMQ's message store, rebuilt in Python, byte-compatible.

The public API in one place; see the module docstrings for the ideas behind each part.
"""

from .common.config import BrokerRole, FlushDiskType, StoreConfig
from .common.errors import CorruptRecordError, LayoutError, RmqStoreError, StoreError, StoreStateError
from .format.message import BatchItem, Message, MessageBatch
from .format.record import Address, BlankRecord, MessageRecord, create_message_id, decode_message_id, decode_record
from .format.status import AppendMessageResult, AppendMessageStatus, PutMessageResult, PutMessageStatus
from .store import MessageStore, open_store

__all__ = [
    "Address", "AppendMessageResult", "AppendMessageStatus", "BatchItem", "BlankRecord", "BrokerRole",
    "CorruptRecordError", "FlushDiskType", "LayoutError", "Message", "MessageBatch", "MessageRecord",
    "MessageStore", "PutMessageResult", "PutMessageStatus", "RmqStoreError", "StoreConfig", "StoreError",
    "StoreStateError", "create_message_id", "open_store", "decode_message_id", "decode_record",
]

__version__ = "0.1.0"
