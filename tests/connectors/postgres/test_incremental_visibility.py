"""An incremental snapshot's window against a transaction whose commit is in the WAL (and delivered by the
stream) while PostgreSQL's snapshots still count it as running.

A committing backend writes its commit record, then (later) leaves the proc array; a snapshot taken in
between does not see the transaction. Synchronous replication widens that gap at will: a transaction with
`synchronous_commit = on` waits, committed locally, for a standby that never answers (here a physical
replication connection that confirms nothing), while the stream delivers its changes. A window read while it
waits would give the rows as they were before it, after its delete and updates in the stream (and a
consumer would keep them): the window is dropped and its range read again once the commit is visible.
A blocking snapshot waits for it likewise.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg2
import psycopg2.extras
import pytest

from headwater.connectors.registry import validate_connector
from tests.connectors.common.incremental_support import reads, replay, value
from tests.connectors.postgres.test_incremental import Run, finish, props, setup, signal, started, table_state

STANDBY = "headwater_stalled_standby"


def lsn_int(lsn: str) -> int:
    hi, lo = lsn.split("/")
    return (int(hi, 16) << 32) + int(lo, 16)


@pytest.fixture
def stalled_commits(pg_server):
    """Synchronous replication to a standby that never confirms: a transaction that sets `synchronous_commit =
    on` waits at its commit (every other one commits locally)."""
    pg_server.execute(f"ALTER SYSTEM SET synchronous_standby_names = '{STANDBY}'")
    pg_server.execute("ALTER SYSTEM SET synchronous_commit = 'local'")
    pg_server.execute("SELECT pg_reload_conf()")
    standby = psycopg2.connect(pg_server.dsn("postgres", application_name=STANDBY),
                               connection_factory=psycopg2.extras.PhysicalReplicationConnection)
    try:
        lsn = pg_server.query("SELECT pg_current_wal_lsn()")[0][0]
        cur = standby.cursor()
        cur.start_replication(start_lsn=lsn)
        cur.send_feedback(write_lsn=lsn_int(lsn), flush_lsn=lsn_int(lsn), reply=True)  # once: a standby at `lsn`
        deadline = time.monotonic() + 30
        while not pg_server.query(f"SELECT 1 FROM pg_stat_replication WHERE application_name = '{STANDBY}' "
                                  "AND sync_state = 'sync'"):
            assert time.monotonic() < deadline, "the standby did not become synchronous"
            time.sleep(0.05)
        yield
    finally:
        standby.close()
        pg_server.execute("ALTER SYSTEM RESET synchronous_standby_names")
        pg_server.execute("ALTER SYSTEM RESET synchronous_commit")
        pg_server.execute("SELECT pg_reload_conf()")


class Stalled:
    """A transaction deleting 5, updating 7 and moving 9 to 10007, its commit waiting for the standby (in the
    WAL and delivered by the stream, still running for snapshots) until `release`."""

    def __init__(self, server: Any, db: str):
        self.server = server
        self.conn = server.connect(db, autocommit=False)
        with self.conn.cursor() as cur:
            cur.execute("SET synchronous_commit = on")
            cur.execute("SELECT pg_backend_pid()")
            self.pid = cur.fetchone()[0]
            cur.execute("DELETE FROM items WHERE id = 5")
            cur.execute("UPDATE items SET v = -1 WHERE id = 7")
            cur.execute("UPDATE items SET id = 10007 WHERE id = 9")
        self.committing = threading.Thread(target=self.conn.commit, daemon=True)
        self.committing.start()

    def release(self) -> None:
        if self.committing.is_alive():
            self.server.execute(f"SELECT pg_cancel_backend({self.pid})")  # the wait ends: the commit is visible
            self.committing.join(30)
        self.conn.close()


def stall(server: Any, db: str, run: Run) -> Stalled:
    stalled = Stalled(server, db)
    run.wait(lambda: any(value(e).get("op") == "d" and value(e)["before"]["id"] == 5 for e in run.events))
    assert server.query("SELECT v FROM items WHERE id = 7", db) == [(70,)]  # delivered, not visible yet
    return stalled


@pytest.mark.parametrize("extra", [
    {"incremental.snapshot.watermarking.strategy": "insert_insert"},
    {"incremental.snapshot.watermarking.strategy": "insert_delete"},
    {"headwater.incremental.snapshot.read.only": "true"},
], ids=["insert_insert", "insert_delete", "read_only"])
def test_an_incremental_window_waits_for_a_delivered_commit(pg_server, pg_db, stalled_commits, extra, caplog):
    rows = 600
    setup(pg_server, pg_db, rows)
    run = Run(validate_connector(props(pg_server, pg_db, **extra)))
    stalled = None
    try:
        started(pg_server, pg_db, run)
        stalled = stall(pg_server, pg_db, run)
        with caplog.at_level(logging.WARNING, logger="headwater"):
            signal(pg_server, pg_db, "execute-snapshot", {"data-collections": ["public.items"]}, "s1")
            run.wait(lambda: caplog.text.count("dropped, its range read again") >= 2, 60)
        assert not reads(run.events)  # the first window (the stalled keys') is not read while the commit waits
        stalled.release()
        finish(pg_server, pg_db, run, 1)
    finally:
        if stalled is not None:
            stalled.release()
        run.stop()
    assert replay(run.events, "items") == table_state(pg_server, pg_db)
    # every row once, up to the largest key when the snapshot began (not 9's new key)
    assert sorted(reads(run.events)) == sorted(k for k in table_state(pg_server, pg_db) if k <= rows)


def test_a_blocking_snapshot_waits_for_a_delivered_commit(pg_server, pg_db, stalled_commits, caplog):
    rows = 600
    setup(pg_server, pg_db, rows)
    run = Run(validate_connector(props(pg_server, pg_db)))
    stalled = None
    try:
        started(pg_server, pg_db, run)
        stalled = stall(pg_server, pg_db, run)
        with caplog.at_level(logging.WARNING, logger="headwater"):
            signal(pg_server, pg_db, "execute-snapshot", {"data-collections": ["public.items"], "type": "blocking"},
                   "b1")
            run.wait(lambda: "taken again once they are visible" in caplog.text, 60)
        assert not [e for e in run.events if value(e).get("op") == "r"]
        stalled.release()
        run.wait(lambda: len([e for e in run.events if value(e).get("op") == "r"]) >= rows - 2)
        pg_server.execute("INSERT INTO done VALUES (1)", pg_db)
        run.wait(lambda: run.saw_done(1))
    finally:
        if stalled is not None:
            stalled.release()
        run.stop()
    assert replay(run.events, "items") == table_state(pg_server, pg_db)
    assert sorted(value(e)["after"]["id"] for e in run.events if value(e).get("op") == "r") == \
        sorted(table_state(pg_server, pg_db))
