"""The binlog reader's framing (`BinlogReader._stream`) without a server: a stream of events as MariaDB and
MySQL send them (GTID event groups, BEGIN/COMMIT, a DDL statement, heartbeats, a rotation, checksums or
none) fed in reads of every size. A read of one byte at a time takes every packet through `Packets`'
splitter, a large read through the loop's inlined packet reading: both must give the buffer the same
transactions, messages, GTID states and positions, and each message must be its event framed as
`framing` describes (type byte, the event without its checksum, its size field saying so)."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from types import SimpleNamespace

import pymysql
import pytest

from headwater.connectors.binlog import framing as fr
from headwater.connectors.binlog import reader
from headwater.connectors.binlog.connection import ConnectionParams
from headwater.connectors.binlog.gtid import MariaGtids, MySqlGtids
from headwater.connectors.binlog.positions import BinlogPosition, stream_pos

SERVER = 7


def _event(kind: int, body: bytes, next_pos: int, checksum: bool, ts: int = 1_700_000_000) -> bytes:
    size = fr.HEADER_SIZE + len(body) + (4 if checksum else 0)
    event = fr.HEADER.pack(ts, kind, SERVER, size, next_pos, 0) + body
    return event + struct.pack("<I", zlib.crc32(event)) if checksum else event


def _query(sql: str, thread: int = 42, db: bytes = b"shop") -> bytes:
    return struct.pack("<IIBHH", thread, 0, len(db), 0, 0) + db + b"\x00" + sql.encode()


def _stream_events(mariadb: bool, checksum: bool) -> list[bytes]:
    """Events of a binlog: a file's transactions, a rotation, more in the next file, heartbeats between."""
    events: list[bytes] = []
    pos = 4

    def add(kind: int, body: bytes) -> None:
        nonlocal pos
        size = fr.HEADER_SIZE + len(body) + (4 if checksum else 0)
        pos += size
        events.append(_event(kind, body, pos, checksum, ts=1_700_000_000 + len(events)))

    def gtid(seq: int, standalone: bool = False) -> None:
        if mariadb:
            add(fr.MARIADB_GTID, struct.pack("<QIB", seq, 0, 1 if standalone else 0) + bytes(6))
        else:
            add(fr.GTID, b"\x01" + bytes(range(16)) + struct.pack("<Q", seq) + bytes(8))
            if not standalone:
                add(fr.QUERY, _query("BEGIN"))

    table_map = (5).to_bytes(6, "little") + b"\x01\x00" + b"\x04shop\x00\x01t\x00\x02\x03\x08\x00\x00"
    for seq in range(1, 40):  # single-row transactions, some of several rows events
        gtid(seq)
        add(fr.TABLE_MAP, table_map)
        for r in range(1 + seq % 3):
            add(fr.WRITE_ROWS, (5).to_bytes(6, "little") + b"\x01\x00\x02\x00\x02\xff\x00" + bytes([seq, r]) * 6)
        add(fr.XID, struct.pack("<Q", 1000 + seq))
        if seq % 10 == 0:
            events.append(_event(fr.HEARTBEAT, b"binlog.000001", pos, checksum))
    gtid(40, standalone=True)
    add(fr.QUERY, _query("ALTER TABLE t ADD c int"))  # a DDL statement: a transaction of its own
    add(fr.QUERY, _query("BEGIN"))  # an event group without a GTID event
    add(fr.TABLE_MAP, table_map)
    add(fr.DELETE_ROWS, (5).to_bytes(6, "little") + b"\x01\x00\x02\x00\x02\xff\x00" + b"\x01" * 12)
    add(fr.QUERY, _query("COMMIT"))
    add(fr.ROTATE, struct.pack("<Q", 4) + b"binlog.000002")
    pos = 4
    gtid(41)
    add(fr.TABLE_MAP, table_map)
    add(fr.WRITE_ROWS, (5).to_bytes(6, "little") + b"\x01\x00\x02\x00\x02\xff\x00" + b"\x02" * 12)
    add(fr.XID, struct.pack("<Q", 2000))
    events.append(_event(fr.HEARTBEAT, b"binlog.000002", pos, checksum))
    return events


def _packets(events: list[bytes]) -> bytes:
    return b"".join(len(e).to_bytes(3, "little") + bytes(((1 + i) % 256,)) + e
                    for i, e in enumerate(b"\x00" + e for e in events))


class _Reads:
    """A socket file handing out at most `step` bytes a read; the end of the data is a lost connection."""

    def __init__(self, data: bytes, step: int, on_read: Callable[[], None]):
        self.data, self.step, self.at, self.on_read = data, step, 0, on_read

    def read1(self, n: int = -1) -> bytes:
        self.on_read()
        chunk = self.data[self.at:self.at + min(n, self.step)]
        self.at += len(chunk)
        return chunk


def _read(events: list[bytes], step: int, mariadb: bool, checksum: bool, reads: list[int] | None = None,
          trim: bool = False) -> tuple:
    """What the reader's buffer holds after reading `events` in reads of `step` bytes (and in `reads` the
    number of transactions it held at each read); with `trim` the first half of the complete transactions
    held are trimmed off at each read, as the planner does, and what the reader keeps per transaction is
    checked to be those held and the last trimmed (FORGET_SLACK of them at most)."""
    r = reader.BinlogReader(ConnectionParams("localhost", 3306, "u", None), 1, MariaGtids() if mariadb else MySqlGtids(),
                            mariadb, 1 << 30, reader.Retry(0, 0), queries=True)
    at = BinlogPosition("binlog.000001", 4, "")
    sock = SimpleNamespace(gettimeout=lambda: 10.0, settimeout=lambda t: None)

    def on_read() -> None:
        if reads is not None:
            reads.append(len(r.buffer.txns))
        if trim:
            done = [t for t in r.buffer.txns if t.complete]
            if len(done) >= 4:
                r.buffer.trim(done[len(done) // 2 - 1].end_pos or 0, None)
            held = {t.xid for t in r.buffer.txns}
            assert set(r.txn_info) == set(r.gtid_after) >= held

    conn = SimpleNamespace(_sock=sock, _read_timeout=10.0, _rfile=_Reads(_packets(events), step, on_read), _next_seq_id=1,
                           close=lambda: None)

    def dump(_at: BinlogPosition) -> SimpleNamespace:
        r.checksum = checksum
        return conn

    r._dump = dump  # type: ignore[method-assign,assignment]
    r.restart(at)
    with pytest.raises(pymysql.err.OperationalError):  # (the data ends)
        r._stream(r.generation, at)
    buf = r.buffer
    txns = [(t.xid, t.begin_pos, t.commit_pos, t.commit_ts, t.end_pos, t.n_data, t.nbytes, list(t.msgs),
             r.gtid_text(t.xid or 0), r.txn_info.get(t.xid or 0)) for t in buf.txns]
    return txns, buf.received, buf.nbytes, len(r.txn_info)


def _framed(event: bytes, checksum: bool) -> bytes:
    if not checksum:
        return bytes((event[4],)) + event
    body = event[:-4]
    return bytes((event[4],)) + body[:9] + struct.pack("<I", len(body)) + body[13:]


@pytest.mark.parametrize("mariadb", [True, False])
@pytest.mark.parametrize("checksum", [True, False])
def test_reads_of_any_size_frame_the_same_transactions(mariadb, checksum):
    events = _stream_events(mariadb, checksum)
    one_by_one = _read(events, 1, mariadb, checksum)
    assert len(one_by_one[0]) == 42  # 40 event groups, the DDL statement's and the one without a GTID
    for step in (5, 777, 1 << 20):
        assert _read(events, step, mariadb, checksum) == one_by_one
    # each message is its event framed, at the event's position; the heartbeats and rotation move `received`
    kept = [e for e in events if e[4] in fr.ROWS_EVENTS | {fr.TABLE_MAP} or
            (e[4] == fr.QUERY and fr.query(e).sql.startswith("ALTER"))]
    msgs = [m for t in one_by_one[0] for m in t[7]]
    assert [p for _, p in msgs] == [_framed(e, checksum) for e in kept]
    assert [pos & 0xFFFFFFFF for pos, _ in msgs] == [fr.header(e).next_pos - fr.header(e).size for e in kept]
    assert one_by_one[1] == stream_pos("binlog.000002", fr.header(events[-1]).next_pos)
    assert one_by_one[2] == sum(len(p) for _, p in msgs)
    # the GTID state after each transaction, its GTID and its thread
    txns = one_by_one[0]
    if mariadb:
        assert [t[8] for t in txns[:3]] == ["0-7-1", "0-7-2", "0-7-3"]
        assert [t[9] for t in txns[38:]] == [("0-7-39", None), ("0-7-40", None), (None, 42), ("0-7-41", None)]
        assert txns[40][8] == txns[39][8] == "0-7-40" and txns[-1][8] == "0-7-41"
    else:
        assert txns[5][9] == ("00010203-0405-0607-0809-0a0b0c0d0e0f:6", 42)


@pytest.mark.parametrize("step", [1, 1 << 20])
def test_transactions_received_are_in_the_buffer_before_the_reader_waits_for_more(step):
    events = [e for e in _stream_events(True, True) if e[4] != fr.HEARTBEAT]  # (a heartbeat hands them on too)
    reads: list[int] = []
    txns = _read(events, step, True, True, reads)[0]
    assert reads[-1] == len(txns) == 42


@pytest.mark.parametrize("slack", [0, 3])
def test_gtids_of_transactions_trimmed_off_the_buffer_are_dropped(monkeypatch, slack):
    events = _stream_events(True, True)
    whole = {t[0]: t[8:] for t in _read(events, 1 << 20, True, True)[0]}  # (nothing dropped)
    monkeypatch.setattr(reader, "FORGET_SLACK", slack)
    held, _, _, known = _read(events, 97, True, True, trim=True)
    assert 0 < len(held) < 42
    assert known < 42 // 2  # (kept for every transaction read, that would be 42)
    assert [t[8:] for t in held] == [whole[t[0]] for t in held]
