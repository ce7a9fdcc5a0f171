"""`textrows.read_text_rows` on a real MariaDB: the rows equal what a PyMySQL cursor reads (every value's
type and text, NULLs, binary values, long values with 2- and 3-byte length prefixes, a row over 16 MiB),
the columns are Arrow strings or binaries, and the connection stays usable after a result and an error;
read `n` rows at a time (`RowStream`), the same rows. The packet walk on made-up streams, cut anywhere:
every row found (also taken `n` at a time, the end known with the last), wrong sequence ids and error
packets refused wherever they are, nothing read past the end of the rows."""

from __future__ import annotations

import pickle
import random
import struct

import numpy as np
import pyarrow as pa
import pymysql
import pytest

from headwater.connectors.binlog import textrows
from headwater.connectors.binlog.snapshot import TEXT_VALUES
from headwater.connectors.binlog.textrows import RowStream, read_text_rows

TABLE = """CREATE TABLE t (
    id INT PRIMARY KEY, i BIGINT UNSIGNED, d DECIMAL(20,5), f DOUBLE, dt DATETIME(6), tm TIME(3), y YEAR,
    vc VARCHAR(300), tx MEDIUMTEXT, lt LONGTEXT, bn BINARY(4), vb VARBINARY(20), bl LONGBLOB, bt BIT(10),
    e ENUM('a', 'b'), s SET('x', 'y'), j JSON, g GEOMETRY, u UUID
)"""
ROWS = [
    "(1, 18446744073709551615, -123456789012345.12345, 1.5e-300, '2024-02-29 12:34:56.123456', '-838:59:59.999',"
    " 2024, 'héllo ☃', REPEAT('m', 70000), REPEAT('é', 40000), x'00ff', x'', x'00010203', b'1010101010',"
    " 'b', 'x,y', '{\"a\": [1, null]}', ST_GeomFromText('POINT(1 2)'), '123e4567-e89b-12d3-a456-426614174000')",
    "(2" + ", NULL" * 18 + ")",
    "(3, 0, 0, 0, '0000-00-00 00:00:00', '00:00:00', 0, '', '', '', x'', x'', x'', b'0', '', '', '[]',"
    " ST_GeomFromText('POINT(0 0)'), '00000000-0000-0000-0000-000000000000')",
]


@pytest.fixture
def conn(mariadb_server, mariadb_db):
    mariadb_server.execute("SET SESSION sql_mode = ''; " + TABLE + "; INSERT INTO t VALUES " + ", ".join(ROWS),
                           mariadb_db)
    c = pymysql.connect(**mariadb_server.connection_params(mariadb_db), conv=TEXT_VALUES, charset="utf8mb4",
                        max_allowed_packet=64 << 20)
    yield c
    c.close()


def pymysql_rows(conn: pymysql.Connection, sql: str, args: tuple = ()) -> list[tuple]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def test_rows_equal_a_pymysql_cursors(conn):
    got = read_text_rows(conn, "SELECT * FROM t WHERE id >= %s ORDER BY id", [1])
    assert len(got) == 3
    want = pymysql_rows(conn, "SELECT * FROM t WHERE id >= %s ORDER BY id", (1,))
    assert got.tuples() == want  # (== compares types too: str is never equal to bytes)
    types = [c.type for c in got.columns()]
    assert types == [pa.binary() if any(isinstance(r[j], bytes) for r in want) else pa.string()
                     for j in range(len(types))]
    assert got.slice(1, 3).tuples() == want[1:] and got.tuples(2) == [r[:2] for r in want]
    again = pickle.loads(pickle.dumps(got))  # (compressed in the pickle: the rows are over 64 KiB)
    assert len(pickle.dumps(got)) < len(got.data) / 2 and again.tuples() == want


def test_an_empty_result_an_error_and_a_huge_row_leave_the_connection_usable(conn):
    assert len(read_text_rows(conn, "SELECT * FROM t WHERE id < 0")) == 0
    with pytest.raises(pymysql.err.OperationalError, match="nothing"):
        read_text_rows(conn, "SELECT nothing FROM t")
    with conn.cursor() as cur:  # a row of more than 16 MiB comes in several packets
        cur.execute("UPDATE t SET bl = REPEAT(x'61', 20000000), lt = REPEAT('b', 300) WHERE id = 3")
    got = read_text_rows(conn, "SELECT id, bl, lt, vc FROM t ORDER BY id")
    assert got.tuples() == pymysql_rows(conn, "SELECT id, bl, lt, vc FROM t ORDER BY id")
    assert pymysql_rows(conn, "SELECT COUNT(*) FROM t") == [("3",)]


def test_rows_taken_n_at_a_time_are_the_rows_and_the_connection_is_free_after(conn):
    with conn.cursor() as cur:  # (the 20 MiB row: several packets, taken with the rows around it)
        cur.execute("INSERT INTO t (id, vc) SELECT seq, CONCAT('v', seq) FROM seq_4_to_40")
        cur.execute("UPDATE t SET bl = REPEAT(x'61', 20000000) WHERE id = 5")
    want = read_text_rows(conn, "SELECT * FROM t ORDER BY id").tuples()
    for n in (1, 2, 5, 40):
        stream = RowStream(conn, "SELECT * FROM t WHERE id > %s ORDER BY id", [0])
        got, ends = [], []
        while not stream.done:
            part = stream.take(n)
            got += part.tuples()
            ends.append((len(part), stream.done))
        assert got == want
        assert ends == [(min(n, 40 - i), i + n >= 40) for i in range(0, 40, n)]  # the end known with the last
        assert pymysql_rows(conn, "SELECT COUNT(*) FROM t") == [("40",)]
    stream = RowStream(conn, "SELECT * FROM t")
    assert len(stream.take(3)) == 3 and not stream.done
    stream.drain()
    assert stream.done and pymysql_rows(conn, "SELECT MAX(id) FROM t") == [("40",)]
    empty = RowStream(conn, "SELECT * FROM t WHERE id < 0")
    assert len(empty.take(5)) == 0 and empty.done


class Stream:
    """A socket's file as `_row_packets` reads it: `read1` hands at most `chunk` bytes; reading past the
    end is a test failure (the real socket would wait for the server, which has nothing more to send)."""

    def __init__(self, data: bytes, chunk: int):
        self.data, self.chunk, self.at = data, chunk, 0

    def read1(self, size: int) -> bytes:
        assert self.at < len(self.data), "read past the end of what the server sent"
        out = self.data[self.at:self.at + min(size, self.chunk)]
        self.at += len(out)
        return out


def packets(payloads: list[bytes], seq: int) -> bytes:
    out = b""
    for p in payloads:
        out += struct.pack("<I", len(p) | seq << 24) + p
        seq = (seq + 1) & 255
    return out


EOF_PACKET = b"\xfe\x00\x00\x22\x00"
ERROR = b"\xff" + struct.pack("<H", 1054) + b"#42S22Unknown column 'nothing' in 'field list'"


def test_the_walk_finds_every_row_wherever_the_reads_cut_the_stream():
    rows = [bytes([n]) + b"v" * n for n in (8, 0, 3, 250, 7, 60, 8, 8, 100)] * 40  # (short rows are not EOFs)
    data = packets([*rows, EOF_PACKET], 254)  # (sequence ids wrap around)
    want = [sum(4 + len(r) for r in rows[:i]) + 4 for i in range(len(rows))]
    for chunk in (1, 3, 4, 5, 13, 64, 1000, len(data)):
        buf, starts, seq = textrows._row_packets(Stream(data, chunk), 254)
        assert starts == want and seq == (254 + len(rows) + 1) & 255
        assert bytes(buf) == data[:len(data) - 4 - len(EOF_PACKET)]
    assert textrows._row_packets(Stream(packets([EOF_PACKET], 1), 7), 1)[1:] == ([], 2)


@pytest.mark.parametrize("n", [1, 7, 360, 1000])
def test_rows_taken_n_at_a_time_are_every_row_with_the_end_known_at_the_last(n):
    rows = [bytes([k]) + b"v" * k for k in (8, 0, 3, 250, 7, 60, 8, 8, 100)] * 40
    data = packets([*rows, EOF_PACKET], 254)
    for chunk in (1, 5, 64, 1000, len(data)):
        walk = textrows.RowPackets(Stream(data, chunk), 254)
        taken = []
        while not walk.done:
            buf, starts = walk.take(n)
            taken.append([bytes(buf[s:s + 1 + buf[s]]) for s in starts])
            assert bool(walk.done) == (sum(map(len, taken)) == len(rows))  # known with the last row, not after
        assert [len(t) for t in taken] == [min(n, len(rows) - i) for i in range(0, len(rows), n)]
        assert [r for t in taken for r in t] == rows and walk.seq == (254 + len(rows) + 1) & 255


@pytest.mark.parametrize("at", [0, 1, 30, 59])
def test_a_wrong_sequence_id_is_refused_wherever_it_is(at):
    rows = [bytes([20]) + b"r" * 20] * 60
    rows[at:at] = [b"\x02ab"]  # a short row there too, taken one by one
    data = bytearray(packets([*rows, EOF_PACKET], 5))
    for short in (False, True):
        bad = bytearray(data)
        i = sum(4 + len(r) for r in rows[:at if short else at + 2])
        bad[i + 3] ^= 0x10
        for chunk in (7, 1 << 20):
            with pytest.raises(pymysql.err.InternalError, match="Packet sequence number wrong - got"):
                textrows._row_packets(Stream(bytes(bad), chunk), 5)
    with pytest.raises(pymysql.err.InternalError, match="got 5 expected 6"):
        textrows._row_packets(Stream(bytes(data), 1 << 20), 6)


@pytest.mark.parametrize("at", [0, 1, 30])
def test_an_error_packet_among_the_rows_is_raised_without_waiting_for_more(at):
    rows = [bytes([20]) + b"r" * 20] * 31
    for chunk in (9, 1 << 20):
        with pytest.raises(pymysql.err.OperationalError, match="Unknown column 'nothing'"):
            textrows._row_packets(Stream(packets([*rows[:at], ERROR], 3), chunk), 3)


def test_data_after_the_end_of_the_rows_is_refused():
    with pytest.raises(pymysql.err.InternalError, match="data after the end"):
        textrows._row_packets(Stream(packets([b"\x01a" * 10, EOF_PACKET, b"\x01a"], 0), 1 << 20), 0)


def _lenenc(value: bytes | None) -> bytes:
    """A value of a text row: NULL, or its length (length-encoded) and bytes."""
    if value is None:
        return b"\xfb"
    n = len(value)
    head = bytes([n]) if n < 0xFB else b"\xfc" + n.to_bytes(2, "little") if n < 1 << 16 \
        else b"\xfd" + n.to_bytes(3, "little") if n < 1 << 24 else b"\xfe" + n.to_bytes(8, "little")
    return head + value


@pytest.mark.parametrize("kinds", ["short", "mixed"])
def test_the_columns_are_each_rows_values(kinds: str):
    """`TextRows.columns` on made-up rows: columns of short values only (one step a column), and columns
    mixing NULLs and values with 1-, 3- and 4-byte length prefixes, in any order."""
    rnd = random.Random(kinds)
    sizes = [0, 1, 7, 250] if kinds == "short" else [0, 1, 250, 251, 300, 65535, 65536, 70000]
    rows = []
    for i in range(60):
        rows.append(tuple(None if kinds == "mixed" and rnd.random() < 0.2 else
                          bytes([97 + (i + j) % 26]) * rnd.choice(sizes) for j in range(4)))
    rows.append((b"a", b"bc", b"", b"d"))  # (a column short in every other row is short here too)
    data = packets([b"".join(_lenenc(v) for v in r) for r in rows], 0)
    starts, at = [], 0
    for r in rows:
        starts.append(at + 4)
        at += 4 + sum(len(_lenenc(v)) for v in r)
    text = textrows.TextRows(data, np.array(starts, dtype=np.int64), (False, True, False, True))
    for part, want in ((text, rows), (text.slice(3, 40), rows[3:40]), (text.slice(5, 5), [])):
        assert part.tuples() == [tuple(v if v is None or b else v.decode() for v, b in zip(r, (0, 1, 0, 1), strict=True))
                                 for r in want]
