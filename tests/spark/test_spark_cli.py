"""``rmqstore spark ...``: in-process on the shared session, and once for real under spark-submit."""

import io
import json
import os
import shutil
import subprocess
import sys
from collections import Counter

import pytest

pytest.importorskip("pyspark")
pq = pytest.importorskip("pyarrow.parquet")

from conftest import FIXTURES, REPO, run_cli  # noqa: E402
from rmqstore.format.record import MessageRecord  # noqa: E402
from rmqstore.read.scan import CommitLogScan  # noqa: E402

TXN = str(FIXTURES / "txn_delay" / "store")


def queue_counts(store):
    return Counter((r.topic, r.queue_id) for _, r in CommitLogScan(store) if isinstance(r, MessageRecord))


def test_stats_json_counts_every_queue(spark):
    code, out, err = run_cli(["spark", "stats", TXN, "--json", "--bucket-ms", "500"])
    assert code == 0, err
    result = json.loads(out)
    assert result["bucket_ms"] == 500
    assert {(q["topic"], q["queue_id"]): q["messages"] for q in result["queues"]} == queue_counts(TXN)
    assert sum(t["messages"] for t in result["throughput"]) == sum(queue_counts(TXN).values())
    assert all(t["bucket_start"] % 500 == 0 for t in result["throughput"])


def test_stats_table_names_the_session_and_the_queues(spark):
    code, out, err = run_cli(["spark", "stats", TXN])
    assert code == 0, err
    assert f"master {spark.sparkContext.master}" in out  # the active session was used, not a new one
    assert "size histogram, all queues (log2 buckets)" in out
    for topic, _ in queue_counts(TXN):
        assert topic in out
    assert not spark.sparkContext._jsc.sc().isStopped()  # and left running


def test_export_writes_parquet(spark, tmp_path):
    out_dir = tmp_path / "parquet"
    code, out, err = run_cli(["spark", "export", TXN, "--out", out_dir, "--no-body", "--partition-by", "topic"])
    assert code == 0, err
    table = pq.read_table(out_dir)
    assert f"rows   {table.num_rows}" in out and table.num_rows == sum(queue_counts(TXN).values())
    assert Counter(str(t) for t in table.column("topic").to_pylist()) == Counter(
        t for (t, _), n in queue_counts(TXN).items() for _ in range(n))
    code, _, err = run_cli(["spark", "export", TXN, "--out", out_dir])
    assert code == 2 and "already exists" in err


def test_verify_finds_the_damage_plain_verify_finds(spark, tmp_path):
    damaged = tmp_path / "damaged"
    shutil.copytree(TXN, damaged)
    first = next(r for _, r in CommitLogScan(TXN) if isinstance(r, MessageRecord) and r.body)
    seg = damaged / "commitlog" / f"{0:020d}"
    data = bytearray(seg.read_bytes())
    body_at = data.index(first.body)
    data[body_at] ^= 0xFF
    seg.write_bytes(bytes(data))
    code, out, err = run_cli(["spark", "verify", TXN, damaged, "--json"])
    assert code == 1, err
    reports = [json.loads(line) for line in out.splitlines()]
    for store, report in zip((TXN, damaged), reports):
        plain_code, plain_out, _ = run_cli(["verify", store, "--json"])
        plain = json.loads(plain_out)
        assert report["problems"] == plain["problems"], store
        assert plain_code == (0 if store == TXN else 1)
    assert any("crc" in p["kind"].lower() for p in reports[1]["problems"])


def test_rebuild_writes_rocketmqs_consume_queues(spark, tmp_path):
    out_dir = tmp_path / "rebuilt"
    code, out, err = run_cli(["spark", "rebuild", TXN, "--out", out_dir])
    assert code == 0, err
    theirs = os.path.join(TXN, "consumequeue")
    files = sorted(os.path.relpath(os.path.join(d, n), theirs) for d, _, names in os.walk(theirs) for n in names)
    assert f"in {len(files)} files" in out
    for rel in files:  # RocketMQ's own files, byte for byte
        assert (out_dir / "consumequeue" / rel).read_bytes() == open(os.path.join(theirs, rel), "rb").read(), rel


def test_usage_errors(spark):
    code, _, err = run_cli(["spark", "stats", "/no/such/store"])
    assert code == 2 and "/no/such/store: no such store directory" in err
    assert run_cli(["spark", "export", TXN])[0] == 2  # --out is required (argparse says so on sys.stderr)


@pytest.mark.slow
def test_spark_submit_runs_the_cli_file(tmp_path):
    """The cluster path for real: spark-submit's master reaches the session (not local[*])."""
    spark_submit = shutil.which("spark-submit")
    if spark_submit is None:
        pytest.skip("spark-submit is not on PATH")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    proc = subprocess.run([spark_submit, "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                           str(REPO / "rmqstore" / "spark" / "cli.py"), "stats", TXN],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "master local[2]" in proc.stdout
    for topic, _ in queue_counts(TXN):
        assert topic in proc.stdout


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_on_a_terminal_counts_spark_tasks(spark):
    from rmqstore import cli

    err = _Terminal()
    code = cli.main(["spark", "stats", TXN, "--json"], stdout=io.StringIO(), stderr=err)
    assert code == 0
    assert "spark stats" in err.getvalue() and "tasks done" in err.getvalue()


def test_without_pyspark_the_command_says_what_to_install():
    """`import rmqstore.spark` loads no PySpark; `rmqstore spark` without it is a clear error."""
    code = ("import sys; sys.modules['pyspark'] = None\n"
            "import rmqstore.cli, rmqstore.spark\n"
            "assert 'pyspark' not in sys.modules or sys.modules['pyspark'] is None\n"
            "sys.exit(rmqstore.cli.main(['spark', 'stats', sys.argv[1]]))\n")
    proc = subprocess.run([sys.executable, "-c", code, TXN], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "rmqstore spark needs PySpark: pip install 'rmqstore[spark]'" in proc.stderr
    assert "Traceback" not in proc.stderr
