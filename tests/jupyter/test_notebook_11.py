"""notebooks/11_master_and_slave: what it prints about replication equals what the stores hold.

The notebook keeps its stores under ``RMQSTORE_NOTEBOOK_WORK`` when the suite runs it (it
prints ``stores kept in DIR``); this module reads them after the run -- the master's and
the slave's commitlogs with the sequential scan, the files byte for byte -- and checks the
offsets, frames and statuses the notebook printed against them, then removes the folder.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("nbclient")

from conftest import executed_notebook, notebook_text  # noqa: E402
from rmqstore.engine.ha import SLAVE_REPORT, TRANSFER_HEADER  # noqa: E402
from rmqstore.format.record import MessageRecord  # noqa: E402
from rmqstore.read.scan import CommitLogScan  # noqa: E402

NAME = "11_master_and_slave.ipynb"
FILE = 64 * 1024
SYNC_FLUSH_TIMEOUT = 500


def _int(s: str) -> int:
    return int(s.replace(",", ""))


@pytest.fixture(scope="module")
def run():
    text = notebook_text(NAME)
    work = Path(re.search(r"^stores kept in (\S+)$", text, re.M).group(1))
    scans = {}
    for name in ("master", "slave", "async-master"):
        scans[name] = {off: rec for off, rec in CommitLogScan(work / name) if isinstance(rec, MessageRecord)}
    yield text, work, scans
    shutil.rmtree(work, ignore_errors=True)


def test_every_put_answer_found_the_slave_past_the_put(run):
    text, _, scans = run
    master = scans["master"]
    lines = re.findall(r"^put (\d+): (\w+)\s+record\s+([\d,]+) \.\.\s+([\d,]+)\s+slave max offset right after the "
                       r"answer\s+([\d,]+)\s+covered: (\w+)$", text, re.M)
    assert len(lines) == 6
    for i, status, start, end, slave_now, covered in lines:
        start, end, slave_now = _int(start), _int(end), _int(slave_now)
        rec = master[start]
        assert start + rec.total_size == end and rec.body == bytes([65 + int(i) % 26]) * len(rec.body)
        assert status == "PUT_OK" and slave_now >= end and covered == "True"
    more = ast.literal_eval(re.search(r"^294 more puts: (\{.*?\});", text, re.M).group(1))
    assert more == {"PUT_OK": 294}
    assert "every answer found the slave at or past the put's end: True" in text


def test_the_transfer_printed_field_by_field_is_the_masters_bytes(run):
    text, work, scans = run
    report_hex = re.search(r"^HASlaveReport \(8 bytes\): ([0-9a-f ]+)$", text, re.M).group(1)
    header_hex = re.search(r"^HATransferHeader \(12 bytes\): ([0-9a-f ]+)$", text, re.M).group(1)
    asked = _int(re.search(r"max_offset\s+\(reportOffset / slaveAckOffset\) = ([\d,]+)", text).group(1))
    offset = _int(re.search(r"physical_offset\s+\(thisOffset / masterPhyOffset\) = ([\d,]+)", text).group(1))
    size = _int(re.search(r"body_size\s+\(size / bodySize\) = ([\d,]+)", text).group(1))
    assert bytes.fromhex(report_hex) == SLAVE_REPORT.pack(asked)
    assert bytes.fromhex(header_hex) == TRANSFER_HEADER.pack(offset, size)
    assert offset == asked and asked in scans["master"]  # pushed from exactly where the "slave" asked
    assert 0 < size <= 32 * 1024 and offset // FILE == (offset + size - 1) // FILE  # one batch, within one file
    rec = scans["master"][offset]
    assert (f"it starts with a record: topic {rec.topic}, queue {rec.queue_id}, queue offset {rec.queue_offset}, "
            f"physical_offset {offset:,} (= the header's offset: True), {rec.total_size} bytes") in text
    assert f"body: {size:,} bytes = the master's commitlog bytes {offset:,}..{offset + size:,}: True" in text


def test_statuses_without_a_slave_and_with_a_silent_one(run):
    text, _, scans = run
    gone = re.search(r"^no slave connected:\s+(\w+) after ([\d.]+) ms -- record ([\d,]+)\.\.([\d,]+) written anyway",
                     text, re.M)
    silent = re.search(r"^a silent slave:\s+(\w+) after (\d+) ms \(sync_flush_timeout (\d+) ms\) -- record "
                       r"([\d,]+)\.\.([\d,]+) written anyway; acknowledged ([\d,]+) < end ([\d,]+)$", text, re.M)
    assert gone.group(1) == "SLAVE_NOT_AVAILABLE" and float(gone.group(2)) < SYNC_FLUSH_TIMEOUT  # at once
    assert silent.group(1) == "FLUSH_SLAVE_TIMEOUT" and int(silent.group(3)) == SYNC_FLUSH_TIMEOUT
    assert int(silent.group(2)) >= SYNC_FLUSH_TIMEOUT  # it did wait the whole timeout
    for m, first in ((gone, 3), (silent, 4)):
        start, end = _int(m.group(first)), _int(m.group(first + 1))
        assert start + scans["master"][start].total_size == end  # written anyway ...
        assert scans["slave"][start].body == scans["master"][start].body  # ... and on the slave after the catch-up
    assert _int(silent.group(6)) == _int(silent.group(4)) < _int(silent.group(7))  # the silent ack: up to the put
    assert re.search(r"^no slave again:\s+SLAVE_NOT_AVAILABLE$", text, re.M)
    statuses = Counter(re.findall(r"^put \d+: (\w+)", text, re.M)) + Counter(
        ast.literal_eval(re.search(r"^294 more puts: (\{.*?\});", text, re.M).group(1)))
    statuses.update(["SLAVE_NOT_AVAILABLE", "FLUSH_SLAVE_TIMEOUT", "SLAVE_NOT_AVAILABLE"])
    printed = ast.literal_eval(re.search(r"^SYNC_MASTER outcomes so far: (\{.*?\}) \|", text, re.M).group(1))
    assert printed == dict(statuses)


def test_the_restarted_slave_caught_up_byte_for_byte(run):
    text, work, scans = run
    first_lost = _int(re.search(r"^no slave connected:.* -- record ([\d,]+)\.\.", text, re.M).group(1))
    m = re.search(r"^slave restarted: it had stopped at ([\d,]+); recovered, it requested ([\d,]+) on connect "
                  r"\(the same: (\w+)\)$", text, re.M)
    assert _int(m.group(1)) == _int(m.group(2)) == first_lost and m.group(3) == "True"  # no byte missing or doubled
    end_before = scans["master"][max(o for o in scans["master"] if o < first_lost)]
    assert end_before.physical_offset + end_before.total_size == first_lost
    assert text.count(", same body: True") == 3 and ", same body: False" not in text
    mdir, sdir = work / "master" / "commitlog", work / "slave" / "commitlog"
    names = sorted(n for n in os.listdir(mdir) if any((mdir / n).read_bytes()))
    assert len(names) >= 3  # replication crossed files
    for n in names:
        assert (sdir / n).read_bytes() == (mdir / n).read_bytes(), n
    assert scans["slave"].keys() == scans["master"].keys()
    assert (f"commitlog files byte-identical on master and slave: {len(names)} of {len(names)} "
            f"({names[0]} .. {names[-1]}): True") in text
    last = max(scans["master"])
    end = last + scans["master"][last].total_size
    assert f"a put after the catch-up: PUT_OK, slave max offset right after the answer {end:,} >= {end:,}" in text


def test_async_master_answers_without_a_slave(run):
    text, _, scans = run
    assert re.search(r"^ASYNC_MASTER, no slave connected: PUT_OK after [\d.]+ ms; replica waits recorded: \{\}$",
                     text, re.M)
    assert len(scans["async-master"]) == 1


def test_the_view_ends_on_the_pairs_final_state(run):
    """The saved widget state (what a static page renders) holds the stores' final offsets and outcomes."""
    _, _, scans = run
    nb = executed_notebook(NAME)
    states = [m["state"] for m in nb.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"].values()
              if "ReplicationView" in str(m["state"].get("_esm", ""))[:200] or "replication_view.js" in
              str(m["state"].get("_esm", ""))[:200]]
    assert len(states) == 1
    state = states[0]
    last = max(scans["master"])
    end = str(last + scans["master"][last].total_size)
    assert state["master"]["max_offset"] == state["slave"]["max_offset"] == end
    assert state["master"]["slaves"][0]["acked"] == state["master"]["push2_slave_max_offset"] == end
    assert state["master"]["outcomes"] == {"PUT_OK": 301, "SLAVE_NOT_AVAILABLE": 2, "FLUSH_SLAVE_TIMEOUT": 1}
    assert state["live"] is False
