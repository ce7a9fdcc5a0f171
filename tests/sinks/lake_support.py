"""A mixed workload on a real PostgreSQL for the Delta Lake and Iceberg sink tests, the engine run that
feeds a sink batch by batch, and the source's rows in a form that compares with what a lake reader
gives back."""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from typing import Any

from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from headwater.events.typed import TypedBlock

SCHEMA = """
CREATE TABLE kinds (id int PRIMARY KEY, i2 smallint, i8 bigint, num numeric(12,3), r real,
                    d double precision, b boolean, t text, vc varchar(20), dt date, ts timestamp,
                    tstz timestamptz, tm time, by bytea, j jsonb, u uuid, ia int[], ta text[]);
CREATE TABLE pairs (k1 int, k2 text, v int, PRIMARY KEY (k1, k2));
INSERT INTO kinds VALUES
  (1, 32767, 9223372036854775807, 123456789.123, 1.5, 1e300, true, 'plain', 'v', '2024-02-29',
   '2024-02-29 23:59:59.999999', '2024-01-02 03:04:05.123456+02', '23:59:59.999999', '\\x00ff10',
   '{"a": [1, 2], "b": null}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{1,NULL,3}', '{"x","y z"}'),
  (2, -32768, -9223372036854775808, -999999999.999, -0.25, -1e-300, false, '', '',
   '0001-01-01', '0001-01-01 00:00:00', '1970-01-01 00:00:00+00', '00:00:00', '\\x', '[]',
   '00000000-0000-0000-0000-000000000000', '{}', '{}'),
  (3, 0, 0, 0, 0, 0, NULL, 'üñí€😀', NULL, '9999-12-31', '9999-12-31 23:59:59', NULL, NULL, NULL,
   'null', NULL, NULL, NULL),
  (4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
INSERT INTO pairs VALUES (1, 'a', 10), (1, 'b', 11), (2, 'a', 20);
"""

# phases of changes, each read as its own batches
CHANGES = [
    """
    INSERT INTO kinds (id, t, num) VALUES (10, 'new', 1.000), (11, NULL, NULL);
    UPDATE kinds SET t = 'changed', num = NULL, ia = '{7}' WHERE id = 1;
    DELETE FROM kinds WHERE id = 2;
    UPDATE kinds SET id = 20 WHERE id = 3;
    UPDATE pairs SET k2 = 'z', v = 12 WHERE k1 = 1 AND k2 = 'b';
    INSERT INTO kinds (id, t) VALUES (40, 'short-lived');
    UPDATE kinds SET t = 'shorter' WHERE id = 40;
    DELETE FROM kinds WHERE id = 40;
    """,
    """
    INSERT INTO pairs VALUES (3, 'c', 30);
    TRUNCATE pairs;
    INSERT INTO pairs VALUES (7, 'after', 70), (8, 'after', 80);
    UPDATE pairs SET v = 71 WHERE k1 = 7;
    """,
    """
    ALTER TABLE kinds ADD COLUMN extra text;
    UPDATE kinds SET extra = 'x' WHERE id = 1;
    INSERT INTO kinds (id, t, extra) VALUES (30, 'with extra', 'y');
    UPDATE kinds SET tstz = '2000-06-15 12:00:00+00', d = 'NaN' WHERE id = 10;
    DELETE FROM pairs WHERE k1 = 8;
    UPDATE kinds SET vc = 'kept' WHERE id = 10;
    """,
    """
    ALTER TABLE kinds DROP COLUMN vc;
    UPDATE kinds SET t = 'after the drop' WHERE id IN (1, 20);
    """,
]

TABLES = {"kinds": ["id"], "pairs": ["k1", "k2"]}
DROPPED = "vc"  # the column the last phase drops: the lake tables keep it


def properties(pg_server, pg_db: str, slot: str) -> dict[str, str]:
    return {"connector.class": "postgres", **pg_server.connector_properties(pg_db), "topic.prefix": "lake",
            "slot.name": slot, "table.include.list": "public.kinds,public.pairs",
            "skipped.operations": "none"}  # truncates too (Debezium skips them by default)


def run_workload(pg_server, pg_db: str, apply: Callable[[list[TypedBlock], int], Any], max_events: int = 4
                 ) -> list[list[TypedBlock]]:
    """Snapshot, then each phase of changes, through the engine (typed blocks, at most `max_events`
    events a batch so that batches end inside transactions); `apply(blocks, batch_id)` gets each
    batch. The batches, in order."""
    pg_server.execute(SCHEMA, pg_db)
    engine = Engine(validate_connector(properties(pg_server, pg_db, f"{pg_db}_lake")), output="typed",
                    max_events=max_events)
    batches: list[list[TypedBlock]] = []
    try:
        for phase in ["", *CHANGES]:
            if phase:
                pg_server.execute(phase, pg_db)
            for batch in engine.blocks(once=True):
                blocks = list(batch)
                apply(blocks, len(batches))
                batches.append(blocks)
    finally:
        engine.close()
    return batches


def normal(v: Any) -> Any:
    """A value as both sides can give it: times of day as ISO text, instants in UTC, bytes as bytes,
    JSON text parsed, NaN as the string 'NaN'."""
    if isinstance(v, datetime.time):
        return v.isoformat(timespec="microseconds")
    if isinstance(v, datetime.datetime) and v.tzinfo is not None:
        return v.astimezone(datetime.UTC)
    if isinstance(v, memoryview):
        return bytes(v)
    if isinstance(v, float) and v != v:
        return "NaN"
    if isinstance(v, list):
        return [normal(x) for x in v]
    return v


def source_rows(pg_server, pg_db: str, table: str) -> list[dict[str, Any]]:
    """The source table's rows (psycopg2's Python values, normalized), ordered by key, without the
    column the last phase drops (the tests check it on their own)."""
    conn = pg_server.connect(pg_db)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table} ORDER BY {', '.join(TABLES[table])}")
            names = [d[0] for d in cur.description]
            rows = [{k: v for k, v in zip(names, row, strict=True) if k != DROPPED} for row in cur.fetchall()]
    finally:
        conn.close()
    for row in rows:
        for k, v in row.items():
            row[k] = normal(v)
    return rows


def lake_rows(rows: list[dict[str, Any]], table: str, json_columns: tuple[str, ...] = ("j",)) -> list[dict[str, Any]]:
    """A lake table's rows (Python values from its reader), normalized like `source_rows`, ordered by
    key, without the column the source dropped."""
    out = []
    for row in rows:
        row = {k: normal(v) for k, v in row.items() if k != DROPPED}
        for c in json_columns:
            if row.get(c) is not None:
                row[c] = json.loads(row[c])
        out.append(row)
    return sorted(out, key=lambda r: tuple(r[k] for k in TABLES[table]))
