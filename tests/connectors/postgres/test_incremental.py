"""Signals and incremental snapshots on a real PostgreSQL server, through the embedded engine.

The main check replays every event a run delivers (creates, updates, deletes, and the snapshot's
`op: r` rows) into a map by key and compares it with the table as it is at the end, while a
workload thread inserts, updates, deletes and changes the primary keys of the rows the snapshot
reads: with each watermarking strategy and with the read-only mode. Then: a restart in the
middle of a snapshot, stop/pause/resume, additional-conditions, malformed signals, the file
channel and the command line.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from headwater.connectors.common import incremental as inc
from headwater.connectors.common.signals import append_signal, with_cli_file
from headwater.connectors.postgres.source import PostgresSource
from headwater.connectors.registry import validate_connector
from headwater.devservers.postgres import PostgresServer
from headwater.engine.engine import Engine
from tests.connectors.common import incremental_support as support
from tests.events_support import json_rows

SIGNALS = "public.dbz_signal"


def props(server: PostgresServer, db: str, **extra: str) -> dict[str, str]:
    return {**server.connector_properties(db), "connector.class": "postgres", "topic.prefix": "s",
            "slot.name": "inc", "snapshot.mode": "no_data", "status.update.interval.ms": "500",
            "signal.data.collection": SIGNALS, "incremental.snapshot.chunk.size": "500",
            "signal.poll.interval.ms": "0", **extra}


def setup(server: PostgresServer, db: str, rows: int) -> None:
    server.execute("CREATE TABLE dbz_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
                   "data varchar(2048))", db)
    server.execute("CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL, color text)", db)
    server.execute("CREATE TABLE done (id int PRIMARY KEY)", db)
    server.execute(f"INSERT INTO items SELECT g, g * 10, CASE WHEN g % 3 = 0 THEN 'blue' ELSE 'red' END "
                   f"FROM generate_series(1, {rows}) g", db)


def signal(server: PostgresServer, db: str, type_: str, data: dict[str, Any] | str | None, id_: str) -> None:
    support.insert_signal(server.connect(db), type_, data, id_)


class Run(support.Run):
    def __init__(self, config, offsets: Path | None = None):
        super().__init__(PostgresSource(config), config, offsets)


_value, replay, reads, reads_of = support.value, support.replay, support.reads, support.reads_of


def table_state(server: PostgresServer, db: str, where: str = "") -> dict[int, dict[str, Any]]:
    return {r[0]: {"id": r[0], "v": r[1], "color": r[2]}
            for r in server.query(f"SELECT id, v, color FROM items {where}", db)}


def start_workload(server: PostgresServer, db: str, rows: int, seed: int = 7) -> tuple[threading.Thread, threading.Event]:
    upsert = "INSERT INTO items VALUES (%s, 1, 'green') ON CONFLICT (id) DO UPDATE SET v = items.v + 100"
    return support.Workload(lambda: server.connect(db, autocommit=False), upsert=upsert).start(rows, seed)


def started(server: PostgresServer, db: str, run: Run) -> None:
    """Wait until the engine streams from its slot (changes before it are not captured)."""
    run.wait(lambda: bool(server.query(f"SELECT 1 FROM pg_replication_slots WHERE slot_name = 'inc' "
                                       f"AND database = '{db}' AND active", db)))


def finish(server: PostgresServer, db: str, run: Run, n: int) -> None:
    """Wait for the snapshot (begun: a row read) to end and the stream to deliver a marker written after it."""
    run.wait(lambda: any(_value(e).get("op") == "r" for e in run.events))
    run.wait(run.snapshot_done, 300)
    server.execute(f"INSERT INTO done VALUES ({n})", db)
    run.wait(lambda: run.saw_done(n))


@pytest.mark.parametrize("extra", [
    {"incremental.snapshot.watermarking.strategy": "insert_insert"},
    {"incremental.snapshot.watermarking.strategy": "insert_delete"},
    {"headwater.incremental.snapshot.read.only": "true"},
], ids=["insert_insert", "insert_delete", "read_only"])
def test_snapshot_under_concurrent_changes_replays_to_the_table(pg_server, pg_db, extra):
    rows = 6000
    setup(pg_server, pg_db, rows)
    # windows of four chunks, each read in four parts (one a chunk: the source's parallelism is 2)
    run = Run(validate_connector(props(pg_server, pg_db, **extra, **{"headwater.incremental.snapshot.batch.rows": "2000"})))
    try:
        started(pg_server, pg_db, run)
        worker, stop = start_workload(pg_server, pg_db, rows)
        time.sleep(0.3)
        signal(pg_server, pg_db, "execute-snapshot", {"data-collections": ["public.items"]}, "s1")
        run.wait(lambda: any(_value(e).get("source", {}).get("snapshot") == "incremental" for e in run.events))
        time.sleep(2.0)
        stop.set()
        worker.join(30)
        finish(pg_server, pg_db, run, 1)
    finally:
        run.stop()
    reads = [e for e in run.events if _value(e).get("op") == "r"]
    assert reads and all(_value(e)["source"]["snapshot"] == "incremental" for e in reads)
    assert replay(run.events, "items") == table_state(pg_server, pg_db)
    watermarks = pg_server.query("SELECT type, count(*) FROM dbz_signal GROUP BY type ORDER BY type", pg_db)
    kinds = dict(watermarks)
    if "headwater.incremental.snapshot.read.only" in extra:
        assert "snapshot-window-open" not in kinds
    elif extra["incremental.snapshot.watermarking.strategy"] == "insert_insert":
        assert kinds["snapshot-window-open"] == kinds["snapshot-window-close"] >= rows // 2000  # a pair a window
    else:
        assert "snapshot-window-open" not in kinds and "snapshot-window-close" not in kinds



@pytest.mark.slow
@pytest.mark.parametrize("extra", [
    {"incremental.snapshot.watermarking.strategy": "insert_insert"},
    {"incremental.snapshot.watermarking.strategy": "insert_delete"},
    {"headwater.incremental.snapshot.read.only": "true"},
], ids=["insert_insert", "insert_delete", "read_only"])
def test_100k_rows_under_concurrent_changes(pg_server, pg_db, extra):
    """The issue's size: 100,000 rows in chunks of Debezium's default 1024, the workload running
    throughout the snapshot."""
    rows = 100_000
    setup(pg_server, pg_db, rows)
    # windows of ten chunks (each read in four parts), so that the workload meets about ten of them
    run = Run(validate_connector({**props(pg_server, pg_db, **extra), "incremental.snapshot.chunk.size": "1024",
                                  "headwater.incremental.snapshot.batch.rows": "10240"}))
    try:
        started(pg_server, pg_db, run)
        worker, stop = start_workload(pg_server, pg_db, rows)
        began = time.monotonic()
        signal(pg_server, pg_db, "execute-snapshot", {"data-collections": ["public.items"]}, "s1")
        run.wait(lambda: bool(reads(run.events)))
        run.wait(run.snapshot_done, 600)
        took = time.monotonic() - began
        stop.set()
        worker.join(30)
        finish(pg_server, pg_db, run, 1)
    finally:
        run.stop()
    n = len(reads(run.events))
    print(f"{extra}: {n} rows read in {took:.1f}s ({n / took:,.0f} rows/s) while streaming "
          f"{sum(1 for e in run.events if _value(e).get('op') in ('c', 'u', 'd'))} changes")
    assert n > rows * 0.9
    assert replay(run.events, "items") == table_state(pg_server, pg_db)


def small(server: PostgresServer, db: str, rows: int = 2000, **extra: str):
    """Windows of 1,000 rows (5 chunks of 200, in 4 parts)."""
    setup(server, db, rows)
    return validate_connector(props(server, db, **{"incremental.snapshot.chunk.size": "200",
                                                   "headwater.incremental.snapshot.batch.rows": "1000", **extra}))


def test_a_restart_resumes_at_the_chunk_it_was_in(pg_server, pg_db, tmp_path):
    config = small(pg_server, pg_db, 20000)  # enough chunks that the stop comes before the last, even on a fast machine
    offsets = tmp_path / "offsets.json"
    run = Run(config, offsets)
    started(pg_server, pg_db, run)
    signal(pg_server, pg_db, "pause-snapshot", None, "p0")  # (no snapshot running: logged, ignored)
    signal(pg_server, pg_db, "execute-snapshot", {"data-collections": ["public.items"]}, "s1")
    run.wait(lambda: len(reads(run.events)) >= 600)
    run.stop()
    first = reads(run.events)
    stored = json.loads(offsets.read_text())["offset"]
    assert stored[inc.COLLECTIONS] and json.loads(stored[inc.PRIMARY_KEY]) == [str(max(first))]
    assert stored[inc.CORRELATION_ID] == "s1"
    assert len(first) < 20000

    again = Run(config, offsets)
    started(pg_server, pg_db, again)
    finish(pg_server, pg_db, again, 1)
    again.stop()
    second = reads(again.events)
    assert min(second) == max(first) + 1  # the chunk after the last one delivered: none read twice
    assert sorted(first + second) == list(range(1, 20001))


def test_a_batch_replayed_in_a_fresh_connector_reads_its_chunk_again(pg_server, pg_db):
    """What Spark does after a crash: plan() of a checkpointed (start, end] in a new source."""
    config = small(pg_server, pg_db)
    src = PostgresSource(config)
    fresh = PostgresSource(config)
    try:
        start = src.initial_offset()
        src.open(start)
        signal(pg_server, pg_db, "execute-snapshot", {"data-collections": ["public.items"]}, "s1")
        planned = None
        for _ in range(50):
            end = src.latest_offset(start)
            units = src.plan(start, end)
            if end.get(inc.CHUNK):
                planned = (start, end, [e for u in units for b in u.read() for e in json_rows(b)])
                assert sum(type(u).__name__ == "IncrementalChunk" for u in units) == 4  # the window's parts
                break
            start = end
        assert planned is not None
        start, end, events = planned
        assert end[inc.CHUNK]["bounds"] == [["250"], ["500"], ["750"]] and end[inc.CHUNK]["to"] == ["1000"]
        src.close()  # (it holds the slot)
        fresh.open(start)
        replayed = [e for u in fresh.plan(start, end) for b in u.read() for e in json_rows(b)]
        assert reads(replayed) == reads(events) == list(range(1, 1001))
        assert [_value(e)["after"] for e in replayed] == [_value(e)["after"] for e in events]
    finally:
        src.close()
        fresh.close()


def test_pause_resume_and_stop(pg_server, pg_db, caplog):
    """Also: a filtered publication and table.include.list leaving the signalling table out (it is
    added to both, as Debezium does, or no signal would arrive)."""
    # 20,000 rows in chunks of 200, so that the stop arrives while chunks are left even on a fast machine
    run = Run(small(pg_server, pg_db, 20000, **{"notification.enabled.channels": "log",
                                                "publication.autocreate.mode": "filtered",
                                                "table.include.list": "public.items,public.done"}))
    try:
        started(pg_server, pg_db, run)
        support.pause_resume_stop(run, lambda *a: signal(pg_server, pg_db, *a), "public.items", 20000,
                                  lambda n: pg_server.execute(f"INSERT INTO done VALUES ({n})", pg_db), inc.status,
                                  lambda: caplog.text)
    finally:
        run.stop()


def test_additional_conditions_and_malformed_signals(pg_server, pg_db, caplog):
    run = Run(small(pg_server, pg_db))
    try:
        started(pg_server, pg_db, run)
        text = support.conditions_and_malformed_signals(run, lambda *a: signal(pg_server, pg_db, *a), "public.items",
                                                        "public\\.ite.*", lambda: finish(pg_server, pg_db, run, 1),
                                                        lambda: caplog.text)
    finally:
        run.stop()
    assert "hello from a signal at {lsn=" in text


def test_file_channel_acts_once_across_restarts(pg_server, pg_db, tmp_path):
    signals = tmp_path / "signals.txt"
    config = small(pg_server, pg_db, 2000, **{"signal.enabled.channels": "source,file", "signal.file": str(signals),
                                              "heartbeat.interval.ms": "100"})  # (batches of heartbeats only, too)
    offsets = tmp_path / "offsets.json"
    signals.write_text("this is not a signal\n")
    append_signal(signals, "execute-snapshot", {"data-collections": ["public.items"]}, "f1")
    run = Run(config, offsets)
    try:
        started(pg_server, pg_db, run)
        run.wait(lambda: len(reads(run.events)) == 2000)
        finish(pg_server, pg_db, run, 1)
    finally:
        run.stop()
    assert sorted(reads(run.events)) == list(range(1, 2001))
    assert any("heartbeat" in e.topic for e in run.events)
    assert json.loads(offsets.read_text())["offset"][inc.FILE_POSITIONS] == {str(signals): signals.stat().st_size}
    again = Run(config, offsets)
    try:
        started(pg_server, pg_db, again)
        pg_server.execute("INSERT INTO done VALUES (2)", pg_db)
        again.wait(lambda: again.saw_done(2))
    finally:
        again.stop()
    assert reads(again.events) == []


def test_the_command_line_signal_reaches_a_stopped_pipeline(pg_server, pg_db, tmp_path):
    setup(pg_server, pg_db, 500)
    source = props(pg_server, pg_db)
    cli_signals = support.cli_signal(tmp_path, source, {"data-collections": ["public.items"]})
    run = Run(with_cli_file(validate_connector(source), cli_signals))
    try:
        started(pg_server, pg_db, run)
        finish(pg_server, pg_db, run, 1)
    finally:
        run.stop()
    assert reads(run.events) == list(range(1, 501))


GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "postgres_signals"


def run_golden(pg_server, name: str, until: Callable[[list[dict[str, Any]]], bool]):
    """A recorded scenario replayed through the engine until `until(events)`: (scenario, events)."""
    from tests.golden_support import load_scenario, run_psql_script

    scenario = load_scenario(GOLDEN / name)
    db = "golden"
    pg_server.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    pg_server.create_database(db)
    try:
        run_psql_script(pg_server, db, scenario.setup)
        config = validate_connector({**pg_server.connector_properties(db), "connector.class": "postgres",
                                     "topic.prefix": "golden", "slot.name": "golden_slot",
                                     "status.update.interval.ms": "500", **scenario.properties,
                                     # one chunk a batch, as Debezium emits them (its sequence: its close watermark)
                                     "headwater.incremental.snapshot.batch.rows":
                                         scenario.properties.get("incremental.snapshot.chunk.size", "1024")})
        connector = PostgresSource(config, schemas_enable=True)
        engine = Engine(config, schemas_enable=True, connector=connector)
        events: list[dict[str, Any]] = []

        def collect() -> None:
            for ev in engine.events():
                events.append({"topic": ev.topic, "key": json.loads(ev.key) if ev.key else None,
                               "value": json.loads(ev.value) if ev.value else None})

        thread = threading.Thread(target=collect, daemon=True)
        thread.start()
        deadline = time.monotonic() + 120
        while not pg_server.query("SELECT 1 FROM pg_replication_slots WHERE slot_name = 'golden_slot' AND active",
                                  db):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert scenario.during is not None
        run_psql_script(pg_server, db, scenario.during)
        while not until(events):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        engine.stop()
        thread.join(60)
        engine.close()
        return scenario, events
    finally:
        pg_server.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                          "WHERE slot_name = 'golden_slot'")
        pg_server.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')


def _table_events(e: dict[str, Any]) -> bool:
    """A captured table's event, or the signal's own row (not the watermarks: random ids and times)."""
    return e["topic"] == "golden.public.items" or (
        e["topic"] == "golden.public.dbz_signal" and (e["key"] or {}).get("payload", {}).get("id") == "ad-hoc-1")


def test_incremental_events_equal_debezium(pg_server):
    """The scenario recorded from Debezium 3.6.3 (scripts/record_debezium.py): the captured table's
    events, key and value with schemas, equal after normalization; the signal's row too."""
    from tests.golden_support import assert_events_equal

    def updated(events: list[dict[str, Any]]) -> bool:
        return any(e["topic"] == "golden.public.items" and e["value"]["payload"]["op"] == "u" for e in events)

    scenario, events = run_golden(pg_server, "incremental", updated)
    assert_events_equal([e for e in scenario.events if _table_events(e)], [e for e in events if _table_events(e)])


def test_notifications_equal_debezium(pg_server, caplog):
    """The sink channel's records of an incremental snapshot (STARTED, IN_PROGRESS per chunk,
    TABLE_SCAN_COMPLETED per table, SUCCEEDED and EMPTY, COMPLETED) equal Debezium's, schemas
    included, apart from their timestamps; the log channel logs them. (Debezium's Initial
    Snapshot notification, SKIPPED for snapshot.mode no_data, is not made by headwater.)"""
    from tests.golden_support import assert_events_equal

    def completed(events: list[dict[str, Any]]) -> bool:
        return any(e["topic"] == "golden.notifications" and e["value"]["payload"]["type"] == "COMPLETED"
                   for e in events)

    scenario, events = run_golden(pg_server, "notifications", completed)

    def notifications(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for e in evs:
            if e["topic"] == "golden.notifications" and e["value"]["payload"]["aggregate_type"] != "Initial Snapshot":
                e = json.loads(json.dumps(e))
                del e["value"]["payload"]["timestamp"]
                out.append(e)
        return out

    expected = notifications(scenario.events)
    assert [n["value"]["payload"]["type"] for n in expected] == [
        "STARTED", "IN_PROGRESS", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "TABLE_SCAN_COMPLETED", "COMPLETED"]
    assert notifications(events) == expected
    assert_events_equal([e for e in scenario.events if _table_events(e)], [e for e in events if _table_events(e)])
    assert caplog.text.count("aggregateType='Incremental Snapshot'") == len(expected)

def test_composite_keys_and_a_surrogate_key(pg_server, pg_db):
    """Chunks of a two-column primary key (row comparison, text keys with a separator-like value)
    under concurrent updates and deletes; a table without a primary key read by its surrogate-key."""
    pg_server.execute("CREATE TABLE dbz_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
                      "data varchar(2048)); CREATE TABLE done (id int PRIMARY KEY); "
                      "CREATE TABLE pairs (a int, b text, v int, PRIMARY KEY (a, b)); "
                      "INSERT INTO pairs SELECT g / 10, 'k' || (g % 10) || E'\\x1f', g FROM generate_series(0, 1999) g; "
                      "CREATE TABLE nokey (code int NOT NULL, v text); "
                      "INSERT INTO nokey SELECT g, 'v' || g FROM generate_series(1, 450) g", pg_db)
    config = validate_connector(props(pg_server, pg_db, **{"incremental.snapshot.chunk.size": "150"}))
    run = Run(config)

    def changes(stop: threading.Event) -> None:
        rnd = random.Random(3)
        conn = pg_server.connect(pg_db)
        with conn.cursor() as cur:
            while not stop.is_set():
                a, b = rnd.randint(0, 199), f"k{rnd.randint(0, 9)}\x1f"
                if rnd.random() < 0.7:
                    cur.execute("UPDATE pairs SET v = v + 1 WHERE a = %s AND b = %s", (a, b))
                else:
                    cur.execute("DELETE FROM pairs WHERE a = %s AND b = %s", (a, b))
                time.sleep(0.002)
        conn.close()

    try:
        started(pg_server, pg_db, run)
        support.keyed_snapshots(run, lambda *a: signal(pg_server, pg_db, *a), "public.pairs", "public.nokey", changes,
                                lambda: finish(pg_server, pg_db, run, 1))
    finally:
        run.stop()
    state: dict[tuple, Any] = {}
    for e in run.events:
        v = _value(e)
        if not v or v.get("source", {}).get("table") != "pairs":
            continue
        if v["op"] == "d":
            state.pop((v["before"]["a"], v["before"]["b"]), None)
        else:
            state[(v["after"]["a"], v["after"]["b"])] = v["after"]["v"]
    assert state == {(a, b): v for a, b, v in pg_server.query("SELECT a, b, v FROM pairs", pg_db)}
    got = [_value(e)["after"]["code"] for e in run.events
           if _value(e).get("op") == "r" and _value(e)["source"]["table"] == "nokey"]
    assert got == list(range(1, 451))


def test_blocking_snapshots_during_a_live_workload(pg_server, pg_db):
    """`type: blocking`: streaming pauses for one batch that reads the tables as the initial snapshot
    does (a full SELECT from additional-conditions replaces a table's), then resumes where it paused;
    rows changed meanwhile may come twice (as Debezium says), so the check is the replayed state."""
    rows = 3000
    setup(pg_server, pg_db, rows)
    run = Run(validate_connector(props(pg_server, pg_db)))
    try:
        started(pg_server, pg_db, run)
        support.blocking_during_workload(run, lambda *a: signal(pg_server, pg_db, *a), "public.items", rows,
                                         lambda: start_workload(pg_server, pg_db, rows),
                                         lambda n: pg_server.execute(f"INSERT INTO done VALUES ({n})", pg_db))
    finally:
        run.stop()
    assert replay(run.events, "items") == table_state(pg_server, pg_db)
