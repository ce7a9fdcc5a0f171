"""Debezium's locking snapshot on a real MariaDB: what each `snapshot.locking.mode` blocks, and the snapshot
and the stream meeting exactly at the binlog position read under the lock (nothing lost, nothing twice)."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.connectors.mariadb.source import MariaDbSource
from headwater.connectors.registry import validate_connector
from headwater.devservers.mariadb import MariaDBServer
from headwater.engine import Engine, OffsetFile


def source(server: MariaDBServer, db: str, **extra: str) -> MariaDbSource:
    props = {"connector.class": "mariadb", **server.connector_properties(db), "database.server.id": "5404",
             "topic.prefix": "s", "include.schema.changes": "false",
             **{k.replace("__", "."): v for k, v in extra.items()}}
    return MariaDbSource(validate_connector(props), parallelism=1)


def writes_blocked(server: MariaDBServer, db: str, key: int) -> bool:
    """Whether an INSERT waits for a lock (it gives up after a second)."""
    try:
        server.execute(f"SET SESSION lock_wait_timeout = 1; INSERT INTO t VALUES ({key}, 'w{key}')", db)
    except RuntimeError as exc:
        assert "Lock wait timeout" in str(exc), exc
        return True
    return False


def read(units: list[Any]) -> list[dict[str, Any]]:
    return [e.value_json() for u in units for batch in u.read() for e in batch.rows() if e.value is not None]


@pytest.fixture
def table(mariadb_server, mariadb_db):
    mariadb_server.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20));"
                           "INSERT INTO t VALUES (1, 'a'), (2, 'b')", mariadb_db)
    return mariadb_db


@pytest.mark.parametrize(("mode", "blocked_while_reading"), [("minimal", False), ("extended", True), ("none", False)])
def test_locking_modes_and_the_meeting_point(mariadb_server, table, mode, blocked_while_reading):
    src = source(mariadb_server, table, snapshot__locking__mode=mode)
    try:
        start = src.initial_offset()
        src.open(start)
        end = src.latest_offset(start)  # the snapshot is taken: lock, transaction, binlog position
        assert writes_blocked(mariadb_server, table, 3) is blocked_while_reading
        if blocked_while_reading:
            assert src.held is not None and src.held.locked
        rows = read(src.plan(start, end))
        assert [r["after"]["id"] for r in rows] == [1, 2]  # the snapshot's view, whatever was written since
        assert rows[0]["source"]["file"] == end["file"] and rows[0]["source"]["pos"] == end["pos"]
        src.commit(end)
        start = end
        first = src.latest_offset(start)  # the snapshot batch is over: what it held is released
        mariadb_server.execute("INSERT INTO t VALUES (4, 'd')", table)
        seen: list[int] = []
        if first != start:
            seen += [v["after"]["id"] for v in read(src.plan(start, first)) if v.get("op") == "c"]
            start = first
        src.prepare_available_now()
        while True:
            end = src.latest_offset(start)
            if end == start:
                break
            seen += [v["after"]["id"] for v in read(src.plan(start, end)) if v.get("op") == "c"]
            start = end
        expected = [4] if blocked_while_reading else [3, 4]
        assert seen == expected
    finally:
        src.close()


def test_initial_only_stops_after_the_snapshot(mariadb_server, table, tmp_path):
    props = {"connector.class": "mariadb", **mariadb_server.connector_properties(table), "database.server.id": "5405",
             "topic.prefix": "s", "include.schema.changes": "false", "snapshot.mode": "initial_only"}
    engine = Engine(validate_connector(props), OffsetFile(tmp_path / "o.json"))
    try:
        first = [e.value_json()["op"] for e in engine.events(once=True)]
        mariadb_server.execute("INSERT INTO t VALUES (9, 'z')", table)
        again = [e for e in engine.events(once=True)]
    finally:
        engine.close()
    assert first == ["r", "r"] and again == []


def test_a_table_is_read_in_key_ordered_chunks(mariadb_server, mariadb_db):
    mariadb_server.execute("CREATE TABLE t (a INT, b VARCHAR(5), v INT, PRIMARY KEY (a, b));"
                           "INSERT INTO t SELECT seq % 7, CONCAT('k', seq), seq FROM seq_1_to_200", mariadb_db)
    # Debezium's locking snapshot's chunks (the lock-free one's: test_lockfree_text_keys.py)
    src = source(mariadb_server, mariadb_db, headwater__snapshot__chunk__rows="30", snapshot__locking__mode="minimal")
    try:
        start = src.initial_offset()
        src.open(start)
        end = src.latest_offset(start)
        units = src.plan(start, end)
        rows = read(units)
    finally:
        src.close()
    assert len(units) >= 6
    keys = [(r["after"]["a"], r["after"]["b"]) for r in rows]
    assert keys == sorted(keys) and len(set(keys)) == 200
    marks = [r["source"]["snapshot"] for r in rows]
    assert marks[0] == "first" and marks[-1] == "last" and set(marks[1:-1]) == {"true"}
