"""The `delta` and `iceberg` sinks fed by the MariaDB connector (binlog events, `source.db` in the
names): a table mirrored under inserts, updates, deletes, a key change and an added column equals the
source row for row (read with Polars and pyiceberg, compared as the server prints the values)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from headwater.sinks.delta import DeltaSink
from headwater.sinks.iceberg import IcebergSink, open_catalog
from headwater.sinks.lake_config import DeltaOptions, IcebergOptions

SETUP = """
CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20), price DECIMAL(10,2), d DATE, qty BIGINT);
INSERT INTO items VALUES (1, 'pen', 2.50, '2024-01-02', 5), (2, 'ink', NULL, NULL, NULL), (3, '', -0.01, '1000-01-01', -1)
"""
CHANGES = """
UPDATE items SET price = 3.75, name = 'pen2' WHERE id = 1;
DELETE FROM items WHERE id = 2;
UPDATE items SET id = 30 WHERE id = 3;
INSERT INTO items VALUES (4, 'new', 9999999.99, '9999-12-31', 9223372036854775807);
ALTER TABLE items ADD COLUMN note VARCHAR(10);
UPDATE items SET note = 'x' WHERE id = 4
"""


def _text(v) -> str | None:
    return None if v is None else str(v)


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_mariadb_table_mirrored(mariadb_server, mariadb_db, tmp_path: Path, kind):
    mariadb_server.execute(SETUP, mariadb_db)
    props = {"connector.class": "mariadb", **mariadb_server.connector_properties(mariadb_db),
             "database.server.id": "5431", "topic.prefix": "m",
             "headwater.schema.history.file": str(tmp_path / "history.jsonl")}
    sink = (DeltaSink(DeltaOptions(str(tmp_path / "lake"), "${source.db}_${source.table}"), "m") if kind == "delta"
            else IcebergSink(IcebergOptions(str(tmp_path / "wh"), table_name_format="${source.db}.${source.table}"), "m"))
    engine = Engine(validate_connector(props), output="typed", max_events=3)
    batch_id = 0
    try:
        for phase in ("", CHANGES):
            if phase:
                mariadb_server.execute(phase, mariadb_db)
            for batch in engine.blocks(once=True):
                sink.write(list(batch), batch_id)
                batch_id += 1
    finally:
        engine.close()
    if kind == "delta":
        rows = pl.read_delta(str(tmp_path / "lake" / f"{mariadb_db}_items")).to_dicts()
    else:
        table = open_catalog(IcebergOptions(str(tmp_path / "wh"))).load_table(f"{mariadb_db}.items")
        rows = table.scan().to_arrow().to_pylist()
    got = sorted(([_text(r[c]) for c in ("id", "name", "price", "d", "qty", "note")] for r in rows),
                 key=lambda r: int(r[0] or 0))
    expected = [list(r) for r in mariadb_server.query("SELECT id, name, price, d, qty, note FROM items ORDER BY id",
                                                      mariadb_db)]
    assert got == expected
