"""The binlog connectors' incremental-snapshot pieces without a server: the read-only mode's view of a
chunk (MariaDB's exact snapshot position; MySQL's GTID sets, which no MySQL server here can show), the
statements that open it, its retry when it misses a change already delivered, the key text, and MySQL's
refusal of read-only snapshots without GTIDs."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.connectors.binlog import incremental as binlog_inc
from headwater.connectors.binlog.ddl import SchemaState, apply_statement
from headwater.connectors.binlog.gtid import GtidSet
from headwater.connectors.binlog.incremental import BinlogIncremental, ChunkView, KeyText, read_in_view
from headwater.connectors.binlog.positions import BinlogPosition, stream_pos
from headwater.connectors.errors import SourceError
from headwater.connectors.mysql.source import MySqlSource
from headwater.connectors.registry import validate_connector

U1 = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
U2 = "4f22fa47-71ca-11e1-9e33-c80aa9429562"


def mysql(**extra: str) -> Any:
    return validate_connector({"connector.class": "mysql", "database.hostname": "127.0.0.1", "database.user": "u",
                               "database.server.id": "5401", "topic.prefix": "p", **extra})


def test_mariadb_view_sees_the_transactions_ending_by_its_snapshot_position():
    low = stream_pos("binlog.000002", 900)
    view = ChunkView(high=stream_pos("binlog.000002", 1500), low=low)
    assert view.sees(low, None) and view.sees(stream_pos("binlog.000001", 99999), "0-1-7")
    assert not view.sees(low + 1, "0-1-8") and not view.sees(None, None)  # (a transaction not yet whole)
    assert view.covers(BinlogPosition("binlog.000002", 900)) and view.covers(BinlogPosition("binlog.000001", 4))
    assert not view.covers(BinlogPosition("binlog.000002", 901))
    # a batch ending inside a transaction: its rows delivered so far are seen when its commit is before low
    assert view.covers(BinlogPosition("binlog.000002", 700, event=3, txn=1, commit=low - 30))
    assert not view.covers(BinlogPosition("binlog.000002", 700, event=3, txn=1, commit=low + 10))


def test_mysql_view_sees_the_gtids_executed_before_the_select():
    view = ChunkView(high=0, gtids=GtidSet.parse(f"{U1}:1-10,{U2}:1-3"))
    assert view.sees(None, f"{U1}:10") and view.sees(12345, f"{U2}:1")
    assert not view.sees(1, f"{U1}:11") and not view.sees(1, f"{U2}:4") and not view.sees(1, None)
    assert view.covers(BinlogPosition("binlog.000009", 4, f"{U1}:1-10"))
    assert view.covers(BinlogPosition("binlog.000009", 4, ""))
    assert not view.covers(BinlogPosition("binlog.000001", 4, f"{U1}:1-11"))


class Cursor:
    """A cursor that records statements and answers the read-only read's queries."""

    def __init__(self, gtids: list[str], low: list[int], high: int = 5000):
        self.gtids, self.low, self.high = gtids, low, high
        self.statements: list[str] = []
        self.last: Any = None

    def execute(self, sql: str, params: Any = None) -> None:
        self.statements.append(sql)
        if sql == "SELECT @@global.gtid_executed":
            self.last = [(self.gtids.pop(0),)]
        elif sql.startswith("SHOW STATUS LIKE 'binlog_snapshot_%'"):
            self.last = [("binlog_snapshot_file", "binlog.000001"), ("binlog_snapshot_position", self.low.pop(0))]
        elif sql == "SHOW MASTER STATUS":
            self.last = [("binlog.000001", self.high)]
        elif sql.startswith("SELECT"):
            self.last = [("1", "x")]
        else:
            self.last = []

    def fetchone(self) -> Any:
        return self.last[0]

    def fetchall(self) -> Any:
        return self.last


def hooks(dbms: str, cfg: Any) -> BinlogIncremental:
    class Source:
        config = cfg

    Source.dbms = dbms  # type: ignore[attr-defined]
    return BinlogIncremental(Source())  # type: ignore[arg-type]


def test_mysql_reads_the_executed_gtids_before_the_snapshot_and_again_until_the_view_holds_the_delivered(monkeypatch):
    monkeypatch.setattr(binlog_inc, "COVER_WAIT_S", 0)
    cur = Cursor([f"{U1}:1-4", f"{U1}:1-5"], [])
    rows, view = read_in_view(cur, "mysql", "SELECT a FROM t", [], BinlogPosition("binlog.000001", 4, f"{U1}:1-5"))
    assert rows == [("1", "x")] and view is not None and view.gtids == GtidSet.parse(f"{U1}:1-5")
    assert view.high == stream_pos("binlog.000001", 5000)
    once = ["SELECT @@global.gtid_executed", "START TRANSACTION WITH CONSISTENT SNAPSHOT", "SELECT a FROM t", "COMMIT",
            "SHOW MASTER STATUS"]
    assert cur.statements == once + once  # (the first view missed U1:5, delivered already: read again)


def test_mariadb_reads_in_a_consistent_snapshot_at_its_exact_position(monkeypatch):
    monkeypatch.setattr(binlog_inc, "COVER_WAIT_S", 0)
    cur = Cursor([], [300, 300, 800])
    delivered = BinlogPosition("binlog.000001", 700)
    _, view = read_in_view(cur, "mariadb", "SELECT a FROM t", [], delivered)
    assert view is not None and view.low == stream_pos("binlog.000001", 800)
    assert cur.statements.count("START TRANSACTION WITH CONSISTENT SNAPSHOT") == 3
    never = Cursor([], [300] * binlog_inc.COVER_TRIES)
    with pytest.raises(SourceError, match="keeps missing changes already delivered"):
        read_in_view(never, "mariadb", "SELECT a FROM t", [], delivered)


def test_a_key_reads_the_same_from_a_select_and_from_a_binlog_image():
    import datetime as dt
    from decimal import Decimal

    from headwater.connectors.mariadb.source import MariaDbContext

    ctx = MariaDbContext.from_config(validate_connector({
        "connector.class": "mariadb", "database.hostname": "h", "database.user": "u", "database.server.id": "1",
        "topic.prefix": "p"}))
    state = SchemaState(server_charset="utf8mb4")
    apply_statement(state, "CREATE TABLE t (a DECIMAL(6,2), b DATETIME(3), c VARBINARY(8), v INT, "
                           "PRIMARY KEY (a, b, c))", "d")
    t = next(iter(state.tables.values()))
    select = KeyText(ctx, t, ["a", "b", "c"], streaming=False)
    binlog = KeyText(ctx, t, ["a", "b", "c"], streaming=True)
    from_select = select(("1.50", "2024-01-02 03:04:05.500", b"\x00\xff", "7"))
    from_binlog = binlog((Decimal("1.50"), dt.datetime(2024, 1, 2, 3, 4, 5, 500000), b"\x00\xff", 7))
    assert from_select == from_binlog
    assert from_select != select(("1.50", "2024-01-02 03:04:05.501", b"\x00\xff", "7"))


def test_mysql_refuses_read_only_snapshots_without_gtids():
    class Conn:
        def __init__(self, mode: str):
            self.mode = mode

        def cursor(self) -> Any:
            conn = self

            class C:
                def __enter__(self) -> C:
                    return self

                def __exit__(self, *a: object) -> None:
                    pass

                def execute(self, sql: str, params: Any = None) -> None:
                    pass

                def fetchall(self) -> Any:
                    return [("gtid_mode", conn.mode)]
            return C()

    source = MySqlSource(mysql(**{"read.only": "true"}))
    with pytest.raises(SourceError, match="gtid_mode=ON"):
        source.check_read_only(Conn("OFF"))  # type: ignore[arg-type]
    source.check_read_only(Conn("ON"))  # type: ignore[arg-type]
