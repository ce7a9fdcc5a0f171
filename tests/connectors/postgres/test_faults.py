"""The PostgreSQL connector under faults, on real servers: lost connections, restarts, bad setups,
lost and re-created slots, and where the slot's flush LSN may (and may not) go.

Every test runs the embedded engine (`headwater.engine.Engine`) against a real PostgreSQL 15:
the session server of `tests/conftest.py`, or a dedicated one where a server setting is the
point (`wal_level=replica`, a small `max_slot_wal_keep_size`). Faults are real: walsenders are
ended with `pg_terminate_backend`, the server is restarted, slots are dropped, re-created and
invalidated. "Nothing lost, nothing twice" is checked against what the database committed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Generator
from functools import partial
from pathlib import Path
from typing import Any, cast

import psycopg2
import pytest

from headwater.connectors.errors import SourceError
from headwater.connectors.postgres.pgoutput import lsn_to_str, str_to_lsn
from headwater.connectors.registry import validate_connector
from headwater.devservers.postgres import PostgresServer
from headwater.engine.engine import Engine, OffsetFile
from headwater.events.batch import Event, Events
from tests.events_support import json_rows

SLOT = "faults_slot"


# ---------------------------------------------------------------------------------------------
# helpers


def connector(server: PostgresServer, dbname: str, **extra: str) -> dict[str, str]:
    """Connector properties for `dbname`, with quick retries and status updates."""
    return {
        **server.connector_properties(dbname),
        "connector.class": "postgres", "topic.prefix": "f", "slot.name": SLOT,
        "retriable.restart.connector.wait.ms": "100", "status.update.interval.ms": "1000",
        **extra,
    }


_opened: list[Engine] = []  # closed after each test, whatever happened


@pytest.fixture(autouse=True)
def _close_engines():
    yield
    while _opened:
        eng = _opened.pop()
        eng.stop()
        with contextlib.suppress(Exception):
            eng.close()


def engine(server: PostgresServer, dbname: str, offsets: Path | None = None, max_events: int | None = None,
           props: dict[str, str] | None = None) -> Engine:
    eng = Engine(validate_connector(connector(server, dbname, **(props or {}))),
                 OffsetFile(offsets) if offsets is not None else None, max_events=max_events)
    _opened.append(eng)
    return eng


def wait_until(cond: Callable[[], Any], what: str, timeout: float = 30.0) -> Any:
    """Poll `cond` until it returns something true; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def payload(ev: Event) -> dict | None:
    return json.loads(ev.value) if ev.value is not None else None


def rows(events: list[Event], table: str = "t") -> list[tuple[str, int]]:
    """(op, id) of the change events of `table`, in order (tombstones left out)."""
    out = []
    for ev in events:
        if ev.topic.endswith(f".{table}") and ev.value is not None:
            p = payload(ev)
            assert p is not None
            image = p["after"] if p["after"] is not None else p["before"]
            out.append((p["op"], image["id"]))
    return out


def slot_state(server: PostgresServer, dbname: str, slot: str = SLOT) -> tuple[Any, ...] | None:
    """(active_pid, confirmed_flush_lsn, restart_lsn, wal_status) of the slot, LSNs as ints."""
    found = server.query("SELECT active_pid, confirmed_flush_lsn::text, restart_lsn::text, wal_status "
                         f"FROM pg_replication_slots WHERE slot_name = '{slot}' AND database = '{dbname}'")
    if not found:
        return None
    pid, flush, restart, status = found[0]
    return pid, str_to_lsn(flush), str_to_lsn(restart), status


def the_slot(server: PostgresServer, dbname: str) -> tuple[Any, ...]:
    """`slot_state` of a slot that must exist."""
    state = slot_state(server, dbname)
    assert state is not None, "the replication slot does not exist"
    return state


def stored_offset(path: Path) -> dict[str, Any]:
    """The offset the engine stored in `path` (one must be there)."""
    offset = OffsetFile(path).load()
    assert offset is not None, f"no offset stored in {path}"
    return offset


def current_lsn(server: PostgresServer) -> int:
    return str_to_lsn(server.query("SELECT pg_current_wal_lsn()::text")[0][0])


def terminate_walsender(server: PostgresServer, dbname: str) -> int:
    pid = wait_until(lambda: (slot_state(server, dbname) or (None,))[0], "the slot to be active")
    server.execute(f"SELECT pg_terminate_backend({pid})")
    return pid


class EngineThread:
    """Runs `engine.batches()` (until stopped) on a thread, collecting events and any error."""

    def __init__(self, eng: Engine):
        self.engine = eng
        self.events: list[Event] = []
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self._run, name="engine", daemon=True)

    def start(self) -> EngineThread:
        self.thread.start()
        return self

    def _run(self) -> None:
        try:
            for batch in self.engine.batches():
                with self.lock:
                    self.events.extend(json_rows(batch))
        except BaseException as exc:
            self.error = exc

    def snapshot(self) -> list[Event]:
        with self.lock:
            return list(self.events)

    def count(self, table: str = "t") -> int:
        return len(rows(self.snapshot(), table))

    def stop(self) -> None:
        self.engine.stop()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "the engine did not stop"
        self.engine.close()


class Writer:
    """Inserts rows 1..n into `t`, `per_txn` rows a transaction, riding out lost connections."""

    def __init__(self, server: PostgresServer, dbname: str, n: int, per_txn: int = 10, pause: float = 0.002):
        self.server, self.dbname, self.n, self.per_txn, self.pause = server, dbname, n, per_txn, pause
        self.failures = 0
        self.thread = threading.Thread(target=self._run, name="writer", daemon=True)
        self.done = threading.Event()
        self.written = 0

    def start(self) -> Writer:
        self.thread.start()
        return self

    def _run(self) -> None:
        conn = None
        first = 1
        deadline = time.monotonic() + 120
        while first <= self.n and time.monotonic() < deadline:
            last = min(self.n, first + self.per_txn - 1)
            try:
                if conn is None or conn.closed:
                    conn = self.server.connect(self.dbname)
                with conn.cursor() as cur:
                    # ON CONFLICT: a commit whose acknowledgement was lost is simply repeated
                    cur.execute("INSERT INTO t SELECT g, 'v' || g FROM generate_series(%s, %s) g "
                                "ON CONFLICT (id) DO NOTHING", (first, last))
                first = last + 1
                self.written = last
                time.sleep(self.pause)
            except psycopg2.Error:
                self.failures += 1
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()
                conn = None
                time.sleep(0.05)
        if conn is not None:
            conn.close()
        self.done.set()

    def join(self) -> None:
        self.thread.join(timeout=150)
        assert self.done.is_set() and self.written == self.n, f"the writer stopped at {self.written}"


def committed_ids(server: PostgresServer, dbname: str, table: str = "t") -> list[int]:
    return [r[0] for r in server.query(f"SELECT id FROM {table} ORDER BY id", dbname)]


def assert_exactly_once(events: list[Event], expected: list[int]) -> None:
    got = [i for op, i in rows(events) if op in ("r", "c")]
    dupes = [i for i, n in Counter(got).items() if n > 1]
    assert not dupes, f"delivered more than once: {dupes[:10]}"
    missing = sorted(set(expected) - set(got))
    assert not missing, f"lost: {missing[:10]} ({len(missing)} in all)"
    assert got == sorted(got), "events out of commit order"


# ---------------------------------------------------------------------------------------------
# lost connections


@pytest.mark.parametrize("max_events", [None, 7])
def test_walsender_terminated_mid_stream(pg_server, pg_db, tmp_path, caplog, max_events):
    caplog.set_level(logging.WARNING, logger="headwater")
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", pg_db)
    run = EngineThread(engine(pg_server, pg_db, tmp_path / "offsets.json", max_events=max_events)).start()
    wait_until(lambda: (slot_state(pg_server, pg_db) or (None,))[0], "the slot to be active")
    writer = Writer(pg_server, pg_db, 3000, pause=0.005).start()
    pids = set()
    for k in range(1, 4):
        wait_until(partial(lambda k: run.count() >= 600 * k or run.error, k), f"{600 * k} events")
        pids.add(terminate_walsender(pg_server, pg_db))
        wait_until(lambda: (slot_state(pg_server, pg_db) or (None,))[0] not in (None, *pids) or run.error,
                   "the reader to reconnect")
    writer.join()
    wait_until(lambda: run.count() >= 3000 or run.error, "all rows")
    run.stop()
    assert run.error is None, run.error
    assert_exactly_once(run.events, committed_ids(pg_server, pg_db))
    assert caplog.text.count("replication connection lost") >= 3


def test_server_restart_mid_stream(pg_server, pg_db, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="headwater")
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", pg_db)
    run = EngineThread(engine(pg_server, pg_db, tmp_path / "offsets.json", max_events=50)).start()
    wait_until(lambda: (slot_state(pg_server, pg_db) or (None,))[0], "the slot to be active")
    writer = Writer(pg_server, pg_db, 2000, pause=0.01).start()
    wait_until(lambda: run.count() >= 500 or run.error, "500 events")
    assert writer.written < 2000  # the restarts come while rows are being written
    pg_server.restart("fast")
    wait_until(lambda: run.count() >= 1200 or run.error, "1200 events")
    pg_server.restart("immediate")  # a crash: the WAL is replayed at start
    writer.join()
    wait_until(lambda: run.count() >= 2000 or run.error, "all rows", timeout=60)
    run.stop()
    assert run.error is None, run.error
    assert_exactly_once(run.events, committed_ids(pg_server, pg_db))
    assert "replication connection lost" in caplog.text


def test_server_restart_between_runs_of_one_engine(pg_server, pg_db, caplog):
    """The engine's normal connection (WAL position, catalog) and its replication connection both
    come back after a restart the engine slept through."""
    caplog.set_level(logging.WARNING, logger="headwater")
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", pg_db)
    eng = engine(pg_server, pg_db)
    pg_server.execute("INSERT INTO t VALUES (1, 'a')", pg_db)
    got = rows(list(eng.events(once=True)))
    started = time.monotonic()
    pg_server.restart("fast")  # the idle engine's walsender must not hold the shutdown up
    assert time.monotonic() - started < 20
    pg_server.execute("INSERT INTO t VALUES (2, 'b'); CREATE TABLE u (id int PRIMARY KEY); INSERT INTO u VALUES (3)",
                      pg_db)
    later = list(eng.events(once=True))
    eng.close()
    assert got + rows(later) == [("r", 1), ("c", 2)] and rows(later, "u") == [("c", 3)]
    assert "lost the connection" in caplog.text


def test_max_retries_zero_fails_clearly(pg_server, pg_db):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", pg_db)
    run = EngineThread(engine(pg_server, pg_db, props={"errors.max.retries": "0"})).start()
    pg_server.execute("INSERT INTO t VALUES (1, 'a')", pg_db)
    wait_until(lambda: run.count() >= 1 or run.error, "the first event")
    terminate_walsender(pg_server, pg_db)
    run.thread.join(timeout=30)
    assert isinstance(run.error, SourceError), run.error
    assert "gave up after 0 retries (errors.max.retries=0)" in str(run.error)
    assert re.search("terminating connection|closed the connection", str(run.error))
    run.engine.close()


# ---------------------------------------------------------------------------------------------
# setups that cannot work: fail before streaming, saying what to run


def test_wal_level_replica_fails_before_streaming():
    with PostgresServer(settings={"wal_level": "replica"}) as server:
        server.create_database("d")
        server.execute("CREATE TABLE t (id int PRIMARY KEY)", "d")
        eng = engine(server, "d")
        with pytest.raises(SourceError, match=r"wal_level is 'replica'.*ALTER SYSTEM SET wal_level = logical"):
            list(eng.events(once=True))
        eng.close()
        assert server.query("SELECT count(*) FROM pg_replication_slots")[0][0] == 0


@pytest.fixture
def role(pg_server, pg_db):
    """A login role without REPLICATION (and without superuser), dropped afterwards."""
    name = f"{pg_db}_user"
    pg_server.execute(f"CREATE ROLE {name} LOGIN PASSWORD 'pw'")
    pg_server.execute(f"GRANT ALL ON SCHEMA public TO {name}", pg_db)
    yield name
    pg_server.execute(f"DROP OWNED BY {name}", pg_db)
    pg_server.execute(f"DROP ROLE {name}")


def test_user_without_replication(pg_server, pg_db, role):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY)", pg_db)
    eng = engine(pg_server, pg_db, props={"database.user": role, "database.password": "pw"})
    with pytest.raises(SourceError, match=rf'user {role!r} lacks the REPLICATION attribute: '
                                          rf'run ALTER ROLE "{role}" REPLICATION;'):
        list(eng.events(once=True))
    eng.close()
    assert slot_state(pg_server, pg_db) is None


def test_user_who_cannot_create_publication_for_all_tables(pg_server, pg_db, role):
    pg_server.execute(f"ALTER ROLE {role} REPLICATION")
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY)", pg_db)
    eng = engine(pg_server, pg_db, props={"database.user": role, "database.password": "pw"})
    with pytest.raises(SourceError, match=r"cannot create publication 'dbz_publication' FOR ALL TABLES.*superuser"):
        list(eng.events(once=True))
    eng.close()


def test_publication_disabled_and_missing(pg_server, pg_db):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY)", pg_db)
    eng = engine(pg_server, pg_db, props={"publication.autocreate.mode": "disabled"})
    with pytest.raises(SourceError, match=r"publication 'dbz_publication' does not exist.*CREATE PUBLICATION"):
        list(eng.events(once=True))
    eng.close()
    assert slot_state(pg_server, pg_db) is None


def test_publication_filtered_created_then_altered(pg_server, pg_db, tmp_path):
    for t in ("a", "b", "c"):
        pg_server.execute(f"CREATE TABLE {t} (id int PRIMARY KEY)", pg_db)
    offsets = tmp_path / "offsets.json"

    def published() -> list[str]:
        return [r[0] for r in pg_server.query(
            "SELECT tablename FROM pg_publication_tables WHERE pubname = 'dbz_publication' ORDER BY 1", pg_db)]

    props = {"publication.autocreate.mode": "filtered"}
    eng = engine(pg_server, pg_db, offsets, props={**props, "table.include.list": "public.a"})
    assert list(eng.events(once=True)) == []
    eng.close()
    assert published() == ["a"]
    pg_server.execute("INSERT INTO a VALUES (1); INSERT INTO b VALUES (1)", pg_db)

    eng = engine(pg_server, pg_db, offsets, props={**props, "table.include.list": "public.a,public.b"})
    first = list(eng.events(once=True))
    assert published() == ["a", "b"]
    pg_server.execute("INSERT INTO a VALUES (2); INSERT INTO b VALUES (2); INSERT INTO c VALUES (2)", pg_db)
    later = list(eng.events(once=True))
    eng.close()
    # b joined the publication after its row 1 was written: that change was never published
    assert (rows(first, "a"), rows(first, "b")) == ([("c", 1)], [])
    assert (rows(later, "a"), rows(later, "b"), rows(later, "c")) == ([("c", 2)], [("c", 2)], [])


def test_replica_identity_autoset(pg_server, pg_db):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text); CREATE TABLE u (id int PRIMARY KEY, v text)",
                      pg_db)
    eng = engine(pg_server, pg_db, props={"replica.identity.autoset.values": "public.t:FULL,public.u:DEFAULT"})
    list(eng.events(once=True))
    identities = dict(pg_server.query("SELECT relname, relreplident FROM pg_class WHERE relname IN ('t', 'u')",
                                      pg_db))
    assert identities == {"t": "f", "u": "d"}
    pg_server.execute("INSERT INTO t VALUES (1, 'a'); UPDATE t SET v = 'b'", pg_db)
    updates = [p for p in map(payload, eng.events(once=True)) if p is not None and p["op"] == "u"]
    eng.close()
    assert [(u["before"], u["after"]) for u in updates] == [({"id": 1, "v": "a"}, {"id": 1, "v": "b"})]


# ---------------------------------------------------------------------------------------------
# slots that cannot serve the stored position


def _stream_some(server: PostgresServer, dbname: str, offsets: Path, props: dict[str, str] | None = None
                 ) -> list[Event]:
    server.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", dbname)
    server.execute("INSERT INTO t SELECT g, 'snap' FROM generate_series(1, 3) g", dbname)
    eng = engine(server, dbname, offsets, props=props)
    events = list(eng.events(once=True))
    server.execute("INSERT INTO t SELECT g, 'stream' FROM generate_series(4, 6) g", dbname)
    events += list(eng.events(once=True))
    eng.close()
    assert rows(events) == [("r", 1), ("r", 2), ("r", 3), ("c", 4), ("c", 5), ("c", 6)]
    return events


def test_dropped_slot_fails_loudly(pg_server, pg_db, tmp_path):
    offsets = tmp_path / "offsets.json"
    _stream_some(pg_server, pg_db, offsets)
    pg_server.execute(f"SELECT pg_drop_replication_slot('{SLOT}')")
    pg_server.execute("INSERT INTO t VALUES (7, 'lost')", pg_db)
    eng = engine(pg_server, pg_db, offsets)
    with pytest.raises(SourceError, match=rf"replication slot '{SLOT}' does not exist any more; changes may "
                                          r"have been lost.*snapshot.mode=when_needed"):
        list(eng.events(once=True))
    eng.close()
    assert slot_state(pg_server, pg_db) is None  # nothing was silently re-created


def test_dropped_slot_when_needed_resnapshots(pg_server, pg_db, tmp_path):
    offsets = tmp_path / "offsets.json"
    _stream_some(pg_server, pg_db, offsets, props={"snapshot.mode": "when_needed"})
    pg_server.execute(f"SELECT pg_drop_replication_slot('{SLOT}')")
    pg_server.execute("INSERT INTO t VALUES (7, 'while the slot was gone'); DELETE FROM t WHERE id = 1", pg_db)
    eng = engine(pg_server, pg_db, offsets, props={"snapshot.mode": "when_needed"})
    again = list(eng.events(once=True))
    pg_server.execute("INSERT INTO t VALUES (8, 'after')", pg_db)
    again += list(eng.events(once=True))
    eng.close()
    assert rows(again) == [("r", 2), ("r", 3), ("r", 4), ("r", 5), ("r", 6), ("r", 7), ("c", 8)]


def test_dropped_slot_mid_run_when_needed_resnapshots(pg_server, pg_db, tmp_path):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", pg_db)
    run = EngineThread(engine(pg_server, pg_db, tmp_path / "o.json", props={"snapshot.mode": "when_needed"})).start()
    wait_until(lambda: (slot_state(pg_server, pg_db) or (None,))[0], "the slot to be active")
    pg_server.execute("INSERT INTO t VALUES (1, 'a')", pg_db)
    wait_until(lambda: run.count() >= 1 or run.error, "the first event")
    wait_until(lambda: _drop_active_slot(pg_server, pg_db), "the slot to be dropped under the engine")
    pg_server.execute("INSERT INTO t VALUES (2, 'b')", pg_db)
    wait_until(lambda: ("r", 2) in rows(run.snapshot()) or ("c", 2) in rows(run.snapshot()) or run.error,
               "row 2, streamed or snapshotted")
    run.stop()
    assert run.error is None, run.error
    got = rows(run.events)
    assert got[0] == ("c", 1)
    assert {i for _, i in got} == {1, 2}


def _drop_active_slot(server: PostgresServer, dbname: str) -> bool:
    """End the walsender holding the slot and drop the slot before the reader reconnects."""
    state = slot_state(server, dbname)
    if state is None:
        return True
    if state[0]:
        server.execute(f"SELECT pg_terminate_backend({state[0]})")
    try:
        server.execute(f"SELECT pg_drop_replication_slot('{SLOT}')")
        return True
    except RuntimeError:
        raise
    except psycopg2.Error:
        return False  # still active: the walsender had not exited yet, or the reader came back


def test_slot_recreated_by_someone_else_fails_loudly(pg_server, pg_db, tmp_path):
    offsets = tmp_path / "offsets.json"
    _stream_some(pg_server, pg_db, offsets)
    pg_server.execute(f"SELECT pg_drop_replication_slot('{SLOT}')")
    pg_server.execute("INSERT INTO t VALUES (7, 'lost')", pg_db)
    pg_server.execute(f"SELECT pg_create_logical_replication_slot('{SLOT}', 'pgoutput')", pg_db)
    eng = engine(pg_server, pg_db, offsets)
    with pytest.raises(SourceError, match=rf"replication slot '{SLOT}' has confirmed .*, past the last position "
                                          r"headwater processed .*; changes may have been lost"):
        list(eng.events(once=True))
    eng.close()


@pytest.fixture(scope="module")
def small_wal_server():
    """A server whose slots are invalidated once they hold more than 1MB of WAL back."""
    server = PostgresServer(settings={"max_slot_wal_keep_size": "1MB", "wal_keep_size": "0",
                                      "min_wal_size": "32MB", "max_wal_size": "64MB"}).start()
    yield server
    server.stop()


def _invalidate(server: PostgresServer, dbname: str) -> None:
    """Write WAL past the slot's limit while nothing reads it, until a checkpoint invalidates it."""
    for _ in range(20):
        server.execute("INSERT INTO filler SELECT g, repeat('x', 200) FROM generate_series(1, 3000) g", dbname)
        server.execute("SELECT pg_switch_wal()")
        server.execute("CHECKPOINT")
        state = slot_state(server, dbname)
        if state and state[3] == "lost":
            return
    raise AssertionError(f"the slot was not invalidated: {slot_state(server, dbname)}")


@pytest.mark.parametrize("mode", ["initial", "when_needed"])
def test_invalidated_slot(small_wal_server, tmp_path, mode):
    server, db = small_wal_server, f"inv_{mode}"
    server.create_database(db)
    server.execute("CREATE TABLE filler (id int, pad text)", db)
    offsets = tmp_path / "offsets.json"
    props = {"snapshot.mode": mode, "table.include.list": "public.t"}
    _stream_some(server, db, offsets, props=props)
    server.execute("INSERT INTO t VALUES (7, 'written before the WAL was removed')", db)
    _invalidate(server, db)
    eng = engine(server, db, offsets, props=props)
    if mode == "initial":
        with pytest.raises(SourceError, match=rf"replication slot '{SLOT}' is invalidated \(wal_status = lost\).*"
                                              r"changes may have been lost"):
            list(eng.events(once=True))
        eng.close()
        return
    again = list(eng.events(once=True))
    server.execute("INSERT INTO t VALUES (8, 'after')", db)
    again += list(eng.events(once=True))
    eng.close()
    assert rows(again) == [("r", i) for i in range(1, 8)] + [("c", 8)]
    assert the_slot(server, db)[3] != "lost"


# ---------------------------------------------------------------------------------------------
# the slot's flush LSN, and resuming from stored offsets


def _stop_midway(eng: Engine, batches_to_take: int) -> tuple[list[Event], list[Event]]:
    """Take `batches_to_take` batches, then stop without asking for more. Returns the events of
    the committed batches and those of the last one, which was not committed (the engine commits
    a batch when the next one is asked for) unless the run had ended by itself."""
    out: list[list[Event]] = []
    gen = cast(Generator[Events, None, None], eng.batches(once=True))
    stopped = False
    for batch in gen:
        out.append(list(json_rows(batch)))
        if len(out) >= batches_to_take:
            stopped = True
            break
    gen.close()
    if not stopped:
        return [e for b in out for e in b], []
    return [e for b in out[:-1] for e in b], out[-1] if out else []


def test_flush_lsn_never_passes_what_was_committed(pg_server, pg_db, tmp_path):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text); CREATE TABLE other (id int)", pg_db)
    offsets = tmp_path / "offsets.json"
    eng = engine(pg_server, pg_db, offsets, max_events=5,
                 props={"publication.autocreate.mode": "filtered", "table.include.list": "public.t"})
    list(eng.events(once=True))  # snapshot: creates the slot
    for i in range(10):
        pg_server.execute(f"INSERT INTO t SELECT g, 'x' FROM generate_series({i * 8 + 1}, {i * 8 + 8}) g", pg_db)
    committed, uncommitted = _stop_midway(eng, 6)
    assert (len(committed), len(uncommitted)) == (25, 5)
    stored = stored_offset(offsets)
    assert stored.get("txId") is not None  # the stored position is inside a transaction
    # WAL the slot does not publish, then let status updates and keepalives go back and forth
    pg_server.execute("INSERT INTO other SELECT generate_series(1, 100)", pg_db)
    target = current_lsn(pg_server)
    wait_until(lambda: pg_server.query(f"SELECT bool_or(write_lsn >= '{lsn_to_str(target)}') FROM pg_stat_replication "
                                       "WHERE application_name = 'headwater'")[0][0],
               "the walsender to hear that the client received everything")
    time.sleep(1.5)  # more than one status interval: nothing may move the flush position meanwhile
    state = the_slot(pg_server, pg_db)
    assert state[1] <= stored["lsn_commit"] < target
    eng.close()
    state = the_slot(pg_server, pg_db)
    assert state[1] <= stored["lsn_commit"]
    # the next run repeats the uncommitted batch, and nothing else
    eng = engine(pg_server, pg_db, offsets, max_events=5)
    rest = list(eng.events(once=True))
    eng.close()
    ids = [i for _, i in rows(committed + rest)]
    assert ids == list(range(1, 81))


def _workload(server: PostgresServer, dbname: str) -> None:
    """Transactions of 1 to 25 changes: inserts, updates, deletes, a message, a multi-table one."""
    server.execute("INSERT INTO t SELECT g, 'a' FROM generate_series(1, 25) g", dbname)
    server.execute("UPDATE t SET v = 'b' WHERE id % 3 = 0", dbname)
    server.execute("INSERT INTO t VALUES (26, 'single')", dbname)
    server.execute("BEGIN; DELETE FROM t WHERE id < 5; INSERT INTO u SELECT g FROM generate_series(1, 7) g; "
                   "SELECT pg_logical_emit_message(true, 'p', 'in txn'); UPDATE t SET v = 'c' WHERE id > 20; COMMIT",
                   dbname)
    server.execute("SELECT pg_logical_emit_message(false, 'p', 'alone')", dbname)
    server.execute("INSERT INTO t SELECT g, 'd' FROM generate_series(27, 45) g", dbname)


def comparable(ev: Event) -> tuple:
    """An event without the fields that carry processing time."""
    value = payload(ev)
    if isinstance(value, dict) and "source" in value:  # BEGIN/END's ts_ms is the commit time: kept
        for k in ("ts_ms", "ts_us", "ts_ns"):
            value.pop(k, None)
    return ev.topic, ev.key, json.dumps(value, sort_keys=True), ev.op, ev.commit_version, ev.commit_ts_us


@pytest.mark.parametrize("stops", [(3, 4, 2, 9), (2,) * 12])
def test_resume_from_offsets_loses_and_repeats_nothing(pg_server, pg_db, tmp_path, stops):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text); CREATE TABLE u (id int PRIMARY KEY)", pg_db)
    props = {"provide.transaction.metadata": "true"}
    offsets = tmp_path / "offsets.json"
    # the reference: another slot, read in one go
    ref = engine(pg_server, pg_db, None, props={**props, "slot.name": "reference"})
    list(ref.events(once=True))
    eng = engine(pg_server, pg_db, offsets, max_events=4, props=props)
    list(eng.events(once=True))
    eng.close()
    _workload(pg_server, pg_db)
    expected = list(ref.events(once=True))
    ref.close()

    delivered: list[Event] = []
    mid_txn = 0
    for n in stops:
        eng = engine(pg_server, pg_db, offsets, max_events=4, props=props)
        committed, _ = _stop_midway(eng, n)
        eng.close()
        delivered += committed
        mid_txn += stored_offset(offsets).get("txId") is not None
    eng = engine(pg_server, pg_db, offsets, max_events=4, props=props)
    delivered += list(eng.events(once=True))
    eng.close()
    assert mid_txn > 0  # some runs stopped inside a transaction
    assert [comparable(e) for e in delivered] == [comparable(e) for e in expected]


def test_slot_drop_on_stop(pg_server, pg_db):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY)", pg_db)
    eng = engine(pg_server, pg_db, props={"slot.drop.on.stop": "true"})
    list(eng.events(once=True))
    pg_server.execute("INSERT INTO t VALUES (1)", pg_db)
    assert rows(list(eng.events(once=True))) == [("c", 1)]
    assert slot_state(pg_server, pg_db) is not None
    eng.close()
    assert slot_state(pg_server, pg_db) is None


def test_flush_lsn_source_false_leaves_the_slot_alone(pg_server, pg_db, tmp_path):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY)", pg_db)
    eng = engine(pg_server, pg_db, tmp_path / "o.json", props={"flush.lsn.source": "false"})
    list(eng.events(once=True))
    created = the_slot(pg_server, pg_db)[1]
    pg_server.execute("INSERT INTO t SELECT generate_series(1, 10)", pg_db)
    assert len(rows(list(eng.events(once=True)))) == 10
    pg_server.execute("INSERT INTO t SELECT generate_series(11, 20)", pg_db)
    assert len(rows(list(eng.events(once=True)))) == 10  # the previous batch is committed by now
    eng.close()
    assert the_slot(pg_server, pg_db)[1] == created


# ---------------------------------------------------------------------------------------------
# snapshot modes


def _run(server: PostgresServer, dbname: str, offsets: Path, mode: str, **props: str) -> list[tuple[str, int]]:
    eng = engine(server, dbname, offsets, props={"snapshot.mode": mode, **props})
    try:
        return rows(list(eng.events(once=True)))
    finally:
        eng.close()


@pytest.mark.parametrize("mode", ["initial", "always", "initial_only", "no_data", "never", "when_needed"])
def test_snapshot_modes(pg_server, pg_db, tmp_path, mode):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", pg_db)
    pg_server.execute("INSERT INTO t VALUES (1, 'before'), (2, 'before')", pg_db)
    offsets = tmp_path / "offsets.json"
    first = _run(pg_server, pg_db, offsets, mode)
    pg_server.execute("INSERT INTO t VALUES (3, 'between runs')", pg_db)
    second = _run(pg_server, pg_db, offsets, mode)
    pg_server.execute("INSERT INTO t VALUES (4, 'later')", pg_db)
    third = _run(pg_server, pg_db, offsets, mode)
    snap = [("r", 1), ("r", 2)]
    expected = {
        "initial": (snap, [("c", 3)], [("c", 4)]),
        "when_needed": (snap, [("c", 3)], [("c", 4)]),
        "always": (snap, [("r", 1), ("r", 2), ("r", 3)], [("r", 1), ("r", 2), ("r", 3), ("r", 4)]),
        "initial_only": (snap, [], []),
        "no_data": ([], [("c", 3)], [("c", 4)]),
        "never": ([], [("c", 3)], [("c", 4)]),
    }[mode]
    assert (first, second, third) == expected


def test_initial_only_engine_finishes(pg_server, pg_db):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY)", pg_db)
    pg_server.execute("INSERT INTO t VALUES (1)", pg_db)
    eng = engine(pg_server, pg_db, props={"snapshot.mode": "initial_only"})
    assert rows(list(eng.events())) == [("r", 1)]  # not `once`: returns because the source is finished
    eng.close()


def test_always_streams_between_snapshots(pg_server, pg_db, tmp_path):
    """`always` re-snapshots at each start and streams what follows each snapshot."""
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", pg_db)
    offsets = tmp_path / "offsets.json"
    eng = engine(pg_server, pg_db, offsets, props={"snapshot.mode": "always"})
    got = rows(list(eng.events(once=True)))
    pg_server.execute("INSERT INTO t VALUES (1, 'a')", pg_db)
    got += rows(list(eng.events(once=True)))
    eng.close()
    assert got == [("c", 1)]


def test_filters_matching_no_table_warn(pg_server, pg_db, tmp_path, caplog):
    """A `table.include.list` that matches nothing (a typo) is named, with the tables that are there."""
    caplog.set_level(logging.WARNING, logger="headwater")
    pg_server.execute("CREATE TABLE orders (id int PRIMARY KEY); CREATE TABLE customers (id int PRIMARY KEY)",
                      pg_db)
    pg_server.execute("INSERT INTO orders VALUES (1)", pg_db)
    eng = engine(pg_server, pg_db, tmp_path / "o.json", props={"table.include.list": "public.order"})
    assert list(eng.events(once=True)) == []
    pg_server.execute("INSERT INTO orders VALUES (2)", pg_db)
    assert rows(list(eng.events(once=True)), "orders") == []
    eng.close()
    warned = [r.getMessage() for r in caplog.records if "no table to capture" in r.getMessage()]
    assert warned == ["the table filters (table.include.list=public.order) match no table to capture; the "
                      "database has 2 tables: public.customers, public.orders. Nothing will be captured until "
                      "a matching table exists"]


def test_captured_tables_warn_nothing(pg_server, pg_db, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="headwater")
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY)", pg_db)
    pg_server.execute("INSERT INTO t VALUES (1)", pg_db)
    eng = engine(pg_server, pg_db, tmp_path / "o.json", props={"table.include.list": "public.t"})
    assert rows(list(eng.events(once=True))) == [("r", 1)]
    eng.close()
    assert "no table to capture" not in caplog.text


def test_snapshot_include_collection_list(pg_server, pg_db, tmp_path):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY); CREATE TABLE u (id int PRIMARY KEY)", pg_db)
    pg_server.execute("INSERT INTO t VALUES (1); INSERT INTO u VALUES (1)", pg_db)
    eng = engine(pg_server, pg_db, tmp_path / "o.json", props={"snapshot.include.collection.list": "public.u"})
    first = list(eng.events(once=True))
    pg_server.execute("INSERT INTO t VALUES (2); INSERT INTO u VALUES (2)", pg_db)
    second = list(eng.events(once=True))
    eng.close()
    assert rows(first, "t") == [] and rows(first, "u") == [("r", 1)]
    assert rows(second, "t") == [("c", 2)] and rows(second, "u") == [("c", 2)]


# ---------------------------------------------------------------------------------------------
# heartbeats keep the slot advancing when only uncaptured tables change




@pytest.mark.parametrize("heartbeat", ["off", "on", "action"])
def test_heartbeats_advance_the_slot(pg_server, pg_db, tmp_path, heartbeat):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY); CREATE TABLE other (id int); "
                      "CREATE TABLE hb (id serial PRIMARY KEY, at timestamptz)", pg_db)
    props = {"publication.autocreate.mode": "filtered", "table.include.list": "public.t,public.hb"}
    if heartbeat != "off":
        props["heartbeat.interval.ms"] = "200"
    if heartbeat == "action":
        props["heartbeat.action.query"] = "INSERT INTO hb (at) VALUES (now())"
    offsets = tmp_path / "offsets.json"
    eng = engine(pg_server, pg_db, offsets, props=props)
    list(eng.events(once=True))
    eng.close()
    start = the_slot(pg_server, pg_db)[1]
    for i in range(20):
        pg_server.execute(f"INSERT INTO other SELECT generate_series(1, {i + 1})", pg_db)
    past = current_lsn(pg_server)
    run = EngineThread(engine(pg_server, pg_db, offsets, props=props)).start()
    if heartbeat == "off":
        time.sleep(2.5)  # long enough for heartbeats, were there any; the slot must not move
    else:
        wait_until(lambda: the_slot(pg_server, pg_db)[1] >= past or run.error, "the slot to move on")
    run.stop()
    assert run.error is None, run.error
    events = run.events
    flush = the_slot(pg_server, pg_db)[1]
    stored = stored_offset(offsets).get("lsn_commit", 0)
    beats = [e for e in events if e.topic.startswith("__debezium-heartbeat")]
    if heartbeat == "off":
        assert flush == start and not beats  # like Debezium: nothing to confirm, the slot stays
    else:
        assert beats
        assert flush >= past, "the slot did not move past the uncaptured changes"
        assert flush <= stored  # never ahead of the stored offset
    if heartbeat == "action":
        assert pg_server.query("SELECT count(*) FROM hb", pg_db)[0][0] >= 1
        assert rows(events, "hb")
    # and the position the heartbeats moved to resumes cleanly
    pg_server.execute("INSERT INTO t VALUES (1)", pg_db)
    eng = engine(pg_server, pg_db, offsets, props=props)
    assert rows(list(eng.events(once=True))) == [("c", 1)]
    eng.close()
