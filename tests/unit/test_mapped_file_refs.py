"""Reference counting keeps a mapped file alive while it is read; async puts; allocate timeout."""

import os
import threading
import time

import pytest

from rmqstore import Message, MessageStore, PutMessageStatus, StoreConfig
from rmqstore.engine.allocate import AllocateMappedFileService
from rmqstore.files.mapped_file import MappedFile


def test_file_stays_mapped_while_a_reader_holds_it(tmp_path):
    mf = MappedFile(str(tmp_path / "00000000000000000000"), 4096)
    assert mf.append_bytes(b"hello world")
    view = mf.select_mapped_buffer(0)
    assert bytes(view.buffer) == b"hello world"
    assert mf.ref_count == 2
    assert mf.destroy() is False  # a reader holds it: not unmapped, not deleted
    assert not mf.is_available() and not mf.is_cleanup_over()
    assert os.path.exists(mf.file_name)
    assert bytes(view.buffer[:5]) == b"hello"  # still readable
    assert mf.select_mapped_buffer(0) is None  # no new readers after shutdown
    view.release()
    assert mf.is_cleanup_over() and mf.ref_count == 0
    assert mf.destroy() is True
    assert not os.path.exists(mf.file_name)


def test_select_respects_read_position(tmp_path):
    mf = MappedFile(str(tmp_path / "00000000000000004096"), 4096)
    mf.append_bytes(b"x" * 100)
    assert mf.file_from_offset == 4096
    assert mf.select_mapped_buffer(50, 51) is None  # past what was written
    with mf.select_mapped_buffer(50, 50) as r:
        assert r.start_offset == 4096 + 50 and r.size == 50
    mf.destroy()


def test_async_put_returns_future_with_the_result(tmp_path):
    for flush in ("ASYNC_FLUSH", "SYNC_FLUSH"):
        root = tmp_path / flush
        with MessageStore(root, StoreConfig(mapped_file_size_commit_log=65536, flush_disk_type=flush)) as store:
            futures = [store.async_put_message(Message("T", b"x" * 100, born_host="192.0.2.1:1")) for _ in range(50)]
            results = [f.result(timeout=10) for f in futures]
            assert all(r.status is PutMessageStatus.PUT_OK for r in results)
            offsets = sorted(r.append_result.wrote_offset for r in results)
            assert offsets == [i * results[0].append_result.wrote_bytes for i in range(50)]
            if flush == "SYNC_FLUSH":  # acknowledged means flushed
                assert store.commit_log.mapped_file_queue.flushed_where >= offsets[-1] + results[0].append_result.wrote_bytes


def test_allocate_service_times_out_and_put_reports_create_failed(tmp_path):
    cfg = StoreConfig(mapped_file_size_commit_log=65536, allocate_wait_timeout_ms=200)
    svc = AllocateMappedFileService(cfg)  # never started: nobody serves the request
    t0 = time.monotonic()
    assert svc.put_request_and_return_mapped_file(str(tmp_path / "00000000000000000000"),
                                                  str(tmp_path / "00000000000000065536"), 65536) is None
    assert 0.15 < time.monotonic() - t0 < 2

    store = MessageStore(tmp_path / "store", cfg)
    store.start()
    store.allocate_service.shutdown()  # the service is gone: no file can be created
    r = store.put_message(Message("T", b"x", born_host="192.0.2.1:1"))
    assert r.status is PutMessageStatus.CREATE_MAPEDFILE_FAILED and "commitlog file" in r.message
    store.shutdown()


def test_group_commit_timeout_is_flush_disk_timeout(tmp_path):
    """A SYNC_FLUSH put whose flush does not come within ``sync_flush_timeout`` is answered
    FLUSH_DISK_TIMEOUT (written, not known to be on disk); once the disk answers, the bytes reach it and
    puts are PUT_OK again.  The flush is stalled on an event released only after the put was answered, so
    the timeout cannot be a race; and nothing after the release is held to the 200 ms deadline -- the put
    that proves the store goes on gets a deadline no machine's slowness reaches (behaviour, not speed)."""
    cfg = StoreConfig(mapped_file_size_commit_log=65536, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=200)
    store = MessageStore(tmp_path, cfg)
    store.start()
    release = threading.Event()
    queue = store.commit_log.mapped_file_queue
    real_flush = queue.flush

    def stuck_flush(least_pages):  # a disk that does not answer until the test says so
        release.wait(120)
        return real_flush(least_pages)

    queue.flush = stuck_flush
    try:
        r = store.put_message(Message("T", b"x" * 10, born_host="192.0.2.1:1"))
    finally:
        release.set()  # (the put was answered, or failed: the disk answers from now on)
    assert r.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
    assert r.append_result.wrote_offset == 0  # written, just not known to be on disk
    end = r.append_result.wrote_offset + r.append_result.wrote_bytes
    deadline = time.monotonic() + 60
    while queue.flushed_where < end and time.monotonic() < deadline:  # the stalled flush goes on once released
        time.sleep(0.01)
    assert queue.flushed_where >= end
    queue.flush = real_flush
    cfg.sync_flush_timeout = 60_000  # the store reads it per put: the next put waits on the disk, not the clock
    r = store.put_message(Message("T", b"y", born_host="192.0.2.1:1"))
    assert r.ok and r.append_result.wrote_offset == end, r
    assert queue.flushed_where >= end + r.append_result.wrote_bytes
    store.shutdown()


def test_a_second_process_cannot_start_a_running_store(tmp_path):
    import subprocess
    import sys

    store = MessageStore(tmp_path, StoreConfig(mapped_file_size_commit_log=65536))
    store.start()
    code = ("import sys\nfrom rmqstore import MessageStore, StoreConfig, StoreStateError\n"
            f"try:\n    MessageStore({str(tmp_path)!r}, StoreConfig(mapped_file_size_commit_log=65536)).start()\n"
            "except StoreStateError as e:\n    print('REFUSED', e); sys.exit(3)\nprint('STARTED')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 3 and "holds its lock file" in r.stdout, (r.stdout, r.stderr)
    store.shutdown()
    again = MessageStore(tmp_path, StoreConfig(mapped_file_size_commit_log=65536))
    again.start()  # the lock went with the shutdown
    assert (tmp_path / "lock").read_bytes() == b"lock"
    again.shutdown()


def test_a_folder_name_no_file_system_takes_is_a_create_failure_not_a_crash(tmp_path):
    """A damaged log can carry a topic with a NUL byte; its consume-queue folder cannot exist, and
    dispatch must get the same answer as for a full disk (no file: dispatch stops at that record)."""
    from rmqstore.files.mapped_file_queue import MappedFileQueue

    queue = MappedFileQueue(str(tmp_path / "consumequeue" / "Top\x00ic" / "0"), 20 * 10)
    assert queue.get_last_mapped_file(0) is None
    assert "embedded null byte" in queue.create_error
    assert [p.name for p in tmp_path.rglob("*")] in ([], ["consumequeue"])  # (makedirs made the parent first)


@pytest.mark.parametrize("flush, pre_faulted", [("ASYNC_FLUSH", True), ("SYNC_FLUSH", False)])
def test_the_allocate_service_pre_faults_new_commitlog_files_unless_sync_flush(tmp_path, monkeypatch, flush,
                                                                               pre_faulted):
    """Pre-faulted pages are dirty zeros: under SYNC_FLUSH the group commit's next fdatasync would
    write the whole file back while the puts wait, so the service leaves the file sparse there.
    (Otherwise a file is faulted in after it was handed out, on the service's thread.)"""
    calls = []
    real = MappedFile.pre_fault
    monkeypatch.setattr(MappedFile, "pre_fault", lambda self, *args: calls.append(self.file_name) or
                        real(self, *args))
    cfg = StoreConfig(mapped_file_size_commit_log=1 << 20, flush_disk_type=flush)
    svc = AllocateMappedFileService(cfg)
    svc.start()
    names = [str(tmp_path / f"{i << 20:020d}") for i in range(3)]
    made = []
    try:
        made.append(svc.put_request_and_return_mapped_file(names[0], names[1], 1 << 20))
        made.append(svc.put_request_and_return_mapped_file(names[1], names[2], 1 << 20))  # made ahead
        assert all(mf is not None for mf in made)
        deadline = time.monotonic() + 20
        while pre_faulted and not set(names[:2]) <= set(calls) and time.monotonic() < deadline:
            time.sleep(0.005)
    finally:
        svc.shutdown()
        for mf in made:
            if mf is not None:
                mf.destroy()
    if pre_faulted:
        assert set(names[:2]) <= set(calls)
    else:
        assert calls == []
