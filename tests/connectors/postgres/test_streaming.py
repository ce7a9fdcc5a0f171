"""Hard streaming cases for the PostgreSQL connector, on a real server.

Huge transactions streamed in progress (pgoutput protocol 2) and spilled to disk with the
driver's memory bounded; aborted streamed transactions and savepoints; the planner cutting
transactions across batches and slices; replays of a planned range in a fresh source (what
Spark does after a crash); DDL, TRUNCATE and logical messages mid-stream.

Most checks are differential: several connectors, each on its own slot created before the
workload, read the same changes in different ways (one big batch and one slice; small batches
cut into several slices; protocol 1 and 2) and must produce the same events, apart from the
fields that carry processing time. `logical_decoding_work_mem` is set to its minimum (64kB) on
the test database, so the server streams any transaction larger than that while it is in progress.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from headwater.connectors.base import Offset, WorkUnit
from headwater.connectors.common import planner
from headwater.connectors.common.txbuffer import Spill
from headwater.connectors.errors import SourceError
from headwater.connectors.postgres.connection import connect_replication
from headwater.connectors.postgres.records import message_collection
from headwater.connectors.postgres.replication import ReplicationReader
from headwater.connectors.postgres.source import PostgresSource
from headwater.connectors.postgres.streaming import StreamSlice
from headwater.connectors.registry import validate_connector
from headwater.devservers.postgres import PostgresServer
from headwater.engine.engine import Engine, OffsetFile
from headwater.events.batch import Event
from tests.events_support import any_run, json_rows


class RecordingSource(PostgresSource):
    """A PostgresSource that remembers the ranges it planned and their work units."""

    live: ClassVar[list[RecordingSource]] = []  # closed after each test, whatever happened

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.plans: list[tuple[Offset, Offset, list[WorkUnit]]] = []
        RecordingSource.live.append(self)

    def plan(self, start: Offset, end: Offset) -> list[WorkUnit]:
        units = super().plan(start, end)
        self.plans.append((start, end, units))
        return units


@pytest.fixture(autouse=True)
def _close_connectors():
    yield
    while RecordingSource.live:
        with contextlib.suppress(Exception):
            RecordingSource.live.pop().close()


def properties(server: PostgresServer, dbname: str, slot: str, **extra: str) -> dict[str, str]:
    return {**server.connector_properties(dbname), "connector.class": "postgres", "topic.prefix": "s",
            "slot.name": slot, "status.update.interval.ms": "1000", **extra}


def make_connector(server: PostgresServer, dbname: str, slot: str, extra: Mapping[str, str] | None = None,
                   parallelism: int = 1) -> RecordingSource:
    return RecordingSource(validate_connector(properties(server, dbname, slot, **(extra or {}))),
                           parallelism=parallelism)


def engine(connector: PostgresSource, offsets: Path | None = None, max_events: int | None = None) -> Engine:
    return Engine(connector.config, OffsetFile(offsets) if offsets is not None else None, max_events=max_events,
                  connector=connector)


def small_work_mem(server: PostgresServer, dbname: str) -> None:
    """Make the server stream (protocol 2) every transaction larger than 64kB while in progress."""
    server.execute(f'ALTER DATABASE "{dbname}" SET logical_decoding_work_mem = \'64kB\'')


def payload(ev: Event) -> Any:
    return json.loads(ev.value) if ev.value is not None else None


def comparable(ev: Event) -> tuple:
    """An event without the fields that carry processing time (a BEGIN/END's ts_ms is the commit time)."""
    value = payload(ev)
    if isinstance(value, dict) and "source" in value:
        for k in ("ts_ms", "ts_us", "ts_ns"):
            value.pop(k, None)
    return ev.topic, ev.key, json.dumps(value, sort_keys=True), ev.op, any_run(ev.headers), ev.commit_version, \
        ev.commit_ts_us


def changes(events: list[Event], table: str | None = None) -> list[tuple[str, str, Any]]:
    """(table, op, id) of change events (no tombstones, transaction events or messages)."""
    out = []
    for ev in events:
        p = payload(ev)
        if not isinstance(p, dict) or "source" not in p or p.get("op") == "m":
            continue
        t = p["source"]["table"]
        if table is not None and t != table:
            continue
        image = p["after"] if p["after"] is not None else p["before"]
        out.append((t, p["op"], image["id"] if image else None))
    return out


def check_transaction_metadata(events: list[Event]) -> int:
    """BEGIN/END pair up; each event's total_order and data_collection_order count up from 1 without
    gaps; END's counts match. Returns the number of transactions."""
    open_id: str | None = None
    total = 0
    per: Counter[str] = Counter()
    n = 0
    for ev in events:
        p = payload(ev)
        if ev.topic.endswith(".transaction"):
            if p["status"] == "BEGIN":
                assert open_id is None, f"BEGIN {p['id']} inside {open_id}"
                open_id, total, per = p["id"], 0, Counter()
            else:
                assert open_id is not None and p["id"].split(":")[0] == open_id.split(":")[0], (p, open_id)
                assert p["event_count"] == total
                assert {d["data_collection"]: d["event_count"] for d in p["data_collections"]} == dict(per)
                open_id = None
                n += 1
            continue
        block = p.get("transaction") if isinstance(p, dict) else None
        if block is None:
            continue
        assert open_id is not None and block["id"].split(":")[0] == open_id.split(":")[0]
        # a logical decoding message is its own data collection
        coll = message_collection(p["source"]["lsn"]) if p["op"] == "m" else f"{p['source']['schema']}.{p['source']['table']}"
        total += 1
        per[coll] += 1
        assert (block["total_order"], block["data_collection_order"]) == (total, per[coll]), (block, total, per)
    assert open_id is None
    return n


def prime(*engines: Engine) -> None:
    """Create each engine's slot (and take its empty snapshot) before the workload."""
    for eng in engines:
        assert list(eng.events(once=True)) == []


def read(eng: Engine) -> list[Event]:
    return list(eng.events(once=True))


class Sampler:
    """Samples this process's RSS and a reader's spill directory size in the background."""

    def __init__(self, connector: PostgresSource):
        self.connector = connector
        self.rss_peak = self.rss_start = self._rss()
        self.spill_peak = 0
        self.spill_files_seen: set[str] = set()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            self.rss_peak = max(self.rss_peak, self._rss())
            reader = self.connector.reader
            if reader is None:
                continue
            size = 0
            with contextlib.suppress(OSError):
                for name in os.listdir(reader.spill_dir):
                    with contextlib.suppress(OSError):
                        size += os.path.getsize(os.path.join(reader.spill_dir, name))
                        self.spill_files_seen.add(name)
            self.spill_peak = max(self.spill_peak, size)

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self.thread.join()


# ---------------------------------------------------------------------------------------------
# huge and aborted streamed transactions


ROWS = 400_000  # events ~200 MB: well above what a batch of 20,000 holds (RSS ~60 MB)


def test_huge_transaction_spills_with_bounded_memory(pg_server, pg_db, tmp_path):
    small_work_mem(pg_server, pg_db)
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", pg_db)
    limit = 1 << 20
    connector = make_connector(pg_server, pg_db, "huge", {"headwater.stream.buffer.bytes": str(limit)})
    eng = engine(connector, tmp_path / "offsets.json", max_events=20_000)
    prime(eng)
    pg_server.execute(f"INSERT INTO t SELECT g, md5(g::text) FROM generate_series(1, {ROWS}) g", pg_db)
    pc.add(pa.array([1]), 1)  # the first Arrow compute call imports pandas (~45 MB, once per process)
    gc.collect()
    expected, batches, bad, event_bytes = 1, 0, [], 0
    started = time.monotonic()
    with Sampler(connector) as sampler:
        for batch in eng.batches(once=True):
            batches += 1
            for ev in json_rows(batch):
                assert ev.value is not None and ev.key is not None
                event_bytes += len(ev.value) + len(ev.key)
                p = payload(ev)
                if p["op"] != "c" or p["after"]["id"] != expected:
                    bad.append((p["op"], p["after"]))
                expected += 1
    elapsed = time.monotonic() - started
    reader = connector.reader
    eng.close()
    assert reader is not None
    assert not bad[:5] and expected == ROWS + 1
    assert batches >= ROWS // 20_000
    assert reader.spill_files == 1 and sampler.spill_files_seen  # streamed by the server, spilled here
    assert reader.spilled_bytes > ROWS * 40
    assert reader.buffer.peak_nbytes <= limit  # nothing of the streamed transaction sat in memory
    growth = sampler.rss_peak - sampler.rss_start
    print(f"\n{ROWS} rows in one transaction: {elapsed:.1f}s, {batches} batches, spill file "
          f"{reader.spilled_bytes / 1e6:.1f} MB (peak on disk {sampler.spill_peak / 1e6:.1f} MB), buffer peak "
          f"{reader.buffer.peak_nbytes} bytes, RSS growth {growth / 1e6:.1f} MB, events {event_bytes / 1e6:.1f} MB")
    # the driver held about one batch at a time, never the transaction (its events alone are larger)
    assert growth < event_bytes / 2
    assert not os.path.exists(reader.spill_dir)  # removed on close


def _aborting_workload(server: PostgresServer, dbname: str) -> None:
    big = "INSERT INTO {t} SELECT g, md5(g::text) FROM generate_series({a}, {b}) g"
    with contextlib.closing(server.connect(dbname)) as conn, conn.cursor() as cur:
        # a streamed transaction that aborts
        cur.execute("BEGIN")
        cur.execute(big.format(t="t", a=1, b=5000))
        cur.execute("ROLLBACK")
        # a streamed transaction with an aborted savepoint in the middle
        cur.execute("BEGIN")
        cur.execute(big.format(t="t", a=10_001, b=12_000))
        cur.execute("SAVEPOINT s1")
        cur.execute(big.format(t="t", a=20_001, b=25_000))
        cur.execute("UPDATE t SET v = 'gone' WHERE id <= 10100")
        cur.execute("ROLLBACK TO SAVEPOINT s1")
        cur.execute("SAVEPOINT s2")
        cur.execute(big.format(t="t", a=12_001, b=13_000))
        cur.execute("RELEASE SAVEPOINT s2")
        cur.execute("SELECT pg_logical_emit_message(true, 'kept', 'yes')")
        cur.execute("COMMIT")
        # the first change of table u in this stream lies in an aborted savepoint: the relation
        # message sent there still describes the rows kept after it
        cur.execute("BEGIN")
        cur.execute("SAVEPOINT s1")
        cur.execute(big.format(t="u", a=1, b=5000))
        cur.execute("ROLLBACK TO SAVEPOINT s1")
        cur.execute("INSERT INTO u VALUES (-1, 'kept'), (-2, 'kept')")
        cur.execute("COMMIT")
        # a streamed transaction whose every change was in an aborted savepoint: nothing at all
        cur.execute("BEGIN")
        cur.execute("SAVEPOINT s1")
        cur.execute(big.format(t="t", a=30_001, b=35_000))
        cur.execute("ROLLBACK TO SAVEPOINT s1")
        cur.execute("COMMIT")
        cur.execute("INSERT INTO t VALUES (99999, 'small')")


def test_aborted_streamed_transactions_emit_nothing(pg_server, pg_db, tmp_path):
    small_work_mem(pg_server, pg_db)
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text); CREATE TABLE u (id int PRIMARY KEY, v text)",
                      pg_db)
    meta = {"provide.transaction.metadata": "true"}
    v2 = make_connector(pg_server, pg_db, "v2", meta)
    v1 = make_connector(pg_server, pg_db, "v1", {**meta, "headwater.pgoutput.protocol.version": "1"})
    e2, e1 = engine(v2, max_events=700), engine(v1)
    prime(e2, e1)
    _aborting_workload(pg_server, pg_db)
    got2, got1 = read(e2), read(e1)
    reader = v2.reader
    e2.close()
    e1.close()
    assert reader is not None
    assert reader.spill_files >= 4  # all four were streamed in progress
    expected = [("t", "c", i) for i in range(10_001, 13_001)] + [("u", "c", -1), ("u", "c", -2), ("t", "c", 99999)]
    assert changes(got2) == expected
    assert [payload(e)["message"]["prefix"] for e in got2 if e.topic.endswith(".message")] == ["kept"]
    assert check_transaction_metadata(got2) == 3
    # protocol 1 (the server decodes each transaction whole, at commit) gives the very same events,
    # transaction ids and BEGIN positions included
    assert [comparable(e) for e in got2] == [comparable(e) for e in got1]


# ---------------------------------------------------------------------------------------------
# the planner: batches and slices cut through transactions; replays


def _mixed_workload(server: PostgresServer, dbname: str) -> None:
    """Large and small transactions, several tables, interleaved transactions, TRUNCATE, logical
    messages in and out of transactions, a transaction touching only an uncaptured table."""
    server.execute("BEGIN; INSERT INTO a SELECT g, 'x' FROM generate_series(1, 1000) g; "
                   "ALTER TABLE a ADD COLUMN n int DEFAULT 5; "
                   "INSERT INTO a SELECT g, 'x', g FROM generate_series(1001, 2000) g; COMMIT", dbname)
    server.execute("INSERT INTO b VALUES (1, 'one')", dbname)
    with contextlib.closing(server.connect(dbname)) as c1, contextlib.closing(server.connect(dbname)) as c2:
        k1, k2 = c1.cursor(), c2.cursor()
        k1.execute("BEGIN")
        k1.execute("INSERT INTO a VALUES (10001, 'first begun')")
        k2.execute("BEGIN")
        k2.execute("INSERT INTO b VALUES (20001, 'second begun')")
        k1.execute("INSERT INTO b VALUES (10002, 'first')")
        k2.execute("SELECT pg_logical_emit_message(false, 'side', 'not transactional')")
        k2.execute("INSERT INTO a VALUES (20002, 'second')")
        k2.execute("COMMIT")  # the second commits first
        k1.execute("UPDATE a SET v = 'y' WHERE id <= 150")
        k1.execute("SELECT pg_logical_emit_message(true, 'in', 'transactional')")
        k1.execute("DELETE FROM a WHERE id BETWEEN 151 AND 170")
        k1.execute("COMMIT")
    server.execute("INSERT INTO skipped VALUES (1)", dbname)
    server.execute("BEGIN; INSERT INTO b SELECT g, 'z' FROM generate_series(3000, 3040) g; TRUNCATE b; "
                   "INSERT INTO b VALUES (4000, 'after truncate'); COMMIT", dbname)
    server.execute("SELECT pg_logical_emit_message(false, 'alone', 'between')", dbname)
    server.execute("INSERT INTO a SELECT g, 'w' FROM generate_series(50000, 51500) g", dbname)


def _tables(server: PostgresServer, dbname: str) -> None:
    server.execute("CREATE TABLE a (id int PRIMARY KEY, v text); CREATE TABLE b (id int PRIMARY KEY, v text); "
                   "CREATE TABLE skipped (id int)", dbname)


CAPTURE = {"provide.transaction.metadata": "true", "skipped.operations": "none",
           "table.include.list": "public.a,public.b"}


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_small_batches_and_slices_equal_one_batch(pg_server, pg_db, monkeypatch, streamed):
    monkeypatch.setattr(planner, "MIN_SLICE", 10)
    monkeypatch.setattr(Spill, "CHECKPOINT_EVERY", 7)  # batches start at spill checkpoints, relations too
    if streamed:
        small_work_mem(pg_server, pg_db)
    _tables(pg_server, pg_db)
    ref_connector = make_connector(pg_server, pg_db, "reference", CAPTURE)
    cut_connector = make_connector(pg_server, pg_db, "cut", CAPTURE, parallelism=3)
    ref, cut = engine(ref_connector), engine(cut_connector, max_events=170)
    prime(ref, cut)
    _mixed_workload(pg_server, pg_db)
    expected, got = read(ref), read(cut)
    assert cut_connector.reader is not None
    spilled = cut_connector.reader.spill_files
    ref.close()
    cut.close()
    assert [comparable(e) for e in got] == [comparable(e) for e in expected]
    assert check_transaction_metadata(got) == 7
    # commit order: the second interleaved transaction first
    assert changes(got)[2001:2005] == [("b", "c", 20001), ("a", "c", 20002), ("a", "c", 10001), ("b", "c", 10002)]
    # the column added inside the first transaction shows from the change after it
    afters = [payload(e)["after"] for e in got if e.topic == "s.public.a" and e.value is not None][:2000]
    assert [sorted(a) for a in (afters[999], afters[1000])] == [["id", "v"], ["id", "n", "v"]]
    if streamed:
        assert spilled >= 2  # the large transactions were streamed in progress
    # batches ended inside transactions, and transactions were cut across slices of one batch
    mid_batch = [end for _, end, _ in cut_connector.plans if end.get("txId") is not None]
    assert len(mid_batch) >= 5
    cut_slices = 0
    for _, _, units in cut_connector.plans:
        slices = [u for u in units if isinstance(u, StreamSlice)]
        cut_slices += sum(1 for u in slices[1:] if not u.segments[0].begin)
    assert cut_slices >= 5
    assert max(len(units) for _, _, units in cut_connector.plans) >= 3


def _plan_all(connector: PostgresSource, start: Offset, max_events: int) -> list[tuple[Offset, Offset, list[Event]]]:
    """Every range from `start` to what the server holds now, read but never committed."""
    connector.open(start)
    connector.prepare_available_now()
    out: list[tuple[Offset, Offset, list[Event]]] = []
    try:
        for _ in range(10_000):
            end = connector.latest_offset(start, max_events)
            if end == start:
                return out
            events = [e for u in connector.plan(start, end) for b in u.read() for e in json_rows(b)]
            out.append((start, end, events))
            start = end
    finally:
        connector.close()
    raise AssertionError("too many batches")


def test_replay_in_a_fresh_source_gives_the_same_events(pg_server, pg_db, monkeypatch):
    """What Spark does after a crash: plan a range from the checkpoint in a new process."""
    monkeypatch.setattr(planner, "MIN_SLICE", 10)
    monkeypatch.setattr(Spill, "CHECKPOINT_EVERY", 7)
    small_work_mem(pg_server, pg_db)
    _tables(pg_server, pg_db)
    first = make_connector(pg_server, pg_db, "replayed", CAPTURE, parallelism=2)
    eng = engine(first)
    prime(eng)
    start = eng.offset
    eng.close()
    assert start is not None
    _mixed_workload(pg_server, pg_db)
    ranges = _plan_all(make_connector(pg_server, pg_db, "replayed", CAPTURE, parallelism=2), start, 250)
    assert len(ranges) > 10 and any(end.get("txId") for _, end, _ in ranges)
    # each range again, twice, in a new source (a new reader started at the range's start) and
    # with another parallelism: the same events. Opening a source at a range's start tells the
    # slot that everything before it is processed, so the ranges go in order.
    for i, (s, e, events) in enumerate(ranges):
        for parallelism in (1 + i % 3, 3 - i % 3):
            again_connector = make_connector(pg_server, pg_db, "replayed", CAPTURE, parallelism=parallelism)
            again_connector.open(s)
            again = [ev for u in again_connector.plan(s, e) for b in u.read() for ev in json_rows(b)]
            again_connector.close()
            assert [comparable(x) for x in again] == [comparable(x) for x in events], f"range {i}: {s} -> {e}"
    # a range the slot can no longer serve (it starts before the slot's position) fails at once
    s, e, _ = next(r for r in ranges if r[1].get("txId") and r[0].get("lsn_commit"))
    late = make_connector(pg_server, pg_db, "replayed", CAPTURE)
    with pytest.raises(SourceError, match="past the last position headwater processed"):
        late.open(s)
    everything = [ev for _, _, events in ranges for ev in events]
    assert check_transaction_metadata(everything) == 7


# ---------------------------------------------------------------------------------------------
# DDL, TRUNCATE and messages mid-stream


def test_ddl_mid_stream(pg_server, pg_db):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", pg_db)
    whole = engine(make_connector(pg_server, pg_db, "whole"))
    small = engine(make_connector(pg_server, pg_db, "small"), max_events=2)
    prime(whole, small)
    pg_server.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')", pg_db)
    pg_server.execute("BEGIN; INSERT INTO t VALUES (4, 'd'); ALTER TABLE t ADD COLUMN n int DEFAULT 7; "
                      "INSERT INTO t VALUES (5, 'e', 5); COMMIT", pg_db)
    pg_server.execute("INSERT INTO t VALUES (6, 'f', NULL)", pg_db)
    pg_server.execute("ALTER TABLE t DROP COLUMN v", pg_db)
    pg_server.execute("INSERT INTO t VALUES (7, 8)", pg_db)
    pg_server.execute("UPDATE t SET n = 9 WHERE id = 1", pg_db)
    got, ref = read(small), read(whole)
    whole.close()
    small.close()
    assert [comparable(e) for e in got] == [comparable(e) for e in ref]
    afters = [payload(e)["after"] for e in got]
    assert afters == [
        {"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}, {"id": 4, "v": "d"},
        {"id": 5, "v": "e", "n": 5}, {"id": 6, "v": "f", "n": 7},  # null shown as the default, like Debezium
        {"id": 7, "n": 8}, {"id": 1, "n": 9},
    ]


def test_sequence_across_batches_with_truncate_and_messages(pg_server, pg_db, monkeypatch):
    """`source.sequence` = [end of the last commit, or the LSN of the last non-transactional message,
    before the event; the event's LSN], whatever the batch and slice boundaries."""
    monkeypatch.setattr(planner, "MIN_SLICE", 2)
    _tables(pg_server, pg_db)
    whole = engine(make_connector(pg_server, pg_db, "whole", CAPTURE))
    cut = engine(make_connector(pg_server, pg_db, "cut", CAPTURE, parallelism=3), max_events=3)
    prime(whole, cut)
    for i in range(3):
        pg_server.execute(f"BEGIN; INSERT INTO a VALUES ({i * 10 + 1}, 'x'); "
                          f"SELECT pg_logical_emit_message(true, 'tx', '{i}'); TRUNCATE b; "
                          f"INSERT INTO b VALUES ({i * 10 + 2}, 'y'), ({i * 10 + 3}, 'z'); COMMIT", pg_db)
        pg_server.execute(f"SELECT pg_logical_emit_message(false, 'solo', '{i}')", pg_db)
        pg_server.execute(f"SELECT pg_logical_emit_message(false, 'solo', '{i}b')", pg_db)
        pg_server.execute(f"TRUNCATE a; INSERT INTO a VALUES ({i * 10 + 4}, 'w')", pg_db)
    got, ref = read(cut), read(whole)
    whole.close()
    cut.close()
    assert [comparable(e) for e in got] == [comparable(e) for e in ref]
    last: str | None = None
    seen: Counter[str] = Counter()
    for ev in got:
        p = payload(ev)
        if ev.topic.endswith(".transaction"):
            if p["status"] == "END":
                last = p["id"].split(":")[1]
            continue
        if p is None:  # tombstone
            continue
        connector = p["source"]
        seq = json.loads(connector["sequence"])
        seen[p["op"]] += 1
        if p["op"] == "m" and connector["txId"] is None:
            assert seq == [str(connector["lsn"]), str(connector["lsn"])]
            last = str(connector["lsn"])
            continue
        assert seq == [last, str(connector["lsn"])], (p["op"], connector, last)
    assert seen == {"c": 12, "t": 6, "m": 9}


def test_the_replication_session_only_lowers_logical_decoding_work_mem(pg_server, pg_db):
    """`headwater.pgoutput.decoding.work.mem.kb` (8 MB) becomes the replication session's
    logical_decoding_work_mem when it is below what the database gives (the server's 64 MB), never above
    (the tests' 64kB stays); protocol 1 (nothing streamed) keeps the server's."""
    source = make_connector(pg_server, pg_db, "wm")
    kb = source._decoding_work_mem_kb()
    assert kb == 8192
    reader = ReplicationReader(source.params, "wm", "p", decoding_work_mem_kb=kb)
    v1 = ReplicationReader(source.params, "wm", "p", proto_version=1, decoding_work_mem_kb=kb)
    assert v1._settings() == {}
    v1.close()
    conn = connect_replication(source.params, reader._settings())
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW logical_decoding_work_mem")
            assert cur.fetchone()[0] == "8MB"  # the walsender's own
    finally:
        conn.close()
        reader.close()
    small_work_mem(pg_server, pg_db)
    assert make_connector(pg_server, pg_db, "wm2")._decoding_work_mem_kb() == 0
