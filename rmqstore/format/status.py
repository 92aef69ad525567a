"""Results of a put: RocketMQ's PutMessageStatus, AppendMessageStatus and result types."""

from __future__ import annotations

import enum

from .message_id import create_message_id

__all__ = ["PutMessageStatus", "AppendMessageStatus", "AppendMessageResult", "PutMessageResult"]


class PutMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"
    LMQ_CONSUME_QUEUE_NUM_EXCEEDED = "LMQ_CONSUME_QUEUE_NUM_EXCEEDED"


class AppendMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    END_OF_FILE = "END_OF_FILE"
    MESSAGE_SIZE_EXCEEDED = "MESSAGE_SIZE_EXCEEDED"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class AppendMessageResult:
    """What ``do_append`` did: where it wrote, how much, and the queue offset it used.

    ``msg_id`` is computed on first access (RocketMQ uses a supplier for the same reason:
    most puts never look at it).
    """

    __slots__ = ("status", "wrote_offset", "wrote_bytes", "_msg_id", "store_host", "store_timestamp",
                 "logics_offset", "msg_num", "pagecache_rt", "_offsets")

    def __init__(self, status, wrote_offset=0, wrote_bytes=0, msg_id=None, store_timestamp=0,
                 logics_offset=0, msg_num=1, pagecache_rt=0, *, store_host=None, offsets=None):
        self.status = status
        self.wrote_offset = wrote_offset
        self.wrote_bytes = wrote_bytes
        self._msg_id = msg_id
        self.store_host = store_host
        self.store_timestamp = store_timestamp
        self.logics_offset = logics_offset
        self.msg_num = msg_num
        self.pagecache_rt = pagecache_rt
        self._offsets = offsets

    @property
    def msg_id(self) -> str:
        """Offset msgId(s): comma-joined for a batch, "" for a blank."""
        if self._msg_id is None:
            if self.store_host is None:
                self._msg_id = ""
            elif self._offsets is None:  # one message (a send): no join
                self._msg_id = create_message_id(self.store_host, self.wrote_offset)
            else:
                self._msg_id = ",".join(create_message_id(self.store_host, o) for o in self._offsets)
        return self._msg_id

    @property
    def ok(self) -> bool:
        return self.status is AppendMessageStatus.PUT_OK

    def __repr__(self) -> str:
        return (f"AppendMessageResult({self.status.name}, wrote_offset={self.wrote_offset}, "
                f"wrote_bytes={self.wrote_bytes}, logics_offset={self.logics_offset}, msg_num={self.msg_num})")


class PutMessageResult:
    """The store's answer to a put. ``message`` explains any status other than PUT_OK."""

    __slots__ = ("status", "append_result", "message")

    def __init__(self, status: PutMessageStatus, append_result: AppendMessageResult | None = None,
                 message: str = ""):
        self.status = status
        self.append_result = append_result
        self.message = message

    def __eq__(self, other):
        return (isinstance(other, PutMessageResult) and self.status is other.status
                and self.message == other.message)

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK

    def __repr__(self) -> str:
        extra = f", {self.message!r}" if self.message else ""
        ar = self.append_result
        where = f", offset={ar.wrote_offset}, bytes={ar.wrote_bytes}, queue_offset={ar.logics_offset}" if ar else ""
        return f"PutMessageResult({self.status.name}{where}{extra})"
