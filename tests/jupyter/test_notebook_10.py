"""notebooks/10_spark_pipeline: what it prints about Spark's view of its store equals the engine's own answers.

The notebook leaves its store in a temp folder and prints the folder; this module reads that
store with the sequential scan and the engine's verify, checks the printed numbers, and removes it.
"""

import ast
import os
import re
import shutil
from collections import Counter

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("nbclient")
np = pytest.importorskip("numpy")

from conftest import notebook_text, notebook_work_folder  # noqa: E402
from rmqstore.format.record import MessageRecord  # noqa: E402
from rmqstore.read.scan import CommitLogScan  # noqa: E402
from rmqstore.read.verify import verify  # noqa: E402

NAME = "10_spark_pipeline.ipynb"


@pytest.fixture(scope="module")
def run():
    text = notebook_text(NAME)
    work = notebook_work_folder(text)
    store = os.path.join(work, "store")
    records = [(o, r) for o, r in CommitLogScan(store) if isinstance(r, MessageRecord)]
    yield text, store, records
    shutil.rmtree(work, ignore_errors=True)


def test_every_check_it_prints_holds(run):
    text, _, records = run
    assert ": False" not in text
    assert text.count(": True") == 8
    n = len(records)
    assert n == 20_000
    assert f"Spark count {n:,} = sum over partitions {n:,}; sequential scan {n:,}: True" in text


def test_partitions_start_where_the_scan_finds_records(run):
    text, store, records = run
    segments = sorted(os.listdir(os.path.join(store, "commitlog")))
    size = 4 << 20
    parts = len(segments) * (size // (1 << 20))
    mid = parts - len(segments)
    assert f"{parts} partitions; {mid} of them start mid-segment" in text
    offsets = [o for o, _ in records]
    rows = re.findall(r"^\s+(\d+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)$", text, re.M)
    assert len(rows) == 6
    for part, start, first, skipped, count in rows:
        start, first, count = (int(x.replace(",", "")) for x in (start, first, count))
        assert start == int(part) * (1 << 20)
        owned = [o for o in offsets if start <= o < start + (1 << 20)]
        assert first == owned[0] and count == len(owned), part  # the first record boundary in the range
        assert int(skipped.replace(",", "")) == first - start


def test_queue_table_equals_the_scan(run):
    text, _, records = run
    groups = {}
    for _, r in records:
        groups.setdefault((r.topic, r.queue_id), []).append(r)
    rows = re.findall(r"^\s*(Orders|Payments|Audit)\s+(\d)\s+" + r"\s+".join([r"(-?\d+)"] * 9) + r"$", text, re.M)
    assert len(rows) == len(groups) == 12
    for topic, q, *nums in rows:
        recs = groups[(topic, int(q))]
        messages, size, lo, hi, p50, p90, p99, top, exact99 = map(int, nums)
        lat = np.array([r.store_timestamp - r.born_timestamp for r in recs])
        sizes = [r.total_size for r in recs]
        assert (messages, size, lo, hi) == (len(recs), sum(sizes), min(sizes), max(sizes)), (topic, q)
        exact = [int(np.percentile(lat, p, method="inverted_cdf")) for p in (50, 90, 99)]
        assert [p50, p90, p99] == exact and top == lat.max() and exact99 == exact[2], (topic, q)


def test_histogram_throughput_and_parquet_equal_the_scan(run):
    text, _, records = run
    buckets = ast.literal_eval(re.search(r"histogram buckets: (\{.*\})$", text, re.M).group(1))
    assert buckets == {f"2^{k}": v for k, v in sorted(Counter(r.total_size.bit_length() - 1 for _, r in records).items())}
    stored = Counter(r.store_timestamp // 250 * 250 for _, r in records)
    span = (max(stored) - min(stored)) // 250 + 1
    assert (f"throughput: {span} buckets of 250 ms, {span - len(stored)} empty, peak {max(stored.values())} "
            f"messages; total {len(records):,}") in text
    per_topic = ast.literal_eval(re.search(r"per topic: (\{.*\})$", text, re.M).group(1))
    assert per_topic == dict(Counter(r.topic for _, r in records))


def test_verify_and_rebuild_agree_with_the_engine(run):
    text, store, records = run
    assert verify(store).ok
    assert "Spark verify: OK: no damage found | engine verify: OK: no damage found | same problems: True" in text
    cq = sum(len(files) for _, _, files in os.walk(os.path.join(store, "consumequeue")))
    assert f"{len(records)} records -> {len(records)} units in {cq} consume-queue files" in text
    assert f"{cq} rebuilt consume-queue files equal the engine's: True" in text


def test_no_spark_startup_noise_on_the_page(run):
    """The notebook's stderr (shown in red in Jupyter and on the site) holds no Spark start-up lines,
    and nothing names the machine it ran on."""
    import socket

    from conftest import executed_notebook

    stderr = "".join(out["text"] for cell in executed_notebook(NAME).cells for out in cell.get("outputs", [])
                     if out.get("output_type") == "stream" and out.get("name") == "stderr")
    for noise in ("log4j profile", "Setting default log level", "NativeCodeLoader", "resolves to a loopback address",
                  socket.gethostname() + ",", "Using incubator modules"):
        assert noise not in stderr, stderr
