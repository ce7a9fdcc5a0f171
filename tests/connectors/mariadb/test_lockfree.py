"""The lock-free parallel snapshot (connectors/binlog/lockfree.py) through the engine on a real MariaDB.

Writers run small transactions of inserts, updates, deletes and key changes on the same keys while the
engine snapshots the table in key chunks (several batches of chunks) and then streams. Replaying the
events in order onto an empty state must meet every row as its before-image says (nothing lost or
doubled: a snapshot row for a key already held, a create of a held key, a delete or update of a row
that differs, all fail) and end equal to the table. A crash mid-snapshot resumes from the stored
chunk progress without reading the chunks done before again, and ends equal to the table.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from headwater.connectors.binlog import lockfree
from headwater.connectors.binlog.positions import split_pos
from headwater.connectors.common import snapshot
from headwater.connectors.common.chunkprogress import Progress
from headwater.connectors.errors import SourceError
from headwater.connectors.registry import create_source, validate_connector
from headwater.devservers.mariadb import MariaDBServer
from headwater.engine import Engine, OffsetFile
from headwater.engine.startup import open_connector
from tests.connectors.common.test_chunkmerge_mariadb import KEYS, writer
from tests.events_support import json_rows


def properties(server: MariaDBServer, db: str, **extra: str) -> dict[str, Any]:
    return {"connector.class": "mariadb", **server.connector_properties(db), "database.server.id": "5403",
            "topic.prefix": "lf", "include.schema.changes": "false", "headwater.snapshot.chunk.rows": "12",
            "headwater.max.batch.events": "36", **{k.replace("__", "."): v for k, v in extra.items()}}


def write_while_chunk_is_read(monkeypatch: Any, server: MariaDBServer, db: str, sql: str, index: int = 4) -> None:
    """Run `sql` when chunk `index` is about to be read (after its batch's low was read, before its SELECT)."""
    fetch = lockfree.LockFreeChunk._fetch

    def writing(self: lockfree.LockFreeChunk) -> Any:
        if self.index == index:
            server.execute(sql, db)
        return fetch(self)
    monkeypatch.setattr(lockfree.LockFreeChunk, "_fetch", writing)


def writes_in_every_window(monkeypatch: Any) -> None:
    """Each key-range chunk's SELECT waits (up to 10 s) until the binlog has moved past its low: the
    concurrent writers' changes land in its window however fast the snapshot reads (with chunks read
    ahead, a small table's snapshot may otherwise end before the writers got going)."""
    fetch = lockfree.LockFreeChunk._fetch

    def waiting(self: lockfree.LockFreeChunk) -> Any:
        if self.order is not None:
            conn = lockfree.connect(self.params)
            try:
                with conn.cursor() as cur:
                    deadline = time.monotonic() + 10
                    while lockfree.master_position(cur) <= self.low and time.monotonic() < deadline:
                        time.sleep(0.005)
            finally:
                conn.close()
        return fetch(self)
    monkeypatch.setattr(lockfree.LockFreeChunk, "_fetch", waiting)


class Replay:
    """The table as a consumer rebuilds it from the events; `strict` checks each event against it."""

    def __init__(self, strict: bool = True):
        self.strict = strict
        self.rows: dict[int, str] = {}
        self.snapshot_keys: list[int] = []
        self.ops: dict[str, int] = {}

    def apply(self, event: Any) -> None:
        value = event.value_json()
        if value is None or not event.topic.endswith(".t"):
            return  # a tombstone, or another table
        op, before, after = value["op"], value["before"], value["after"]
        self.ops[op] = self.ops.get(op, 0) + 1
        if op == "r":
            self.snapshot_keys.append(after["id"])
        if self.strict:
            if op in ("r", "c"):
                assert after["id"] not in self.rows, f"{op} of key {after['id']}, which the consumer holds"
            elif op in ("u", "d"):
                assert self.rows.get(before["id"]) == before["v"], f"{op} of {before} meets {self.rows.get(before['id'])}"
        if before is not None:
            self.rows.pop(before["id"], None)
        if after is not None:
            self.rows[after["id"]] = after["v"]


def table_rows(server: MariaDBServer, db: str) -> dict[int, str]:
    return {int(str(k)): str(v) for k, v in server.query("SELECT id, v FROM t", db)}


@pytest.fixture
def tables(mariadb_server, mariadb_db):
    mariadb_server.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL)", mariadb_db)
    mariadb_server.execute("INSERT INTO t VALUES " + ",".join(f"({k}, 'init{k}')" for k in range(0, KEYS, 2)),
                           mariadb_db)
    mariadb_server.execute("CREATE TABLE k (v VARCHAR(10))", mariadb_db)  # no key: one exact chunk
    mariadb_server.execute("INSERT INTO k VALUES ('a'), ('a'), ('b')", mariadb_db)
    return mariadb_db


@pytest.fixture
def folded(monkeypatch):
    """How many binlog changes the chunks' windows held (the merges had work to do when > 0)."""
    count = [0]
    read = lockfree.read_window

    def counting(*args: Any) -> Any:
        changes = read(*args)
        count[0] += len(changes)
        return changes
    monkeypatch.setattr(lockfree, "read_window", counting)
    return count


class Writers:
    """Two writers on `t` while the block runs."""

    def __init__(self, server: MariaDBServer, db: str):
        self.params = server.connection_params(db)
        self.stop = threading.Event()
        self.pool = ThreadPoolExecutor(2)

    def __enter__(self) -> Writers:
        self.runs = [self.pool.submit(writer, self.params, self.stop, seed) for seed in (3, 4)]
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.transactions = sum(run.result() for run in self.runs)
        self.pool.shutdown()


def test_lock_free_snapshot_under_concurrent_writes_through_the_engine(mariadb_server, tables, folded, monkeypatch,
                                                                     tmp_path):
    writes_in_every_window(monkeypatch)
    replay = Replay()
    keyless: list[str] = []
    engine = Engine(validate_connector(properties(mariadb_server, tables)), OffsetFile(tmp_path / "o.json"))
    try:
        with Writers(mariadb_server, tables) as writers:
            for event in engine.events(once=True):
                replay.apply(event)
                value = event.value_json()
                if value is not None and event.topic.endswith(".k"):
                    keyless.append(value["after"]["v"])
        assert writers.transactions > 5  # writes overlapped the snapshot (it got faster: ~20 on a loaded machine)
        for event in engine.events(once=True):  # what the writers did after the first run's end
            replay.apply(event)
        stored = OffsetFile(tmp_path / "o.json").load()
    finally:
        engine.close()
    assert folded[0] > 0  # the windows held changes
    assert replay.ops["r"] == len(replay.snapshot_keys) > 0 and replay.ops.get("c", 0) > 0
    assert len(set(replay.snapshot_keys)) == len(replay.snapshot_keys)
    assert sorted(keyless) == ["a", "a", "b"]
    assert replay.rows == table_rows(mariadb_server, tables)
    assert stored is not None and stored["snapshot"] == "streaming"


def test_a_crash_mid_snapshot_resumes_chunk_by_chunk(mariadb_server, tables, folded, tmp_path):
    offsets = OffsetFile(tmp_path / "o.json")
    replay = Replay(strict=False)  # the batch in flight at the crash is delivered again
    with Writers(mariadb_server, tables):
        first = Engine(validate_connector(properties(mariadb_server, tables)), offsets)
        batches = first.batches(once=True)
        for _ in range(8):  # the crash: events of some batches delivered, the last one's offset not stored
            for event in json_rows(next(batches)):
                replay.apply(event)
        before_crash = set(replay.snapshot_keys)
        del batches  # abandoned mid-batch: the engine never stores that batch's offset
        first.close()
        stored = offsets.load()
        assert stored is not None and stored["snapshot"] == "chunks"
        done = {tuple(c["lo"] or [None]) for chunks in stored["progress"]["tables"].values() for c in chunks
                if c["high"] is not None}
        assert done  # some chunks were done before the crash
        replay.snapshot_keys = []
        again = Engine(validate_connector(properties(mariadb_server, tables)), offsets)
        try:
            for event in again.events(once=True):
                replay.apply(event)
        finally:
            again.close()
    again = Engine(validate_connector(properties(mariadb_server, tables)), offsets)
    try:
        for event in again.events(once=True):
            replay.apply(event)
    finally:
        again.close()
    # the chunks done before the crash were not read again: the first keys came only before it
    assert before_crash and min(before_crash) not in replay.snapshot_keys
    assert replay.rows == table_rows(mariadb_server, tables)


def test_debeziums_locking_mode_is_taken_when_set(mariadb_server, tables, tmp_path):
    engine = Engine(validate_connector(properties(mariadb_server, tables, snapshot__locking__mode="minimal")),
                    OffsetFile(tmp_path / "o.json"))
    try:
        replay = Replay()
        for event in engine.events(once=True):
            replay.apply(event)
    finally:
        engine.close()
    assert engine.connector.lockfree is None  # type: ignore[attr-defined]
    assert replay.rows == table_rows(mariadb_server, tables)


CHILD = """
import json, sys, time
from headwater.connectors.registry import validate_connector
from headwater.engine import Engine, OffsetFile
props, offsets, out, pause = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], float(sys.argv[4])
engine = Engine(validate_connector(props), OffsetFile(offsets))
with open(out, "a") as f:
    for batch in engine.batches(once=True):
        for e in batch.rows():
            f.write(json.dumps({"topic": e.topic, "value": e.value_json()}) + "\\n")
        f.flush()
        time.sleep(pause)
engine.close()
"""


class Line:
    """An event read back from the child's output, as `Replay` takes it."""

    def __init__(self, data: dict[str, Any]):
        self.topic, self.value = data["topic"], data["value"]

    def value_json(self) -> Any:
        return self.value


def test_kill_9_mid_snapshot_resumes_and_ends_equal_to_the_table(mariadb_server, tables, tmp_path):
    """The engine in a child process, killed with SIGKILL while its lock-free snapshot is half done
    (writers running), then run again from its offset file to the end."""
    props = properties(mariadb_server, tables)
    offsets, out = tmp_path / "o.json", tmp_path / "events.jsonl"

    def child(pause: float) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", CHILD, json.dumps(props), str(offsets), str(out), str(pause)],
                                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})

    with Writers(mariadb_server, tables):
        proc = child(0.3)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            stored = OffsetFile(offsets).load()
            if stored is not None and stored.get("snapshot") == "chunks" and any(
                    c["high"] is not None for chunks in stored["progress"]["tables"].values() for c in chunks):
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        stored = OffsetFile(offsets).load()
        assert stored is not None and stored["snapshot"] == "chunks"  # killed mid-snapshot
        killed_at = len(out.read_text().splitlines())
        assert child(0).wait(timeout=120) == 0
    assert child(0).wait(timeout=120) == 0  # what the writers did after the second run's end
    replay = Replay(strict=False)  # the batch in flight at the kill is delivered again
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    for data in lines:
        replay.apply(Line(data))
    first_keys = [d["value"]["after"]["id"] for d in lines[:killed_at] if d["value"] and d["value"]["op"] == "r"
                  and d["topic"].endswith(".t")]
    again_keys = [d["value"]["after"]["id"] for d in lines[killed_at:] if d["value"] and d["value"]["op"] == "r"
                  and d["topic"].endswith(".t")]
    assert first_keys and again_keys and min(first_keys) not in again_keys  # not started over
    assert replay.rows == table_rows(mariadb_server, tables)


def test_key_changes_across_chunks_are_split_by_the_stream_filter(mariadb_server, mariadb_db, monkeypatch, tmp_path):
    """Two key changes made while the last chunk is read (after the first chunk is done): 100 -> 3 (from
    the last chunk into the first) and 10 -> 101 (the other way). The last chunk's records are its range at
    its batch's low (100, not 101); the stream from the lowest low passes both sides of both changes (each
    after its chunk's low): a delete and a create each, every one meeting the row it changes."""
    mariadb_server.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL)", mariadb_db)
    mariadb_server.execute("INSERT INTO t VALUES " + ",".join(f"({k}, 'init{k}')" for k in range(0, 120, 2)),
                           mariadb_db)
    fetch = lockfree.LockFreeChunk._fetch

    def changing(self: lockfree.LockFreeChunk) -> Any:
        if self.index == 4:
            mariadb_server.execute("UPDATE t SET id = 3 WHERE id = 100; UPDATE t SET id = 101 WHERE id = 10",
                                   mariadb_db)
        return fetch(self)
    monkeypatch.setattr(lockfree.LockFreeChunk, "_fetch", changing)
    replay = Replay()
    engine = Engine(validate_connector(properties(mariadb_server, mariadb_db)), OffsetFile(tmp_path / "o.json"))
    try:
        for event in engine.events(once=True):
            replay.apply(event)
        for event in engine.events(once=True):  # up to the changes (made after the first run's end)
            replay.apply(event)
    finally:
        engine.close()
    assert 100 in replay.snapshot_keys and 101 not in replay.snapshot_keys and 3 not in replay.snapshot_keys
    assert replay.ops == {"r": 60, "c": 2, "d": 2}
    assert replay.rows == table_rows(mariadb_server, mariadb_db)


def test_a_window_across_a_binlog_rotation(mariadb_server, mariadb_db, monkeypatch, tmp_path):
    """A change and a FLUSH BINARY LOGS while the last chunk is read: its window runs into the next
    binlog file and ends at the new file's first events, with no transaction after them."""
    mariadb_server.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL)", mariadb_db)
    mariadb_server.execute("INSERT INTO t VALUES " + ",".join(f"({k}, 'init{k}')" for k in range(0, 120, 2)),
                           mariadb_db)
    write_while_chunk_is_read(monkeypatch, mariadb_server, mariadb_db,
                              "UPDATE t SET v = 'changed' WHERE id = 100; DELETE FROM t WHERE id = 102; FLUSH BINARY LOGS")
    replay = Replay()
    engine = Engine(validate_connector(properties(mariadb_server, mariadb_db)), OffsetFile(tmp_path / "o.json"))
    try:
        for _ in range(2):
            for event in engine.events(once=True):
                replay.apply(event)
    finally:
        engine.close()
    assert replay.ops == {"r": 60, "u": 1, "d": 1}  # the records are the chunk at its low; the window's changes streamed
    assert replay.rows == table_rows(mariadb_server, mariadb_db) and replay.rows[100] == "changed"


def _read_all(units: list[Any]) -> list[tuple[str, Any]]:
    """The units' events as (topic, value), without the envelope's `ts_*` (the time they were read)."""
    return [(e.topic, {k: v for k, v in (e.value_json() or {}).items() if not k.startswith("ts_")})
            for u in units for batch in u.read() for e in json_rows(batch)]


@pytest.mark.parametrize("which", ["first", "second"])
def test_a_chunk_batch_planned_before_a_restart_is_planned_again_after_it(mariadb_server, tables, tmp_path, which):
    """Spark's restart: a chunk batch's offset was stored (planned) and the process died before it was
    committed; a new process plans that batch again from the offsets alone (its start `pending` for the
    first batch: nothing was opened at the snapshot's position) and reads the same records, the
    snapshot's schema change records included."""
    config = validate_connector(properties(mariadb_server, tables, include__schema__changes="true",
                                           headwater__schema__history__file=str(tmp_path / "history.jsonl")))
    first = create_source(config)
    try:
        start = first.initial_offset()
        open_connector(first, start)
        end = first.latest_offset(start, None)
        if which == "second":
            _read_all(first.plan(start, end))
            start, end = end, first.latest_offset(end, None)
        assert end["snapshot"] == "chunks" and end["batch"]
        expected = _read_all(first.plan(start, end))
    finally:
        first.close()
    again = create_source(config)
    try:
        open_connector(again, start)
        got = _read_all(again.plan(start, end))
    finally:
        again.close()
    assert got == expected
    schema_records = [v for topic, v in got if topic == "lf"]
    assert (len(schema_records) > 0) == (which == "first")


def test_a_partial_row_image_in_a_chunks_window_is_refused(mariadb_server, mariadb_db, monkeypatch, tmp_path):
    """A session's MINIMAL image written while a chunk is read: the chunk's window refuses it (its merge
    would otherwise fold NULLs for the columns it lacks into the snapshot's records)."""
    mariadb_server.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL)", mariadb_db)
    mariadb_server.execute("INSERT INTO t VALUES " + ",".join(f"({k}, 'init{k}')" for k in range(0, 120, 2)),
                           mariadb_db)
    write_while_chunk_is_read(monkeypatch, mariadb_server, mariadb_db,
                              "SET SESSION binlog_row_image = MINIMAL; UPDATE t SET v = 'm' WHERE id = 100")
    engine = Engine(validate_connector(properties(mariadb_server, mariadb_db)), OffsetFile(tmp_path / "o.json"))
    try:
        with pytest.raises(SourceError, match=r"partial row image \(without id, v\).*binlog_row_image=FULL"):
            for _ in engine.events(once=True):
                pass
    finally:
        engine.close()


@pytest.mark.parametrize("set_note", [False, True])
def test_noblob_changes_in_a_chunks_window_keep_the_blob_and_text_values_the_key_held(mariadb_server, mariadb_db,
                                                                                      monkeypatch, tmp_path, set_note):
    """NOBLOB images in a chunk's window (a session's; a before image lacks every TEXT column, an after image
    those the change did not set). The roll-back fills the column from the row's life after the change: the
    SELECT's row of the key the row ends under (100's; 104's from 101, where it moved to), so the chunk's `r`
    events carry the table's values at its batch's low (101 and 103 were not there yet). When a change sets
    the column (102's note), its value at low is in no image: the chunk is merged forward as before, to the
    window's end (the stream replays the window's changes onto it from the low), the column taken from the
    row the key held before each change (the SELECT's, or an earlier change's)."""
    mariadb_server.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL, note TEXT)", mariadb_db)
    mariadb_server.execute("INSERT INTO t VALUES " + ",".join(f"({k}, 'init{k}', 'n{k}')" for k in range(0, 120, 2)),
                           mariadb_db)
    write_while_chunk_is_read(monkeypatch, mariadb_server, mariadb_db,
                              "SET SESSION binlog_row_image = NOBLOB; UPDATE t SET v = 'x' WHERE id = 100; "
                              + ("UPDATE t SET note = 'changed' WHERE id = 102; " if set_note else "")
                              + "UPDATE t SET v = 'y' WHERE id = 102; "
                              "UPDATE t SET id = 101 WHERE id = 104; INSERT INTO t (id, v) VALUES (103, 'new')")
    engine = Engine(validate_connector(properties(mariadb_server, mariadb_db)), OffsetFile(tmp_path / "o.json"))
    try:
        reads = {}
        for e in engine.events(once=True):
            value = e.value_json()
            if value is not None and value.get("op") == "r":
                reads[value["after"]["id"]] = (value["after"]["v"], value["after"]["note"])
    finally:
        engine.close()
    if set_note:
        assert reads[100] == ("x", "n100")
        assert reads[102] == ("y", "changed")
        assert reads[101] == ("init104", "n104") and 104 not in reads
        assert reads[103] == ("new", None)
    else:
        assert reads[100] == ("init100", "n100")
        assert reads[102] == ("init102", "n102")
        assert reads[104] == ("init104", "n104") and 101 not in reads and 103 not in reads
    assert reads[98] == ("init98", "n98")


@pytest.mark.parametrize(("first_chunk_rows", "dense_fill", "expected"), [(None, 2, 17), (4, 2, 18), (None, 0, 9),
                                                                       (4, 0, 10)])
def test_chunk_batches_under_concurrent_writes(mariadb_server, tables, folded, monkeypatch, tmp_path,
                                               first_chunk_rows, dense_fill, expected):
    """Every chunk's window holds the writers' changes, and the events still replay to the table; also
    when the first batch's chunks are smaller than the others (`FIRST_CHUNK_ROWS`; the default is above
    this table's chunk size), and with t's key cut by the boundary queries (`DENSE_FILL` 0) as by
    arithmetic (the default: its keys fill half their span)."""
    if first_chunk_rows is not None:
        monkeypatch.setattr(lockfree, "FIRST_CHUNK_ROWS", first_chunk_rows)
    monkeypatch.setattr(snapshot, "DENSE_FILL", dense_fill)
    ranges: list[int] = []
    cut = lockfree.key_ranges

    def counting(*args: Any, **kwargs: Any) -> Any:
        got = cut(*args, **kwargs)
        ranges.append(len(got))
        return got
    monkeypatch.setattr(lockfree, "key_ranges", counting)
    writes_in_every_window(monkeypatch)
    replay = Replay()
    engine = Engine(validate_connector(properties(mariadb_server, tables)), OffsetFile(tmp_path / "o.json"))
    try:
        with Writers(mariadb_server, tables) as writers:
            for event in engine.events(once=True):
                replay.apply(event)
        assert writers.transactions > 5
        for event in engine.events(once=True):
            replay.apply(event)
    finally:
        engine.close()
    assert folded[0] > 0
    assert len(set(replay.snapshot_keys)) == len(replay.snapshot_keys)
    assert replay.rows == table_rows(mariadb_server, tables)
    # by the boundary queries, t's 100 rows in chunks of 12: 9 ranges; the first batch is k's one chunk (k
    # comes first) and t's first two, which with FIRST_CHUNK_ROWS = 4 hold 4 rows each: 2 + 8 ranges. By
    # arithmetic, a range every 12 key values from 0 to 198: 17 ranges; with the first two every 4: 18
    assert ranges == [expected]


def test_a_chunk_batch_gives_the_table_at_its_low_and_the_same_events_when_run_again(mariadb_server, mariadb_db,
                                                                                     monkeypatch):
    """Inserts, updates (two on one key), a delete and key changes into, out of and within chunk 1's range
    while it is read (after the batch's low): the batch's `r` events are the table as it stood at the low,
    at that position; the batch run again after more changes (chunk 0's window now holds a key change of
    its own) gives the same events."""
    mariadb_server.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(40) NOT NULL)", mariadb_db)
    mariadb_server.execute("INSERT INTO t VALUES " + ",".join(f"({k}, 'init{k}')" for k in range(0, 120, 2)),
                           mariadb_db)
    writes = ["UPDATE t SET v = 'a' WHERE id = 24; UPDATE t SET v = 'b' WHERE id = 24; DELETE FROM t WHERE id = 26; "
              "INSERT INTO t VALUES (25, 'new'); UPDATE t SET id = 27 WHERE id = 2; UPDATE t SET id = 119 WHERE id = 28; "
              "UPDATE t SET id = 29 WHERE id = 30; UPDATE t SET v = 'c' WHERE id = 29",
              "UPDATE t SET id = 1 WHERE id = 4; DELETE FROM t WHERE id = 32; UPDATE t SET v = 'd' WHERE id = 50"]
    fetch = lockfree.LockFreeChunk._fetch

    def writing(self: lockfree.LockFreeChunk) -> Any:
        if self.index == 1 and writes:
            mariadb_server.execute(writes.pop(0), mariadb_db)
        return fetch(self)
    monkeypatch.setattr(lockfree.LockFreeChunk, "_fetch", writing)
    source = create_source(validate_connector(properties(mariadb_server, mariadb_db)))
    try:
        start = source.initial_offset()
        open_connector(source, start)
        end = source.latest_offset(start, None)
        at_low = table_rows(mariadb_server, mariadb_db)
        first = _read_all(source.plan(start, end))
        assert len(writes) == 1
        again = _read_all(source.plan(start, end))
        assert not writes
    finally:
        source.close()
    assert again == first
    spans = Progress.from_json(end["progress"]).tables[f"{mariadb_db}.t"]
    batch = [spans[i].span for _, i in end["batch"]]
    read = {v["after"]["id"]: v["after"]["v"] for _, v in first if v.get("op") == "r"}
    assert read == {k: v for k, v in at_low.items()
                    if any((s.lo is None or s.lo[0] <= k) and (s.hi is None or k < s.hi[0]) for s in batch)}
    assert {(v["source"]["file"], v["source"]["pos"]) for _, v in first if v.get("op") == "r"} == \
        {split_pos(end["file"], end["low"])}
    assert read[24] == "init24" and read[26] == "init26" and read[28] == "init28" and 25 not in read


def test_a_keyless_table_written_while_it_is_read_gives_the_table_at_the_batchs_low(mariadb_server, mariadb_db,
                                                                                    monkeypatch, tmp_path):
    """A table without a key is one chunk read in a consistent snapshot at P, after the batch's low: changes
    made in between (a delete of one of two equal rows, an insert, an update) are undone on its rows as a
    multiset, so its `r` events are the table at the low; the stream then gives the changes once."""
    mariadb_server.execute("CREATE TABLE k (v VARCHAR(10), n INT)", mariadb_db)
    mariadb_server.execute("INSERT INTO k VALUES ('a', 1), ('a', 1), ('b', 2), (NULL, 3)", mariadb_db)
    write_while_chunk_is_read(monkeypatch, mariadb_server, mariadb_db,
                              "DELETE FROM k WHERE v = 'a' LIMIT 1; INSERT INTO k VALUES ('c', 4); "
                              "UPDATE k SET v = 'x' WHERE v = 'b'; UPDATE k SET n = 5 WHERE v IS NULL", index=0)
    engine = Engine(validate_connector(properties(mariadb_server, mariadb_db)), OffsetFile(tmp_path / "o.json"))
    ops: list[tuple[str, Any, Any]] = []
    try:
        for _ in range(2):
            for e in engine.events(once=True):
                value = e.value_json()
                if value is not None and "op" in value:
                    ops.append((value["op"], value["before"], value["after"]))
    finally:
        engine.close()
    reads = sorted((a["v"] or "", a["n"]) for op, _, a in ops if op == "r")
    assert reads == [("", 3), ("a", 1), ("a", 1), ("b", 2)]
    assert sorted(op for op, _, _ in ops if op != "r") == ["c", "d", "u", "u"]
