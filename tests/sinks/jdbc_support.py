"""Helpers of the JDBC sink's tests: a PostgreSQL source read by the embedded engine, its batches
applied to a target, and the rows of source and target read back with SQL as comparable values."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from headwater.sinks.jdbc.config import parse_jdbc_sink
from headwater.sinks.jdbc.writer import JdbcWriter


def source_engine(pg_server, pg_db: str, slot: str, tables: str, **extra: str) -> Engine:
    props = {"connector.class": "postgres", **pg_server.connector_properties(pg_db), "topic.prefix": "src",
             "slot.name": slot, "table.include.list": tables, "skipped.operations": "none", **extra}
    return Engine(validate_connector(props), output="typed")


def pg_url(pg_server, db: str) -> dict[str, Any]:
    return {"type": "jdbc", "connection.url": f"jdbc:postgresql://127.0.0.1:{pg_server.port}/{db}",
            "connection.username": pg_server.superuser, "connection.password": pg_server.password}


def mariadb_url(server, db: str) -> dict[str, Any]:
    return {"type": "jdbc", "connection.url": f"jdbc:mariadb://127.0.0.1:{server.port}/{db}",
            "connection.username": server.superuser, "connection.password": server.password}


def writer(props: dict[str, Any], pipeline: str = "test") -> JdbcWriter:
    return JdbcWriter(parse_jdbc_sink(props), pipeline)


def apply_available(engine: Engine, w: JdbcWriter, first_batch: int = 0) -> tuple[int, list]:
    """Apply every batch the source holds now; the next batch id and the batches (for replays)."""
    batches = []
    batch_id = first_batch
    for batch in engine.blocks(once=True):
        w.apply(batch_id, list(batch))
        batches.append((batch_id, list(batch)))
        batch_id += 1
    return batch_id, batches


def pg_rows(pg_server, db: str, sql: str) -> list[tuple]:
    conn = pg_server.connect(db)
    try:
        with conn.cursor() as c:
            c.execute(sql)
            return [tuple(normal(v) for v in r) for r in c.fetchall()]
    finally:
        conn.close()


def mariadb_rows(server, db: str, sql: str) -> list[tuple]:
    import pymysql

    conn = pymysql.connect(host="127.0.0.1", port=server.port, user=server.superuser, password=server.password,
                           database=db, charset="utf8mb4")
    try:
        with conn.cursor() as c:
            c.execute("SET time_zone = '+00:00'")
            c.execute(sql)
            return [tuple(normal(v) for v in r) for r in c.fetchall()]
    finally:
        conn.close()


def normal(v: Any) -> Any:
    """A value as both databases' drivers can be compared: instants in UTC without a zone, times of
    day as time, JSON parsed, UUIDs as text, booleans as 0/1."""
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.UTC).replace(tzinfo=None)
    if isinstance(v, dt.timedelta) and dt.timedelta(0) <= v < dt.timedelta(days=1):  # PyMySQL's TIME
        return (dt.datetime.min + v).time()
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (bytes, memoryview)):
        return bytes(v)
    if isinstance(v, decimal.Decimal):
        return v.normalize() if v.is_finite() else v
    if isinstance(v, str) and v[:1] in "[{":
        try:
            return json.loads(v)
        except ValueError:
            return v
    if isinstance(v, (dict, list)):
        return v
    return v if v is None or isinstance(v, (int, float, str, dt.date, dt.time, dt.timedelta)) else str(v)
