"""Writes a kill -9 tears: a consume-queue unit and an index header left half written.

A kill lands between two machine instructions, not between two Python statements: copying
a 20-byte unit or a 40-byte header is two overlapping stores (glibc's memmove for 17-64
bytes), so a kill between them leaves the first 16 (or 32) bytes new and the rest old.
The slow kill -9 loop (tests/engine/test_crash.py) met both:

* a consume-queue unit with the right commitlog offset and size and a tags code of 0
  (its last four bytes never written): the consume-queue recovery takes it for whole, and
  the re-dispatch skipped it as "already built";
* an index file with no entry whose header held a begin time and an end time of 0 (the
  header was written field by field when the file was created).

The images here are made in-process (tests/engine/test_index_recovery.py's ``written_then_killed``:
a copy of an idle started store, abort file included) and then torn by hand.
"""

from __future__ import annotations

import os
import struct

from test_index_recovery import BASE_TS, written_then_killed

from rmqstore.engine.consume_queue import CQ_STORE_UNIT_SIZE
from rmqstore.engine.dispatch import tags_code_of
from rmqstore.engine.index import IndexFile, IndexService
from rmqstore.format.layout import INDEX_HEADER
from rmqstore.format.properties import string_to_properties
from rmqstore.store import MessageStore
from rmqstore.read.verify import verify


def _last_unit(store):
    """(queue key, queue offset, file path, position in the file) of the newest unit of any queue."""
    best = None
    for key, cq in store.consume_queue_table.items():
        n = cq.get_max_offset_in_queue() - 1
        offset = cq.get_unit(n)[0]
        if best is None or offset > best[0]:
            mf = cq.mapped_file_queue.mapped_files[-1]
            best = (offset, key, n, mf.file_name, n * CQ_STORE_UNIT_SIZE - mf.file_from_offset)
    return best[1:]


def _tags_want(store, offset: int) -> int:
    rec = store.look_message_by_offset(offset)
    return tags_code_of(rec.topic, string_to_properties(rec.properties), rec.store_timestamp,
                        store.config.delay_level_table())


def test_a_consume_queue_unit_a_kill_tore_is_written_again(tmp_path):
    root, cfg, _keys = written_then_killed(tmp_path)
    store = MessageStore(root, cfg, read_only=True)
    store.load()
    try:
        (topic, qid), n, name, pos = _last_unit(store)
        offset, size, tags = store.consume_queue_table[(topic, qid)].get_unit(n)
        assert tags == _tags_want(store, offset) != 0
    finally:
        store.close()
    path = os.path.join(root, "consumequeue", topic, str(qid), name)
    with open(path, "r+b") as f:  # the second store of the copy never happened: tags code's low half 0
        f.seek(pos + 16)
        f.write(bytes(4))
    store = MessageStore(root, cfg)
    store.load()
    try:
        assert store.consume_queue_table[(topic, qid)].get_unit(n) == (offset, size, tags)
    finally:
        store.close()
    report = verify(root, config=cfg)
    assert report.ok, report.problems[:5]


def test_verify_reports_a_torn_unit_a_read_only_open_leaves(tmp_path):
    """Inspection never writes: the torn unit stays, and ``verify`` names it."""
    root, cfg, _keys = written_then_killed(tmp_path)
    store = MessageStore(root, cfg, read_only=True)
    store.load()
    try:
        (topic, qid), n, name, pos = _last_unit(store)
    finally:
        store.close()
    with open(os.path.join(root, "consumequeue", topic, str(qid), name), "r+b") as f:
        f.seek(pos + 16)
        f.write(bytes(4))
    report = verify(root, config=cfg)
    assert [p.kind for p in report.errors] == ["unit_mismatch"], report.errors
    assert f"unit {n} of {topic}/{qid} has tags code 0" in report.errors[0].message


def test_an_index_header_a_kill_tore_at_creation_is_made_whole(tmp_path):
    """A new index file's header once took four writes: a kill after the first left a begin time
    and no end time (and ``verify`` then reported "beginTimestamp ... is after endTimestamp 0"
    whenever no record came after the restart).  Loading after a crash gives such an entry-less
    file the header its creation writes: it begins and ends where the previous file ends."""
    service = IndexService(str(tmp_path), 4, 8)
    os.makedirs(service.store_path)
    prev = IndexFile(os.path.join(service.store_path, "20261124090000000"), 4, 8)
    for i in range(7):
        assert prev.put_key(f"T#k{i}", 1000 + 100 * i, BASE_TS + 1000 * i)
    assert prev.is_write_full()
    f = IndexFile(os.path.join(service.store_path, "20261124090007000"), 4, 8)
    struct.pack_into(">qqqq", f.buf, 0, prev.end_timestamp, 0, prev.end_phy_offset, prev.end_phy_offset)
    f.shutdown()
    prev.shutdown()
    service.load(last_exit_ok=False)
    try:
        first, last = service.index_files
        assert struct.unpack_from(">qqqq", last.buf, 0) == (BASE_TS + 6000, BASE_TS + 6000, 1600, 1600)
        assert last.begins_where(1600, BASE_TS + 6000), last.header()
        assert service.get_and_create_last_index_file() is last
    finally:
        service.shutdown()


def test_a_new_index_file_header_is_one_write(tmp_path, monkeypatch):
    """Creating a file after a full one writes its bounds at once (one ``pack_into`` of the four
    begin/end fields); its counts stay 0 on disk until the first entry, as RocketMQ's creation leaves them."""
    writes = []
    prev = IndexFile(str(tmp_path / "20261124090000000"), 4, 2)
    assert prev.put_key("T#a", 700, BASE_TS)
    for name in ("_write_header", "_write_bounds"):
        real = getattr(IndexFile, name)
        monkeypatch.setattr(IndexFile, name, lambda self, real=real, name=name: (writes.append(name), real(self)))
    f = IndexFile(str(tmp_path / "20261124090001000"), 4, 2, prev.end_phy_offset, prev.end_timestamp)
    assert writes == ["_write_bounds"] and f.begins_where(700, BASE_TS)
    assert INDEX_HEADER.unpack_from(f.buf) == (BASE_TS, BASE_TS, 700, 700, 0, 0)
    f.shutdown()
    prev.shutdown()


def test_a_first_index_file_with_a_torn_header_ends_where_it_begins(tmp_path):
    """An entry-less file with no file before it: its header must still begin where it ends."""
    path = str(tmp_path / "20261124090000000")
    f = IndexFile(path, 4, 32, end_phy_offset=5000, end_timestamp=BASE_TS)
    assert f.begins_where(5000, BASE_TS)
    assert struct.unpack_from(">qqqq", f.buf, 0) == (BASE_TS, BASE_TS, 5000, 5000)
    struct.pack_into(">q", f.buf, 8, 0)  # the end time never written
    f.shutdown()
    service = IndexService(str(tmp_path / "store"), 4, 32)
    os.makedirs(service.store_path)
    os.rename(path, os.path.join(service.store_path, os.path.basename(path)))
    service.load(last_exit_ok=False)
    try:
        assert struct.unpack_from(">qqqq", service.index_files[0].buf, 0) == (BASE_TS, BASE_TS, 5000, 5000)
    finally:
        service.shutdown()


class _RecordingFile:
    """A file's bytes that remember every write (slice assignment); no buffer protocol, so a
    field patched in place (``struct.pack_into``) cannot reach it unseen."""

    def __init__(self, size: int):
        self.bytes = bytearray(size)
        self.writes: list[tuple[int, int]] = []

    def __setitem__(self, key, value):
        self.writes.append((key.start, key.stop))
        self.bytes[key] = value

    def __getitem__(self, key):
        return self.bytes[key]


def test_a_put_writes_its_record_finished_in_one_copy(tmp_path):
    """A record reaches the file once, its queue offset, physical offset and store time already in
    it.  The put path once copied the record and then patched those fields in the file one by one;
    a kill after the physical offset and before the store time left a record recovery takes for
    valid with store time 0 -- and an index file whose end time became 0 when recovery indexed it
    (the slow crash loop's "beginTimestamp ... is after endTimestamp 0")."""
    from rmqstore.engine.commit_log import DefaultAppendMessageCallback
    from rmqstore.common.config import StoreConfig
    from rmqstore.format.message import Message
    from rmqstore.format.record import decode_record

    with MessageStore(tmp_path / "s", StoreConfig(mapped_file_size_commit_log=65536)) as store:
        cl = store.commit_log
        enc = cl.encode(Message("TornTopic", b"body", queue_id=1, properties="KEYS\x01k1"))
        cl.current_store_timestamp = BASE_TS + 123
        cl.topic_queue_table[("TornTopic", 1)] = 41
        f = _RecordingFile(4096)
        result = DefaultAppendMessageCallback(cl).do_append(65536, f, 100, 4096 - 100, enc)
        assert f.writes == [(100, 100 + enc.length)]
        rec = decode_record(f.bytes, 100, check_crc=True)
        assert (rec.physical_offset, rec.queue_offset, rec.store_timestamp) == (65636, 41, BASE_TS + 123)
        assert (result.wrote_offset, result.logics_offset) == (65636, 41)


def _pool_file(tmp_path):
    from rmqstore.engine.allocate import TransientStorePool
    from rmqstore.files.mapped_file import MappedFile

    pool = TransientStorePool(1, 65536)
    pool.init()
    return MappedFile(str(tmp_path / "00000000000000000000"), 65536, pool)


def _append_records(mf, bodies_props):
    """Encode records at the file's write position into its write buffer; their (offset, size)."""
    from rmqstore.format.record import encode_message

    out = []
    for body, props in bodies_props:
        pos = mf.wrote_position
        data = encode_message(queue_id=0, flag=0, queue_offset=len(out), physical_offset=pos, sys_flag=0,
                              born_timestamp=BASE_TS, born_host=("127.0.0.1", 1), store_timestamp=BASE_TS,
                              store_host=("127.0.0.1", 2), reconsume_times=0, prepared_transaction_offset=0,
                              body=body, topic="TornCommit", properties=props)
        assert mf.append_bytes(data)
        out.append((pos, len(data)))
    return out


def _walk_records(image: bytes) -> list[tuple[int, int]]:
    from rmqstore.format.walk import step

    found, pos = [], 0
    while True:
        s = step(image, pos, crc=True, strict=True)
        if not s.is_record:
            return found
        found.append((pos, s.size))
        pos += s.size


def test_a_commit_a_kill_cuts_short_leaves_no_half_record(tmp_path, monkeypatch):
    """With the transient store pool a commit copies ``[committed, wrote)`` of the write buffer into the
    file.  A kill can end a ``pwrite`` after any whole page (a short write), so whatever prefix of the
    commit's writes reached the file, a walk of it must find the records committed before and then
    none or all of this commit's -- never a record whose head claims bytes that never came (the slow
    crash loop met an acknowledged record with its properties turned to zeros: the body CRC does not
    cover them)."""
    import rmqstore.files.mapped_file as mapped_file

    mf = _pool_file(tmp_path)
    try:
        before = _append_records(mf, [(b"a", "K\x01v"), (b"b", "K\x01w")])
        mf.commit(0)
        # properties of 2,000 bytes: a page boundary falls inside the second record's properties
        new = _append_records(mf, [(b"x", "P\x01" + "p" * 2000)] * 3)
        image = bytearray(os.pread(mf._fd, 65536, 0))
        writes = []
        real_pwrite = os.pwrite
        monkeypatch.setattr(mapped_file.os, "pwrite", lambda fd, data, off: writes.append((off, bytes(data)))
                            or len(data))
        try:
            mf.commit(0)
        finally:
            monkeypatch.setattr(mapped_file.os, "pwrite", real_pwrite)
        assert writes and mf.committed_position == new[-1][0] + new[-1][1]
        for i, (off, data) in enumerate(writes):
            cuts = [k for k in range(len(data) + 1) if k in (0, len(data)) or (off + k) % 4096 == 0]
            for k in cuts:
                torn = bytearray(image)
                for o, d in writes[:i]:
                    torn[o:o + len(d)] = d
                torn[off:off + k] = data[:k]
                assert _walk_records(bytes(torn)) in (before, before + new), (i, off, k)
    finally:
        mf.shutdown()


def test_a_short_commit_write_is_finished_not_taken_for_whole(tmp_path, monkeypatch):
    """``pwrite`` may write fewer bytes than asked without an error (a signal, a nearly full disk): the
    commit writes the rest before it moves the committed position."""
    import rmqstore.files.mapped_file as mapped_file

    mf = _pool_file(tmp_path)
    try:
        new = _append_records(mf, [(b"y" * 3000, "K\x01v")] * 4)
        real_pwrite = os.pwrite
        monkeypatch.setattr(mapped_file.os, "pwrite", lambda fd, data, off: real_pwrite(fd, bytes(data)[:1000], off))
        try:
            mf.commit(0)
        finally:
            monkeypatch.setattr(mapped_file.os, "pwrite", real_pwrite)
        end = new[-1][0] + new[-1][1]
        assert mf.committed_position == end
        assert os.pread(mf._fd, end, 0) == bytes(mf.write_buffer[:end])
        assert _walk_records(os.pread(mf._fd, 65536, 0)) == new
    finally:
        mf.shutdown()
