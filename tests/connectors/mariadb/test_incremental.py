"""Signals and incremental and blocking snapshots on a real MariaDB server, through the embedded engine.

As for PostgreSQL (`tests/connectors/postgres/test_incremental.py`, whose helpers these share): every
event a run delivers (creates, updates, deletes, the snapshot's `op: r` rows) is replayed into a map by
key and compared with the table at the end, while a workload inserts, updates, deletes and changes the
primary keys of the rows the snapshot reads: with each watermarking strategy and the read-only mode.
Then: a restart in the middle of a snapshot, a batch replayed in a fresh connector, stop/pause/resume
with notifications, additional-conditions, malformed signals and the log signal, the file channel and
the command line's, composite and text keys and a surrogate key, a blocking snapshot during a workload,
and the `source` block of the snapshot's rows.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Any

import pymysql
import pytest

from headwater.connectors.common import incremental as inc
from headwater.connectors.common.signals import append_signal, with_cli_file
from headwater.connectors.mariadb.source import MariaDbSource
from headwater.connectors.registry import validate_connector
from headwater.devservers.mariadb import MariaDBServer
from tests.connectors.common import incremental_support as support
from tests.connectors.common.incremental_support import reads, reads_of, replay, value
from tests.events_support import json_rows


def props(server: MariaDBServer, db: str, **extra: str) -> dict[str, str]:
    return {**server.connector_properties(db), "connector.class": "mariadb", "database.server.id": "5471",
            "topic.prefix": "s", "snapshot.mode": "no_data", "include.schema.changes": "false",
            "signal.data.collection": f"{db}.dbz_signal", "incremental.snapshot.chunk.size": "500",
            "signal.poll.interval.ms": "0", **extra}


def setup(server: MariaDBServer, db: str, rows: int) -> None:
    server.execute("CREATE TABLE dbz_signal (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                   "data VARCHAR(2048)); CREATE TABLE done (id INT PRIMARY KEY); "
                   "CREATE TABLE items (id INT PRIMARY KEY, v INT NOT NULL, color VARCHAR(16)); "
                   f"INSERT INTO items SELECT seq, seq * 10, IF(seq % 3 = 0, 'blue', 'red') FROM seq_1_to_{rows}", db)


def connect(server: MariaDBServer, db: str, autocommit: bool = True) -> pymysql.Connection:
    return pymysql.connect(**server.connection_params(db), autocommit=autocommit)


def signal(server: MariaDBServer, db: str, type_: str, data: dict[str, Any] | str | None, id_: str) -> None:
    support.insert_signal(connect(server, db), type_, data, id_)


class Run(support.Run):
    def __init__(self, config: Any, offsets: Path | None = None):
        super().__init__(MariaDbSource(config), config, offsets)


def table_state(server: MariaDBServer, db: str) -> dict[int, dict[str, Any]]:
    return {int(str(i)): {"id": int(str(i)), "v": int(str(v)), "color": c}
            for i, v, c in server.query("SELECT id, v, color FROM items", db)}


def start_workload(server: MariaDBServer, db: str, rows: int, seed: int = 7) -> tuple[threading.Thread,
                                                                                       threading.Event]:
    upsert = "INSERT INTO items VALUES (%s, 1, 'green') ON DUPLICATE KEY UPDATE v = v + 100"
    return support.Workload(lambda: connect(server, db, autocommit=False), upsert=upsert).start(rows, seed)


def started(run: Run) -> None:
    """Wait until the engine streams (its schema snapshot is taken: changes after it are captured)."""
    run.wait(lambda: run.offset().get("snapshot") in ("completed", "streaming"))


def finish(server: MariaDBServer, db: str, run: Run, n: int) -> None:
    """Wait for the incremental snapshot (begun: a row read) to end and the stream to deliver a marker written
    after it."""
    run.wait(lambda: any(value(e).get("source", {}).get("snapshot") == "incremental" for e in run.events))
    run.wait(run.snapshot_done, 300)
    server.execute(f"INSERT INTO done VALUES ({n})", db)
    run.wait(lambda: run.saw_done(n))


STRATEGIES = [
    {"incremental.snapshot.watermarking.strategy": "insert_insert"},
    {"incremental.snapshot.watermarking.strategy": "insert_delete"},
    {"read.only": "true"},
]
IDS = ["insert_insert", "insert_delete", "read_only"]


def snapshot_under_workload(server: MariaDBServer, db: str, rows: int, extra: dict[str, str]) -> Run:
    setup(server, db, rows)
    run = Run(validate_connector(props(server, db, **extra)))
    try:
        started(run)
        worker, stop = start_workload(server, db, rows)
        signal(server, db, "execute-snapshot", {"data-collections": [f"{db}.items"]}, "s1")
        run.wait(lambda: any(value(e).get("source", {}).get("snapshot") == "incremental" for e in run.events))
        run.wait(run.snapshot_done, 900)
        stop.set()
        worker.join(30)
        finish(server, db, run, 1)
    finally:
        run.stop()
    return run


@pytest.mark.parametrize("extra", STRATEGIES, ids=IDS)
def test_snapshot_under_concurrent_changes_replays_to_the_table(mariadb_server, mariadb_db, extra):
    rows = 5000
    # windows of four chunks, each read in four parts (one a chunk: the source's parallelism is 2)
    run = snapshot_under_workload(mariadb_server, mariadb_db, rows,
                                  {**extra, "headwater.incremental.snapshot.batch.rows": "2000"})
    read = [e for e in run.events if value(e).get("op") == "r"]
    assert read and all(value(e)["source"]["snapshot"] == "incremental" for e in read)
    assert len(set(reads(run.events))) == len(reads(run.events))
    assert replay(run.events, "items") == table_state(mariadb_server, mariadb_db)
    kinds = dict(mariadb_server.query("SELECT type, count(*) FROM dbz_signal GROUP BY type", mariadb_db))
    if "read.only" in extra:
        assert "snapshot-window-open" not in kinds
    elif extra["incremental.snapshot.watermarking.strategy"] == "insert_insert":
        assert kinds["snapshot-window-open"] == kinds["snapshot-window-close"]
        assert int(str(kinds["snapshot-window-open"])) >= rows // 2000  # a pair a window
    else:
        assert "snapshot-window-open" not in kinds and "snapshot-window-close" not in kinds


@pytest.mark.slow
@pytest.mark.parametrize("extra", STRATEGIES, ids=IDS)
def test_100k_rows_under_concurrent_changes(mariadb_server, mariadb_db, extra):
    """The issue's size: 100,000 rows in chunks of Debezium's default 1024, the workload running
    throughout the snapshot."""
    rows = 100_000
    began = time.monotonic()
    run = snapshot_under_workload(mariadb_server, mariadb_db, rows,
                                  # windows of ten chunks (each read in four parts): the workload meets ten of them
                                  {**extra, "incremental.snapshot.chunk.size": "1024",
                                   "headwater.incremental.snapshot.batch.rows": "10240"})
    took = time.monotonic() - began
    n = len(reads(run.events))
    print(f"{extra}: {n} rows read in {took:.1f}s ({n / took:,.0f} rows/s) while streaming "
          f"{sum(1 for e in run.events if value(e).get('op') in ('c', 'u', 'd'))} changes")
    assert n > rows * 0.9 and len(set(reads(run.events))) == n
    assert replay(run.events, "items") == table_state(mariadb_server, mariadb_db)


@pytest.mark.parametrize("extra", STRATEGIES, ids=IDS)
def test_changes_right_after_a_chunks_select_supersede_its_rows(mariadb_server, mariadb_db, extra, monkeypatch):
    """Every chunk's keys 3, 5 and 7 of its range are updated, deleted or moved right after the part's SELECT
    read them (where the part is read, after the batch's end was fixed, before the binlog's end is read): the
    part reads the binlog from the batch's end to there and drops those keys' rows, whatever its view saw;
    the streamed changes that follow give the keys their rows."""
    from headwater.connectors.binlog import incremental as binlog_inc

    rows = 1000
    setup(mariadb_server, mariadb_db, rows)
    hit: list[int] = []

    def change_the_chunk() -> None:
        first = 1 + 100 * len(hit)
        if first > rows:
            return
        hit.append(first)
        conn = connect(mariadb_server, mariadb_db)
        with conn.cursor() as cur:
            cur.execute("UPDATE items SET v = -1 WHERE id = %s", (first + 2,))
            cur.execute("DELETE FROM items WHERE id = %s", (first + 4,))
            cur.execute("UPDATE items SET id = id + 100000 WHERE id = %s", (first + 6,))
        conn.close()

    position = binlog_inc.master_position

    def after_select(cur: Any) -> int:  # the binlog's end read after a part's SELECT
        change_the_chunk()
        return position(cur)
    monkeypatch.setattr(binlog_inc, "master_position", after_select)
    run = Run(validate_connector(props(mariadb_server, mariadb_db, **extra, **{
        "incremental.snapshot.chunk.size": "100", "headwater.incremental.snapshot.batch.rows": "100"})))
    try:
        started(run)
        signal(mariadb_server, mariadb_db, "execute-snapshot", {"data-collections": [f"{mariadb_db}.items"]}, "s1")
        finish(mariadb_server, mariadb_db, run, 1)
    finally:
        run.stop()
    assert len(hit) == 10
    got = reads(run.events)
    assert not {f + 2 for f in hit} & set(got) and not {f + 4 for f in hit} & set(got)  # superseded: not read
    assert replay(run.events, "items") == table_state(mariadb_server, mariadb_db)


def small(server: MariaDBServer, db: str, rows: int = 2000, **extra: str) -> Any:
    """Windows of 1,000 rows (5 chunks of 200, in 4 parts)."""
    setup(server, db, rows)
    return validate_connector(props(server, db, **{"incremental.snapshot.chunk.size": "200",
                                                   "headwater.incremental.snapshot.batch.rows": "1000", **extra}))


def test_a_restart_resumes_at_the_chunk_it_was_in(mariadb_server, mariadb_db, tmp_path):
    rows = 20000  # enough chunks that the stop comes before the last, even on a fast machine
    config = small(mariadb_server, mariadb_db, rows)
    offsets = tmp_path / "offsets.json"
    run = Run(config, offsets)
    started(run)
    signal(mariadb_server, mariadb_db, "execute-snapshot", {"data-collections": [f"{mariadb_db}.items"]}, "s1")
    run.wait(lambda: len(reads(run.events)) >= 600)
    run.stop()
    first = reads(run.events)
    stored = json.loads(offsets.read_text())["offset"]
    assert stored[inc.COLLECTIONS] and json.loads(stored[inc.PRIMARY_KEY]) == [str(max(first))]
    assert stored[inc.CORRELATION_ID] == "s1" and len(first) < rows

    again = Run(config, offsets)
    started(again)
    finish(mariadb_server, mariadb_db, again, 1)
    again.stop()
    second = reads(again.events)
    assert min(second) == max(first) + 1  # the chunk after the last one delivered: none read twice
    assert sorted(first + second) == list(range(1, rows + 1))


CHILD = """
import json, sys, time
from headwater.connectors.registry import validate_connector
from headwater.engine import Engine, OffsetFile
props, offsets, out, pause = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
engine = Engine(validate_connector(props), OffsetFile(offsets))
with open(out, "a") as f:
    for batch in engine.batches():
        for e in batch.rows():
            f.write(json.dumps({"topic": e.topic, "value": e.value_json()}) + "\\n")
        f.flush()
        time.sleep(pause)
"""


def until(proc: Any, what: Any, timeout: float = 120) -> None:
    """Wait for `what()` while the child process `proc` runs."""
    deadline = time.monotonic() + timeout
    while not what():
        assert proc.poll() is None, f"the engine's process ended ({proc.returncode})"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_kill_9_mid_snapshot_resumes_after_the_last_chunk_stored(mariadb_server, mariadb_db, tmp_path):
    """The engine in a child process, killed with SIGKILL while an incremental snapshot runs under a workload,
    then run again from its offset file: no chunk whose offset was stored is read again (only the batch in
    flight at the kill may come twice), and the events replay to the table."""
    import os
    import signal as signals
    import subprocess
    import sys

    from headwater.engine import OffsetFile

    rows = 6000
    config = props(mariadb_server, mariadb_db, **{"incremental.snapshot.chunk.size": "200",
                                                  "headwater.incremental.snapshot.batch.rows": "1000"})
    setup(mariadb_server, mariadb_db, rows)
    offsets, out = tmp_path / "o.json", tmp_path / "events.jsonl"

    def child(pause: float) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(config), str(offsets), str(out), str(pause)],
                                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})

    def lines() -> list[dict[str, Any]]:
        return [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []

    def read_ids(part: list[dict[str, Any]]) -> list[int]:
        return [d["value"]["after"]["id"] for d in part if d["value"] and d["value"]["op"] == "r"]

    def stored() -> dict[str, Any]:
        return OffsetFile(offsets).load() or {}

    proc = child(0.2)
    worker, stop = start_workload(mariadb_server, mariadb_db, rows)
    try:
        until(proc, lambda: stored().get("snapshot") in ("completed", "streaming"))
        signal(mariadb_server, mariadb_db, "execute-snapshot", {"data-collections": [f"{mariadb_db}.items"]}, "s1")
        until(proc, lambda: stored().get(inc.PRIMARY_KEY) is not None
                         and len(read_ids(lines())) >= 1000)
        proc.send_signal(signals.SIGKILL)
        proc.wait()
        at_kill = stored()
        last_stored = int(json.loads(at_kill[inc.PRIMARY_KEY])[0])
        killed_at = len(lines())
        assert at_kill[inc.COLLECTIONS] and last_stored < rows
        proc = child(0)
        until(proc, lambda: not stored().get(inc.COLLECTIONS), 300)
        stop.set()
        worker.join(30)
        mariadb_server.execute("INSERT INTO done VALUES (1)", mariadb_db)
        until(proc, lambda: any(d["topic"].endswith(".done") for d in lines()))
    finally:
        stop.set()
        proc.send_signal(signals.SIGKILL)
        proc.wait()
    events = lines()
    first, again = read_ids(events[:killed_at]), read_ids(events[killed_at:])
    assert first and again and min(again) > last_stored  # the chunks stored before the kill: not read again
    assert len(again) == len(set(again))
    state: dict[int, Any] = {}
    for d in events:
        v = d["value"]
        if v and d["topic"].endswith(".items"):
            if v["op"] == "d":
                state.pop(v["before"]["id"], None)
            else:
                state[v["after"]["id"]] = v["after"]
    assert state == table_state(mariadb_server, mariadb_db)


def test_a_batch_replayed_in_a_fresh_connector_reads_its_chunk_again(mariadb_server, mariadb_db):
    """What Spark does after a crash: plan() of a checkpointed (start, end] in a new source."""
    config = small(mariadb_server, mariadb_db)
    src, fresh = MariaDbSource(config), MariaDbSource(config)
    try:
        start = src.initial_offset()
        src.open(start)
        planned = None
        for i in range(60):
            end = src.latest_offset(start)
            units = src.plan(start, end)
            for u in units:
                list(u.read())
            if i == 1:
                signal(mariadb_server, mariadb_db, "execute-snapshot", {"data-collections": [f"{mariadb_db}.items"]},
                       "s1")
            if end.get(inc.CHUNK):
                planned = (start, end, [e for u in units for b in u.read() for e in json_rows(b)])
                break
            src.commit(end)
            start = end
        assert planned is not None
        start, end, events = planned
        fresh.open(start)
        replayed = [e for u in fresh.plan(start, end) for b in u.read() for e in json_rows(b)]
        assert reads(replayed) == reads(events) == list(range(1, 1001))
        assert end[inc.CHUNK]["bounds"] == [["250"], ["500"], ["750"]] and end[inc.CHUNK]["to"] == ["1000"]
        assert [value(e)["after"] for e in replayed] == [value(e)["after"] for e in events]
        assert [value(e)["source"]["pos"] for e in replayed] == [value(e)["source"]["pos"] for e in events]
    finally:
        src.close()
        fresh.close()


def test_pause_resume_and_stop(mariadb_server, mariadb_db, caplog):
    """Also: table.include.list and database.include.list leaving the signalling table out (it is captured
    too, as Debezium does, or no signal would arrive)."""
    mariadb_server.execute("CREATE DATABASE IF NOT EXISTS sig_elsewhere; CREATE TABLE IF NOT EXISTS "
                           "sig_elsewhere.dbz_signal (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                           "data VARCHAR(2048))")
    config = small(mariadb_server, mariadb_db, 20000, **{
        "notification.enabled.channels": "log", "signal.data.collection": "sig_elsewhere.dbz_signal",
        "table.include.list": f"{mariadb_db}.items,{mariadb_db}.done"})
    items = f"{mariadb_db}.items"
    run = Run(config)
    try:
        started(run)
        support.pause_resume_stop(run, lambda *a: signal(mariadb_server, "sig_elsewhere", *a), items, 20000,
                                  lambda n: mariadb_server.execute(f"INSERT INTO done VALUES ({n})", mariadb_db),
                                  run.connector.status, lambda: caplog.text)
    finally:
        run.stop()
        mariadb_server.execute("DROP DATABASE sig_elsewhere")


def test_additional_conditions_malformed_signals_and_the_log_signal(mariadb_server, mariadb_db, caplog):
    run = Run(small(mariadb_server, mariadb_db))
    items = f"{mariadb_db}.items"
    try:
        started(run)
        text = support.conditions_and_malformed_signals(run, lambda *a: signal(mariadb_server, mariadb_db, *a), items,
                                                        re.escape(mariadb_db) + r"\.ite.*",
                                                        lambda: finish(mariadb_server, mariadb_db, run, 1),
                                                        lambda: caplog.text)
    finally:
        run.stop()
    assert re.search(r"hello from a signal at \{file=binlog\.\d+, pos=\d+, gtids=0-1-\d+\}", text)


def complete(server: MariaDBServer, db: str, config: Any, offsets: Path, n: int) -> Run:
    """A run from `offsets` until the snapshot it has (or gets) is done and marker `n` is delivered."""
    run = Run(config, offsets)
    try:
        started(run)
        finish(server, db, run, n)
    finally:
        run.stop()
    return run


def test_the_file_channel_and_the_command_line(mariadb_server, mariadb_db, tmp_path):
    """A signal file read once across restarts, and `headwater signal` queueing one for a stopped pipeline;
    after the initial snapshot (the lock-free one, whose chunk progress rides in the first streaming offsets)."""
    signals = tmp_path / "signals.txt"
    config = small(mariadb_server, mariadb_db, 1000, **{"signal.enabled.channels": "source,file",
                                                        "signal.file": str(signals), "snapshot.mode": "initial"})
    items = f"{mariadb_db}.items"
    offsets = tmp_path / "offsets.json"
    signals.write_text("this is not a signal\n")
    append_signal(signals, "execute-snapshot", {"data-collections": [items]}, "f1")
    run = complete(mariadb_server, mariadb_db, config, offsets, 1)
    assert reads(run.events) == list(range(1, 1001))
    assert json.loads(offsets.read_text())["offset"][inc.FILE_POSITIONS] == {str(signals): signals.stat().st_size}

    queued = support.cli_signal(tmp_path, props(mariadb_server, mariadb_db), {
        "data-collections": [items], "additional-conditions": [{"data-collection": items, "filter": "id <= 300"}]})
    # the file channel's signal is not acted on again
    again = complete(mariadb_server, mariadb_db, with_cli_file(config, queued), offsets, 2)
    assert reads(again.events) == list(range(1, 301))


def test_composite_and_text_keys_and_a_surrogate_key(mariadb_server, mariadb_db):
    """Chunks of a two-column key (an integer and a case-insensitive text column: the server's order and
    equality) under concurrent updates, deletes and case-only key changes; a table without a primary key
    read by its surrogate-key."""
    db = mariadb_db
    mariadb_server.execute(
        "CREATE TABLE dbz_signal (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, data VARCHAR(2048)); "
        "CREATE TABLE done (id INT PRIMARY KEY); "
        "CREATE TABLE pairs (a INT, b VARCHAR(20) COLLATE utf8mb4_general_ci, v INT, PRIMARY KEY (a, b)); "
        "INSERT INTO pairs SELECT seq DIV 10, CONCAT(IF(seq % 2, 'k', 'K'), seq % 10, ' x'), seq FROM seq_0_to_1999; "
        "CREATE TABLE nokey (code INT NOT NULL, v VARCHAR(10)); "
        "INSERT INTO nokey SELECT seq, CONCAT('v', seq) FROM seq_1_to_450", db)
    run = Run(validate_connector(props(mariadb_server, db, **{"incremental.snapshot.chunk.size": "150"})))

    def changes(stop: threading.Event) -> None:
        import random
        rnd = random.Random(3)
        conn = connect(mariadb_server, db)
        with conn.cursor() as cur:
            while not stop.is_set():
                a, i = rnd.randint(0, 199), rnd.randint(0, 9)
                b = f"{'k' if i % 2 else 'K'}{i} x"
                op = rnd.random()
                if op < 0.6:
                    cur.execute("UPDATE pairs SET v = v + 1 WHERE a = %s AND b = %s", (a, b.upper()))
                elif op < 0.8:
                    cur.execute("DELETE FROM pairs WHERE a = %s AND b = %s", (a, b))
                else:  # the same key as the server compares it, other letters
                    cur.execute("UPDATE pairs SET b = %s WHERE a = %s AND b = %s", (b.swapcase(), a, b))
                time.sleep(0.002)
        conn.close()

    try:
        started(run)
        support.keyed_snapshots(run, lambda *a: signal(mariadb_server, db, *a), f"{db}.pairs", f"{db}.nokey", changes,
                                lambda: finish(mariadb_server, db, run, 1))
    finally:
        run.stop()
    state: dict[tuple, Any] = {}
    for e in run.events:
        v = value(e)
        if not v or v.get("source", {}).get("table") != "pairs":
            continue
        if v["op"] in ("d", "u"):
            state.pop((v["before"]["a"], v["before"]["b"].lower()), None)
        if v["op"] != "d":
            state[(v["after"]["a"], v["after"]["b"].lower())] = (v["after"]["b"], v["after"]["v"])
    table = {(int(str(a)), str(b).lower()): (b, int(str(v)))
             for a, b, v in mariadb_server.query("SELECT a, b, v FROM pairs", db)}
    assert state == table
    assert len(reads_of(run.events, "pairs")) > 1000
    got = [value(e)["after"]["code"] for e in reads_of(run.events, "nokey")]
    assert got == list(range(1, 451))


def test_blocking_snapshots_during_a_live_workload(mariadb_server, mariadb_db):
    """`type: blocking`: streaming pauses for one batch that reads the tables as the initial snapshot does
    (a full SELECT from additional-conditions replaces a table's), then resumes where it paused; rows
    changed meanwhile may come twice (as Debezium says), so the check is the replayed state."""
    rows = 3000
    db = mariadb_db
    run = Run(small(mariadb_server, db, rows))
    try:
        started(run)
        read = support.blocking_during_workload(run, lambda *a: signal(mariadb_server, db, *a), f"{db}.items", rows,
                                                lambda: start_workload(mariadb_server, db, rows),
                                                lambda n: mariadb_server.execute(f"INSERT INTO done VALUES ({n})", db))
    finally:
        run.stop()
    assert all(value(e)["source"]["file"].startswith("binlog.") and value(e)["source"]["pos"] > 0 for e in read)
    assert replay(run.events, "items") == table_state(mariadb_server, db)


def test_the_rows_source_and_the_notifications(mariadb_server, mariadb_db):
    """An incremental snapshot's rows carry the `source` of the event that closed their window (the close
    watermark's row: server_id, gtid, file, pos, row, thread), `snapshot: incremental`, no query; the sink
    channel's records say STARTED, TABLE_SCAN_COMPLETED per table (EMPTY, SUCCEEDED), IN_PROGRESS per chunk
    and COMPLETED with Debezium's additional data, after the initial (schema) snapshot's."""
    db = mariadb_db
    mariadb_server.execute("CREATE TABLE empty_one (id INT PRIMARY KEY)", db)
    run = Run(small(mariadb_server, db, 450, **{"notification.enabled.channels": "sink",
                                                 "notification.sink.topic.name": "s.notifications",
                                                 "headwater.incremental.snapshot.batch.rows": "200"}))  # (as Debezium)
    try:
        started(run)
        signal(mariadb_server, db, "execute-snapshot", {"data-collections": [f"{db}.items", f"{db}.empty_one"]},
               "s1")
        finish(mariadb_server, db, run, 1)
    finally:
        run.stop()
    closes = {value(e)["after"]["id"].removesuffix("-close"): value(e)["source"] for e in run.events
              if value(e).get("op") == "c" and value(e)["source"]["table"] == "dbz_signal"
              and value(e)["after"]["type"] == "snapshot-window-close"}
    assert len(closes) == 4  # (the last window finds no rows: the table is done)
    fields = ("server_id", "gtid", "file", "pos", "row", "thread")
    by_close = {tuple(s[f] for f in fields): s for s in closes.values()}
    chunks: dict[tuple, list[int]] = {}
    for e in reads_of(run.events, "items"):
        src = value(e)["source"]
        assert src["snapshot"] == "incremental" and src["query"] is None and src["db"] == db
        assert src["connector"] == "mariadb" and src["name"] == "s" and src["table"] == "items"
        chunks.setdefault(tuple(src[f] for f in fields), []).append(value(e)["after"]["id"])
    assert len(chunks) == 3 and set(chunks) <= set(by_close)  # each chunk's rows: its close watermark's position
    assert sorted(len(ids) for ids in chunks.values()) == [50, 200, 200]
    assert all(src["gtid"].startswith("0-1-") and src["server_id"] == 1 and src["row"] == 0 for src in by_close.values())
    notes = [value(e) for e in run.events if e.topic == "s.notifications"]
    initial = [n["type"] for n in notes if n["aggregate_type"] == "Initial Snapshot"]
    assert initial[0] == "STARTED" and initial[-1] == "COMPLETED"  # (the schema snapshot of no_data)
    notes = [n for n in notes if n["aggregate_type"] == "Incremental Snapshot"]
    got = [(n["type"], n["additional_data"].get("status")) for n in notes]
    assert got == [("STARTED", None), ("TABLE_SCAN_COMPLETED", "EMPTY"), ("IN_PROGRESS", None),
                   ("IN_PROGRESS", None), ("IN_PROGRESS", None), ("TABLE_SCAN_COMPLETED", "SUCCEEDED"),
                   ("COMPLETED", None)]
    assert all(n["id"] == "s1" for n in notes)
    tables = f"{db}.empty_one,{db}.items"
    assert notes[0]["additional_data"] == {"connector_name": "s", "data_collections": tables}
    assert notes[1]["additional_data"] == {"connector_name": "s", "data_collections": tables,
                                           "scanned_collection": f"{db}.empty_one", "total_rows_scanned": "0",
                                           "status": "EMPTY"}
    assert notes[4]["additional_data"] == {"connector_name": "s", "current_collection_in_progress": f"{db}.items",
                                           "data_collections": f"{db}.items", "last_processed_key": "450",
                                           "maximum_key": "450"}
    assert notes[-2]["additional_data"]["total_rows_scanned"] == "450"


def test_a_composite_keys_chunk_is_read_by_a_range_of_the_key(mariadb_server, mariadb_db):
    """The chunk's bounds spelt column by column: MariaDB reads a range of the primary key, where a row
    comparison `(a, b) > (x, y)` scans the key from its start."""
    from headwater.connectors.binlog.snapshot import DIALECT
    from headwater.connectors.common.snapshot import ChunkKey, key_between

    mariadb_server.execute("CREATE TABLE p (a INT, b VARCHAR(20), v INT, PRIMARY KEY (a, b)); "
                           "INSERT INTO p SELECT seq DIV 10, CONCAT('k', seq % 10), seq FROM seq_0_to_19999; "
                           "ANALYZE TABLE p", mariadb_db)
    where, params = key_between(ChunkKey(("a", "b"), (False, False)), DIALECT, ["1000", "k3"], ["1999", "k9"])
    conn = connect(mariadb_server, mariadb_db)
    with conn.cursor() as cur:
        cur.execute(f"EXPLAIN SELECT * FROM p WHERE {where} ORDER BY a, b LIMIT 100", params)
        plan = cur.fetchone()
        cur.execute(f"SELECT a, b FROM p WHERE {where} ORDER BY a, b LIMIT 3", params)
        first = cur.fetchall()
    conn.close()
    assert plan[3] == "range" and plan[5] == "PRIMARY"
    assert first == ((1000, "k4"), (1000, "k5"), (1000, "k6"))
