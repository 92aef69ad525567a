"""One put pipeline: checks -> encode + append -> wait -> record, the async form the same stages completed by a
callback; the answer of a wait and the statistics each decided in one place."""

import re
from pathlib import Path

import pytest

from rmqstore import Message, MessageStore, StoreConfig
from rmqstore.engine.store_put import PutPath
from rmqstore.format.status import AppendMessageResult, AppendMessageStatus, PutMessageResult, PutMessageStatus

ENGINE = Path(__file__).resolve().parents[2] / "rmqstore" / "engine"
S = PutMessageStatus


def _occurrences(pattern: str) -> list[str]:
    rx = re.compile(pattern)
    return [f"{p.name}:{n}" for p in sorted(ENGINE.rglob("*.py"))
            for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if rx.search(line)]


def test_the_statistics_and_the_not_kept_answer_are_written_once():
    assert len(_occurrences(r"\.record_put\(")) == 1  # PutPath.record: every put the Python side answers
    assert len(_occurrences(r"NOT_KEPT\.get\(")) == 1  # PutPath.settle: the answer of a put's waits


@pytest.mark.parametrize("flush, replica, expected", [
    (S.PUT_OK, S.PUT_OK, S.PUT_OK), (S.FLUSH_DISK_TIMEOUT, S.PUT_OK, S.FLUSH_DISK_TIMEOUT),
    (S.PUT_OK, S.FLUSH_SLAVE_TIMEOUT, S.FLUSH_SLAVE_TIMEOUT),
    (S.FLUSH_DISK_TIMEOUT, S.SLAVE_NOT_AVAILABLE, S.SLAVE_NOT_AVAILABLE),  # replication overrides the flush
])
def test_settle_answers_as_rocketmq(flush, replica, expected):
    appended = PutMessageResult(S.PUT_OK, AppendMessageResult(AppendMessageStatus.PUT_OK, 0, 100))
    answer = PutPath.settle(appended, flush, replica)
    assert answer.status is expected and answer.append_result is appended.append_result
    if expected is S.PUT_OK:
        assert answer is appended
    else:
        assert answer.message.startswith("the message was written but") or "SYNC_MASTER" in answer.message


@pytest.mark.parametrize("native", [True, False], ids=["compiled", "pure"])
@pytest.mark.parametrize("flush", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_every_answered_put_is_recorded_by_the_pipelines_last_stage(tmp_path, monkeypatch, native, flush):
    """Sync, async, refused, compiled with waits: each answer the Python side gives passes ``PutPath.record``
    once (the compiled put without waits counts in its own counters), and the statistics add up."""
    recorded = []
    real = PutPath.record

    def spy(self, item, result, begin, tr, clock=None):
        recorded.append(result.status.name)
        return real(self, item, result, begin, tr, *(() if clock is None else (clock,)))

    monkeypatch.setattr(PutPath, "record", spy)
    store = MessageStore(tmp_path, StoreConfig(mapped_file_size_commit_log=65536, flush_disk_type=flush,
                                               native=native))
    store.start()
    try:
        msg = Message("PipeTopic", b"x" * 10, queue_id=0)
        answers = [store.put_message(msg), store.put_message(msg)]
        answers += [f.result(10) for f in [store.async_put_message(msg) for _ in range(3)]]
        answers.append(store.put_message(Message("Pipe Topic?", b"x", queue_id=0)))  # refused by the checks
    finally:
        store.shutdown()
    assert [a.status.name for a in answers] == ["PUT_OK"] * 5 + ["MESSAGE_ILLEGAL"]
    compiled_without_waits = 1 if native and flush == "ASYNC_FLUSH" else 0  # the second sync put
    assert len(recorded) == len(answers) - compiled_without_waits
    stats = store.stats.snapshot()
    assert stats["putMessageTimesTotal"] == 5 and stats["putMessageFailedTimes"] == 1
