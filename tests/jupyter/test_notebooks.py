"""Every teaching notebook executes top to bottom in a real kernel, and prints what it teaches."""

import re
from collections import Counter

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

from conftest import NOTEBOOK_TEMP_LEFTOVERS, NOTEBOOKS_DIR, executed_notebook, notebook_text  # noqa: E402

ROOT = NOTEBOOKS_DIR.parent
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path):
    nb = executed_notebook(path.name)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_leaves_nothing_in_the_temp_folder(path):
    """A notebook removes the stores and files it makes (the kernel runs with a temp folder of its own)."""
    executed_notebook(path.name)
    assert NOTEBOOK_TEMP_LEFTOVERS[path.name] == []


def test_tour_prints_the_sample_store():
    import rmqstore
    from rmqstore.read.scan import CommitLogScan

    text = notebook_text("01_tour.ipynb")
    scan = CommitLogScan(ROOT / "data" / "sample_store")
    records = list(scan)
    n_msgs = sum(isinstance(r, rmqstore.MessageRecord) for _, r in records)
    n_blanks = len(records) - n_msgs
    assert f"{n_msgs} messages, {n_blanks} blank records" in text
    assert re.search(r"00000000000000000000  starts at offset +0  size 65,536 bytes$", text, re.M)
    assert "OrderTopic" in text and "SCHEDULE_TOPIC_XXXX" in text
    # the per-queue table: every queue with its count, "1 message" in the singular, columns in line
    # whatever the width of a queue number or an offset
    queues = Counter((r.topic, r.queue_id) for _, r in records if isinstance(r, rmqstore.MessageRecord))
    rows = re.findall(r"^(\S+) +queue +(\d+): +(\d+) (messages?)$", text, re.M)
    assert {(t, int(q)): int(n) for t, q, n, _ in rows} == dict(queues)
    assert all(word == ("message" if n == "1" else "messages") for _, _, n, word in rows), rows
    assert max(queues.values()) > 1 and min(queues.values()) == 1 and max(q for _, q in queues) >= 10
    table = [line for line in text.splitlines() if re.match(r"^\S+ +queue +\d+: ", line)]
    assert len({line.index(":") for line in table}) == 1, "\n".join(table)
    assert len({line.rstrip("s").rindex(" ") for line in table}) == 1, "\n".join(table)
    segments = re.findall(r"\d{20}  starts at offset +[\d,]+  size ", text)
    assert len(segments) > 16 and len({len(head) for head in segments}) == 1, "\n".join(segments)
    # properties print with visible separators, not raw control characters
    assert "\\x01" in text and "\x01" not in text and "\x02" not in text


def test_tour_opens_on_the_store_inspector():
    """The first thing the tour shows is the store itself: a live StoreInspector view."""
    views = [out["data"]["application/vnd.jupyter.widget-view+json"]["model_id"]
             for cell in executed_notebook("01_tour.ipynb").cells for out in cell.get("outputs", [])
             if "application/vnd.jupyter.widget-view+json" in out.get("data", {})]
    assert views, "the tour displays no widget"
    first = next(c for c in executed_notebook("01_tour.ipynb").cells
                 if any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in c.get("outputs", [])))
    assert "StoreInspector.from_path(STORE)" in "".join(first.source)
    assert any("StoreInspector" in o["data"].get("text/plain", "") for o in first.outputs if "data" in o)


def test_record_layout_prints_fields_record_and_blank():
    from rmqstore.format.layout import MESSAGE_FIELDS

    text = notebook_text("02_record_layout.ipynb")
    assert f"{len(MESSAGE_FIELDS)} rows in the table" in text and len(MESSAGE_FIELDS) == 17
    assert "the spans end at byte 191 == total_size 191" in text
    assert "decode_record says total_size = 191, bytes read = 191" in text
    assert "V1 re-encoded equals the bytes on disk: True" in text
    assert "topic_length bytes 89..91 (2 byte(s))" in text
    assert "born IPv6  total  203 (+12)" in text and "both IPv6  total  215 (+24)" in text
    assert "its 8 bytes: 00 00 00 d3 cb d4 31 94" in text
    assert "BLANK_MAGIC_CODE: True" in text


def test_put_path_prints_the_stages_and_the_retry():
    text = notebook_text("03_put_path.ipynb")
    assert "results: Counter({'PutMessageStatus.PUT_OK': 12})" in text
    for stage in ("put.begin", "encode", "lock.acquire", "append.record", "position.wrote", "lock.release",
                  "put.end", "append.blank", "append.retry", "mapped_file.allocated", "dispatch.consume_queue"):
        assert f"  {stage} " in text, stage
    assert "END_OF_FILE: the record does not fit; next file" in text
    assert "blank record at offset 3438: 658 bytes (= 4096 - 3438: True)" in text
    assert "file  4096: wrote    0 ->  822" in text
    assert "00000000000000004096  wrote 1788" in text


def test_mapped_files_prints_positions_rollover_and_pool():
    text = notebook_text("04_mapped_files.ipynb")
    # a started store has its first file (and the next) made before any put; the queue takes one at the put
    assert "files before the first put: ['00000000000000000000', '00000000000000004096'] positions: []" in text
    assert "in the mapped file queue: ['00000000000000000000']" in text
    assert "pre-created next file 00000000000000004096 on disk: True | size 4096" in text
    # the file the rollover asked for is listed once made, never as the temporary file it is made through
    assert "on disk: ['00000000000000000000', '00000000000000004096', '00000000000000008192']" in text
    assert ".creating" not in text
    assert "  00000000000000000000  wrote 3500  committed    0" in text
    assert "PutMessageResult(PUT_OK, offset=4096, bytes=700, queue_offset=5)" in text
    assert "the 8 bytes at 3500: 00 00 02 54 cb d4 31 94" in text
    assert "blank record at 3500: total_size 596, magic 0xcbd43194 (BLANK_MAGIC_CODE: True)" in text
    assert text.count("settled: True") == 2
    assert "pool off: committed positions [0, 0]" in text
    assert "pool on : committed positions [4096, 2100]" in text
