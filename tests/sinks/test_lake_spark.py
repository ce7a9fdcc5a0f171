"""The `delta` and `iceberg` sinks in headwater's Spark streaming query (`run --once`'s query, in the
tests' shared local Spark session) on a real PostgreSQL: the query mirrors the schema after the
snapshot and after each phase of changes (read back with Polars and pyiceberg), a new run over the
same checkpoint adds nothing, a batch Spark runs again changes nothing, `headwater status` works."""

from __future__ import annotations

import pytest
import yaml

from tests.sinks.lake_support import CHANGES, SCHEMA, TABLES, lake_rows, properties, source_rows
from tests.spark_support import cli, run_once, write_config

pytestmark = pytest.mark.spark


def _read(sink: dict, table: str) -> list[dict]:
    if sink["type"] == "delta":
        import polars as pl

        return pl.read_delta(f"{sink['path']}/{table}").to_dicts()
    from headwater.sinks.iceberg import open_catalog
    from headwater.sinks.lake_config import IcebergOptions

    catalog = open_catalog(IcebergOptions(sink["catalog.warehouse"]))
    return catalog.load_table(f"lake_public.{table}").scan().to_arrow().to_pylist()


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_run_once_mirrors_the_schema(spark, pg_server, pg_db, tmp_path, kind):
    sink = ({"type": "delta", "path": str(tmp_path / "lake"), "table.name.format": "${source.table}",
             "mirror": True} if kind == "delta" else
            {"type": "iceberg", "catalog.warehouse": str(tmp_path / "warehouse"), "partition.by": "k1"})
    pg_server.execute(SCHEMA, pg_db)
    props = properties(pg_server, pg_db, f"{pg_db}_spark")
    source = {k: v for k, v in props.items() if not k.startswith("database.") and k != "connector.class"}
    config = write_config(tmp_path, pg_server, pg_db, source=source, sink=sink,
                          spark={"maxEventsPerTrigger": 5}, name=f"lake_{kind}")
    cfg = yaml.safe_load(config.read_text())
    cfg["sink"] = sink  # without the jsonl sink's path that write_config puts in
    config.write_text(yaml.safe_dump(cfg))
    for phase in ["", *CHANGES]:
        if phase:
            pg_server.execute(phase, pg_db)
        run_once(spark, config)
        for table in TABLES:
            assert lake_rows(_read(sink, table), table) == source_rows(pg_server, pg_db, table), (phase, table)
    run_once(spark, config)  # nothing new: nothing changes
    for table in TABLES:
        assert lake_rows(_read(sink, table), table) == source_rows(pg_server, pg_db, table)
    status = cli("status", str(config)).stdout
    assert "last committed batch" in status


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_a_batch_spark_replays_changes_nothing(spark, pg_server, pg_db, tmp_path, kind):
    """A crash after the sink committed a batch and before Spark's checkpoint recorded it (its commit
    log entry missing) makes Spark run that batch again with the same id: the change log must not
    get its changes twice."""
    sink = ({"type": "delta", "path": str(tmp_path / "lake")} if kind == "delta" else
            {"type": "iceberg", "catalog.warehouse": str(tmp_path / "warehouse")})
    sink.update({"mode": "changelog", "table.name.format": "${source.table}"})
    pg_server.execute(SCHEMA, pg_db)
    source = {k: v for k, v in properties(pg_server, pg_db, f"{pg_db}_replay").items()
              if not k.startswith("database.") and k != "connector.class"}
    config = write_config(tmp_path, pg_server, pg_db, source=source, sink=sink, name=f"replay_{kind}")
    cfg = yaml.safe_load(config.read_text())
    cfg["sink"] = sink
    config.write_text(yaml.safe_dump(cfg))
    run_once(spark, config)
    pg_server.execute(CHANGES[0], pg_db)
    run_once(spark, config)
    before = _log(sink, "kinds")
    commits = tmp_path / "state" / "checkpoint" / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()  # the state a kill -9 right after the sink's commit leaves
    run_once(spark, config)
    assert (commits / str(last)).exists()  # Spark ran the batch again
    assert _log(sink, "kinds") == before
    # the snapshot's 4 rows; 2 inserts, an update, a delete, a key change (delete, create), 40 created,
    # updated and deleted: once each
    assert len(before) == 4 + 9
    # the Spark tasks wrote the files; the replay's are on disk, not in the table
    on_disk, in_table = _files(sink, "kinds")
    assert in_table and in_table < on_disk


def _files(sink: dict, table: str) -> tuple[set[str], set[str]]:
    """The names of the files the Spark tasks wrote for a table, and of the table's data files."""
    from pathlib import Path

    if sink["type"] == "delta":
        from deltalake import DeltaTable

        root = Path(sink["path"], table)
        return {p.name for p in root.glob("headwater-*.parquet")}, {Path(f).name for f in DeltaTable(str(root)).file_uris()}
    from headwater.sinks.iceberg import open_catalog
    from headwater.sinks.lake_config import IcebergOptions

    iceberg = open_catalog(IcebergOptions(sink["catalog.warehouse"])).load_table(f"default.{table}")
    on_disk = {p.name for p in Path(sink["catalog.warehouse"], "default.db", table, "data").glob("headwater-*.parquet")}
    return on_disk, {Path(t.file.file_path).name for t in iceberg.scan().plan_files()}


def _log(sink: dict, table: str) -> list[dict]:
    if sink["type"] == "delta":
        import polars as pl

        rows = pl.read_delta(f"{sink['path']}/{table}").to_dicts()
    else:
        from headwater.sinks.iceberg import open_catalog
        from headwater.sinks.lake_config import IcebergOptions

        rows = open_catalog(IcebergOptions(sink["catalog.warehouse"])).load_table(
            f"default.{table}").scan().to_arrow().to_pylist()
    return sorted(rows, key=lambda r: (r["_batch_id"], r["_batch_order"]))
