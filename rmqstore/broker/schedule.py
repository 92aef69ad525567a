"""Delayed messages come due (RocketMQ's ``ScheduleMessageService``).

A message sent with a delay level is not stored under its topic: the store's put path
rewrites it to ``SCHEDULE_TOPIC_XXXX``, queue ``level - 1``, keeping the real topic and
queue in REAL_TOPIC/REAL_QID, and the dispatcher writes the *delivery time* (store time +
the level's delay) as the unit's tags code.  Each level's queue is therefore in delivery
order, and the service only ever looks at the head of each: every 100 ms it reads the
units from the level's offset, and while a unit is due it puts the message again under
its real topic and queue, then moves the offset past it; the first unit not yet due
stops that level until the next round.  The offsets (level -> queue offset) are in
``config/delayOffset.json`` so a restart neither loses nor repeats a delivery it
persisted.

The delivered message is the stored one with its topic and queue put back; as RocketMQ
4.9.8 stores it, its properties text keeps DELAY, REAL_TOPIC and REAL_QID (only the
properties map drops DELAY, which :attr:`Message.delay_cleared` stands for), its born and
store hosts and times are the original's.
"""

from __future__ import annotations

import asyncio
import logging

from ..format.message import Message
from ..format.properties import REAL_QID, REAL_TOPIC, parse_properties
from ..files.store_paths import DELAY_OFFSET_JSON, config_path
from .jsonfmt import dumps, read_config_file, write_config_file
from .tasks import BackgroundTask
from .topics import SCHEDULE_TOPIC

__all__ = ["ScheduleMessageService"]

log = logging.getLogger(__name__)

_ROUND_S = 0.1  # DELAY_FOR_A_WHILE
_AFTER_FAILURE_S = 10.0  # DELAY_FOR_A_PERIOD


class ScheduleMessageService:
    def __init__(self, broker):
        self.broker = broker
        self.path = config_path(broker.store_root, DELAY_OFFSET_JSON)
        self.offsets: dict[int, int] = {}
        self._retry_at: dict[int, float] = {}
        self._task = BackgroundTask()

    def load(self) -> None:
        data = read_config_file(self.path)
        if isinstance(data, dict):
            try:
                self.offsets = {int(k): int(v) for k, v in (data.get("offsetTable") or {}).items()}
            except (TypeError, ValueError):
                log.warning("%s: unreadable offsets, starting from 0", self.path)

    def persist(self) -> None:
        write_config_file(self.path, dumps({"offsetTable": dict(sorted(self.offsets.items()))}, pretty=True))

    def start(self) -> None:
        self.load()
        self._task.start(self._run())

    async def stop(self) -> None:
        await self._task.stop()
        self.persist()

    async def _run(self) -> None:
        while True:
            for level in self.broker.store.config.delay_level_table():
                try:
                    await self.deliver_due(level)
                except Exception:
                    log.exception("delivering delay level %d failed", level)
            await asyncio.sleep(_ROUND_S)

    async def deliver_due(self, level: int) -> int:
        """Deliver the due messages at the head of ``level``'s queue; returns how many."""
        loop = asyncio.get_running_loop()
        if self._retry_at.get(level, 0) > loop.time():
            return 0
        store = self.broker.store
        queue_id = level - 1
        offset = max(self.offsets.get(level, 0), store.get_min_offset_in_queue(SCHEDULE_TOPIC, queue_id))
        if offset >= store.get_max_offset_in_queue(SCHEDULE_TOPIC, queue_id):
            return 0
        result = store.get_message("SCHEDULE", SCHEDULE_TOPIC, queue_id, offset, 32)
        delivered = 0
        now = store.clock()
        for record, unit in zip(result.messages, result.units):
            if unit.tags_code > now:
                break
            msg = self._real_message(record)
            if msg is None:
                log.error("delayed message at %d has no REAL_TOPIC/REAL_QID: skipped", unit.commit_log_offset)
                self.offsets[level] = unit.queue_offset + 1
                continue
            put = await asyncio.wrap_future(store.async_put_message(msg))
            self.broker.stats.count_delivered(level, msg, put)
            if not put.ok:
                log.error("delivering delayed message at %d failed: %s", unit.commit_log_offset, put)
                self._retry_at[level] = loop.time() + _AFTER_FAILURE_S
                break
            delivered += 1
            self.offsets[level] = unit.queue_offset + 1
        if not result.messages and result.next_begin_offset > offset:  # skip holes (removed files)
            self.offsets[level] = result.next_begin_offset
        return delivered

    @staticmethod
    def _real_message(record) -> Message | None:
        props = parse_properties(record.properties)
        try:
            topic, queue_id = props[REAL_TOPIC], int(props[REAL_QID])
        except (KeyError, ValueError):
            return None
        return Message(topic=topic, body=record.body, queue_id=queue_id, flag=record.flag,
                       properties=record.properties, sys_flag=record.sys_flag,
                       born_timestamp=record.born_timestamp, born_host=record.born_host,
                       store_host=record.store_host, reconsume_times=record.reconsume_times,
                       prepared_transaction_offset=record.prepared_transaction_offset, delay_cleared=True)
