"""`rows.rows_of` against python-mysql-replication on a real MariaDB's binlog: every rows event of a table
of the column types it decodes gives the library's values (partial NOBLOB and MINIMAL images too, their
absent columns ABSENT on both sides); a table with another type is left to the library."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from headwater.connectors.binlog import framing as fr
from headwater.connectors.binlog.rows import rows_of
from headwater.connectors.binlog.streaming import DecodeControl, decode_event, image, map_table

DECODED = """
CREATE TABLE {db}.fast (
    id bigint PRIMARY KEY, ub bigint unsigned, ti tinyint, uti tinyint unsigned, si smallint,
    usi smallint unsigned, mi mediumint, umi mediumint unsigned, i int, ui int unsigned, flag boolean,
    f float, d double, d1 decimal(5,2), d2 decimal(30,10), d3 decimal(10,0), d4 decimal(4,4),
    dt date, dtm datetime, dtm3 datetime(3), dtm6 datetime(6), ts timestamp NULL, ts2 timestamp(2) NULL,
    ts6 timestamp(6) NULL, vc varchar(10), vcl varchar(300), c char(4), tx text, mt mediumtext,
    bl blob, vb varbinary(20), bn binary(3), lat varchar(10) CHARACTER SET latin1
)"""
OTHER = "CREATE TABLE {db}.other (id int PRIMARY KEY, e enum('a','b'), s set('x','y'), t time(3), b bit(5), j json)"
ROWS = [
    "(1, 18446744073709551615, -128, 255, -32768, 65535, -8388608, 16777215, -2147483648, 4294967295, true,"
    " 1.5, -2.25e300, -123.45, 12345678901234567890.0123456789, 9999999999, -0.1234, '2024-02-29',"
    " '1000-01-01 00:00:00', '2024-01-01 12:34:56.789', '9999-12-31 23:59:59.999999', '2038-01-19 03:14:07',"
    " '2001-02-03 04:05:06.07', '1970-01-01 00:00:01.000001', 'héllo', REPEAT('é', 300), 'ab', 'text ☃',"
    " REPEAT('m', 70000), x'00ff10', x'', x'0102', 'café')",
    "(2" + ", NULL" * 32 + ")",
    "(3, 0, 0, 0, 0, 0, 0, 0, 0, 0, false, 0, 0, 0.00, -0.0000000001, -1, 0.0001, '0000-00-00',"
    " '0000-00-00 00:00:00', '2024-00-00 00:00:00.5', '2024-01-01 00:00:00.000001', '1970-01-01 00:00:01',"
    " '1970-01-01 00:00:01.5', '2020-02-02 02:02:02.123456', '', '', '', '', '', '', '', '', '')",
]


def _events(binlog_dir: Path) -> list[bytes]:
    """Every event of the server's binlog files, framed as the reader frames them (type byte, checksum cut)."""
    out = []
    for path in sorted(binlog_dir.glob("binlog.[0-9]*")):
        data = path.read_bytes()
        at = 4
        while at + fr.HEADER_SIZE <= len(data):
            size = struct.unpack_from("<I", data, at + 9)[0]
            event = bytearray(data[at:at + size - 4])
            struct.pack_into("<I", event, 9, size - 4)  # the size without the checksum, as the reader says
            out.append(bytes([event[4]]) + event)
            at += size
    return out


def _library(payload: bytes, table_map: dict[int, Any], ctl: DecodeControl) -> list[tuple[tuple[Any, ...], ...]]:
    ev = decode_event(payload, table_map, ctl)
    names = [str(i) for i in range(len(ev.columns))]
    if payload[0] in fr.UPDATES:
        return [(image(r["before_values"], r.get("before_none_sources") or {}, names),
                 image(r["after_values"], r.get("after_none_sources") or {}, names)) for r in ev.rows]
    return [(image(r["values"], r.get("none_sources") or {}, names),) for r in ev.rows]


def test_rows_match_the_library(mariadb_server, mariadb_db):
    db = mariadb_db
    mariadb_server.execute("SET SESSION sql_mode = ''; " + DECODED.format(db=db) + "; " + OTHER.format(db=db))
    mariadb_server.execute(f"SET SESSION sql_mode = ''; SET time_zone = '+00:00'; INSERT INTO {db}.fast VALUES "
                           + ", ".join(ROWS))
    mariadb_server.execute(f"UPDATE {db}.fast SET i = i + 1, vc = 'x' WHERE id IN (1, 3); "
                           f"UPDATE {db}.fast SET d1 = 1.5 WHERE id = 2; DELETE FROM {db}.fast")
    # partial images (ABSENT where a column is left out): NOBLOB leaves out the TEXT/BLOB columns, MINIMAL more
    mariadb_server.execute(f"SET SESSION binlog_row_image = NOBLOB; INSERT INTO {db}.fast (id, i, tx) VALUES (4, 7, 't'); "
                           f"UPDATE {db}.fast SET vc = 'y' WHERE id = 4; SET SESSION binlog_row_image = MINIMAL; "
                           f"UPDATE {db}.fast SET i = NULL, bl = 'b' WHERE id = 4; DELETE FROM {db}.fast WHERE id = 4")
    mariadb_server.execute(f"INSERT INTO {db}.other VALUES (1, 'b', 'x,y', '-01:02:03.5', b'101', '{{\"a\": 1}}')")
    mariadb_server.execute("FLUSH BINARY LOGS")
    ctl = DecodeControl("mariadb")
    table_map: dict[int, Any] = {}
    seen = {"fast": 0, "other": 0}
    partial = 0
    for payload in _events(Path(mariadb_server.root) / "data"):
        if payload[0] == fr.TABLE_MAP:
            map_table(payload, table_map, ctl)
            continue
        if payload[0] not in fr.ROWS_EVENTS:
            continue
        tm = table_map[fr.table_id(payload[1:])]
        if tm.schema != db:
            continue
        fast = rows_of(payload, table_map)
        if tm.table == "fast":
            assert fast is not None
            partial += fr.partial_image(payload)
            want = _library(payload, table_map, ctl)
            for got_row, want_row in zip(fast, want, strict=True):
                for got_image, want_image in zip(got_row, want_row, strict=True):
                    # repr, not ==: the same type, a Decimal's exponent, a float's every digit
                    pairs = enumerate(zip(got_image, want_image, strict=True))
                    assert [(i, g, w) for i, (g, w) in pairs if repr(g) != repr(w)] == []
        else:
            assert fast is None
        seen[tm.table] += len(fast or _library(payload, table_map, ctl))
    assert seen == {"fast": 3 + 2 + 1 + 3 + 4, "other": 1}
    assert partial == 4
