"""The `delta` sink on a real PostgreSQL: a schema mirrored into Delta tables under a mixed workload
(read back with Polars and DuckDB, not headwater), replays that change nothing, the change log."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest
from deltalake import DeltaTable

from headwater.sinks.delta import DeltaOptions, DeltaSink, optimize, vacuum
from tests.sinks.lake_support import TABLES, lake_rows, run_workload, source_rows


def test_mirror_equals_the_source_and_replays_change_nothing(pg_server, pg_db, tmp_path):
    root = tmp_path / "lake"
    sink = DeltaSink(DeltaOptions(str(root), "${source.table}", partition_by=("k1",)), app_id="mirror")
    batches = run_workload(pg_server, pg_db, sink.write)
    assert len(batches) > 5  # batches end inside transactions
    for table in TABLES:
        got = pl.read_delta(str(root / table)).to_dicts()
        assert lake_rows(got, table) == source_rows(pg_server, pg_db, table), table
    assert DeltaTable(str(root / "pairs")).metadata().partition_columns == ["k1"]
    assert DeltaTable(str(root / "kinds")).metadata().partition_columns == []
    assert "extra" in DeltaTable(str(root / "kinds")).schema().to_arrow().names  # the added column
    kinds = pl.read_delta(str(root / "kinds"))
    # the dropped column: null in the rows changed after the drop, kept in the others
    assert kinds.sort("id").filter(pl.col("id").is_in([1, 10, 20]))["vc"].to_list() == [None, "kept", None]

    versions = {t: DeltaTable(str(root / t)).version() for t in TABLES}
    for batch_id, blocks in enumerate(batches):  # the snapshot again would bring back deleted rows
        assert sink.write(blocks, batch_id) == {}
    assert {t: DeltaTable(str(root / t)).version() for t in TABLES} == versions
    assert max(sink.applied_batch(str(root / t)) or -1 for t in TABLES) == len(batches) - 1
    for table in TABLES:  # DuckDB reads the tables as they are after the replays
        dataset = DeltaTable(str(root / table)).to_pyarrow_dataset()  # noqa: F841 - DuckDB finds it by name
        relation = duckdb.sql("SELECT * FROM dataset")
        assert relation is not None
        got = relation.to_arrow_table().to_pylist()
        assert lake_rows(got, table) == source_rows(pg_server, pg_db, table)

    # another application id is another writer: it applies the batches
    other = DeltaSink(DeltaOptions(str(root), "${source.table}"), app_id="other")
    assert other.write(batches[-1], len(batches) - 1)


def test_changelog_appends_every_change(pg_server, pg_db, tmp_path):
    root = tmp_path / "log"
    sink = DeltaSink(DeltaOptions(str(root), "${source.table}", mode="changelog"), app_id="log")
    run_workload(pg_server, pg_db, sink.write)
    kinds = pl.read_delta(str(root / "kinds")).sort("_batch_id", "_batch_order")
    assert set(kinds.columns) >= {"_op", "_change_type", "_commit_version", "_commit_timestamp", "_source_ts_ms"}
    short = kinds.filter(pl.col("id") == 40)
    assert short["_op"].to_list() == ["c", "u", "d"]
    assert short["_change_type"].to_list() == ["insert", "update_postimage", "delete"]
    assert short["t"].to_list() == ["short-lived", "shorter", None]  # a delete's before: the key only
    pairs = pl.read_delta(str(root / "pairs")).sort("_batch_id", "_batch_order")
    ops = pairs["_op"].to_list()
    assert ops.count("t") == 1 and ops.count("r") == 3
    assert pairs.filter(pl.col("_op") == "t")["k1"].to_list() == [None]
    versions = pairs["_commit_version"].to_list()
    snapshot_rows = ops.count("r")
    assert versions[snapshot_rows:] == sorted(versions[snapshot_rows:])  # commit order


def test_optimize_and_vacuum(pg_server, pg_db, tmp_path):
    root = tmp_path / "lake"
    sink = DeltaSink(DeltaOptions(str(root), "${source.table}", mode="changelog"), app_id="m")  # a file a batch
    run_workload(pg_server, pg_db, sink.write)
    order = ["_batch_id", "_batch_order"]
    before = {t: pl.read_delta(str(root / t)).sort(order) for t in TABLES}
    files = len(DeltaTable(str(root / "kinds")).file_uris())
    metrics = optimize(root)
    assert set(metrics) == {DeltaTable(str(root / t)).table_uri for t in TABLES}
    assert len(DeltaTable(str(root / "kinds")).file_uris()) < files
    removed = vacuum(root, retention_hours=0)
    assert sum(len(v) for v in removed.values()) > 0
    for t in TABLES:
        assert pl.read_delta(str(root / t)).sort(order).equals(before[t])


def test_a_table_without_a_key_cannot_be_merged(pg_server, pg_db, tmp_path):
    pg_server.execute("CREATE TABLE loose (a int); INSERT INTO loose VALUES (1), (1);", pg_db)
    from headwater.connectors.registry import validate_connector
    from headwater.engine import Engine
    from tests.sinks.lake_support import properties

    props = {**properties(pg_server, pg_db, f"{pg_db}_loose"), "table.include.list": "public.loose"}
    engine = Engine(validate_connector(props), output="typed")
    try:
        blocks = [b for batch in engine.blocks(once=True) for b in batch]
    finally:
        engine.close()
    with pytest.raises(ValueError, match="no primary key.*mode: changelog"):
        DeltaSink(DeltaOptions(str(tmp_path / "m")), app_id="a").write(blocks, 0)
    assert DeltaSink(DeltaOptions(str(tmp_path / "c"), mode="changelog"), app_id="a").write(blocks, 0) == {
        f"{tmp_path / 'c'}/lake.public.loose": 2}
