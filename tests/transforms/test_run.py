"""headwater's Spark query (`run --once`'s, in the tests' shared local Spark session) with
transformations in the source block, on a real PostgreSQL: unwrap + route into the parquet sink and
into jsonl (the chain runs in the Spark source, on the executors)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.dataset as ds
import pytest

from tests.spark_support import read_sink, run_once, write_config

CHAIN = {
    "transforms": "route,unwrap",
    "transforms.route.type": "io.debezium.transforms.ByLogicalTableRouter",
    "transforms.route.topic.regex": "(.*)shard_(.)",
    "transforms.route.topic.replacement": "$1all_shards",
    "transforms.route.key.field.name": "shard",
    "transforms.route.key.field.regex": ".*shard_(.)",
    "transforms.route.key.field.replacement": "$1",
    "transforms.unwrap.type": "ExtractNewRecordState",
    "transforms.unwrap.delete.tombstone.handling.mode": "rewrite",
    "transforms.unwrap.add.fields": "op,source.table",
}
SETUP = ("CREATE TABLE shard_1 (id int PRIMARY KEY, name text); CREATE TABLE shard_2 (id int PRIMARY KEY, name text);"
         "INSERT INTO shard_1 VALUES (1, 'a'); INSERT INTO shard_2 VALUES (1, 'b')")
CHANGES = "UPDATE shard_1 SET name = 'a2' WHERE id = 1; DELETE FROM shard_2 WHERE id = 1; INSERT INTO shard_2 VALUES (2, 'c')"


@pytest.mark.spark
def test_unwrap_and_route_into_jsonl(spark, pg_server, pg_db, tmp_path):
    pg_server.execute(SETUP, pg_db)
    config = write_config(tmp_path, pg_server, pg_db, source=CHAIN, name="smtjsonl")
    run_once(spark, config)
    pg_server.execute(CHANGES, pg_db)
    run_once(spark, config)
    events = read_sink(Path(tmp_path / "out"))
    assert {e["topic"] for e in events} == {"golden.public.all_shards"}
    rows = [(e["key"], e["value"]) for e in events]
    assert sorted(rows[:2], key=str) == sorted([
        ({"id": 1, "shard": "1"}, {"id": 1, "name": "a", "__deleted": "false", "__op": "r", "__source_table": "shard_1"}),
        ({"id": 1, "shard": "2"}, {"id": 1, "name": "b", "__deleted": "false", "__op": "r", "__source_table": "shard_2"}),
    ], key=str)
    assert rows[2:] == [
        ({"id": 1, "shard": "1"}, {"id": 1, "name": "a2", "__deleted": "false", "__op": "u", "__source_table": "shard_1"}),
        ({"id": 1, "shard": "2"}, {"id": 1, "name": None, "__deleted": "true", "__op": "d", "__source_table": "shard_2"}),
        ({"id": 2, "shard": "2"}, {"id": 2, "name": "c", "__deleted": "false", "__op": "c", "__source_table": "shard_2"}),
    ]


@pytest.mark.spark
def test_unwrap_and_route_into_parquet(spark, pg_server, pg_db, tmp_path):
    pg_server.execute(SETUP, pg_db)
    config = write_config(tmp_path, pg_server, pg_db, source=CHAIN, sink={"type": "parquet"}, name="smtparquet")
    run_once(spark, config)
    pg_server.execute(CHANGES, pg_db)
    run_once(spark, config)
    out = Path(tmp_path / "out")
    assert sorted(p.name for p in out.iterdir()) == ["golden.public.all_shards"]
    table = ds.dataset(out / "golden.public.all_shards", format="parquet").to_table()
    assert table.schema.names[:5] == ["id", "name", "__deleted", "__op", "__source_table"]
    rows = sorted(table.to_pylist(), key=lambda r: (r["_commit_version"], r["__source_table"], r["id"]))
    assert [(r["id"], r["name"], r["__deleted"], r["__op"], r["__source_table"]) for r in rows] == [
        (1, "a", "false", "r", "shard_1"), (1, "b", "false", "r", "shard_2"),
        (1, "a2", "false", "u", "shard_1"), (1, None, "true", "d", "shard_2"), (2, "c", "false", "c", "shard_2")]
