"""table_changes: one table's snapshot and streamed changes as typed Spark columns, from a real PostgreSQL."""

from __future__ import annotations

import datetime as dt
import decimal
import time

import pytest

from headwater.spark.tables import table_changes

pytestmark = pytest.mark.slow

DDL = """
CREATE TABLE items (id int PRIMARY KEY, name text, price numeric(10,2), at timestamptz, day date,
                    ok boolean, seen timestamp, tags text[]);
INSERT INTO items VALUES (1, 'apple', 1.25, '2026-01-02 03:04:05.123456+00', '2026-01-02', true,
                          '2026-01-02 03:04:05', '{a,b}'),
                         (2, 'pear', -0.50, NULL, NULL, false, NULL, NULL);
"""


@pytest.fixture(scope="module")
def spark(spark):
    """The shared session with timestamps read in UTC."""
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    yield spark
    spark.conf.set("spark.sql.session.timeZone", zone)


def _wait_rows(spark, name: str, n: int, timeout: float = 180) -> list:
    deadline = time.time() + timeout
    while time.time() < deadline:
        rows = spark.sql(f"SELECT * FROM {name} ORDER BY _commit_version, id").collect()
        if len(rows) >= n:
            return rows
        time.sleep(0.5)
    raise AssertionError(f"{name}: fewer than {n} rows after {timeout}s")


def test_snapshot_and_changes_as_typed_columns(spark, pg_server, pg_db, tmp_path):
    pg_server.execute(DDL, pg_db)
    props = {"connector.class": "postgres", **pg_server.connector_properties(pg_db), "topic.prefix": "shop",
             "slot.name": "tables_slot", "table.include.list": "public.items"}
    changes = table_changes(spark, props, "public.items")
    assert [f.name for f in changes.schema.fields] == [
        "id", "name", "price", "at", "day", "ok", "seen", "tags",
        "_op", "_change_type", "_commit_version", "_commit_timestamp", "_source_ts_ms"]
    types = {f.name: f.dataType.simpleString() for f in changes.schema.fields}
    assert types["id"] == "int" and types["price"] == "decimal(10,2)" and types["at"] == "timestamp"
    assert types["day"] == "date" and types["ok"] == "boolean" and types["seen"] == "timestamp_ntz"
    assert types["tags"] == "array<string>"

    query = (changes.writeStream.format("memory").queryName("items_changes")
             .option("checkpointLocation", str(tmp_path / "ckpt")).start())
    try:
        rows = _wait_rows(spark, "items_changes", 2)
        first = {r["id"]: r for r in rows}
        assert first[1]["_op"] == "r" and first[1]["_change_type"] == "insert"
        assert first[1]["name"] == "apple" and first[1]["price"] == decimal.Decimal("1.25")
        assert first[1]["at"] == dt.datetime(2026, 1, 2, 3, 4, 5, 123456)  # UTC session
        assert first[1]["day"] == dt.date(2026, 1, 2) and first[1]["ok"] is True
        assert first[1]["seen"] == dt.datetime(2026, 1, 2, 3, 4, 5) and first[1]["tags"] == ["a", "b"]
        assert first[2]["price"] == decimal.Decimal("-0.50") and first[2]["at"] is None

        pg_server.execute("UPDATE items SET price = 2.00, name = 'green apple' WHERE id = 1;"
                          "DELETE FROM items WHERE id = 2;", pg_db)
        rows = _wait_rows(spark, "items_changes", 4)
    finally:
        query.stop()
    update = next(r for r in rows if r["_op"] == "u")
    delete = next(r for r in rows if r["_op"] == "d")
    assert (update["id"], update["name"], update["price"], update["_change_type"]) == (
        1, "green apple", decimal.Decimal("2.00"), "update_postimage")
    # a delete's row is its before image: only the key under REPLICA IDENTITY DEFAULT, as in Debezium's event
    assert (delete["id"], delete["name"], delete["price"], delete["_change_type"]) == (2, None, None, "delete")
    assert update["_commit_version"] > first[1]["_commit_version"] and update["_source_ts_ms"] > 0
