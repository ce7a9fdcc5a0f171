"""GTIDs of both servers, without a server: MariaDB's per-domain positions and MySQL's `uuid:interval` sets
(MySQL's written to the spec and MySQL's documented set syntax: no MySQL server runs here)."""

from __future__ import annotations

import pytest
from pymysqlreplication.gtid import GtidSet as LibraryGtidSet

from headwater.connectors.binlog import reader as reader_module
from headwater.connectors.binlog.connection import ConnectionParams
from headwater.connectors.binlog.gtid import GtidSet, MariaGtids, MySqlGtids, dump_gtid_payload
from headwater.connectors.binlog.positions import BinlogPosition, split_pos, stream_pos
from headwater.connectors.binlog.reader import BinlogReader, Retry
from headwater.connectors.mysql.source import MySqlSource
from headwater.connectors.registry import validate_connector

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


def test_mariadb_keeps_the_last_gtid_of_each_domain():
    g = MariaGtids()
    state = ""
    for gtid in ("0-1-1", "0-1-2", "1-7-40", "0-2-3"):
        state = g.add(state, gtid)
    assert state == "0-2-3,1-7-40"
    assert g.normalise(" 1-7-40, 0-2-3 ") == "0-2-3,1-7-40"
    with pytest.raises(ValueError, match="domain-server-sequence"):
        g.normalise("0-1")


def test_mysql_sets_merge_intervals_per_source():
    g = MySqlGtids()
    state = ""
    for n in (1, 2, 3, 5, 4, 9):
        state = g.add(state, f"{A}:{n}")
    state = g.add(state, f"{B}:7")
    assert state == f"{A}:1-5:9,{B}:7"
    assert g.normalise(f"{B}:1-3,\n{A}:1-2") == f"{A}:1-2,{B}:1-3"


def test_mysql_source_filters_choose_the_uuids_kept():
    assert MySqlGtids(includes=["3e11.*"]).normalise(f"{A}:1-5,{B}:1-2") == f"{A}:1-5"
    assert MySqlGtids(excludes=["3e11.*"]).normalise(f"{A}:1-5,{B}:1-2") == f"{B}:1-2"
    assert MySqlGtids(excludes=["3e11.*"]).add(f"{B}:1", f"{A}:9") == f"{B}:1"


def test_a_malformed_mysql_set_is_refused():
    with pytest.raises(ValueError, match="not a MySQL GTID set"):
        MySqlGtids().normalise("zz:1-")


def test_positions_order_across_files_and_round_trip():
    assert stream_pos("binlog.000002", 4) > stream_pos("binlog.000001", 999_999)
    assert split_pos("binlog.000001", stream_pos("binlog.000012", 345)) == ("binlog.000012", 345)
    pos = BinlogPosition("binlog.000003", 1234, "0-1-9", 2, stream_pos("binlog.000003", 1300), 9999)
    assert BinlogPosition.from_offset(pos.to_offset()) == pos
    assert pos.to_offset() == {"file": "binlog.000003", "pos": 1234, "gtids": "0-1-9", "event": 2,
                               "txn": stream_pos("binlog.000003", 1300), "commit": 9999}


# ---------------------------------------------------------------------------------------------- MySQL sets
# Written from MySQL's documented GTID set syntax and replication protocol (COM_BINLOG_DUMP_GTID, the
# encoded set) and Debezium's MySQL connector's rules; no MySQL server runs here, so the packets are
# synthetic, built by hand from the protocol's layout, and the server's side is a stand-in.


def test_gtid_sets_normalise_and_do_arithmetic():
    s = GtidSet.parse(f"{B.upper()}:7, {A}:11-18:1-5:6:3")
    assert str(s) == f"{A}:1-6:11-18,{B}:7"
    t = GtidSet.parse(f"{A}:4-12")
    assert str(s | t) == f"{A}:1-18,{B}:7"
    assert str(s - t) == f"{A}:1-3:13-18,{B}:7"
    assert str(s & t) == f"{A}:4-6:11-12"
    assert GtidSet.parse(f"{A}:2-3") <= s and not t <= s
    assert str(s.retain(lambda u: u == B)) == f"{B}:7"
    assert str(s.replaced_by(GtidSet.parse(f"{A}:1-2"))) == f"{A}:1-2,{B}:7"
    assert str(GtidSet.parse("")) == "" and GtidSet.parse("") <= s
    for bad in (f"{A}:0", f"{A}:5-3", f"{A}", "3e11fa47:1", f"{A}:1-"):
        with pytest.raises(ValueError):
            GtidSet.parse(bad)


def test_adding_a_gtid_already_in_the_set_changes_nothing():
    assert MySqlGtids().add(f"{A}:1-5", f"{A}:3") == f"{A}:1-5"
    assert MySqlGtids().add(f"{A}:1-5", f"{A}:6") == f"{A}:1-6"


def test_the_set_a_restart_asks_for_is_debeziums():
    g = MySqlGtids()
    executed = f"{A}:1-20,{B}:1-5"
    # the offset's intervals; a source the offset does not know: all of it is sent
    assert str(g.dump_set(f"{A}:1-10", executed, "")) == f"{A}:1-10"
    # ... except what the server purged, which it can no longer send
    assert str(g.dump_set(f"{A}:1-10", executed, f"{B}:1-3")) == f"{A}:1-10,{B}:1-3"
    # a source the filters exclude is left out of the offset's part
    only_a = MySqlGtids(includes=["3e11.*"])
    assert str(only_a.dump_set(f"{A}:1-10,{B}:1-4", executed, "")) == f"{A}:1-10"


def test_a_set_the_server_cannot_resume_from_is_lost():
    g = MySqlGtids()
    assert g.lost(f"{A}:1-10", f"{A}:1-20", f"{A}:1-5") is None
    assert g.lost("", f"{A}:1-20", "") is None
    purged = g.lost(f"{A}:1-10", f"{A}:1-20", f"{A}:1-12")
    assert purged is not None and f"{A}:11-12" in purged and "purged" in purged
    unknown = g.lost(f"{A}:1-30", f"{A}:1-20", "")
    assert unknown is not None and f"{A}:21-30" in unknown
    assert "gtid_mode" in (g.lost(f"{A}:1-3", "", "") or "")
    # a purged source the filters exclude does not matter
    assert MySqlGtids(excludes=[B]).lost(f"{A}:1-10", f"{A}:1-20,{B}:1-9", f"{B}:1-9") is None
    assert g.lost(f"{A}:1-10", f"{A}:1-20,{B}:1-9", f"{B}:1-9") is not None


def _u64(n: int) -> bytes:
    return n.to_bytes(8, "little")


def test_the_encoded_set_follows_the_protocol():
    s = GtidSet.parse(f"{B}:7,{A}:1-5:11-18")
    expected = (_u64(2)
                + bytes.fromhex(A.replace("-", "")) + _u64(2) + _u64(1) + _u64(6) + _u64(11) + _u64(19)
                + bytes.fromhex(B.replace("-", "")) + _u64(1) + _u64(7) + _u64(8))
    assert s.encoded() == expected
    # python-mysql-replication, written independently, encodes the same set the same way
    assert s.encoded() == LibraryGtidSet(f"{A}:1-5:11-18,{B}:7").encoded()
    payload = dump_gtid_payload(5421, s)
    assert payload == (b"\x04\x00" + (5421).to_bytes(4, "little") + (0).to_bytes(4, "little") + _u64(4)
                       + len(expected).to_bytes(4, "little") + expected)


class _Cursor:
    def __init__(self, conn: _Connection):
        self.conn = conn

    def __enter__(self) -> _Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def execute(self, sql: str, args: object = None) -> None:
        self.conn.sql.append(sql)

    def fetchone(self) -> tuple[str, str]:
        last = self.conn.sql[-1]
        return (f"{A}:1-20,{B}:1-9", f"{B}:1-4") if "gtid_executed" in last else ("CRC32",)  # type: ignore[return-value]


class _Connection:
    """A stand-in for MySQL's side of the dump (no MySQL server runs here): what the reader sends."""

    def __init__(self) -> None:
        self.sql: list[str] = []
        self.commands: list[tuple[int, bytes]] = []

    def cursor(self) -> _Cursor:
        return _Cursor(self)

    def _execute_command(self, command: int, payload: bytes) -> None:
        self.commands.append((command, payload))


def test_a_mysql_restart_from_gtids_sends_com_binlog_dump_gtid(monkeypatch):
    conn = _Connection()
    monkeypatch.setattr(reader_module, "connect", lambda *a, **k: conn)
    reader = BinlogReader(ConnectionParams("h", 1, "u", "p"), 5421, MySqlGtids(), False, 1 << 20, Retry(0, 0))
    assert reader._dump(BinlogPosition("mysql-bin.000009", 1234, f"{A}:1-10")) is conn
    assert conn.commands == [(0x1E, dump_gtid_payload(5421, GtidSet.parse(f"{A}:1-10,{B}:1-4")))]
    # without GTIDs, the file and position (COM_BINLOG_DUMP)
    conn.commands.clear()
    reader._dump(BinlogPosition("mysql-bin.000009", 1234, ""))
    assert [c for c, _ in conn.commands] == [0x12] and conn.commands[0][1].endswith(b"mysql-bin.000009")


def test_a_mysql_source_checks_a_stored_gtid_set_against_the_server(monkeypatch):
    src = MySqlSource(validate_connector({"connector.class": "mysql", "database.hostname": "h", "database.user": "u",
                                          "database.password": "p", "database.server.id": "5", "topic.prefix": "m"}))
    monkeypatch.setattr(src, "_query", lambda sql, args=(): [(f"{A}:1-20", f"{A}:1-12")])
    why = src.position_unavailable({"file": "elsewhere-bin.000001", "pos": 4, "gtids": f"{A}:1-10"})
    assert why is not None and f"{A}:11-12" in why
    assert src.position_unavailable({"file": "elsewhere-bin.000001", "pos": 4, "gtids": f"{A}:1-12"}) is None
