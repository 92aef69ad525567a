"""Tracing is an observer at the stage boundaries: a null tracer when off, never a guard in the business logic."""

import re
from pathlib import Path

import pytest

from rmqstore import Message, MessageStore, StoreConfig
from rmqstore.common import native
from rmqstore.common.trace import RecordingTracer

ROOT = Path(__file__).resolve().parents[2] / "rmqstore"
GUARD = re.compile(r"\b(tracer|tr)\s+is\s+(not\s+)?None\b")


def test_no_tracer_guards_in_the_engine_or_the_send_processor():
    """The engine and the broker's send processor call their tracer's hooks and never ask whether one is set."""
    sources = sorted((ROOT / "engine").rglob("*.py")) + [ROOT / "broker" / "send.py"]
    guards = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in sources
              for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
              if GUARD.search(line) and "def put_trace" not in line and "return NULL_PUT_TRACE" not in line]
    assert guards == []


def test_the_tracing_observer_has_every_hook_of_the_null_one():
    from rmqstore.common.trace import NULL_TRACER
    from rmqstore.engine.put_trace import NullPutTrace, PutTrace

    hooks = {name for name, value in vars(NullPutTrace).items() if callable(value) and not name.startswith("_")}
    assert len(hooks) > 20
    assert hooks <= set(vars(PutTrace)), hooks - set(vars(PutTrace))
    assert (NullPutTrace.active, PutTrace.active, NULL_TRACER.active, RecordingTracer.active) == (False, True, False, True)


class _Untouchable:
    """Any attribute read is an error: a hook given one computes nothing from it."""

    def __getattr__(self, name):
        raise AssertionError(f"the null tracer read .{name}")


def test_the_null_tracers_hooks_compute_nothing():
    from rmqstore.common.trace import NULL_TRACER
    from rmqstore.engine.put_trace import NULL_PUT_TRACE, NullPutTrace

    x = _Untouchable()
    for name, hook in vars(NullPutTrace).items():
        if name.startswith("_") or not callable(hook) or name in ("flush", "commit"):
            continue
        arity = hook.__code__.co_argcount - 1
        assert getattr(NULL_PUT_TRACE, name)(*[x] * arity) is None
    NULL_TRACER.event("send.response", status="OK")  # the broker's: drops it

    class Queue:
        def flush(self, least_pages):
            return ("flushed", least_pages)

        def commit(self, least_pages):
            return ("committed", least_pages)

    assert NULL_PUT_TRACE.flush(Queue(), 4, "FlushRealTimeService") == ("flushed", 4)  # the work, nothing more
    assert NULL_PUT_TRACE.commit(Queue(), 0) == ("committed", 0)


def test_an_untraced_store_holds_the_null_tracer_and_takes_the_compiled_put(tmp_path):
    from rmqstore.engine.put_trace import NULL_PUT_TRACE, PutTrace

    if native.module("_cput", True) is None:
        pytest.skip("the compiled put is not built")
    store = MessageStore(tmp_path, StoreConfig(mapped_file_size_commit_log=65536))
    store.start()
    try:
        msg = Message("TraceTopic", b"x", queue_id=0)
        assert store.put_message(msg).ok  # (the pure path checks the topic once)
        assert store.tracer is None and store.commit_log.tracer is NULL_PUT_TRACE
        assert store.put_path.putter.put(msg) is not None  # the null tracer: the compiled put runs
        tracer = RecordingTracer()
        store.tracer = tracer
        assert store.tracer is tracer and isinstance(store.commit_log.tracer, PutTrace)
        assert store.put_path.putter.put(msg) is None  # traced: the pure path, whose stages the trace shows
        assert store.put_message(msg).ok and "append.record" in {e["stage"] for e in tracer.events}
        store.tracer = None
        assert store.commit_log.tracer is NULL_PUT_TRACE and store.put_path.putter.put(msg) is not None
    finally:
        store.shutdown()


@pytest.mark.parametrize("flush", ["ASYNC_FLUSH", "SYNC_FLUSH"])
def test_an_untraced_pure_put_calls_one_hook_a_stage_boundary(tmp_path, monkeypatch, flush):
    """The checks, the encoding, the lock taken with its file, the append, the lock released, the flush request and
    the put's end: one no-op call each; the lock taken and the file that takes the append are one boundary."""
    from rmqstore.engine.put_trace import NullPutTrace

    calls = []
    for name, hook in vars(NullPutTrace).items():
        if callable(hook) and not name.startswith("_"):
            monkeypatch.setattr(NullPutTrace, name, lambda self, *a, _n=name, _h=hook: calls.append(_n) or _h(self, *a))
    store = MessageStore(tmp_path, StoreConfig(mapped_file_size_commit_log=65536, flush_disk_type=flush, native=False))
    store.start()
    try:
        assert store.put_message(Message("HookTopic", b"x", queue_id=0)).ok  # the first file made
        del calls[:]
        assert store.put_message(Message("HookTopic", b"y", queue_id=0)).ok
    finally:
        store.shutdown()
    services = ("flush", "commit", "group_commit_swap", "group_commit_wake",  # (the other threads' hooks)
                "queue_max", "dispatched", "dispatch_skipped", "indexed")
    put_thread = [c for c in calls if c not in services]
    flush_request = "group_commit_request" if flush == "SYNC_FLUSH" else "flush_wakeup"
    assert put_thread == ["checked", "encoded", "file_found", "appended", "lock_released", flush_request, "end"]
