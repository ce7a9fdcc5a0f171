"""Debezium's locking snapshot on a real MariaDB: what each `snapshot.locking.mode` blocks, and the snapshot
and the stream meeting exactly at the binlog position read under the lock (nothing lost, nothing twice)."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from headwater.connectors.binlog import textrows
from headwater.connectors.binlog.snapshot import SnapshotChunk
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


# ------------------------------------------------------------------------ the locking snapshot in batches


def _same(value: Any) -> Any:
    """An event's value without its times (two snapshots taken a second apart differ only there)."""
    if isinstance(value, dict):
        return {k: _same(v) for k, v in value.items() if not k.startswith("ts_")}
    return value


def _snapshot(src: MariaDbSource) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The offsets of a snapshot's batches, up to `completed`, and its records."""
    start = src.initial_offset()
    src.open(start)
    offsets, values = [], []
    while True:
        end = src.latest_offset(start)
        offsets.append(end)
        values += read(src.plan(start, end))
        src.commit(end)
        start = end
        if end["snapshot"] == "completed":
            return offsets, values


@pytest.fixture
def hundred(mariadb_server, mariadb_db):
    mariadb_server.execute("CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(20));"
                           "INSERT INTO a SELECT seq, CONCAT('a', seq) FROM seq_1_to_5;"
                           "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20));"
                           "INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_100", mariadb_db)
    return mariadb_db



def _in_batches_and_whole(server, db, props: dict[str, str]) -> tuple[tuple[list, list], tuple[list, list]]:
    """The (offsets, records) of the locking snapshot of `db` read in batches of 2 chunks of 10 rows
    (headwater.max.batch.events 20), and in one batch."""
    runs = []
    for events in ("20", "100000"):
        src = source(server, db, headwater__max__batch__events=events, **props)
        try:
            runs.append(_snapshot(src))
        finally:
            src.close()
    return runs[0], runs[1]

def test_the_locking_snapshot_is_read_in_batches_of_chunks(mariadb_server, hundred):
    """A snapshot larger than a batch (2 chunks of 10 rows: headwater.max.batch.events / chunk.rows) spans
    several batches, each offset naming its chunks and the held snapshot; the last batch, empty, moves to
    `completed`; the records are those of the snapshot read in one batch (markers and schema records too)."""
    props = {"snapshot__locking__mode": "minimal", "headwater__snapshot__chunk__rows": "10",
             "include__schema__changes": "true"}
    (offsets, values), (one_offsets, one_values) = _in_batches_and_whole(mariadb_server, hundred, props)
    ranges = [o.get("chunk_range") for o in offsets]
    assert ranges == [[0, 2], [2, 4], [4, 6], [6, 8], [8, 10], [10, 11], None]  # a: 1 chunk, t: 10
    assert len({o["token"] for o in offsets[:-1]}) == 1
    position = {k: offsets[-1][k] for k in ("file", "pos", "epoch")}
    assert offsets[-1]["snapshot"] == "completed" and set(offsets[-1]) == {"snapshot", "file", "pos", "gtids", "epoch"}
    assert all(o["snapshot"] == "chunks" and {k: o[k] for k in position} == position for o in offsets[:-1])
    assert [o.get("chunk_range") for o in one_offsets] == [[0, 11], None]
    rows = [v for v in values if "op" in v]
    assert [(r["source"]["table"], r["after"]["id"]) for r in rows] == \
        [("a", i) for i in range(1, 6)] + [("t", i) for i in range(1, 101)]
    assert [r["source"]["snapshot"] for r in rows] == \
        ["first", "true", "true", "true", "last_in_data_collection", "first_in_data_collection"] + \
        ["true"] * 98 + ["last"]
    assert values[0].get("ddl") is not None and "op" not in values[0]  # the schema records come first
    assert [_same(v) for v in values] == [_same(v) for v in one_values]


def test_a_pickled_chunk_leaves_no_rows_and_the_next_batch_is_read_ahead(mariadb_server, hundred):
    """A chunk shipped to an executor carries its rows; the driver's keeps none. While a batch is shipped
    the next batch's rows are read in the held transaction, and its chunks take them from there."""
    src = source(mariadb_server, hundred, snapshot__locking__mode="minimal", headwater__snapshot__chunk__rows="10",
                 headwater__max__batch__events="20")
    try:
        start = src.initial_offset()
        src.open(start)
        end = src.latest_offset(start)
        units = [u for u in src.plan(start, end) if isinstance(u, SnapshotChunk)]
        held = src.held
        assert held is not None and held.ahead == {} and [u.index for u in units] == [0, 1]
        shipped = [pickle.loads(pickle.dumps(u)) for u in units]
        assert all(u.rows is None for u in units) and all(u.rows is not None for u in shipped)
        assert held.reader is not None
        held.reader.join(30)
        assert sorted(held.ahead) == [2, 3]  # the next batch's chunks
        src.commit(end)
        start, end = end, src.latest_offset(end)
        nxt = [u for u in src.plan(start, end) if isinstance(u, SnapshotChunk)]
        assert [u.index for u in nxt] == [2, 3]
        got = [pickle.loads(pickle.dumps(u)) for u in nxt]  # the rows read ahead, taken
        assert 2 not in held.ahead and 3 not in held.ahead and held.reader is not None
        held.reader.join(30)
        assert sorted(held.ahead) == [4, 5]
        ids = [v["after"]["id"] for v in read(shipped + got)]
    finally:
        src.close()
    assert ids == [1, 2, 3, 4, 5] + list(range(1, 31))



def _stopped_and_run_again(server, db, tmp_path, after: int, extra: dict[str, str]
                           ) -> tuple[OffsetFile, dict[str, Any], list[dict[str, Any]]]:
    """The engine's locking snapshot of `db` (batches of 2 chunks of 10 rows) stopped after `after` records
    inside a batch (its stored offset, a `chunks` one), then run again once: (offsets, stored, records of
    the second run, which finds the snapshot due again: not SKIPPED)."""
    props = {"connector.class": "mariadb", **server.connector_properties(db), "topic.prefix": "s",
             "include.schema.changes": "false", "snapshot.locking.mode": "minimal",
             "headwater.snapshot.chunk.rows": "10", "headwater.max.batch.events": "20",
             "snapshot.mode": "initial_only", **extra}
    offsets = OffsetFile(tmp_path / "o.json")
    engine = Engine(validate_connector(props), offsets)
    try:
        for n, _ in enumerate(engine.events(), 1):
            if n == after:
                break
    finally:
        engine.close()
    stored = offsets.load()
    assert stored is not None and stored["snapshot"] == "chunks"
    again = Engine(validate_connector(props), offsets)
    try:
        rows = [e.value_json() for e in again.events(once=True)]
        assert again.connector.snapshot_due(stored)  # a new run: the snapshot starts again
    finally:
        again.close()
    return offsets, stored, rows

def test_a_restart_mid_snapshot_takes_it_again_and_gives_the_table_once(mariadb_server, hundred, tmp_path):
    """The engine stopped after the locking snapshot's first batch (its offset stored): the next run cannot
    go on in a transaction that is gone, so the snapshot is due again and taken from the start, whole, once."""
    # stopped inside the second batch (the first read a's 5 rows and t's 1..10)
    offsets, stored, rows = _stopped_and_run_again(mariadb_server, hundred, tmp_path, 26, {"database.server.id": "5406"})
    assert stored["chunk_range"] == [0, 2]
    assert [(r["source"]["table"], r["after"]["id"]) for r in rows] == \
        [("a", i) for i in range(1, 6)] + [("t", i) for i in range(1, 101)]
    marks = [r["source"]["snapshot"] for r in rows]
    assert marks[0] == "first" and marks[-1] == "last" and marks.count("first") == marks.count("last") == 1
    final = offsets.load()
    assert final is not None and final["snapshot"] == "completed" and final["epoch"] == stored["epoch"] + 1


# ------------------------------------------------------------------------ tables read with one streamed SELECT


@pytest.fixture
def keyless(mariadb_server, mariadb_db):
    """a: a key; k: no key (100 rows); m: no key, empty; o: a key, read through a select override (30 of
    its 60 rows)."""
    mariadb_server.execute("CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(20));"
                           "INSERT INTO a SELECT seq, CONCAT('a', seq) FROM seq_1_to_5;"
                           "CREATE TABLE k (id INT, v VARCHAR(20));"
                           "INSERT INTO k SELECT seq, CONCAT('k', seq) FROM seq_1_to_100;"
                           "CREATE TABLE m (id INT);"
                           "CREATE TABLE o (id INT PRIMARY KEY, v VARCHAR(20));"
                           "INSERT INTO o SELECT seq, CONCAT('o', seq) FROM seq_1_to_60", mariadb_db)
    return mariadb_db


def overridden(db: str) -> dict[str, str]:
    return {"snapshot.select.statement.overrides": f"{db}.o",
            f"snapshot.select.statement.overrides.{db}.o": f"SELECT * FROM {db}.o WHERE id % 2 = 0 ORDER BY id"}


KEYLESS_ROWS = ([("a", i) for i in range(1, 6)] + [("k", i) for i in range(1, 101)]
                + [("o", i) for i in range(2, 61, 2)])
KEYLESS_MARKS = (["first"] + ["true"] * 3 + ["last_in_data_collection"]
                 + ["first_in_data_collection"] + ["true"] * 98 + ["last_in_data_collection"]
                 + ["first_in_data_collection"] + ["true"] * 28 + ["last"])


def test_tables_without_a_key_or_with_an_override_are_cut_from_one_select_across_batches(mariadb_server, keyless,
                                                                                          caplog):
    """A table without a primary key, and one read through a select override, are each read with one
    SELECT streamed across batches, cut into chunks of `headwater.snapshot.chunk.rows` rows as it is read:
    the offsets name the chunks read so far, and the records (markers too) are the one-batch read's."""
    props = {"snapshot__locking__mode": "minimal", "headwater__snapshot__chunk__rows": "10",
             "include__schema__changes": "true", **overridden(keyless)}
    with caplog.at_level("INFO", logger="headwater.binlog"):
        (offsets, values), (one_offsets, one_values) = _in_batches_and_whole(mariadb_server, keyless, props)
    # a: 1 chunk; k: 10 chunks of 10 rows (the last one known as it is read); m: 1, empty; o: 3
    assert [o.get("chunk_range") for o in offsets] == [[i, min(i + 2, 15)] for i in range(0, 15, 2)] + [None]
    assert [o.get("chunk_range") for o in one_offsets] == [[0, 15], None]
    rows = [v for v in values if "op" in v]
    assert [(r["source"]["table"], r["after"]["id"]) for r in rows] == KEYLESS_ROWS
    assert [r["source"]["snapshot"] for r in rows] == KEYLESS_MARKS
    assert [_same(v) for v in values] == [_same(v) for v in one_values]
    assert "read again" not in caplog.text  # each table's SELECT ran once


def test_a_batch_planned_again_reads_its_streamed_chunks_again(mariadb_server, keyless, caplog):
    """A batch planned again in the same snapshot (its rows were taken) reads its table's SELECT again up to
    its chunks: the same records."""
    src = source(mariadb_server, keyless, snapshot__locking__mode="minimal", headwater__snapshot__chunk__rows="10",
                 headwater__max__batch__events="20")
    try:
        start = src.initial_offset()
        src.open(start)
        first = src.latest_offset(start)
        src.plan(start, first)  # (not read: the next batch's plan reads its rows)
        second = src.latest_offset(first)
        assert second["chunk_range"] == [2, 4]  # k's chunks 1 and 2 (rows 11..30)
        once = read(src.plan(first, second))
        with caplog.at_level("INFO", logger="headwater.binlog"):
            again = read(src.plan(first, second))
        assert "part 1: its table's SELECT is read again up to it" in caplog.text
    finally:
        src.close()
    assert [r["after"]["id"] for r in once] == list(range(11, 31))
    assert [_same(v) for v in again] == [_same(v) for v in once]


def test_the_driver_holds_two_batches_of_a_streamed_table_at_most(mariadb_server, mariadb_db):
    """The rows the driver holds while a key-less table (~6 MB) is read in batches of two 1,000-row chunks:
    those read ahead, and those the streamed SELECT received and not yet cut (at most a socket read more),
    never the table."""
    mariadb_server.execute("CREATE TABLE k (id INT, v VARCHAR(300));"
                           "INSERT INTO k SELECT seq, REPEAT('x', 290) FROM seq_1_to_20000", mariadb_db)
    src = source(mariadb_server, mariadb_db, snapshot__locking__mode="minimal",
                 headwater__snapshot__chunk__rows="1000", headwater__max__batch__events="2000")
    held_bytes, ids = [], []
    table = 20000 * 296  # (each row as sent: a header, the two values with their lengths)

    def held(units: list[Any]) -> int:
        h = src.held
        assert h is not None
        stream = h.stream.rows.packets if h.stream is not None else None
        return (sum(len(r.data) for r in h.ahead.values()) + (len(stream.buf) if stream is not None else 0)
                + sum(len(u.rows.data) for u in units if getattr(u, "rows", None) is not None))

    try:
        start = src.initial_offset()
        src.open(start)
        while True:
            end = src.latest_offset(start)
            if end["snapshot"] == "completed":
                break
            held_bytes.append(held([]))
            units = src.plan(start, end)
            held_bytes.append(held(units))
            shipped = [pickle.dumps(u) for u in units]
            held_bytes.append(held(units))
            assert src.held is not None and src.held.reader is not None
            src.held.reader.join(30)
            held_bytes.append(held(units))
            ids += [v["after"]["id"] for v in read([pickle.loads(s) for s in shipped])]
            src.commit(end)
            start = end
    finally:
        src.close()
    assert ids == list(range(1, 20001))
    batch = 2 * 1000 * 296
    assert max(held_bytes) <= 2 * batch + textrows.READ_SIZE + 1000 and max(held_bytes) < table / 2
    assert len(held_bytes) == 40 and min(held_bytes[3:-4:4]) >= batch  # (the next batch is read ahead meanwhile)


def test_a_restart_mid_snapshot_gives_a_streamed_table_once(mariadb_server, keyless, tmp_path):
    """Stopped inside a key-less table's chunks, the next run takes the snapshot again from the start: every
    table once, the markers those of one snapshot."""
    # stopped inside k's chunks, in the third batch
    _, stored, rows = _stopped_and_run_again(mariadb_server, keyless, tmp_path, 40,
                                             {"database.server.id": "5407", **overridden(keyless)})
    assert stored["chunk_range"] == [2, 4]
    assert [(r["source"]["table"], r["after"]["id"]) for r in rows] == KEYLESS_ROWS
    assert [r["source"]["snapshot"] for r in rows] == KEYLESS_MARKS


def test_a_dense_integer_key_is_cut_by_arithmetic_as_the_boundary_queries_cut_it(mariadb_server, mariadb_db):
    """MariaDB's estimate of a table's rows (EXPLAIN) lets the lock-free snapshot cut a dense integer key
    without reading the table; the ranges are the boundary queries' own. A sparse key is cut by them."""
    import pymysql

    from headwater.connectors.binlog.snapshot import DIALECT
    from headwater.connectors.common.snapshot import ChunkKey, dense_ranges, key_ranges

    mariadb_server.execute("CREATE TABLE d (id bigint PRIMARY KEY, v int); INSERT INTO d SELECT seq, seq FROM seq_1_to_5000;"
                           "CREATE TABLE s (id int PRIMARY KEY); INSERT INTO s SELECT seq * 7 FROM seq_1_to_3000;"
                           "ANALYZE TABLE d, s", mariadb_db)
    conn = pymysql.connect(**mariadb_server.connection_params(mariadb_db))
    try:
        with conn.cursor() as cur:
            key = ChunkKey(("id",), (False,))
            estimate = DIALECT.estimated_rows(cur, "`d`")
            assert estimate is not None and 2500 <= estimate <= 10000
            for rows, first in ((1000, (0, 0)), (700, (2, 300)), (5000, (0, 0))):
                dense = dense_ranges(cur, DIALECT, "`d`", "id", rows, first)
                assert dense is not None
                assert dense == key_ranges(cur, DIALECT, "`d`", key, rows, first)
            assert dense_ranges(cur, DIALECT, "`s`", "id", 500) is None
            assert (key_ranges(cur, DIALECT, "`s`", key, 500, unique_integer=True)
                    == key_ranges(cur, DIALECT, "`s`", key, 500))
    finally:
        conn.close()
