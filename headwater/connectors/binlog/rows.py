"""A fast decoder of ROWS events (WRITE/UPDATE/DELETE, v1 and v2) for tables of common column types.

`rows_of` reads a rows event's row images straight from its bytes into tuples in column order, the
values exactly as python-mysql-replication gives them: integers (TINY, SHORT, INT24, LONG,
LONGLONG, signed or unsigned), FLOAT, DOUBLE, NEWDECIMAL (Decimal), DATE, DATETIME2 and TIMESTAMP2
(date / naive datetime, None for a zero date), VARCHAR / STRING / BLOB (str in the column's character
set, bytes for a binary one, which Python has no codec for). A NULL reads as None, a column a partial
row image does not carry (its columns-present bitmap says so) as `images.ABSENT`. It answers None
(decode with python-mysql-replication instead) for a table with any other column type and for a value
the library fails on (text not valid in its character set, an impossible date). The plan of a table
(how to read each column) is worked out once per TABLE_MAP (`plan_of`).
"""

from __future__ import annotations

import codecs
import datetime as dt
import struct
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from pymysql.charset import charset_by_name
from pymysqlreplication.constants import FIELD_TYPE

from headwater.connectors.binlog import framing as fr
from headwater.connectors.binlog.images import ABSENT

Reader = Callable[[bytes, int], tuple[Any, int]]  # (event, offset) -> (value, offset after it)


def _fixed(fmt: str) -> Reader:
    s = struct.Struct(fmt)
    unpack, size = s.unpack_from, s.size

    def read(data: bytes, at: int) -> tuple[Any, int]:
        return unpack(data, at)[0], at + size
    return read


def _int24(signed: bool) -> Reader:
    def read(data: bytes, at: int) -> tuple[Any, int]:
        return int.from_bytes(data[at:at + 3], "little", signed=signed), at + 3
    return read


def _text(length_size: int, encoding: str) -> Reader:
    def read(data: bytes, at: int) -> tuple[Any, int]:
        n = int.from_bytes(data[at:at + length_size], "little")
        at += length_size
        raw = data[at:at + n]
        # without a codec the library keeps the bytes, but an empty value decodes to '' (Python looks no codec up)
        return (raw.decode(encoding) if encoding else raw or ""), at + n
    return read


def _fsp(fsp: int) -> Callable[[bytes, int], tuple[int, int]]:
    """The fractional seconds of TIME2/DATETIME2/TIMESTAMP2 (big-endian, signed as the library reads them)."""
    size = (fsp + 1) // 2
    scale = 10 ** (6 - fsp)

    def read(data: bytes, at: int) -> tuple[int, int]:
        if size == 0:
            return 0, at
        v = int.from_bytes(data[at:at + size], "big", signed=True)
        if fsp % 2:
            v = int(v / 10)
        return v * scale, at + size
    return read


def _timestamp2(fsp: int) -> Reader:
    fraction = _fsp(fsp)

    def read(data: bytes, at: int) -> tuple[Any, int]:
        t = dt.datetime.utcfromtimestamp(int.from_bytes(data[at:at + 4], "big", signed=True))
        micros, at = fraction(data, at + 4)
        return (t.replace(microsecond=micros) if micros > 0 else t), at
    return read


def _datetime2(fsp: int) -> Reader:
    fraction = _fsp(fsp)

    def read(data: bytes, at: int) -> tuple[Any, int]:
        v = int.from_bytes(data[at:at + 5], "big")
        micros, at = fraction(data, at + 5)
        ym = v >> 22 & 0x1FFFF
        try:
            t = dt.datetime(ym // 13, ym % 13, v >> 17 & 31, v >> 12 & 31, v >> 6 & 63, v & 63)
        except ValueError:
            return None, at
        return (t.replace(microsecond=micros) if micros > 0 else t), at
    return read


def _date(data: bytes, at: int) -> tuple[Any, int]:
    v = int.from_bytes(data[at:at + 3], "little")
    year, month, day = v >> 9 & 0x7FFF, v >> 5 & 15, v & 31
    if year == 0 or month == 0 or day == 0:
        return None, at + 3
    return dt.date(year, month, day), at + 3


_COMPRESSED = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)  # bytes of a NEWDECIMAL's leftover digits


def _decimal(precision: int, decimals: int) -> Reader:
    """NEWDECIMAL as python-mysql-replication reads it: groups of 9 digits in 4 big-endian bytes, the
    leftover digits (first of the integral part, last of the fraction) in fewer, the sign in the first
    bit, a negative number's bytes inverted. The digits make one coefficient, `decimals` the exponent:
    the same Decimal as the library's text `[-]digits.digits`."""
    integral = precision - decimals
    widths = ([integral % 9] if integral % 9 else []) + [9] * (integral // 9 + decimals // 9) + \
        ([decimals % 9] if decimals % 9 else [])
    groups = [(_COMPRESSED[w], 10 ** w) for w in widths]
    total = sum(size for size, _ in groups)

    def read(data: bytes, at: int) -> tuple[Any, int]:
        raw = bytearray(data[at:at + total])
        negative = not raw[0] & 0x80
        raw[0] ^= 0x80
        mask = -1 if negative else 0
        coefficient = k = 0
        for size, scale in groups:
            coefficient = coefficient * scale + (int.from_bytes(raw[k:k + size], "big", signed=True) ^ mask)
            k += size
        return Decimal(f"{'-' if negative else ''}{coefficient}E-{decimals}"), at + total
    return read


_INTS = {FIELD_TYPE.TINY: "b", FIELD_TYPE.SHORT: "h", FIELD_TYPE.LONG: "i", FIELD_TYPE.LONGLONG: "q"}


def _reader(column: Any) -> Reader | None:
    """How to read one column's value, or None for a type this module leaves to python-mysql-replication."""
    t = column.type
    if t in _INTS:
        code = _INTS[t]
        return _fixed("<" + (code.upper() if column.unsigned else code))
    if t == FIELD_TYPE.INT24:
        return _int24(not column.unsigned)
    if t == FIELD_TYPE.FLOAT:
        return _fixed("<f")
    if t == FIELD_TYPE.DOUBLE:
        return _fixed("<d")
    if t == FIELD_TYPE.NEWDECIMAL:
        return _decimal(column.precision, column.decimals)
    if t == FIELD_TYPE.DATE:
        return _date
    if t == FIELD_TYPE.DATETIME2:
        return _datetime2(column.fsp)
    if t == FIELD_TYPE.TIMESTAMP2:
        return _timestamp2(column.fsp)
    if t in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING, FIELD_TYPE.BLOB):
        size = column.length_size if t == FIELD_TYPE.BLOB else 2 if column.max_length > 255 else 1
        return _text(size, text_encoding(column))
    return None


def text_encoding(column: Any) -> str:
    """The Python codec a character column's values are decoded with, as python-mysql-replication
    does; "" for a character set Python has no codec for (the library keeps the bytes)."""
    name = column.character_set_name
    charset = charset_by_name(name) if name is not None else None
    encoding = "utf8" if name is None else charset.encoding if charset else name
    try:
        codecs.lookup(encoding)
    except LookupError:
        return ""
    return str(encoding)


_PLANS: dict[int, tuple[Any, tuple[Reader, ...] | None]] = {}  # by id(table): (table, plan)


def plan_of(table: Any) -> tuple[Reader, ...] | None:
    """The readers of a python-mysql-replication Table's columns, or None if one is not decoded here."""
    known = _PLANS.get(id(table))
    if known is not None and known[0] is table:
        return known[1]
    readers = [_reader(c) for c in table.columns]
    plan = None if any(r is None for r in readers) else tuple(r for r in readers if r is not None)
    if len(_PLANS) > 4096:
        _PLANS.clear()
    _PLANS[id(table)] = (table, plan)
    return plan


def _packed_int(data: bytes, at: int) -> tuple[int, int]:
    first = data[at]
    if first < 251:
        return first, at + 1
    size = {252: 2, 253: 3, 254: 8}[first]
    return int.from_bytes(data[at + 1:at + 1 + size], "little"), at + 1 + size


def _image(data: bytes, at: int, plan: tuple[Reader, ...], null_bytes: int) -> tuple[tuple[Any, ...], int]:
    nulls = int.from_bytes(data[at:at + null_bytes], "little")
    at += null_bytes
    out: list[Any] = []
    for i, read in enumerate(plan):
        if nulls >> i & 1:
            out.append(None)
        else:
            value, at = read(data, at)
            out.append(value)
    return tuple(out), at


def _partial_image(data: bytes, at: int, plan: tuple[Reader, ...], present: tuple[int, ...]) -> tuple[tuple[Any, ...], int]:
    """An image carrying only the columns `present` (their null bitmap counts those only); the others ABSENT."""
    null_bytes = (len(present) + 7) // 8
    nulls = int.from_bytes(data[at:at + null_bytes], "little")
    at += null_bytes
    out: list[Any] = [ABSENT] * len(plan)
    for k, i in enumerate(present):
        if nulls >> k & 1:
            out[i] = None
        else:
            out[i], at = plan[i](data, at)
    return tuple(out), at


def rows_of(payload: bytes, table_map: dict[int, Any]) -> list[tuple[tuple[Any, ...], ...]] | None:
    """The row images of a framed rows event (type byte + event without checksum): per row `(image,)`
    for a write or delete, `(before, after)` for an update; None where python-mysql-replication must decode."""
    kind = payload[0]
    event = payload[1:]
    at = fr.HEADER_SIZE
    table = table_map.get(int.from_bytes(event[at:at + 6], "little"))
    if table is None:
        return None
    plan = plan_of(table)
    if plan is None:
        return None
    at += 8  # table id, flags
    if kind in (fr.WRITE_ROWS, fr.UPDATE_ROWS, fr.DELETE_ROWS):
        at += int.from_bytes(event[at:at + 2], "little")  # extra data, its length included
    n, at = _packed_int(event, at)
    if n != len(plan):
        return None
    bitmap_bytes = (n + 7) // 8
    full = (1 << n) - 1
    images = 2 if kind in fr.UPDATES else 1
    presents: list[tuple[int, ...] | None] = []
    for _ in range(images):
        bits = int.from_bytes(event[at:at + bitmap_bytes], "little")
        presents.append(None if bits == full else tuple(i for i in range(n) if bits >> i & 1))
        at += bitmap_bytes
    rows: list[tuple[tuple[Any, ...], ...]] = []
    end = len(event)
    try:
        if presents == [None] * images:
            while at < end:
                first, at = _image(event, at, plan, bitmap_bytes)
                if images == 2:
                    second, at = _image(event, at, plan, bitmap_bytes)
                    rows.append((first, second))
                else:
                    rows.append((first,))
            return rows
        present = [tuple(range(n)) if p is None else p for p in presents]
        while at < end:
            first, at = _partial_image(event, at, plan, present[0])
            if images == 2:
                second, at = _partial_image(event, at, plan, present[1])
                rows.append((first, second))
            else:
                rows.append((first,))
    except (UnicodeDecodeError, ValueError, IndexError):  # the library raises its own error for these
        return None
    return rows
