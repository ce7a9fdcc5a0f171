"""The `iceberg` sink on a real PostgreSQL: a schema mirrored into Iceberg tables under a mixed workload
(read back with pyiceberg and DuckDB, not headwater), replays that change nothing, the change log in
a catalog kept in PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb

from headwater.sinks.iceberg import IcebergSink, applied_batch, expire_snapshots, open_catalog
from headwater.sinks.lake_config import IcebergOptions
from tests.sinks.lake_support import TABLES, lake_rows, run_workload, source_rows


def test_mirror_equals_the_source_and_replays_change_nothing(pg_server, pg_db, tmp_path):
    options = IcebergOptions(str(tmp_path / "warehouse"), partition_by=("k1",))
    sink = IcebergSink(options, app_id="mirror")
    batches = run_workload(pg_server, pg_db, sink.write)
    catalog = open_catalog(options)  # a reader of its own
    tables = {t: catalog.load_table(f"lake_public.{t}") for t in TABLES}  # ${topic}: namespace lake_public
    for name, table in tables.items():
        assert lake_rows(table.scan().to_arrow().to_pylist(), name) == source_rows(pg_server, pg_db, name), name
    assert [f.name for f in tables["pairs"].spec().fields] == ["k1"]
    assert "extra" in tables["kinds"].schema().column_names  # the added column
    kinds = tables["kinds"].scan().to_arrow().to_pylist()
    # the dropped column: null in the rows changed after the drop, kept in the others (rewritten too)
    assert [r["vc"] for r in sorted(kinds, key=lambda r: r["id"]) if r["id"] in (1, 10, 20)] == [None, "kept", None]
    assert {f.name: str(f.field_type) for f in tables["kinds"].schema().fields}["tstz"] == "timestamptz"

    snapshots = {t: table.current_snapshot() for t, table in tables.items()}
    for batch_id, blocks in enumerate(batches):  # the snapshot again would bring back deleted rows
        assert sink.write(blocks, batch_id) == {}
    tables = {t: catalog.load_table(f"lake_public.{t}") for t in TABLES}
    assert {t: table.current_snapshot() for t, table in tables.items()} == snapshots
    assert max(applied_batch(table, "mirror") or -1 for table in tables.values()) == len(batches) - 1
    for name, table in tables.items():
        arrow = table.scan().to_arrow()  # noqa: F841 - DuckDB finds it by name
        relation = duckdb.sql("SELECT * FROM arrow")
        assert relation is not None
        got = relation.to_arrow_table().to_pylist()
        assert lake_rows(got, name) == source_rows(pg_server, pg_db, name)

    expired = expire_snapshots(options, datetime.now(UTC))
    assert expired["lake_public.kinds"] > 5
    for name in TABLES:
        table = catalog.load_table(f"lake_public.{name}")
        assert len(table.metadata.snapshots) == 1
        assert lake_rows(table.scan().to_arrow().to_pylist(), name) == source_rows(pg_server, pg_db, name)
    assert max(applied_batch(catalog.load_table(f"lake_public.{t}"), "mirror") or -1 for t in TABLES) == len(batches) - 1


def test_changelog_in_a_postgresql_catalog(pg_server, pg_db, tmp_path):
    url = (f"postgresql+psycopg2://{pg_server.superuser}:{pg_server.password}@127.0.0.1:{pg_server.port}/{pg_db}")
    options = IcebergOptions(str(tmp_path / "warehouse"), catalog_uri=url, table_name_format="cdc.${source.table}",
                             mode="changelog")
    run_workload(pg_server, pg_db, IcebergSink(options, app_id="log").write)
    assert pg_server.query("SELECT count(*) FROM iceberg_tables WHERE table_namespace = 'cdc'", pg_db) == [(2,)]
    kinds = open_catalog(options).load_table("cdc.kinds").scan().to_arrow().sort_by(
        [("_batch_id", "ascending"), ("_batch_order", "ascending")])
    short = kinds.filter(kinds.column("id").to_numpy(zero_copy_only=False) == 40)
    assert short.column("_op").to_pylist() == ["c", "u", "d"]
    assert short.column("t").to_pylist() == ["short-lived", "shorter", None]
    pairs = open_catalog(options).load_table("cdc.pairs").scan().to_arrow()
    assert pairs.column("_op").to_pylist().count("t") == 1
