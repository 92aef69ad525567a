"""What a producer hands the store: :class:`Message` and :class:`MessageBatch`.

``Message`` mirrors RocketMQ's ``MessageExtBrokerInner``: the topic, queue and body, the
properties *string* exactly as it will be stored, the sysFlag, and the born/store hosts
and timestamps.  Three optional fields exist for replay only (``rmqstore load``, through
:meth:`~rmqstore.store.MessageStore.replay_message`): a recorded ``store_timestamp``,
``queue_offset`` and ``body_crc`` that the put path keeps instead of deciding them
itself, so a recorded record is written again byte for byte -- a damaged body's CRC
included.  ``put_message`` refuses a message that sets any of them (MESSAGE_ILLEGAL).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .properties import (JavaHashMap, WAIT, properties_to_string, string_to_properties)
from .record import Address

__all__ = ["Message", "BatchItem", "MessageBatch"]


def _props_string(props) -> str:
    if props is None:
        return ""
    if isinstance(props, str):
        return props
    if isinstance(props, dict):
        return properties_to_string(props)
    raise TypeError(f"properties must be a str or a dict, got {type(props).__name__}")


@dataclass(slots=True)
class Message:
    """One message to put (``MessageExtBrokerInner``).

    ``properties`` is the stored string (``k\\x01v\\x02...``) or a dict that is
    serialised on construction.  ``born_host``/``store_host`` take ``"ip:port"``
    strings or :class:`~rmqstore.format.record.Address`; ``store_host=None`` means the store's own.
    """

    topic: str
    body: bytes = b""
    queue_id: int = 0
    flag: int = 0
    properties: str = ""
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Address | str = "127.0.0.1:0"
    store_host: Address | str | None = None
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    # replay only (MessageStore.replay_message): recorded values kept instead of decided by the
    # store; put_message refuses a message that sets any of them
    store_timestamp: int | None = None
    queue_offset: int | None = None
    body_crc: int | None = None
    #: the DELAY property was cleared from the properties *map* while the stored text keeps it
    #: (a ScheduleMessageService delivery, as RocketMQ 4.9.8 stores one): no delay rewrite
    delay_cleared: bool = False
    #: the WAIT value the properties *map* holds while the stored text lacks it: RocketMQ 4.9.8's send
    #: path takes WAIT out of the text (9 bytes a message) and puts it back in the map, and a delay
    #: rewrite stores the map, so the value comes back there. "true" (what a producer's message carries)
    #: unless the sender says otherwise; None when the client sent no WAIT at all (ConsumeOrderly's
    #: send-back copies the consumed message's properties, which have none)
    wait_in_map: str | None = "true"
    _props_map: JavaHashMap | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        if not isinstance(self.properties, str):
            self.properties = _props_string(self.properties)

    @property
    def property_map(self) -> JavaHashMap:
        """The properties parsed as RocketMQ parses them (cached)."""
        if self._props_map is None:
            self._props_map = string_to_properties(self.properties)
        return self._props_map

    def get_property(self, name: str) -> str | None:
        return self.property_map.get(name)

    @property
    def wait_store_msg_ok(self) -> bool:
        """``Message.isWaitStoreMsgOK``: true unless WAIT is set to something not 'true'."""
        if WAIT + "\x01" not in self.properties:
            return True
        v = self.get_property(WAIT)
        return v is None or v.lower() == "true"

    @property
    def delay_time_level(self) -> int:
        if self.delay_cleared or "DELAY\x01" not in self.properties:
            return 0
        v = self.get_property("DELAY")
        try:
            return int(v) if v is not None else 0
        except ValueError:
            return 0


@dataclass(slots=True)
class BatchItem:
    """One inner message of a batch: body, its own properties string, its flag."""

    body: bytes
    properties: str = ""
    flag: int = 0


@dataclass(slots=True)
class MessageBatch:
    """A batch for ``put_messages`` (``MessageExtBatch``): one topic and queue, many bodies.

    Batch-level ``properties`` (e.g. WAIT, CLUSTER) are appended to every inner message's
    properties, as the 4.9.8 store does.
    """

    topic: str
    items: list[BatchItem]
    queue_id: int = 0
    sys_flag: int = 0
    properties: str = ""
    born_timestamp: int = 0
    born_host: Address | str = "127.0.0.1:0"
    store_host: Address | str | None = None
    reconsume_times: int = 0

    def __post_init__(self):
        if not isinstance(self.properties, str):
            self.properties = _props_string(self.properties)
        self.items = [it if isinstance(it, BatchItem) else BatchItem(*it) if isinstance(it, tuple)
                      else BatchItem(it) for it in self.items]

    @property
    def wait_store_msg_ok(self) -> bool:
        v = string_to_properties(self.properties).get(WAIT)
        return v is None or v.lower() == "true"

    @property
    def delay_time_level(self) -> int:
        v = string_to_properties(self.properties).get("DELAY")
        try:
            return int(v) if v is not None else 0
        except ValueError:
            return 0
