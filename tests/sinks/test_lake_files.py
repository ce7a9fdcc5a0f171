"""Change-log mode as the Spark tasks write it, without Spark: each part of a batch written as parquet
files (`write_files`), the files committed by the driver (`commit_files`); on a real PostgreSQL's mixed
workload (types, truncate, added and dropped columns) the tables hold what the driver's own writes
give, and a batch committed again adds nothing."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from headwater.sinks.delta import DeltaSink, vacuum
from headwater.sinks.iceberg import IcebergSink, open_catalog
from headwater.sinks.lake_config import DeltaOptions, IcebergOptions
from headwater.spark.lakesink import PARTITION_SHIFT
from tests.sinks.lake_support import TABLES, normal, run_workload


def _sinks(kind: str, tmp_path) -> tuple[DeltaSink | IcebergSink, DeltaSink | IcebergSink]:
    if kind == "delta":
        return (DeltaSink(DeltaOptions(str(tmp_path / "driver"), "${source.table}", mode="changelog"), "a"),
                DeltaSink(DeltaOptions(str(tmp_path / "tasks"), "${source.table}", mode="changelog"), "a"))
    return (IcebergSink(IcebergOptions(str(tmp_path / "driver"), table_name_format="${source.table}",
                                       mode="changelog"), "a"),
            IcebergSink(IcebergOptions(str(tmp_path / "tasks"), table_name_format="${source.table}",
                                       mode="changelog"), "a"))


def _log(sink: DeltaSink | IcebergSink, table: str) -> list[dict]:
    if isinstance(sink, DeltaSink):
        rows = pl.read_delta(f"{sink.options.path}/{table}").to_dicts()
    else:
        rows = open_catalog(sink.options).load_table(f"default.{table}").scan().to_arrow().to_pylist()
    rows.sort(key=lambda r: (r["_batch_id"], r["_batch_order"]))
    return [{k: normal(v) for k, v in r.items() if k != "_batch_order"} for r in rows]


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_task_files_commit_the_same_change_log(pg_server, pg_db, tmp_path, kind):
    driver, tasks = _sinks(kind, tmp_path)
    committed = []

    def apply(blocks, batch_id):
        driver.write(blocks, batch_id)
        half = len(blocks) // 2  # two tasks, each with part of the batch's blocks
        files = [f for part, blocks in enumerate([blocks[:half], blocks[half:]]) if blocks
                 for f in tasks.write_files(blocks, batch_id, part * PARTITION_SHIFT, f"{part}-x")]
        committed.append(files)
        assert tasks.commit_files(files, batch_id)

    batches = run_workload(pg_server, pg_db, apply)
    assert any(len(blocks) > 1 for blocks in batches)  # some batches are written by two tasks
    for table in TABLES:
        assert _log(tasks, table) == _log(driver, table), table
    before = {table: _log(tasks, table) for table in TABLES}
    for batch_id, files in enumerate(committed):  # a replay commits nothing
        assert tasks.commit_files(files, batch_id) == {}
    assert {table: _log(tasks, table) for table in TABLES} == before
    # a replay's tasks write the batch's files again: the table leaves them out
    last = len(batches) - 1
    orphans = tasks.write_files(batches[last], last, 0, "replay")
    assert orphans and tasks.commit_files(orphans, last) == {}
    assert {table: _log(tasks, table) for table in TABLES} == before
    if isinstance(tasks, DeltaSink):  # a full vacuum deletes them
        removed = [Path(p).name for files in vacuum(tasks.options.path, retention_hours=0).values() for p in files]
        assert sorted(removed) == sorted(f.path for f in orphans)
        assert {table: _log(tasks, table) for table in TABLES} == before
