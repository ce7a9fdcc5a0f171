"""A blocking snapshot that meets a query error on a real PostgreSQL server, as Debezium 3's coordinator treats one
(`ChangeEventSourceCoordinator`: WARN "Error while executing requested blocking snapshot.", streaming resumes):
the snapshot is abandoned, streaming resumes where it paused, nothing streamed is lost or doubled; an error of the
connection is not a query error (it fails the batch, which is read again from the last durable offset)."""

from __future__ import annotations

import logging
from typing import Any

import psycopg2
import pytest

from headwater.connectors.common import incremental as inc
from headwater.connectors.postgres.connection import query_error
from headwater.connectors.postgres.source import PostgresSource
from headwater.connectors.registry import validate_connector
from headwater.devservers.postgres import PostgresServer
from tests.connectors.common.incremental_support import insert_signal
from tests.events_support import json_rows

Record = dict[str, Any]
WARNED = "Error while executing requested blocking snapshot"


@pytest.fixture
def db(pg_server, pg_db):
    pg_server.execute("CREATE TABLE dbz_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
                      "data varchar(2048)); CREATE TABLE done (id int PRIMARY KEY);"
                      "CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a SELECT g, 'a' || g "
                      "FROM generate_series(1, 30) g;"
                      "CREATE TABLE b (id int PRIMARY KEY, v text); INSERT INTO b SELECT g, 'b' || g "
                      "FROM generate_series(1, 20) g", pg_db)
    return pg_db


class Driver:
    """A PostgreSQL source driven batch by batch as the engine drives it; `before_read` runs between a batch's
    planning and the reading of its units."""

    def __init__(self, server: PostgresServer, db: str):
        props = {**server.connector_properties(db), "connector.class": "postgres", "topic.prefix": "s",
                 "slot.name": "blk", "snapshot.mode": "no_data", "signal.data.collection": "public.dbz_signal",
                 "signal.poll.interval.ms": "0"}
        self.src = PostgresSource(validate_connector(props))
        self.start: Record = self.src.initial_offset()
        self.src.open(self.start)
        self.values: list[Record] = []
        self.offsets: list[Record] = []

    def step(self, before_read: Any = None) -> Record:
        end = self.src.latest_offset(self.start)
        if end == self.start:
            return end
        units = self.src.plan(self.start, end)
        if before_read is not None:
            before_read(end)
        self.values += [e.value_json() for u in units for b in u.read() for e in json_rows(b) if e.value is not None]
        self.src.commit(end)
        self.offsets.append(end)
        self.start = end
        return end

    def until(self, done: Any, before_read: Any = None, limit: int = 400) -> Record:
        for _ in range(limit):
            end = self.step(before_read)
            if done(end):
                return end
        raise AssertionError("not reached")

    def saw(self, table: str, key: int) -> bool:
        return any(v["source"]["table"] == table and (v.get("after") or {}).get("id") == key for v in self.values)


def blocking(server: PostgresServer, db: str, id_: str, **data: Any) -> None:
    insert_signal(server.connect(db), "execute-snapshot",
                  {"data-collections": ["public.a", "public.b"], "type": "blocking", **data}, id_)


def reads(d: Driver) -> list[tuple[str, int]]:
    return [(v["source"]["table"], v["after"]["id"]) for v in d.values if v.get("op") == "r"]


def streamed(d: Driver) -> list[tuple[str, str, int]]:
    return [(v["source"]["table"], v["op"], (v["after"] or v["before"])["id"]) for v in d.values
            if v.get("op") in ("c", "u", "d") and v["source"]["table"] != "dbz_signal"]


def test_a_bad_statement_abandons_the_blocking_snapshot_before_any_row(pg_server, db, caplog):
    """`additional-conditions` naming a column that does not exist: the statements are checked under the exported
    snapshot before any row is read; the snapshot is abandoned (WARN, without the password), and the batch after
    it streams from where streaming paused: a change made after the signal comes once."""
    d = Driver(pg_server, db)
    caplog.set_level(logging.INFO)
    try:
        d.step()
        pg_server.execute("INSERT INTO done VALUES (1)", db)
        d.until(lambda o: d.saw("done", 1))
        blocking(pg_server, db, "b1", **{"additional-conditions": [
            {"data-collection": "public.b", "filter": "SELECT id, nope FROM public.b"}]})
        pg_server.execute("UPDATE a SET v = 'changed' WHERE id = 3", db)
        d.until(lambda o: bool(o.get(inc.BLOCKING)))
        paused = d.offsets[-1]
        after = d.step()
        assert not after.get(inc.BLOCKING) and not after.get(inc.BLOCKING_PENDING)
        pg_server.execute("INSERT INTO done VALUES (2)", db)
        d.until(lambda o: d.saw("done", 2))
    finally:
        d.src.close()
    assert reads(d) == []
    assert streamed(d) == [("done", "c", 1), ("a", "u", 3), ("done", "c", 2)]
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and WARNED in r.getMessage()]
    assert len(warned) == 1 and "b1" in warned[0] and 'column "nope" does not exist' in warned[0]
    assert pg_server.password not in caplog.text
    assert paused["lsn_commit"] == d.offsets[d.offsets.index(paused) - 1]["lsn_commit"]  # (paused there)


def test_a_table_dropped_while_its_rows_are_read_abandons_the_snapshot(pg_server, db, caplog):
    """`b` is dropped after the batch is planned (the plan holds no lock on it): its chunk's COPY fails with
    "does not exist", its unit logs the WARN and ends; `a`'s rows stay delivered; streaming resumes."""
    d = Driver(pg_server, db)
    caplog.set_level(logging.INFO)
    try:
        d.step()
        blocking(pg_server, db, "b2")
        pg_server.execute("INSERT INTO a VALUES (31, 'after the signal')", db)

        def drop(end: Record) -> None:
            if end.get(inc.BLOCKING):
                pg_server.execute("DROP TABLE b", db)

        d.until(lambda o: bool(o.get(inc.BLOCKING)), drop)
        pg_server.execute("INSERT INTO done VALUES (1)", db)
        d.until(lambda o: d.saw("done", 1))
    finally:
        d.src.close()
    assert reads(d) == [("a", i) for i in range(1, 32)]  # (the insert was before the snapshot)
    assert streamed(d) == [("a", "c", 31), ("done", "c", 1)]  # after the snapshot, once
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and WARNED in r.getMessage()]
    assert len(warned) == 1 and "b2" in warned[0] and 'relation "public.b" does not exist' in warned[0]


def test_query_errors_and_connection_errors(pg_server, pg_db):
    """What abandons a blocking snapshot (an error of the query) and what fails the batch instead (the
    connection lost: the batch is read again from the last durable offset)."""
    conn = pg_server.connect(pg_db)
    with conn.cursor() as cur, pytest.raises(psycopg2.Error) as bad:
        cur.execute("SELECT * FROM missing")
    assert query_error(bad.value)
    with conn.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        pid = cur.fetchone()[0]
    pg_server.execute(f"SELECT pg_terminate_backend({pid})")
    with conn.cursor() as cur, pytest.raises(psycopg2.Error) as lost:
        cur.execute("SELECT 1")
    assert not query_error(lost.value)
    conn.close()
    wrapped = RuntimeError("reading a chunk failed")
    wrapped.__cause__ = bad.value
    assert query_error(wrapped) and not query_error(RuntimeError("no cause"))
