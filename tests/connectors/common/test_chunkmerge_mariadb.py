"""The lock-free parallel snapshot's core (common/chunkmerge.py, common/chunkprogress.py) on a real MariaDB:
while a writer runs small transactions of inserts, updates, deletes and key changes on the same keys,
the table is cut by `key_ranges` and its chunks are read in parallel, without a lock, each by a plain
SELECT between its low position (MariaDB's `binlog_snapshot_position` of a consistent snapshot taken
just before) and its high one (SHOW MASTER STATUS after), merged with the binlog of its window. Then the
binlog from the stream start, through the filter, replayed on the chunks' records must meet every row
as its before-image says and end equal to the table. The binlog is read here with python-mysql-replication
(a test's reader: the connector has its own). And a case-insensitive text key, cut by the server's
collation: Python's order misplaces rows, the collation's does not."""

from __future__ import annotations

import itertools
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import RotateEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from headwater.connectors.common.chunkmerge import Bounds, Change, ChunkMergeError, merge_chunk, null_first
from headwater.connectors.common.chunkprogress import Progress, StreamFilter
from headwater.connectors.common.snapshot import ChunkKey, KeyDialect, KeyRange, key_ranges

KEYS = 200
DEADLOCK, LOCK_WAIT_TIMEOUT = 1213, 1205
Row = tuple[int, str]
Position = dict[str, Any]
_server_ids = itertools.count(4000)


class MariaDialect(KeyDialect):
    """MariaDB's spelling: backquotes; ascending order puts NULL first already."""

    def quote(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def nulls_first(self, column: str) -> str:
        return column


def binlog_order(p: Position) -> tuple[int, int]:
    return int(p["file"].rpartition(".")[2]), p["pos"]


def master_position(cur: Any) -> Position:
    cur.execute("SHOW MASTER STATUS")
    file, pos = cur.fetchone()[:2]
    return {"file": file, "pos": int(pos)}


def writer(params: dict[str, Any], stop: threading.Event, seed: int) -> int:
    """Small random transactions on keys 0..KEYS-1 until `stop`; the number of transactions."""
    rnd = random.Random(seed)
    conn = pymysql.connect(**params, autocommit=False)
    n = 0
    with conn.cursor() as cur:
        while not stop.is_set():
            try:
                for _ in range(rnd.randint(1, 3)):
                    k, other, v = rnd.randrange(KEYS), rnd.randrange(KEYS), f"w{n}.{rnd.randrange(1000)}"
                    op = rnd.choice(["insert", "update", "delete", "key change"])
                    if op == "insert":
                        cur.execute("INSERT IGNORE INTO t VALUES (%s, %s)", (k, v))
                    elif op == "update":
                        cur.execute("UPDATE t SET v = %s WHERE id = %s", (v, k))
                    elif op == "delete":
                        cur.execute("DELETE FROM t WHERE id = %s", (k,))
                    else:
                        cur.execute("UPDATE IGNORE t SET id = %s WHERE id = %s", (other, k))
                conn.commit()
                n += 1
            except pymysql.err.OperationalError as e:
                if e.args[0] not in (DEADLOCK, LOCK_WAIT_TIMEOUT):
                    raise
                conn.rollback()  # the other writer won: an aborted transaction is in no binlog
            time.sleep(0.002)
    conn.close()
    return n


def read_chunk(params: dict[str, Any], span: KeyRange) -> tuple[Position, list[Row], Position]:
    """A chunk's SELECT, without a lock, between its low and high positions."""
    conn = pymysql.connect(**params, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
        status = {name.lower(): value for name, value in cur.fetchall()}
        cur.execute("COMMIT")
        low = {"file": status["binlog_snapshot_file"], "pos": int(status["binlog_snapshot_position"])}
        time.sleep(0.02)  # let changes land between low and the SELECT's view, and after it
        cur.execute(*span.select("t", ["id", "v"], ChunkKey(("id",), (False,)), MariaDialect()))
        rows = [tuple(r) for r in cur.fetchall()]
        time.sleep(0.02)
        high = master_position(cur)
    conn.close()
    return low, rows, high  # type: ignore[return-value]


def log_changes(params: dict[str, Any], db: str, start: Position, end: Position) -> list[Change[Row]]:
    """The row changes of `db`.t in (start, end], each at its transaction's commit end position. The read
    blocks until `end`: SHOW MASTER STATUS may name a position a moment before a replica can read it,
    and a non-blocking dump would stop short of it. (The test's binlog stays in one file.)"""
    assert start["file"] == end["file"]
    if start["pos"] == end["pos"]:
        return []
    stream = BinLogStreamReader(connection_settings=params, server_id=next(_server_ids),
                                log_file=start["file"], log_pos=start["pos"], resume_stream=True, blocking=True,
                                end_log_pos=end["pos"],
                                only_events=[RotateEvent, XidEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
    changes: list[Change[Row]] = []
    pending: list[tuple[Row | None, Row | None]] = []
    file = start["file"]
    try:
        for event in stream:
            if isinstance(event, RotateEvent):
                file = event.next_binlog
            elif isinstance(event, XidEvent):
                commit = {"file": file, "pos": event.packet.log_pos}
                if binlog_order(commit) > binlog_order(end):
                    break
                changes += [Change(commit, b, a) for b, a in pending]
                pending = []
            elif event.schema == db and event.table == "t":
                for r in event.rows:
                    if isinstance(event, WriteRowsEvent):
                        pending.append((None, tuple(r["values"].values())))
                    elif isinstance(event, DeleteRowsEvent):
                        pending.append((tuple(r["values"].values()), None))
                    else:
                        pending.append((tuple(r["before_values"].values()), tuple(r["after_values"].values())))
    finally:
        stream.close()
    return changes


def snapshot(cur: Any, params: dict[str, Any], db: str) -> tuple[list[KeyRange], Progress, list[Row], int]:
    """The chunks, read in parallel and merged: their ranges, the progress, the records and how many
    changes the windows held."""
    time.sleep(0.2)
    spans = key_ranges(cur, MariaDialect(), "t", ChunkKey(("id",), (False,)), chunk_rows=12)
    assert len(spans) >= 6
    progress = Progress({"db.t": spans}, binlog_order)
    records: list[Row] = []
    folded = 0
    with ThreadPoolExecutor(3) as executors:
        reads = list(executors.map(lambda span: read_chunk(params, span), spans))
    for i, (span, (low, rows, high)) in enumerate(zip(spans, reads, strict=True)):
        window = log_changes(params, db, low, high)
        folded += len(window)
        records += merge_chunk(rows, window, span, low=low, high=high, row_key=lambda r: (r[0],),
                               position=binlog_order)
        progress.finish("db.t", i, low, high)
    time.sleep(0.2)
    return spans, progress, records, folded


def test_lock_free_parallel_snapshot_under_concurrent_changes(mariadb_server, mariadb_db):
    params = mariadb_server.connection_params(mariadb_db)
    conn = pymysql.connect(**params, autocommit=True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL)")
    cur.executemany("INSERT INTO t VALUES (%s, %s)", [(k, f"init{k}") for k in range(0, KEYS, 2)])

    stop = threading.Event()
    with ThreadPoolExecutor(2) as writers:
        runs = [writers.submit(writer, params, stop, seed) for seed in (1, 2)]
        try:
            spans, progress, records, folded = snapshot(cur, params, mariadb_db)
        finally:
            stop.set()
        assert all(run.result() > 20 for run in runs)
    assert folded > 0  # the windows held changes: the merge had work to do

    consumer: dict[int, str] = {}
    for k, v in records:
        assert k not in consumer  # no key in two chunks
        consumer[k] = v
    keep = StreamFilter(progress).keep
    passed = 0
    for change in log_changes(params, mariadb_db, progress.stream_start(), master_position(cur)):
        before, after = change.before, change.after
        if before is not None and after is not None and before[0] == after[0]:
            if keep("db.t", (before[0],), change.position):
                assert consumer[before[0]] == before[1]
                consumer[before[0]] = after[1]
                passed += 1
            continue
        if before is not None and keep("db.t", (before[0],), change.position):
            assert consumer.pop(before[0]) == before[1]
            passed += 1
        if after is not None and keep("db.t", (after[0],), change.position):
            assert after[0] not in consumer
            consumer[after[0]] = after[1]
            passed += 1
    assert passed > 0
    cur.execute("SELECT id, v FROM t")
    assert consumer == dict(cur.fetchall())
    conn.close()


def casefolded(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """utf8mb4_general_ci's order and equality for ASCII letters."""
    return tuple(v.casefold() for v in key)


def test_text_keys_need_the_collations_order(mariadb_server, mariadb_db):
    """The server cuts a case-insensitive text key by its collation; Python's own order places some of
    the rows it returns outside their chunk (and the merge says so), the collation's order none."""
    conn = pymysql.connect(**mariadb_server.connection_params(mariadb_db), autocommit=True)
    cur = conn.cursor()
    cur.execute("CREATE TABLE w (name VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY)")
    names = ["apple", "Banana", "cherry", "Date", "egg", "Fig", "grape", "Hazel", "ice", "Juniper"]
    cur.executemany("INSERT INTO w VALUES (%s)", [(n,) for n in names])
    key = ChunkKey(("name",), (False,))
    spans = key_ranges(cur, MariaDialect(), "w", key, chunk_rows=3)
    chunks = []
    for span in spans:
        cur.execute(*span.select("w", ["name"], key, MariaDialect()))
        chunks.append((span, [tuple(r) for r in cur.fetchall()]))
    conn.close()
    assert sorted(r[0] for _, rows in chunks for r in rows) == sorted(names) and len(spans) >= 3

    def misplaced_in(span: KeyRange, rows: list[tuple[Any, ...]], order: Any = null_first) -> list[str]:
        return [r[0] for r in rows if not Bounds(span, order).holds(order(r))]

    def misplaced(order: Any) -> list[str]:
        return [name for span, rows in chunks for name in misplaced_in(span, rows, order)]

    assert misplaced(null_first) and misplaced(casefolded) == []
    # a chunk with rows on both sides of Python's order: a change to one it holds makes the merge compare
    span, rows = next((s, r) for s, r in chunks if 0 < len(misplaced_in(s, r)) < len(r))
    held = next(x for x in rows if x[0] not in misplaced_in(span, rows))
    touch = [Change({"file": "x.1", "pos": 2}, held, held)]
    with pytest.raises(ChunkMergeError, match="collation"):
        merge_chunk(rows, touch, span, low={"file": "x.1", "pos": 1}, high={"file": "x.1", "pos": 3},
                    row_key=lambda r: r, position=binlog_order)
    assert merge_chunk(rows, touch, span, low={"file": "x.1", "pos": 1}, high={"file": "x.1", "pos": 3},
                       row_key=lambda r: r, order=casefolded, position=binlog_order) == rows
