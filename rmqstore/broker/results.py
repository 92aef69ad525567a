"""A store put's result as a RocketMQ response code (``SendMessageProcessor.handlePutMessageResult``).

Every place that puts for a client -- a send, a send-back, a transaction's commit --
answers the same way, so the mapping lives here once.
"""

from __future__ import annotations

from ..remoting import ResponseCode
from ..format.status import PutMessageStatus

__all__ = ["response_of_put"]

_PUT_RESPONSE = {
    PutMessageStatus.PUT_OK: (ResponseCode.SUCCESS, None),
    PutMessageStatus.FLUSH_DISK_TIMEOUT: (ResponseCode.FLUSH_DISK_TIMEOUT, None),
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: (ResponseCode.FLUSH_SLAVE_TIMEOUT, None),
    PutMessageStatus.SLAVE_NOT_AVAILABLE: (ResponseCode.SLAVE_NOT_AVAILABLE, None),
    PutMessageStatus.CREATE_MAPEDFILE_FAILED: (ResponseCode.SYSTEM_ERROR,
                                               "create mapped file failed, server is busy or broken."),
    PutMessageStatus.MESSAGE_ILLEGAL: (ResponseCode.MESSAGE_ILLEGAL,
                                       "the message is illegal, maybe msg body or properties length not matched. "
                                       "msg body length limit 128k, msg properties length limit 32k."),
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: (ResponseCode.MESSAGE_ILLEGAL,
                                                "the message is illegal, maybe msg properties length limit 32k."),
    PutMessageStatus.SERVICE_NOT_AVAILABLE: (ResponseCode.SERVICE_NOT_AVAILABLE,
                                             "service not available now. It may be caused by one of the following "
                                             "reasons: the broker's disk is full, messages are put to the slave, "
                                             "message store has been shut down, etc."),
    PutMessageStatus.OS_PAGECACHE_BUSY: (ResponseCode.SYSTEM_ERROR,
                                         "[PC_SYNCHRONIZED]broker busy, start flow control for a while"),
    PutMessageStatus.LMQ_CONSUME_QUEUE_NUM_EXCEEDED: (ResponseCode.SYSTEM_ERROR,
                                                      "[LMQ_CONSUME_QUEUE_NUM_EXCEEDED]broker config "
                                                      "enableLmq and enableMultiDispatch, lmq consumeQueue num "
                                                      "exceed maxLmqConsumeQueueNum config num"),
    PutMessageStatus.UNKNOWN_ERROR: (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"),
}


def response_of_put(result) -> tuple[int, str | None]:
    """(response code, remark) of a PutMessageResult (``handlePutMessageResult``)."""
    code, remark = _PUT_RESPONSE.get(result.status, (ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"))
    if result.message and remark is not None:
        remark = f"{remark} ({result.message})"
    return code, remark
