"""A run of WRITE_ROWS events of one table, decoded column-wise into the JSON (or typed) values of its columns.

Decoding a rows event value by value (`rows.py`) and building each record as a dict costs several
microseconds a row. Here the events of a run are laid end to end in one buffer and walked with
numpy: one step per row *position* in an event, every event at once (a step takes each event's
next row from its start to its end: where no row has a NULL, by the lengths of its length-prefixed
values alone), so a run of single-row transactions is one step and a 1M-row transaction ~120 (an
event holds up to `binlog_row_event_max_size`, 8 KiB). Every row's null bitmap and value offsets are
then read at once, and each column's values from the buffer at once:

- integers (signed or unsigned as the column is, BOOLEAN as true/false) as int64,
- DECIMAL of up to 18 digits in precise mode as its unscaled int64 (Debezium's base64 bytes),
- TIMESTAMP as Debezium's ZonedTimestamp text and DATETIME as micro- or milliseconds,
- character columns in utf8/utf8mb3/utf8mb4 as Arrow strings over the buffer.

Every other column type (and any value a kernel does not take as it is: a zero date, a text JSON
must escape) is read by `rows.py`'s reader and goes through the column's converter and masks, as a
row does; a column with masks goes that way entirely. So the JSON is byte for byte the row-wise
path's (tests compare both on edge values). `decode_writes` answers None for anything `rows.py`
would not decode (then the caller decodes the events one by one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pymysqlreplication.constants import FIELD_TYPE

from headwater.connectors.binlog import framing as fr
from headwater.connectors.binlog import types
from headwater.connectors.binlog.rows import Reader, plan_of, text_encoding
from headwater.connectors.binlog.schema import Table
from headwater.connectors.common.columnar import (
    any_escapable,
    base64_twos_complement,
    decimal_text,
    text_json,
)
from headwater.connectors.common.records import ValueColumn
from headwater.connectors.common.semantics import timestamp_unit
from headwater.events.arrays import binary_array, bool_array, byte_spans, int64_array, lit, ragged_binary
from headwater.events.typed import connect_type

_INT_WIDTHS = {FIELD_TYPE.TINY: 1, FIELD_TYPE.SHORT: 2, FIELD_TYPE.INT24: 3, FIELD_TYPE.LONG: 4,
               FIELD_TYPE.LONGLONG: 8}
_COMPRESSED = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)  # bytes of a NEWDECIMAL's leftover digits
_UTF8 = ("utf8", "utf-8", "utf8mb4", "utf8mb3")
_MICROS_PER_DAY = 86_400_000_000
_PAD = 8  # zero bytes after the buffer: a length read past a malformed event's end stays inside it


def _decimal_groups(precision: int, decimals: int) -> list[tuple[int, int]]:
    """A NEWDECIMAL's digit groups as (bytes, digits), most significant first (see `rows._decimal`)."""
    integral = precision - decimals
    widths = ([integral % 9] if integral % 9 else []) + [9] * (integral // 9 + decimals // 9) + \
        ([decimals % 9] if decimals % 9 else [])
    return [(_COMPRESSED[w], w) for w in widths]


def _layout(column: Any) -> tuple[int, int]:
    """(fixed width, length prefix size) of a TABLE_MAP column that `rows.py` decodes: one of them is 0."""
    t = column.type
    if t in _INT_WIDTHS:
        return _INT_WIDTHS[t], 0
    if t == FIELD_TYPE.FLOAT:
        return 4, 0
    if t == FIELD_TYPE.DOUBLE:
        return 8, 0
    if t == FIELD_TYPE.NEWDECIMAL:
        return sum(size for size, _ in _decimal_groups(column.precision, column.decimals)), 0
    if t == FIELD_TYPE.DATE:
        return 3, 0
    if t == FIELD_TYPE.DATETIME2:
        return 5 + (column.fsp + 1) // 2, 0
    if t == FIELD_TYPE.TIMESTAMP2:
        return 4 + (column.fsp + 1) // 2, 0
    if t == FIELD_TYPE.BLOB:
        return 0, column.length_size
    return 0, 2 if column.max_length > 255 else 1  # VARCHAR, STRING


@dataclass
class RunRows:
    """Where each row's values are in the run's buffer: per row its event and its index in the event;
    per column each row's value offset (`offsets[:, j]`) and whether it is NULL (`nulls[:, j]`)."""

    data: bytes  # the events end to end (then `_PAD` zero bytes)
    buf: np.ndarray  # `data` as uint8
    event: np.ndarray  # per row: its event's index in the run
    row: np.ndarray  # per row: its index in its event (Debezium's source.row)
    offsets: np.ndarray  # (rows, columns) int64
    nulls: np.ndarray  # (rows, columns) bool
    counts: np.ndarray  # rows per event
    begins: np.ndarray  # per event: where it starts in `data` (its type byte)


def _first_rows(buf: np.ndarray, begins: np.ndarray, ends: np.ndarray, ncols: int) -> np.ndarray | None:
    """Where each framed WRITE_ROWS event's (at `begins` of `buf`, ending at `ends`) first row image is,
    or None unless every one is a WRITE_ROWS event whose rows carry every one of `ncols` columns (the
    columns-present bitmap full; fewer than 251 columns: the count one byte)."""
    at = begins + 1 + fr.HEADER_SIZE + 8  # type byte, header, table id, flags
    if ncols >= 251 or (at + 2 > ends).any():
        return None
    kind = buf[begins]
    v2 = kind == fr.WRITE_ROWS
    if not (v2 | (kind == fr.WRITE_ROWS_V1)).all():
        return None
    if v2.any():  # extra data, its length included
        at = at + np.where(v2, buf[at].astype(np.int64) | buf[at + 1].astype(np.int64) << 8, 0)
    bitmap = (ncols + 7) // 8
    if (at + 1 + bitmap > ends).any() or (buf[at] != ncols).any():
        return None
    full = np.frombuffer(((1 << ncols) - 1).to_bytes(bitmap, "little"), dtype=np.uint8)
    if (buf[at[:, None] + 1 + np.arange(bitmap)] != full).any():
        return None
    return at + 1 + bitmap


def _walk_plan(layouts: Sequence[tuple[int, int]]) -> list[tuple[int, int, np.ndarray | int]]:
    """How a row image is walked: (first, last + 1, widths) for a group of fixed-width columns (their
    offsets are one cumulative sum), (column, column + 1, -prefix) for a length-prefixed one."""
    plan: list[tuple[int, int, np.ndarray | int]] = []
    j = 0
    while j < len(layouts):
        if layouts[j][1]:
            plan.append((j, j + 1, -layouts[j][1]))
            j += 1
            continue
        k = j
        while k < len(layouts) and not layouts[k][1]:
            k += 1
        plan.append((j, k, np.array([w for w, _ in layouts[j:k]], dtype=np.int64)))
        j = k
    return plan


def _words(data: bytes, big: bool = False) -> np.ndarray:
    """Every 8-byte word of `data` (little- or big-endian) by the offset of its first byte: an unaligned,
    overlapping view (a value's bytes are one gather, not a gather of each byte)."""
    return np.ndarray((len(data) - 7,), dtype=">u8" if big else "<u8", buffer=data, strides=(1,))


def _read(data: bytes, at: np.ndarray, width: int, *, big: bool = False, signed: bool = False) -> np.ndarray:
    """The integers of `width` (1 to 8) bytes at each offset of `data`, as int64 (an unsigned one of 8
    bytes wraps). Each read takes the word at the offset: `data` ends with `_PAD` bytes, which the
    value at an offset before them is followed by."""
    v = _words(data, big)[at]
    if width < 8:
        v = v >> np.uint64(64 - 8 * width) if big else v & np.uint64((1 << 8 * width) - 1)
    v = v.view(np.int64)
    if signed and width < 8:
        v = (v << (64 - 8 * width)) >> (64 - 8 * width)
    return v


def _walk(data: bytes, pos: np.ndarray, null: np.ndarray | None, walk: list[tuple[int, int, np.ndarray | int]],
          last: int, off: np.ndarray | None = None) -> np.ndarray:
    """The end of each row image whose values start at `pos` (after its null bitmap; `null`: its NULL
    columns, None for none), and with `off` each value's offset into `off[:, column]`. A length
    prefix is read at or before `last` (one past a malformed length's end reads the padding)."""
    for first, stop, widths in walk:
        if isinstance(widths, int):  # a length-prefixed column
            if off is not None:
                off[:, first] = pos
            step = _read(data, np.minimum(pos, last), -widths) - widths
            pos = pos + (step if null is None else np.where(null[:, first], 0, step))
        elif null is None:
            if off is not None:
                off[:, first:stop] = pos[:, None] + (np.cumsum(widths) - widths)
            pos = pos + int(widths.sum())
        else:
            steps = np.where(null[:, first:stop], 0, widths).cumsum(axis=1)
            if off is not None:
                off[:, first] = pos
                off[:, first + 1:stop] = pos[:, None] + steps[:, :-1]
            pos = pos + steps[:, -1]
    return pos


def decode_writes(payloads: Sequence[bytes], tm: Any) -> RunRows | None:
    """The value offsets of the rows of WRITE_ROWS events of TABLE_MAP table `tm` (framed: type byte
    + event without checksum), or None when `rows.py` would not decode them (a column type it leaves
    to python-mysql-replication, a partial row image, a malformed event).

    Rows are found in one step per row position, every event at once: a step takes each event's next
    row's start to its end (its null bitmap, the fixed widths of the columns not NULL, each
    length-prefixed value's length; a step whose rows have no NULL reads only the lengths). Then every
    row's null bitmap and value offsets are read at once. A length that points past its event's end
    shows after the row (offsets only grow within a row: reads stay inside the buffer)."""
    plan = plan_of(tm)
    if plan is None or not payloads:
        return None
    ncols = len(tm.columns)
    walk = _walk_plan([_layout(c) for c in tm.columns])
    sizes = np.fromiter(map(len, payloads), dtype=np.int64, count=len(payloads))
    ends = np.cumsum(sizes)
    begins = ends - sizes
    data = b"".join([*payloads, bytes(_PAD)])
    buf = np.frombuffer(data, dtype=np.uint8)
    if (sizes < 1 + fr.HEADER_SIZE + 8).any():
        return None
    firsts = _first_rows(buf, begins, ends, ncols)
    if firsts is None:
        return None
    last = len(data) - _PAD  # a read at or past this (a malformed length) is moved back to it
    bitmap = (ncols + 7) // 8
    spread = np.arange(bitmap, dtype=np.int64)
    used = np.frombuffer(((1 << ncols) - 1).to_bytes(bitmap, "little"), dtype=np.uint8)  # (the rest: padding)
    if bitmap == 1:
        used = used[0]
    idx = np.nonzero(firsts < ends)[0]
    pos, end = firsts[idx], ends[idx]
    events, starts = [], []
    while len(idx):
        if (pos + bitmap > end).any():
            return None
        bits = buf[pos] if bitmap == 1 else buf[pos[:, None] + spread]
        null = None
        if (bits & used).any():
            null = np.unpackbits(bits.reshape(len(pos), bitmap), axis=1, count=ncols, bitorder="little").view(bool)
        after = _walk(data, pos + bitmap, null, walk, last)
        if (after > end).any():
            return None
        events.append(idx)
        starts.append(pos)
        more = after < end
        if more.all():
            pos = after
        else:
            idx, pos, end = idx[more], after[more], end[more]
    counts = np.bincount(np.concatenate(events), minlength=len(payloads)) if events else \
        np.zeros(len(payloads), dtype=np.int64)
    if not events:  # (events without rows)
        event = start = row = np.zeros(0, dtype=np.int64)
    elif len(events) == 1:  # one row an event: already in order
        event, start = events[0], starts[0]
        row = np.zeros(len(event), dtype=np.int64)
    else:  # rows were found step by step (row k of every event): row k of event e is its first row + k
        begin = np.cumsum(counts) - counts
        dest = np.concatenate([begin[e] + k for k, e in enumerate(events)])
        start = np.empty(len(dest), dtype=np.int64)
        start[dest] = np.concatenate(starts)
        event = np.repeat(np.arange(len(payloads), dtype=np.int64), counts)
        row = np.arange(len(dest), dtype=np.int64) - begin[event]
    nulls = np.unpackbits(buf[start[:, None] + spread], axis=1, count=ncols, bitorder="little").view(bool)
    offsets = np.empty((ncols, len(start)), dtype=np.int64).T  # (a column's offsets contiguous)
    _walk(data, start + bitmap, nulls if nulls.any() else None, walk, last, offsets)
    return RunRows(data, buf, event, row, offsets, nulls, counts, begins)


def header_fields(rows: RunRows) -> tuple[np.ndarray, np.ndarray]:
    """Each event's header timestamp (seconds) and server id, as int64."""
    at = rows.begins + 1  # (after the type byte)
    return _read(rows.data, at, 4), _read(rows.data, at + 5, 4)


# ----------------------------------------------------------------------------- column kernels


def _integers(data: bytes, at: np.ndarray, column: Any) -> np.ndarray:
    """A TABLE_MAP integer column's values as `rows.py` reads them (signed or unsigned as the map says;
    BIGINT UNSIGNED wraps, as its converter does)."""
    return _read(data, at, _INT_WIDTHS[column.type], signed=not column.unsigned)


def _unscaled(data: bytes, at: np.ndarray, column: Any) -> np.ndarray:
    """A NEWDECIMAL of up to 18 digits as its unscaled int64 (the coefficient `rows._decimal` reads:
    groups of digits big-endian, the sign in the first bit, a negative number's bytes inverted)."""
    negative = (_read(data, at, 1) & 0x80) == 0
    out = np.zeros(len(at), dtype=np.int64)
    k = 0
    for size, digits in _decimal_groups(column.precision, column.decimals):
        group = _read(data, at + k, size, big=True)
        if not k:
            group ^= 0x80 << (8 * size - 8)
        out = out * 10 ** digits + np.where(negative, group ^ ((1 << 8 * size) - 1), group)
        k += size
    return np.where(negative, -out, out)


def _fraction(data: bytes, at: np.ndarray, fsp: int) -> np.ndarray:
    """Microseconds of a TIME2/DATETIME2/TIMESTAMP2 fraction at each offset, as `rows._fsp` reads them
    (a value at or below 0 counts as none, as `rows.py` keeps it)."""
    size = (fsp + 1) // 2
    if size == 0:
        return np.zeros(len(at), dtype=np.int64)
    v = _read(data, at, size, big=True, signed=True)
    if fsp % 2:
        v = np.trunc(v / 10).astype(np.int64)
    v = v * 10 ** (6 - fsp)
    return np.where(v > 0, v, 0)


def civil_from_days(days: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Days since 1970-01-01 -> (year, month, day), proleptic Gregorian (Howard Hinnant's algorithm)."""
    z = days + 719468
    era = np.floor_divide(z, 146097)
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = np.where(mp < 10, mp + 3, mp - 9)
    return yoe + era * 400 + (month <= 2), month, day


def days_from_civil(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """(year, month, day) -> days since 1970-01-01, proleptic Gregorian."""
    y = year - (month <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    doy = (153 * np.where(month > 2, month - 3, month + 9) + 2) // 5 + day - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


_PAIRS = np.frombuffer(b"".join(b"%02d" % i for i in range(100)), dtype=np.uint16)  # '00'..'99' as 2 bytes


def _digits(out: np.ndarray, col: int, v: np.ndarray, width: int) -> None:
    """Write `v` (0 <= v < 10**width) as `width` decimal digits into columns col.. of the uint8 matrix
    `out`: two at a time, each pair's bytes one lookup."""
    if width % 2:
        scale = 10 ** (width - 1)
        out[:, col] = 48 + v // scale
        v, col, width = v % scale, col + 1, width - 1
    pairs = out[:, col:col + width].view(np.uint16)  # (the matrix's rows are contiguous)
    for i in range(width // 2 - 1, -1, -1):
        pairs[:, i] = _PAIRS[v % 100] if i else _PAIRS[v]
        v = v // 100


def _iso_json(micros: np.ndarray, digits: int) -> pa.Array:
    """'"YYYY-MM-DDTHH:MM:SS[.f]Z"' (java.iso_timestamp_utc with `digits` fraction digits) of UTC
    microseconds from year 1 to 9999."""
    days, us = np.divmod(micros, _MICROS_PER_DAY)
    secs, frac = np.divmod(us, 1_000_000)
    year, month, day = civil_from_days(days)
    width = 22 + (digits + 1 if digits else 0)
    out = np.empty((len(micros), width), dtype=np.uint8)
    out[:] = np.frombuffer(b'"0000-00-00T00:00:00' + (b"." + b"0" * digits if digits else b"") + b'Z"', np.uint8)
    _digits(out, 1, year, 4)
    _digits(out, 6, month, 2)
    _digits(out, 9, day, 2)
    _digits(out, 12, secs // 3600, 2)
    _digits(out, 15, secs // 60 % 60, 2)
    _digits(out, 18, secs % 60, 2)
    if digits:
        _digits(out, 21, frac // 10 ** (6 - digits), digits)
    return ragged_binary(out, np.full(len(micros), width))


_MONTH_DAYS = np.array([0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)


def _datetime_fields(data: bytes, at: np.ndarray, fsp: int, adjust: bool) -> tuple[np.ndarray, np.ndarray]:
    """DATETIME2 values as microseconds since the epoch (`values.datetime_micros`), and which are
    valid dates (`rows.py` reads the others as None: a zero or impossible date)."""
    v = _read(data, at, 5, big=True)
    ym = v >> 22 & 0x1FFFF
    year, month, day = ym // 13, ym % 13, v >> 17 & 31
    hour, minute, second = v >> 12 & 31, v >> 6 & 63, v & 63
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    limit = _MONTH_DAYS[month] - ((month == 2) & ~leap)
    valid = (year >= 1) & (month >= 1) & (day >= 1) & (day <= limit) & (hour < 24) & (minute < 60) & (second < 60)
    if adjust:
        year = np.where(year <= 69, year + 2000, np.where(year <= 99, year + 1900, year))
    days = days_from_civil(year, np.where(valid, month, 1), np.where(valid, day, 1))
    micros = (days * 86_400 + hour * 3600 + minute * 60 + second) * 1_000_000 + _fraction(data, at + 5, fsp)
    return micros, valid


class ColumnValues:
    """One column of a decoded run: its values' JSON and typed values, column-wise where a kernel
    covers the column's type, else value by value through its converter and masks as a row is."""

    def __init__(self, rows: RunRows, index: int, tm_column: Any, column: Any, reader: Reader,
                 settings: types.TypeSettings):
        self.rows, self.index, self.tm, self.column, self.reader = rows, index, tm_column, column, reader
        self.settings = settings
        self.null = rows.nulls[:, index]
        self.at = np.where(self.null, 0, rows.offsets[:, index])
        self._pyvalues: list[Any] | None = None

    def python(self) -> list[Any]:
        """Each row's value as `rows.py` reads it (None for NULL)."""
        if self._pyvalues is None:
            data, read = self.rows.data, self.reader
            self._pyvalues = [None if n else read(data, a)[0] for n, a in zip(self.null.tolist(), self.at.tolist(),
                                                                                 strict=True)]
        return self._pyvalues

    def kind(self, col: ValueColumn) -> str | None:
        """The kernel that makes this column's JSON, or None (value by value)."""
        if col.maskers:
            return None
        name, unsigned = types.base_type(self.column.type_name)
        t, s = self.tm.type, self.settings
        if t in _INT_WIDTHS and name == "BOOLEAN":
            return "boolean"
        if t in _INT_WIDTHS and name in types.INTEGERS and bool(self.tm.unsigned) == unsigned and not (
                name == "BIGINT" and unsigned and s.bigint_unsigned_mode == "precise"):
            return "integer"
        if t == FIELD_TYPE.NEWDECIMAL and name == "DECIMAL" and s.decimal_mode == "precise" \
                and self.tm.precision <= 18 and self.tm.decimals == (self.column.scale or 0):
            return "decimal"
        if (t, name) in ((FIELD_TYPE.TIMESTAMP2, "TIMESTAMP"), (FIELD_TYPE.DATETIME2, "DATETIME")):
            return name.lower()
        if t in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING, FIELD_TYPE.BLOB) and name in types.STRINGS \
                and text_encoding(self.tm) in _UTF8:
            return "text"
        return None

    def _kernel(self, kind: str) -> tuple[np.ndarray | pa.Array, np.ndarray]:
        """The kernel's values (an int64 numpy array, or for text and timestamps an Arrow array) and
        the rows it leaves to the converter."""
        data, at = self.rows.data, self.at
        slow = np.zeros(len(at), dtype=bool)
        if kind in ("integer", "boolean"):
            return _integers(data, at, self.tm), slow
        if kind == "decimal":
            return _unscaled(data, at, self.tm), slow
        if kind == "timestamp":
            seconds = _read(data, at, 4, big=True, signed=True)
            micros = seconds * 1_000_000 + _fraction(data, at + 4, self.tm.fsp)
            return micros, micros <= 0  # 0: the zero TIMESTAMP (the column's null value)
        if kind == "datetime":
            micros, valid = _datetime_fields(data, at, self.tm.fsp, self.settings.time_adjuster)
            mode = "connect" if self.settings.time_precision_mode == "connect" else "adaptive"
            if timestamp_unit(mode, self.column.length or 0) == "ms":
                micros = micros // 1000
            return micros, ~valid
        prefix = _layout(self.tm)[1]  # text
        length = _read(data, at, prefix)
        length[self.null] = 0  # (a NULL as an empty text where its value would be: the starts stay in order)
        first = np.where(self.null, self.rows.offsets[:, self.index], at + prefix)
        return _strings(self.rows.data, first, length), slow

    def _per_value(self, col: ValueColumn, rows: np.ndarray | None) -> list[Any]:
        """Converted values (of `rows`, else all), as `compile_fill` converts a row's."""
        values = self.python()
        if rows is not None:
            values = [values[i] for i in rows.tolist()]
        fill = col.null_value if col.optional else col.missing
        out = []
        for v in values:
            if v is None:
                v = fill
            elif v.__class__ is str:
                v = col.from_text(v)
            else:
                v = col.from_binary(v)
            for m in col.maskers:
                v = m(v)
            out.append(v)
        return out

    def json(self, col: ValueColumn) -> pa.Array | list:
        """Each row's JSON text of the column `col` (binary), or as parts for `join_parts`: a text
        column without a NULL or a value JSON must escape is its values between two quotes (joined
        once, with the rest of the event)."""
        kind = self.kind(col)
        if kind is None:
            dumps = orjson.dumps
            return binary_array([dumps(v) for v in self._per_value(col, None)])
        values, slow = self._kernel(kind)
        if kind == "text" and isinstance(values, pa.Array) and not self.null.any() and not any_escapable(values):
            return [b'"', values.cast(pa.binary()), b'"']
        if kind == "integer" or kind == "datetime":
            out = decimal_text(values)
        elif kind == "boolean":
            out = pc.if_else(bool_array(values != 0), lit(b"true"), lit(b"false"))
        elif kind == "decimal":
            out = base64_twos_complement(values)
        elif kind == "timestamp":
            micros = np.where(slow | self.null, 1, values)
            out = _iso_json(micros, self.column.length or 0)
        else:
            out, escapes = text_json(values, 0)
            if escapes is not None:
                slow |= np.asarray(escapes.to_numpy(zero_copy_only=False), dtype=bool)
        slow &= ~self.null
        if slow.any():
            rows = np.nonzero(slow)[0]
            fixed = binary_array([orjson.dumps(v) for v in self._per_value(col, rows)])
            out = pc.replace_with_mask(out, bool_array(slow), fixed)
        if self.null.any():
            fill = orjson.dumps(col.null_value if col.optional else col.missing)
            out = pc.if_else(bool_array(self.null), lit(fill), out)
        return out

    def typed(self, col: ValueColumn, schema: dict) -> pa.Array:
        """Each row's typed value of the column `col` (`events.typed`), for its Connect `schema`."""
        typ, convert = connect_type(schema)
        kind = self.kind(col)
        fast = None
        if kind is not None and (col.optional or not self.null.any()):  # (a null stays null)
            fast = self._typed_kernel(kind, typ)
        if fast is None:
            return pa.array([None if v is None else convert(v) for v in self._per_value(col, None)], type=typ)
        out, slow = fast
        slow &= ~self.null
        if slow.any():
            rows = np.nonzero(slow)[0]
            fixed = pa.array([None if v is None else convert(v) for v in self._per_value(col, rows)], type=typ)
            out = pc.replace_with_mask(out, bool_array(slow), fixed)
        if self.null.any():
            out = pc.if_else(bool_array(self.null), pa.nulls(1, typ)[0], out)
        return out

    def _typed_kernel(self, kind: str, typ: pa.DataType) -> tuple[pa.Array, np.ndarray] | None:
        """The kernel's values as the typed column of Arrow type `typ` and the rows it leaves to the
        converter, or None where the kernel's values are not of that type."""
        values, slow = self._kernel(kind)
        if isinstance(values, pa.Array):  # text: the value is the text
            return (values, slow) if typ == pa.string() else None
        if kind == "boolean":
            return (bool_array(values != 0), slow) if typ == pa.bool_() else None
        if kind == "integer" and pa.types.is_integer(typ):
            return int64_array(values).cast(typ), slow  # a value the type cannot hold: ArrowInvalid
        if kind == "datetime" and pa.types.is_timestamp(typ):  # values in the schema's unit
            return int64_array(values).cast(typ), slow
        if kind == "decimal" and pa.types.is_decimal128(typ):
            wide = np.empty((len(values), 2), dtype=np.int64)  # 16 little-endian bytes: the int64, its sign
            wide[:, 0], wide[:, 1] = values, values >> 63
            return pa.Array.from_buffers(typ, len(values), [None, pa.py_buffer(wide)]), slow
        if kind == "timestamp" and typ == pa.string():
            json = _iso_json(np.where(slow | self.null, 1, values), self.column.length or 0)
            return pc.binary_slice(json, 1, -1).cast(pa.string()), slow
        return None


def _strings(data: bytes, first: np.ndarray, length: np.ndarray) -> pa.Array:
    """A string array of the byte ranges [first, first + length) of `data`, which follow each other
    (ValueError: not UTF-8)."""
    return byte_spans(data, first, length).cast(pa.string())


def run_columns(rows: RunRows, tm: Any, table: Table, settings: types.TypeSettings) -> list[ColumnValues]:
    """The columns of a decoded run, in the tracked table's column order (which is the TABLE_MAP's)."""
    plan = plan_of(tm)
    assert plan is not None
    return [ColumnValues(rows, i, c, table.columns[i], plan[i], settings) for i, c in enumerate(tm.columns)]

