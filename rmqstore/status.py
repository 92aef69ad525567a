"""Results of a put: RocketMQ's PutMessageStatus, AppendMessageStatus and result types."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

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


@dataclass
class AppendMessageResult:
    """What ``do_append`` did: where it wrote, how much, and the queue offset it used."""

    status: AppendMessageStatus
    wrote_offset: int = 0
    wrote_bytes: int = 0
    msg_id: str = ""
    store_timestamp: int = 0
    logics_offset: int = 0
    msg_num: int = 1
    pagecache_rt: int = 0

    @property
    def ok(self) -> bool:
        return self.status is AppendMessageStatus.PUT_OK


@dataclass
class PutMessageResult:
    """The store's answer to a put. ``message`` explains any status other than PUT_OK."""

    status: PutMessageStatus
    append_result: AppendMessageResult | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK

    def __repr__(self) -> str:
        extra = f", {self.message!r}" if self.message else ""
        ar = self.append_result
        where = f", offset={ar.wrote_offset}, bytes={ar.wrote_bytes}, queue_offset={ar.logics_offset}" if ar else ""
        return f"PutMessageResult({self.status.name}{where}{extra})"
