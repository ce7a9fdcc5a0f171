"""Binlog events as raw bytes: the event types the connector tells apart and the few fields it reads.

The reader keeps each event as it came (header and body, the checksum cut off) and reads only
what framing needs: the header (time, type, server id, size, next position), a GTID event's GTID,
a QUERY event's thread, database and statement, a ROTATE event's next file, a TABLE_MAP's table
id and name. Row values are decoded later, in the work units (`streaming.py`). Layouts of MySQL 5.6+/8 and
MariaDB 10.x (binlog version 4).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

HEADER = struct.Struct("<IBIIIH")  # timestamp, type, server id, event size, next position, flags
HEADER_SIZE = HEADER.size  # 19

QUERY = 2
ROTATE = 4
XID = 16
TABLE_MAP = 19
WRITE_ROWS_V1, UPDATE_ROWS_V1, DELETE_ROWS_V1 = 23, 24, 25
HEARTBEAT = 27
ROWS_QUERY = 29  # MySQL's binlog_rows_query_log_events
WRITE_ROWS, UPDATE_ROWS, DELETE_ROWS = 30, 31, 32
GTID = 33  # MySQL
ANONYMOUS_GTID = 34
MARIADB_ANNOTATE_ROWS = 160
MARIADB_GTID = 162
MARIADB_FL_STANDALONE = 1  # a GTID event group without BEGIN/COMMIT (DDL, non-transactional statements)

ROWS_EVENTS = frozenset((WRITE_ROWS_V1, UPDATE_ROWS_V1, DELETE_ROWS_V1, WRITE_ROWS, UPDATE_ROWS, DELETE_ROWS))
WRITES = frozenset((WRITE_ROWS_V1, WRITE_ROWS))
UPDATES = frozenset((UPDATE_ROWS_V1, UPDATE_ROWS))
DELETES = frozenset((DELETE_ROWS_V1, DELETE_ROWS))


class Header(NamedTuple):
    timestamp: int  # seconds
    type: int
    server_id: int
    size: int
    next_pos: int  # the position after this event in its file (0 for artificial events)
    flags: int


def header(event: bytes, at: int = 0) -> Header:
    """The header of the event at `at` of `event`."""
    return Header(*HEADER.unpack_from(event, at))


def table_id(event: bytes) -> int:
    """The table id of a TABLE_MAP or rows event (6 bytes after the header)."""
    return int.from_bytes(event[HEADER_SIZE:HEADER_SIZE + 6], "little")


def framed_table_id(payload: bytes) -> int:
    """`table_id` of a framed event (type byte + event), without copying it."""
    return int.from_bytes(payload[1 + HEADER_SIZE:7 + HEADER_SIZE], "little")


class BinlogKinds:
    """Rows events are data, TABLE_MAP events layouts (by the event type byte the reader puts first)."""

    data_kinds = ROWS_EVENTS
    layout_kind = TABLE_MAP

    def layout_id(self, payload: bytes) -> int:
        return framed_table_id(payload)


def table_map_name(payload: bytes) -> tuple[str, str]:
    """The database and table a framed TABLE_MAP event names (without decoding its columns)."""
    at = 1 + HEADER_SIZE + 8  # table id, flags
    n = payload[at]
    database = payload[at + 1:at + 1 + n].decode("utf-8", "replace")
    at += n + 2  # the name and its NUL
    m = payload[at]
    return database, payload[at + 1:at + 1 + m].decode("utf-8", "replace")


def partial_image(payload: bytes) -> bool:
    """Whether a framed rows event's columns-present bitmaps leave a column out (binlog_row_image NOBLOB
    or MINIMAL)."""
    kind = payload[0]
    at = 1 + HEADER_SIZE + 8  # type byte, header, table id, flags
    if kind in (WRITE_ROWS, UPDATE_ROWS, DELETE_ROWS):
        at += int.from_bytes(payload[at:at + 2], "little")  # extra data, its length included
    n = payload[at]
    at += 1
    if n >= 251:
        size = {252: 2, 253: 3, 254: 8}[n]
        n = int.from_bytes(payload[at:at + size], "little")
        at += size
    size = (n + 7) // 8
    full = (1 << n) - 1
    for _ in range(2 if kind in UPDATES else 1):
        if int.from_bytes(payload[at:at + size], "little") != full:
            return True
        at += size
    return False


def rotate_file(event: bytes) -> tuple[str, int]:
    """A ROTATE event's next file and position."""
    pos = struct.unpack_from("<Q", event, HEADER_SIZE)[0]
    return event[HEADER_SIZE + 8:].decode(), pos


_SERVER_ID = struct.Struct("<I").unpack_from  # (5 bytes into the header)
_MARIADB_GTID = struct.Struct("<QIB").unpack_from


def mariadb_gtid(event: bytes) -> tuple[str, bool]:
    """A MariaDB GTID event's GTID (`domain-server-sequence`) and whether it stands alone (no BEGIN)."""
    domain, server, seq, standalone = mariadb_gtid_at(event, 0)
    return f"{domain}-{server}-{seq}", standalone


def mariadb_gtid_at(buf: bytes, at: int) -> tuple[int, int, int, bool]:
    """`mariadb_gtid` of the event at `at` of `buf`, as numbers (domain, server id, sequence), without
    copying the event."""
    server = _SERVER_ID(buf, at + 5)[0]
    seq, domain, flags = _MARIADB_GTID(buf, at + HEADER_SIZE)
    return domain, server, seq, bool(flags & MARIADB_FL_STANDALONE)


def mysql_gtid(event: bytes) -> str:
    """A MySQL GTID event's GTID (`uuid:sequence`)."""
    sid = event[HEADER_SIZE + 1:HEADER_SIZE + 17].hex()
    gno = struct.unpack_from("<Q", event, HEADER_SIZE + 17)[0]
    return f"{sid[:8]}-{sid[8:12]}-{sid[12:16]}-{sid[16:20]}-{sid[20:]}:{gno}"


class Query(NamedTuple):
    thread: int
    database: str
    sql: str


def query(event: bytes) -> Query:
    """A QUERY event's thread id, current database and statement."""
    thread, _, db_len, _, vars_len = struct.unpack_from("<IIBHH", event, HEADER_SIZE)
    at = HEADER_SIZE + 13 + vars_len
    database = event[at:at + db_len].decode("utf-8", "replace")
    return Query(thread, database, event[at + db_len + 1:].decode("utf-8", "replace"))


def annotate(event: bytes) -> str:
    """The statement of a MariaDB ANNOTATE_ROWS event or a MySQL ROWS_QUERY event."""
    body = event[HEADER_SIZE:]
    if header(event).type == ROWS_QUERY:
        body = body[1:]  # a length byte (truncated to 255), then the whole statement
    return body.decode("utf-8", "replace")
