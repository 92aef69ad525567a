"""Spark ``export``: the Parquet files read back with pyarrow hold exactly the message lines of `rmqstore dump`."""

import json

import pytest

pytest.importorskip("pyspark")
pq = pytest.importorskip("pyarrow.parquet")

from conftest import FIXTURES, run_cli  # noqa: E402
from rmqstore.format.dumpfmt import MESSAGE_KEYS  # noqa: E402
from rmqstore.format.properties import parse_properties  # noqa: E402
from rmqstore.spark.export import export  # noqa: E402

STORES = [str(FIXTURES / n / "store") for n in ("basic", "boundary", "txn_delay")]


def dumped_messages(store):
    code, out, err = run_cli(["dump", store, "--json"])
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    return {(store, j["offset"]): j for j in lines if j["type"] == "message"}


def test_parquet_rows_are_the_dump(spark, tmp_path):
    result = export(spark, STORES, tmp_path / "all", split_size=50_000)
    table = pq.read_table(result.path)
    assert result.rows == table.num_rows == 600 + 16 + 24
    assert '"type":"blank"' in run_cli(["dump", STORES[0], "--json"])[1]  # in the dump, not in the export
    expected = {}
    for store in STORES:
        expected.update(dumped_messages(store))
    got = {(r["store"], r["offset"]): r for r in table.to_pylist()}
    assert set(got) == set(expected)
    for key, j in expected.items():
        r = got[key]
        for name in MESSAGE_KEYS:
            if name == "type":
                continue
            value = r[name]
            if name == "body":
                value = value.hex()
            elif name == "properties":
                value = r["properties_raw"]
                assert dict(r["properties"]) == parse_properties(j["properties"]), key
            assert value == j[name], (key, name)

        assert int(r["segment"]) <= j["offset"], key


def test_partitioned_export_without_bodies(spark, tmp_path):
    store = STORES[2]
    result = export(spark, [store], tmp_path / "by_topic", body=False, partition_by="topic")
    expected = dumped_messages(store)
    folders = {p.name for p in (tmp_path / "by_topic").iterdir() if p.is_dir()}
    assert folders == {f"topic={t}" for t in {j["topic"] for j in expected.values()}}
    table = pq.read_table(result.path)
    rows = table.to_pylist()
    assert result.rows == len(rows) == len(expected)
    assert all(r["body"] is None for r in rows)
    assert {(r["offset"], str(r["topic"])) for r in rows} == {(o, j["topic"]) for (_, o), j in expected.items()}


def test_export_refuses_to_overwrite_by_accident(spark, tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(FileExistsError, match="already exists"):
        export(spark, STORES[:1], tmp_path / "taken")
    with pytest.raises(ValueError, match="cannot partition by"):
        export(spark, STORES[:1], tmp_path / "x", partition_by=["no_such_column"])
    with pytest.raises(ValueError, match="mode"):
        export(spark, STORES[:1], tmp_path / "x", mode="ignore")
