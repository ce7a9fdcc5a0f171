"""The blocking ad-hoc snapshot on a real MariaDB read in batches of chunks, as the locking snapshot is: the
records of one batch, the driver holding two batches' rows at most, streaming resuming where it paused with
nothing lost or doubled, a restart in the middle going on after the last batch stored (a replayed batch reading
its key ranges again; a table read by a streamed SELECT read again from its start), and a query error (a bad
statement, a table dropped, a chunk that cannot be read) abandoning it while streaming resumes where it paused (a
lost connection fails the read instead)."""

from __future__ import annotations

import pickle
from typing import Any

import pymysql
import pytest

from headwater.connectors.binlog.connection import query_error
from headwater.connectors.binlog.snapshot import SnapshotChunk
from headwater.connectors.common import incremental as inc
from headwater.connectors.mariadb.source import MariaDbSource
from headwater.connectors.registry import validate_connector
from headwater.devservers.mariadb import MariaDBServer
from tests.connectors.common.incremental_support import insert_signal

Record = dict[str, Any]


@pytest.fixture
def tables(mariadb_server, mariadb_db):
    mariadb_server.execute("CREATE TABLE dbz_signal (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                           "data VARCHAR(2048)); CREATE TABLE done (id INT PRIMARY KEY);"
                           "CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(20));"
                           "INSERT INTO a SELECT seq, CONCAT('a', seq) FROM seq_1_to_5;"
                           "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20));"
                           "INSERT INTO t SELECT seq, CONCAT('v', seq) FROM seq_1_to_100", mariadb_db)
    return mariadb_db


def source(server: MariaDBServer, db: str, max_events: int) -> MariaDbSource:
    """Chunks of 10 rows: `a` is one chunk, `t` ten; `max_events` 20 makes batches of two chunks."""
    props = {"connector.class": "mariadb", **server.connector_properties(db), "database.server.id": "5481",
             "topic.prefix": "s", "include.schema.changes": "false", "snapshot.mode": "no_data",
             "signal.data.collection": f"{db}.dbz_signal", "headwater.snapshot.chunk.rows": "10",
             "headwater.max.batch.events": str(max_events)}
    return MariaDbSource(validate_connector(props), parallelism=1)


def signal(server: MariaDBServer, db: str, id_: str) -> None:
    insert_signal(pymysql.connect(**server.connection_params(db), autocommit=True), "execute-snapshot",
                  {"data-collections": [f"{db}.a", f"{db}.t"], "type": "blocking"}, id_)


class Driver:
    """A source driven batch by batch as the engine drives it (latest, plan, the units read, commit), the
    units pickled first as Spark ships them."""

    def __init__(self, src: MariaDbSource, start: Record | None = None):
        self.src = src
        self.start = start if start is not None else src.initial_offset()
        src.open(self.start)
        self.offsets: list[Record] = []
        self.values: list[Record] = []
        self.ahead: list[tuple[list[int], list[int]]] = []  # per blocking batch: its chunks, those read ahead

    def step(self) -> Record:
        src, start = self.src, self.start
        end = src.latest_offset(start)
        if end == start:  # nothing new (the engine asks again)
            return end
        units = src.plan(start, end)
        shipped = [pickle.loads(pickle.dumps(u)) for u in units]
        chunks = [u for u in units if isinstance(u, SnapshotChunk)]
        assert all(u.rows is None for u in chunks)  # the driver's copies keep no rows once shipped
        held = src.incremental_hooks.blocking.held()
        if chunks and held is not None and held.reader is not None:
            held.reader.join(30)
            self.ahead.append(([u.index for u in chunks], sorted(held.ahead)))
        self.values += [e.value_json() for u in shipped for b in u.read() for e in b.rows() if e.value is not None]
        src.commit(end)
        self.offsets.append(end)
        self.start = end
        return end

    def until(self, done: Any, limit: int = 200) -> Record:
        for _ in range(limit):
            end = self.step()
            if done(end):
                return end
        raise AssertionError("not reached")


def streaming(d: Driver) -> None:
    d.until(lambda o: o.get("snapshot") in ("completed", "streaming"))  # (changes after it are captured)


def blocking_read(d: Driver, server: MariaDBServer, db: str, id_: str, during: Any = None) -> list[Record]:
    """Signal a blocking snapshot, drive its batches (`during` runs after the first), then until a `done` row
    written after it is streamed; the offsets of the blocking batches."""
    signal(server, db, id_)
    d.until(lambda o: bool(o.get(inc.BLOCKING)))
    first = len(d.offsets) - 1
    if during is not None:
        during()
    d.until(lambda o: not o.get(inc.BLOCKING))
    server.execute(f"INSERT INTO done VALUES ({len(d.offsets)})", db)
    d.until(lambda o: any(v.get("source", {}).get("table") == "done" for v in d.values[-5:]))
    return [o for o in d.offsets[first:] if o.get(inc.BLOCKING)]


def reads(values: list[Record]) -> list[tuple[str, Any, Any, str]]:
    return [(v["source"]["table"], v["after"]["id"], v["after"]["v"], v["source"]["snapshot"]) for v in values
            if v.get("op") == "r"]


def test_a_blocking_snapshot_in_batches_gives_the_one_batch_records_and_streaming_resumes(mariadb_server, tables):
    """Six batches of two chunks (the offset naming the held snapshot and the chunk range, the stream position
    that of the pause), the records and markers of the same snapshot read in one batch; changes made during
    the snapshot, after its transaction began, come once, streamed after it."""
    db = tables
    one = Driver(source(mariadb_server, db, 100_000))
    try:
        streaming(one)
        one_offsets = blocking_read(one, mariadb_server, db, "b1")
    finally:
        one.src.close()
    assert [o[inc.BLOCKING]["chunk_range"] for o in one_offsets] == [[0, 11]]

    def changes() -> None:
        mariadb_server.execute("INSERT INTO t VALUES (101, 'new'); UPDATE t SET v = 'changed' WHERE id = 5;"
                               "DELETE FROM t WHERE id = 95", db)

    d = Driver(source(mariadb_server, db, 20))
    try:
        streaming(d)
        offsets = blocking_read(d, mariadb_server, db, "b2", changes)
    finally:
        d.src.close()
    assert [o[inc.BLOCKING]["chunk_range"] for o in offsets] == [[0, 2], [2, 4], [4, 6], [6, 8], [8, 10], [10, 11]]
    assert len({o[inc.BLOCKING]["token"] for o in offsets}) == 1
    assert all(o[inc.BLOCKING]["id"] == "b2" and o[inc.BLOCKING]["tables"] == [f"{db}.a", f"{db}.t"] for o in offsets)
    pause = next(o for o in d.offsets if o.get(inc.BLOCKING_PENDING))  # the batch that met the signal
    assert {(o["file"], o["pos"]) for o in offsets} == {(pause["file"], pause["pos"])}
    # the driver held the next batch's rows at most: those read ahead are the next batch's chunks
    assert [ahead for _, ahead in d.ahead] == [[2, 3], [4, 5], [6, 7], [8, 9], [10], []]
    got, want = reads(d.values), reads(one.values)
    assert got == want and len(got) == 105
    assert [r[3] for r in got] == ["first", "true", "true", "true", "last_in_data_collection",
                                   "first_in_data_collection"] + ["true"] * 98 + ["last"]
    assert ("t", 5, "v5", "true") in got and ("t", 95, "v95", "true") in got  # the snapshot's view: before them
    last = max(i for i, v in enumerate(d.values) if v.get("op") == "r")
    streamed = [(i, v["op"], (v["after"] or v["before"])["id"]) for i, v in enumerate(d.values)
                if v.get("op") in ("c", "u", "d") and v["source"]["table"] == "t"]
    assert [(op, k) for _, op, k in streamed] == [("c", 101), ("u", 5), ("d", 95)]  # once each,
    assert all(i > last for i, _, _ in streamed)  # after the snapshot


def test_a_restart_mid_blocking_snapshot_goes_on_after_the_last_batch(mariadb_server, tables):
    """The process ends after the blocking snapshot's second batch (chunks 2 and 3: `t`'s keys 11 to 30) was
    stored: its transaction is gone. Replayed (as Spark does when the batch was not committed), the batch reads
    its key ranges again in a new transaction, with the same markers. Going on from it, the next batch reads the
    keys from 31 on in a new transaction, with the stream still paused at the same position: no row comes twice,
    none is missed; then streaming resumes, the changes made meanwhile once."""
    db = tables
    d = Driver(source(mariadb_server, db, 20))
    try:
        streaming(d)
        signal(mariadb_server, db, "b1")
        d.until(lambda o: bool(o.get(inc.BLOCKING)) and o[inc.BLOCKING]["chunk_range"] == [2, 4])
    finally:
        d.src.close()
    before, stored = d.offsets[-2], d.offsets[-1]
    first = reads(d.values)
    assert [(r[0], r[1]) for r in first] == [("a", i) for i in range(1, 6)] + [("t", i) for i in range(1, 31)]
    assert stored[inc.BLOCKING]["resume"] == {"table": f"{db}.t", "from": ["31"]}
    mariadb_server.execute("INSERT INTO t VALUES (200, 'meanwhile'); UPDATE t SET v = 'moved' WHERE id = 25", db)
    replay = Driver(source(mariadb_server, db, 20), before)
    try:
        replayed = reads([e.value_json() for u in replay.src.plan(before, stored) for b in pickle.loads(
            pickle.dumps(u)).read() for e in b.rows() if e.value is not None])
    finally:
        replay.src.close()
    assert [(r[0], r[1], r[3]) for r in replayed] == [(r[0], r[1], r[3]) for r in first if r[0] == "t" and r[1] > 10]
    assert ("t", 25, "moved", "true") in replayed  # (read in the new transaction)

    again = Driver(source(mariadb_server, db, 20), stored)
    try:
        end = again.step()
        assert end[inc.BLOCKING]["chunk_range"] == [0, 2] and end[inc.BLOCKING]["token"] != stored[inc.BLOCKING]["token"]
        assert (end["file"], end["pos"]) == (stored["file"], stored["pos"])
        again.until(lambda o: not o.get(inc.BLOCKING))
        mariadb_server.execute("INSERT INTO done VALUES (1)", db)
        again.until(lambda o: any(v.get("source", {}).get("table") == "done" for v in again.values[-5:]))
    finally:
        again.src.close()
    got = reads(again.values)
    assert [(r[0], r[1]) for r in got] == [("t", i) for i in range(31, 101)] + [("t", 200)]
    assert [r[3] for r in got] == ["true"] * 70 + ["last"]  # (the snapshot's first rows were delivered before)
    streamed = [(v["op"], v["after"]["id"]) for v in again.values
                if v.get("op") != "r" and v.get("source", {}).get("table") == "t"]
    # and after the pause position: streamed once the snapshot is over (Debezium's "possible duplicates")
    assert streamed == [("c", 200), ("u", 25)]


def test_a_restart_inside_a_table_read_by_a_streamed_select_reads_it_again_from_its_start(mariadb_server, tables):
    """`t` read by a statement (a streamed SELECT cut as it is read: its rows after a restart would be other
    rows): the process ends after the batch holding its parts 1 and 2; replayed, that batch reads nothing of it;
    going on, `t` is read again whole (its rows delivered before come again), `a` is not."""
    db = tables
    d = Driver(source(mariadb_server, db, 20))
    try:
        streaming(d)
        insert_signal(pymysql.connect(**mariadb_server.connection_params(db), autocommit=True), "execute-snapshot",
                      {"data-collections": [f"{db}.a", f"{db}.t"], "type": "blocking", "additional-conditions": [
                          {"data-collection": f"{db}.t", "filter": f"SELECT * FROM {db}.t ORDER BY id"}]}, "b1")
        d.until(lambda o: bool(o.get(inc.BLOCKING)) and o[inc.BLOCKING]["chunk_range"] == [2, 4])
    finally:
        d.src.close()
    before, stored = d.offsets[-2], d.offsets[-1]
    assert stored[inc.BLOCKING]["resume"] == {"table": f"{db}.t", "from": None} and stored[inc.BLOCKING]["ranges"] == []
    again = Driver(source(mariadb_server, db, 20), stored)
    try:
        assert again.src.plan(before, stored) == []
        again.until(lambda o: not o.get(inc.BLOCKING))
    finally:
        again.src.close()
    assert [(r[0], r[1]) for r in reads(d.values)] == [("a", i) for i in range(1, 6)] + [("t", i) for i in range(1, 31)]
    got = reads(again.values)
    assert [(r[0], r[1]) for r in got] == [("t", i) for i in range(1, 101)]
    assert got[0][3] == "first_in_data_collection" and got[-1][3] == "last"


def test_blocking_snapshots_in_batches_during_a_live_workload(mariadb_server, mariadb_db, caplog):
    """The shared scenario (`support.blocking_during_workload`: one blocking snapshot by a full SELECT, one whole
    while a workload changes the rows) through the engine, each read in batches of two chunks of 250 rows:
    replaying every event gives the table."""
    from tests.connectors.common import incremental_support as support
    from tests.connectors.mariadb.test_incremental import Run, small, start_workload, table_state
    from tests.connectors.mariadb.test_incremental import signal as send

    rows, db = 3000, mariadb_db
    run = Run(small(mariadb_server, db, rows, **{"headwater.snapshot.chunk.rows": "250",
                                                 "headwater.max.batch.events": "500"}))
    caplog.set_level("INFO", logger="headwater.binlog")
    try:
        run.wait(lambda: run.offset().get("snapshot") in ("completed", "streaming"))
        support.blocking_during_workload(run, lambda *a: send(mariadb_server, db, *a), f"{db}.items", rows,
                                         lambda: start_workload(mariadb_server, db, rows),
                                         lambda n: mariadb_server.execute(f"INSERT INTO done VALUES ({n})", db))
    finally:
        run.stop()
    batches = [[int(n) for n in m.split(": chunks ")[1].removesuffix(" planned so far").replace("..", " of ")
                .split(" of ")] for m in caplog.messages if ": chunks " in m]  # [first, last, of (planned so far)]
    second = next(i for i, b in enumerate(batches) if i and b[0] == 0)
    blue, whole = batches[:second], batches[second:]
    # the blue rows' SELECT (about 1,000 rows): streamed, cut in chunks of 250 rows as it is read, two a batch
    assert [b[:2] for b in blue] == [[0, 1], [2, 3]] and blue[-1][2] == 4
    # the whole table (about 3,000 rows, as the workload leaves it): key ranges, two chunks a batch
    assert len(whole) >= 6 and whole[0][2] >= 11 and all(b[1] - b[0] == 1 for b in whole[:-1])
    assert support.replay(run.events, "items") == table_state(mariadb_server, db)


WARNED = "Error while executing requested blocking snapshot"


def warnings_of(caplog: Any) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING" and WARNED in r.getMessage()]


def streamed_changes(d: Driver) -> list[tuple[str, str, Any]]:
    return [(v["source"]["table"], v["op"], (v["after"] or v["before"])["id"]) for v in d.values
            if v.get("op") in ("c", "u", "d") and v["source"]["table"] != "dbz_signal"]


def test_a_bad_statement_met_mid_snapshot_abandons_it_and_streaming_resumes(mariadb_server, tables, caplog):
    """`a` is three chunks, `t` read by a statement naming a column that does not exist: the first batch delivers
    two chunks of `a`; planning the next meets the error (reading `t`'s SELECT in the held transaction): the
    snapshot is abandoned (WARN, without the password) and that batch streams from where streaming paused, a
    change made during the snapshot once. The rows delivered stay delivered."""
    db = tables
    mariadb_server.execute("INSERT INTO a SELECT seq, CONCAT('a', seq) FROM seq_6_to_30", db)
    d = Driver(source(mariadb_server, db, 20))
    caplog.set_level("INFO")
    try:
        streaming(d)
        insert_signal(pymysql.connect(**mariadb_server.connection_params(db), autocommit=True), "execute-snapshot",
                      {"data-collections": [f"{db}.a", f"{db}.t"], "type": "blocking", "additional-conditions": [
                          {"data-collection": f"{db}.t", "filter": f"SELECT id, nope FROM {db}.t"}]}, "b1")
        d.until(lambda o: bool(o.get(inc.BLOCKING)))
        mariadb_server.execute("UPDATE a SET v = 'changed' WHERE id = 25", db)
        after = d.step()
        assert not after.get(inc.BLOCKING) and d.src.incremental_hooks.blocking.held() is None
        mariadb_server.execute("INSERT INTO done VALUES (1)", db)
        d.until(lambda o: any(v["source"]["table"] == "done" for v in d.values))
    finally:
        d.src.close()
    assert [(r[0], r[1]) for r in reads(d.values)] == [("a", i) for i in range(1, 21)]
    assert streamed_changes(d) == [("a", "u", 25), ("done", "c", 1)]
    warned = warnings_of(caplog)
    assert len(warned) == 1 and "b1" in warned[0] and "Unknown column 'nope'" in warned[0]
    assert mariadb_server.password not in caplog.text


def test_a_table_dropped_after_the_signal_abandons_the_snapshot(mariadb_server, tables, caplog):
    """`t` is dropped once the signal is met, before the snapshot's first batch is planned (the schema history
    still holds it at the pause): cutting it into key ranges fails, nothing is read, streaming resumes."""
    db = tables
    d = Driver(source(mariadb_server, db, 20))
    caplog.set_level("INFO")
    try:
        streaming(d)
        signal(mariadb_server, db, "b2")
        d.until(lambda o: bool(o.get(inc.BLOCKING_PENDING)))
        mariadb_server.execute("DROP TABLE t; INSERT INTO done VALUES (1)", db)
        d.until(lambda o: any(v["source"]["table"] == "done" for v in d.values))
    finally:
        d.src.close()
    assert reads(d.values) == [] and not any(o.get(inc.BLOCKING) for o in d.offsets)
    warned = warnings_of(caplog)
    assert len(warned) == 1 and "b2" in warned[0] and "doesn't exist" in warned[0]


def test_a_query_error_reading_a_chunk_abandons_the_snapshot_there(mariadb_server, tables, caplog, monkeypatch):
    """The error met where a unit takes its chunk's rows (here made up for chunk 3, as a privilege revoked in
    the middle would give): that chunk and the ones after it read nothing, the next batch streams; an error of
    the connection fails the read instead."""
    from headwater.connectors.binlog.snapshot import HeldSnapshot

    read = HeldSnapshot._read

    def failing(self: HeldSnapshot, chunk: SnapshotChunk) -> Any:
        if chunk.index == 3:
            raise pymysql.err.OperationalError(1142, "SELECT command denied to user for table `t`")
        return read(self, chunk)

    monkeypatch.setattr(HeldSnapshot, "_read", failing)
    db = tables
    d = Driver(source(mariadb_server, db, 20))
    caplog.set_level("INFO")
    try:
        streaming(d)
        signal(mariadb_server, db, "b3")
        d.until(lambda o: not o.get(inc.BLOCKING) and any(p.get(inc.BLOCKING) for p in d.offsets))
        mariadb_server.execute("INSERT INTO done VALUES (1)", db)
        d.until(lambda o: any(v["source"]["table"] == "done" for v in d.values))
    finally:
        d.src.close()
    assert [o[inc.BLOCKING]["chunk_range"] for o in d.offsets if o.get(inc.BLOCKING)] == [[0, 2], [2, 4]]
    assert [(r[0], r[1]) for r in reads(d.values)] == [("a", i) for i in range(1, 6)] + [("t", i) for i in range(1, 21)]
    warned = warnings_of(caplog)
    assert len(warned) == 1 and "b3" in warned[0] and "SELECT command denied" in warned[0]


def test_a_lost_connection_fails_the_blocking_snapshot_rather_than_abandoning_it(mariadb_server, tables):
    """The held transaction's connection killed between batches: the read fails (the batch is read again from the
    last durable offset), the snapshot is not abandoned. Errors of the connection, and transient ones, are not
    query errors."""
    assert query_error(pymysql.err.ProgrammingError(1146, "Table 'd.t' doesn't exist"))
    assert not any(query_error(e) for e in (pymysql.err.OperationalError(2013, "Lost connection"),
                                            pymysql.err.InterfaceError(0, ""), pymysql.err.OperationalError(1927, ""),
                                            pymysql.err.OperationalError(1205, "Lock wait timeout exceeded")))
    db = tables
    d = Driver(source(mariadb_server, db, 20))
    try:
        streaming(d)
        signal(mariadb_server, db, "b4")
        d.until(lambda o: bool(o.get(inc.BLOCKING)) and o[inc.BLOCKING]["chunk_range"] == [0, 2])
        held = d.src.incremental_hooks.blocking.held()
        assert held is not None
        mariadb_server.execute(f"KILL {held.conn.thread_id()}")
        with pytest.raises(pymysql.err.MySQLError):  # (lost, or closed by a read ahead that lost it)
            for _ in range(5):
                d.step()
        assert held.failed is None and d.src.incremental_hooks.blocking.held() is held
    finally:
        d.src.close()
