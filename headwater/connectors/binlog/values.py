"""MySQL/MariaDB values as the server and python-mysql-replication give them, read into plain numbers.

The text protocol's temporal strings (`parse_date`, `parse_datetime`, `parse_time`), the Python
objects python-mysql-replication makes of row images (`date_days`, `datetime_micros`,
`replication_time_micros`, `replication_values`, with what it gets wrong undone), decimals
(`unscaled`), two-digit years (`adjust_year`, `enable.time.adjuster`), BIT values in both forms
(`bits_from_bytes`, `bits_from_string`, little-endian as Debezium writes them), spatial values
(`split_geometry`, `point_xy`: MySQL's 4-byte SRID prefix and WKB), UUIDs (`uuid_from_bytes`, as
Debezium's MariaDB connector reads the binlog's image) and ENUM/SET members (`escape_option`,
`member_value`).
A date whose month or day is 0 (a zero or partial zero date) reads as None: Debezium writes no
date for it.
"""

from __future__ import annotations

import datetime as dt
import struct
from decimal import Decimal
from typing import Any

from pymysqlreplication.constants import NONE_SOURCE

from headwater.connectors.binlog.images import ABSENT
from headwater.events.calendar import days_from_civil

MICROS_PER_SECOND = 1_000_000
MICROS_PER_DAY = 86_400 * MICROS_PER_SECOND
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()


# ------------------------------------------------------------------------------ temporal text


def parse_date(text: str, adjust: bool) -> int | None:
    """'YYYY-MM-DD' -> days since 1970-01-01 (proleptic Gregorian); None for a zero or partial zero date."""
    y, m, d = text[:-6], text[-5:-3], text[-2:]
    year, month, day = int(y), int(m), int(d)
    if month == 0 or day == 0:
        return None
    if adjust:
        year = adjust_year(year)
    return days_from_civil(year, month, day)


def parse_datetime(text: str, adjust: bool) -> int | None:
    """'YYYY-MM-DD HH:MM:SS[.ffffff]' -> microseconds since the epoch (as UTC); None for a zero date part."""
    date_part, _, time_part = text.partition(" ")
    days = parse_date(date_part, adjust)
    if days is None:
        return None
    return days * MICROS_PER_DAY + parse_time(time_part)


def parse_time(text: str) -> int:
    """'[-]H+:MM:SS[.ffffff]' (MySQL's TIME text, -838:59:59 .. 838:59:59) -> microseconds."""
    negative = text.startswith("-")
    body = text[1:] if negative else text
    clock, _, fraction = body.partition(".")
    h, m, s = clock.split(":")
    micros = (int(h) * 3600 + int(m) * 60 + int(s)) * MICROS_PER_SECOND + int(fraction.ljust(6, "0")[:6] or 0)
    return -micros if negative else micros


# --------------------------------------------------------------------------- Python objects


def adjust_year(year: int) -> int:
    """MySQL's two-digit years: 0-69 are 2000-2069, 70-99 are 1970-1999 (Debezium's adjustTemporal)."""
    if 0 <= year <= 69:
        return year + 2000
    if 70 <= year <= 99:
        return year + 1900
    return year


def date_days(value: dt.date, adjust: bool) -> int:
    """A date -> days since 1970-01-01."""
    if adjust and value.year <= 99:
        return days_from_civil(adjust_year(value.year), value.month, value.day)
    return value.toordinal() - _EPOCH_ORDINAL


def datetime_micros(value: dt.datetime, adjust: bool) -> int:
    """A datetime (naive: read as UTC; aware: converted) -> microseconds since the epoch."""
    if value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    days = date_days(value.date(), adjust)
    return (days * 86_400 + value.hour * 3600 + value.minute * 60 + value.second) * MICROS_PER_SECOND \
        + value.microsecond


def timedelta_micros(value: dt.timedelta) -> int:
    """A timedelta -> microseconds."""
    return (value.days * 86_400 + value.seconds) * MICROS_PER_SECOND + value.microseconds


def replication_time_micros(value: dt.timedelta) -> int:
    """A TIME value as python-mysql-replication (1.0.x) decodes it -> microseconds.

    It reads a negative TIME2 with a fraction as -(seconds + (1 - fraction)): the row image stores
    such a value's fraction complemented and python-mysql-replication takes it as it is. The mapping
    is one to one, so the true value is recovered here (-838:59:59.999 arrives as -838:59:59.001).
    """
    micros = timedelta_micros(value)
    if micros >= 0:
        return micros
    seconds, fraction = divmod(-micros, MICROS_PER_SECOND)
    return -(seconds * MICROS_PER_SECOND + (MICROS_PER_SECOND - fraction if fraction else 0))


def unscaled(value: Decimal, scale: int) -> int:
    """A decimal's unscaled value at `scale` digits after the point (exactly, whatever its digits)."""
    sign, digits, exponent = value.as_tuple()
    n = int("".join(map(str, digits)) or "0")
    assert isinstance(exponent, int), "not a finite decimal"
    shift = exponent + scale
    n = n * 10**shift if shift >= 0 else n // 10**-shift
    return -n if sign else n


def replication_values(values: dict[str, Any], none_sources: dict[str, str]) -> dict[str, Any]:
    """A row image of python-mysql-replication with its empty SETs restored (it gives None for an
    empty SET and says "empty set" in the row's none_sources; an empty set here, Debezium writes '')
    and the columns a partial image does not carry (its none_sources say "cols_bitmap") as `ABSENT`."""
    if not none_sources:
        return values
    kinds = set(none_sources.values())
    if "empty set" not in kinds and NONE_SOURCE.COLS_BITMAP not in kinds:
        return values
    out = {}
    for k, val in values.items():
        if val is None:
            source = none_sources.get(k)
            if source == "empty set":
                val = frozenset()
            elif source == NONE_SOURCE.COLS_BITMAP:
                val = ABSENT
        out[k] = val
    return out


# ----------------------------------------------------------------------------------------- BIT


def bit_bytes(length: int | None) -> int:
    """How many bytes Debezium's Bits value of BIT(length) has."""
    n = length or 1
    return n // 8 + (1 if n % 8 else 0)


def bits_from_bytes(value: bytes, length: int | None) -> bytes:
    """The text protocol's big-endian BIT bytes -> Debezium's little-endian Bits bytes."""
    return int.from_bytes(value, "big").to_bytes(bit_bytes(length), "little")


def bits_from_string(value: str, length: int | None) -> bytes:
    """python-mysql-replication's '0'/'1' string of a BIT value -> Debezium's little-endian Bits bytes."""
    return int(value or "0", 2).to_bytes(bit_bytes(length), "little")


# ------------------------------------------------------------------------------------- spatial

_WKB_POINT = struct.Struct("<dd")
_WKB_POINT_BE = struct.Struct(">dd")


def split_geometry(value: bytes) -> tuple[int | None, bytes]:
    """MySQL's internal geometry (4-byte little-endian SRID, then WKB) -> (SRID or None for 0, WKB)."""
    srid = int.from_bytes(value[:4], "little")
    return (srid or None), value[4:]


def point_xy(wkb: bytes) -> tuple[float, float]:
    """The coordinates of a WKB POINT."""
    layout = _WKB_POINT if wkb[0] == 1 else _WKB_POINT_BE
    x, y = layout.unpack_from(wkb, 5)
    return x, y


# ---------------------------------------------------------------------------------------- UUID


def uuid_from_bytes(value: bytes) -> str:
    """A binlog UUID image -> text, as Debezium's MariaDB connector makes it: the bytes read as one
    unsigned big-endian number. The binlog drops the trailing zero bytes of a UUID and Debezium does
    not pad them back, so such a UUID comes out shifted (its recorded behaviour, copied here)."""
    h = f"{int.from_bytes(value, 'big'):032x}"[-32:]
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# ------------------------------------------------------------------------------------ ENUM/SET


def escape_option(raw: str) -> str:
    """An ENUM/SET member as written in DDL (quoted or not) as Debezium's DDL parser keeps it: quotes
    removed, a comma escaped with a backslash, \\' and '' read as a quote."""
    return _unquoted(raw).replace(",", "\\,").replace("\\'", "'").replace("''", "'")


def member_value(raw: str) -> str:
    """An ENUM/SET member as written in DDL (quoted or not) -> the member's value (SQL string escapes read)."""
    body = _unquoted(raw)
    if len(raw) < 2 or raw[0] != raw[-1] or raw[0] not in "'\"":
        return body
    out, i = [], 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append(_SQL_ESCAPES.get(nxt, nxt))
            i += 2
        elif c == raw[0] and body[i + 1:i + 2] == c:
            out.append(c)
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


_SQL_ESCAPES = {"0": "\0", "b": "\b", "n": "\n", "r": "\r", "t": "\t", "Z": "\x1a"}


def _unquoted(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    return raw
