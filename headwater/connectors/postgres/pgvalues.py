"""PostgreSQL value formats: parsers and decoders of what the server sends.

Pure functions without database access, used by `types.py`:

- parsers for PostgreSQL's text output (DateStyle ISO, IntervalStyle postgres, bytea_output hex):
  dates, times, timestamps with and without zone, intervals (with pgjdbc's PGInterval, which
  Debezium computes from), numerics, money, arrays, hstore;
- decoders for the binary (send/recv) formats of pgoutput's binary mode and COPY BINARY;
- COPY's text-format unescaping.

Times are kept as integers (days, microseconds) and calendars are proleptic Gregorian, as in
java.time (the Java behaviour itself is in `connectors/common/java.py`); the helpers on the hot
path are cached per distinct date.
"""

from __future__ import annotations

import struct
from decimal import Decimal
from functools import lru_cache

from headwater.connectors.common.java import (
    INT_MAX,
    INT_MIN,
    MICROS_PER_DAY,
    MICROS_PER_SECOND,
    d2l,
    java_double_decimal,
    java_int,
    java_round,
    julian_days,
    plain_string,
    plain_stripped,
)
from headwater.events.calendar import days_from_civil

PG_EPOCH_DAYS = 10_957  # 2000-01-01, PostgreSQL's binary epoch, in days since 1970-01-01
POW10 = tuple(10**i for i in range(10))


# ------------------------------------------------------------------------------- calendar


@lru_cache(maxsize=65536)
def parse_date(s: str) -> tuple[int, int, int, bool]:
    """'2020-02-29', '0044-03-15 BC', '294276-12-31' -> (year, month, day, bc); year as written."""
    bc = s.endswith(" BC")
    if bc:
        s = s[:-3]
    y, m, d = s.split("-")
    return int(y), int(m), int(d), bc


def date_days(s: str) -> int:
    """Epoch days of a date's text, proleptic (1 BC is year 0), as java.time reads it."""
    y, m, d, bc = parse_date(s)
    return days_from_civil(1 - y if bc else y, m, d)


def date_days_jdbc(s: str) -> int:
    """Epoch days of a date's text as pgjdbc's java.sql.Date.toLocalDate() gives them: the era is lost."""
    y, m, d, _ = parse_date(s)
    return days_from_civil(y, m, d)


def time_micros(t: str) -> int:
    """'HH:MM:SS[.ffffff]' -> microseconds past midnight (24:00:00 allowed)."""
    us = ((int(t[0:2]) * 60 + int(t[3:5])) * 60 + int(t[6:8])) * MICROS_PER_SECOND
    if len(t) > 9:
        f = t[9:]
        us += int(f) * POW10[6 - len(f)]
    return us


_DAYS: dict[str, int] = {}


def days_of(ymd: str) -> int:
    """Epoch days of 'YYYY-MM-DD' (AD), cached per distinct date."""
    d = _DAYS.get(ymd)
    if d is None:
        y, m, dd = ymd.split("-")
        d = days_from_civil(int(y), int(m), int(dd))
        if len(_DAYS) > 200_000:
            _DAYS.clear()
        _DAYS[ymd] = d
    return d


def timestamp_micros(s: str) -> int:
    """'YYYY-MM-DD HH:MM:SS[.ffffff][ BC]' -> microseconds since the epoch (proleptic calendar)."""
    if len(s) >= 19 and s[10] == " " and s[-1] != "C":  # the common case: a 4-digit AD year
        us = days_of(s[:10]) * MICROS_PER_DAY + (
            int(s[11:13]) * 3600 + int(s[14:16]) * 60 + int(s[17:19])) * MICROS_PER_SECOND
        if len(s) > 20:
            f = s[20:]
            us += int(f) * POW10[6 - len(f)]
        return us
    bc = s.endswith(" BC")
    if bc:
        s = s[:-3]
    i = s.index(" ")
    ys, m, d = s[:i].split("-")
    y = int(ys)
    days = days_from_civil(1 - y if bc else y, int(m), int(d))
    return days * MICROS_PER_DAY + time_micros(s[i + 1:])


def timestamp_micros_hybrid(s: str) -> int:
    """A timestamp's text as pgjdbc's java.sql.Timestamp counts it: the fields of a date before
    1582-10-15 are read in the Julian calendar (java.util.GregorianCalendar's cutover)."""
    bc = s.endswith(" BC")
    if bc:
        s = s[:-3]
    i = s.index(" ")
    y, m, d = (int(p) for p in s[:i].split("-"))
    if bc:
        y = 1 - y
    days = julian_days(y, m, d) if (y, m, d) < (1582, 10, 15) else days_from_civil(y, m, d)
    return days * MICROS_PER_DAY + time_micros(s[i + 1:])


def offset_seconds(z: str) -> int:
    """'+05', '-03:30', '+00:19:32' -> seconds east of UTC."""
    sign = -1 if z[0] == "-" else 1
    secs = int(z[1:3]) * 3600
    if len(z) > 3:
        secs += int(z[4:6]) * 60
        if len(z) > 6:
            secs += int(z[7:9])
    return sign * secs


def split_zone(s: str, start: int) -> tuple[str, str]:
    """Split 'HH:MM:SS.ffff+05:30' (the sign after index `start`) into the local part and the offset."""
    i = max(s.rfind("+"), s.rfind("-"))
    if i <= start:
        raise ValueError(f"no zone offset in {s!r}")
    return s[:i], s[i:]


def timestamptz_micros(s: str) -> int:
    """'YYYY-MM-DD HH:MM:SS[.ffffff]+ZZ[:ZZ[:ZZ]][ BC]' -> UTC microseconds since the epoch."""
    bc = s.endswith(" BC")
    if bc:
        s = s[:-3]
    i = s.index(" ")
    local, zone = split_zone(s, i + 8)
    if i == 10 and not bc:
        days = days_of(local[:10])
    else:
        ys, m, d = local[:i].split("-")
        y = int(ys)
        days = days_from_civil(1 - y if bc else y, int(m), int(d))
    return days * MICROS_PER_DAY + time_micros(local[i + 1:]) - offset_seconds(zone) * MICROS_PER_SECOND


def timestamptz_micros_jdbc(s: str) -> int:
    """Like timestamptz_micros, but losing the era (java.sql.Timestamp in arrays)."""
    return timestamptz_micros(s[:-3] if s.endswith(" BC") else s)


def timetz_parts(s: str) -> tuple[int, int]:
    """'HH:MM:SS[.ffffff]+ZZ[:ZZ[:ZZ]]' -> (local microseconds, offset seconds east of UTC)."""
    local, zone = split_zone(s, 7)
    return time_micros(local), offset_seconds(zone)


# ------------------------------------------------------------------------------- interval


def pginterval(s: str) -> tuple[int, int, int, int, int, float]:
    """pgjdbc's PGInterval of IntervalStyle=postgres text: (years, months, days, hours, minutes, seconds).

    Reproduces PGInterval.setValue and setSeconds/getSeconds exactly (seconds are stored as whole
    seconds plus rounded microseconds), since Debezium computes from these fields.
    """
    years = months = days = hours = minutes = 0
    seconds = 0.0
    value_token: str | None = None
    for i, token in enumerate(s.replace("+", " ").split(), 1):
        if i & 1:
            end_hours = token.find(":")
            if end_hours == -1:
                value_token = token
                continue
            neg = token[0] == "-"
            hours = java_int(token[int(neg):end_hours])
            minutes = java_int(token[end_hours + 1:end_hours + 3])
            end_minutes = token.find(":", end_hours + 1)
            if end_minutes != -1:
                seconds = float(token[end_minutes + 1:])
            if neg:
                hours, minutes, seconds = -hours, -minutes, -seconds
            value_token = None
        elif token.startswith("year"):
            years = java_int(value_token)
        elif token.startswith("mon"):
            months = java_int(value_token)
        elif token.startswith("day"):
            days = java_int(value_token)
        elif token.startswith("hour"):
            hours = java_int(value_token)
        elif token.startswith("min"):
            minutes = java_int(value_token)
        elif token.startswith("sec"):
            seconds = float(value_token) if value_token is not None else 0.0
    total = java_round(seconds * 1_000_000.0)
    whole = abs(total) // 1_000_000 * (1 if total >= 0 else -1)  # Java's truncating long division
    if not INT_MIN <= whole <= INT_MAX:
        raise ValueError("Number of whole seconds should be within Integer.MIN_VALUE...Integer.MAX_VALUE")
    micro = total - whole * 1_000_000
    return years, months, days, hours, minutes, whole + micro / 1_000_000.0


def interval_micros(fields: tuple[int, int, int, int, int, float]) -> int:
    """Debezium's MicroDuration.durationMicros with 365.25/12 days a month (double arithmetic)."""
    years, months, days, hours, minutes, seconds = fields
    ym = (years * 12 + months + 2**31) % 2**32 - 2**31  # Java int arithmetic
    d = ym * 30.4375 + days
    s = ((d * 24.0 + hours) * 60.0 + minutes) * 60.0 + seconds
    return d2l(s * 1_000_000.0)


def interval_iso(fields: tuple[int, int, int, int, int, float]) -> str:
    """Debezium's Interval string 'P<y>Y<m>M<d>DT<h>H<m>M<s>S' of PGInterval fields."""
    years, months, days, hours, minutes, seconds = fields
    sec = plain_stripped(java_double_decimal(seconds), 9)
    return f"P{years}Y{months}M{days}DT{hours}H{minutes}M{sec}S"


# -------------------------------------------------------------------------------- numbers


def big_int(digits: str) -> int:
    """int(digits), also beyond Python's 4300-digit limit for str -> int conversion."""
    return int(digits) if len(digits) < 4000 else int(Decimal(digits))


def split_numeric(s: str) -> tuple[int, int]:
    """A numeric's text ('-123.4500') -> (unscaled integer, scale): (-1234500, 4)."""
    dot = s.find(".")
    if dot < 0:
        return big_int(s), 0
    return big_int(s[:dot] + s[dot + 1:]), len(s) - dot - 1


def parse_money(s: str) -> Decimal:
    """Debezium's PostgresMoney.parse: drop sign or parentheses, one currency symbol and commas."""
    negative = s[0] in "(-"
    v = s[1:] if s[0] == "-" else s
    v = v.strip("()")
    if v and not v[0].isdigit() and v[0] != ".":
        v = v[1:]
    v = v.replace(",", "")
    return Decimal("-" + v if negative else v)


# ------------------------------------------------------------------------ arrays, hstore


def parse_array(s: str, delim: str = ",") -> list:
    """PostgreSQL's array text ('{1,NULL,"a b"}', '[2:3]={5,6}', nested) -> nested lists of str/None."""
    if s[0] == "[":
        s = s[s.index("=") + 1:]
    pos = 0
    n = len(s)

    def parse_level() -> list:
        nonlocal pos
        assert s[pos] == "{"
        pos += 1
        out: list = []
        if s[pos] == "}":
            pos += 1
            return out
        while True:
            c = s[pos]
            if c == "{":
                out.append(parse_level())
            elif c == '"':
                pos += 1
                buf = []
                while True:
                    c = s[pos]
                    if c == "\\":
                        buf.append(s[pos + 1])
                        pos += 2
                    elif c == '"':
                        pos += 1
                        break
                    else:
                        j = pos
                        while j < n and s[j] not in '\\"':
                            j += 1
                        buf.append(s[pos:j])
                        pos = j
                out.append("".join(buf))
            else:
                j = pos
                while s[j] not in (delim, "}"):
                    j += 1
                tok = s[pos:j].strip()
                out.append(None if tok.upper() == "NULL" else tok)
                pos = j
            while s[pos] == " ":
                pos += 1
            if s[pos] == delim:
                pos += 1
                while s[pos] == " ":
                    pos += 1
                continue
            if s[pos] == "}":
                pos += 1
                return out
            raise ValueError(f"bad array literal at {pos}: {s!r}")

    return parse_level()


def parse_hstore(s: str) -> list[tuple[str, str | None]]:
    """hstore's text ('"a"=>"1", "b"=>NULL') -> [(key, value or None)] in text order."""
    out: list[tuple[str, str | None]] = []
    pos, n = 0, len(s)

    def quoted() -> str:
        nonlocal pos
        pos += 1
        buf = []
        while True:
            c = s[pos]
            if c == "\\":
                buf.append(s[pos + 1])
                pos += 2
            elif c == '"':
                pos += 1
                return "".join(buf)
            else:
                buf.append(c)
                pos += 1

    while pos < n:
        while pos < n and s[pos] in " ,":
            pos += 1
        if pos >= n:
            break
        key = quoted()
        while s[pos] == " ":
            pos += 1
        if s[pos:pos + 2] != "=>":
            raise ValueError(f"bad hstore at {pos}: {s!r}")
        pos += 2
        while s[pos] == " ":
            pos += 1
        if s[pos] == '"':
            out.append((key, quoted()))
        else:
            j = pos
            while j < n and s[j] not in " ,":
                j += 1
            out.append((key, None))
            pos = j
    return out


# ---------------------------------------------------------------------------- binary formats

_I16, _I32, _I64 = struct.Struct("!h"), struct.Struct("!i"), struct.Struct("!q")
_F32, _F64 = struct.Struct("!f"), struct.Struct("!d")
_TIMETZ = struct.Struct("!qi")
_INTERVAL = struct.Struct("!qii")


def bin_numeric(b: bytes) -> tuple[str, int, int]:
    """numeric_send -> ('n', unscaled, dscale) or ('NaN'|'Infinity'|'-Infinity', 0, 0)."""
    ndigits, weight, sign, dscale = struct.unpack_from("!hhHH", b)
    if sign == 0xC000:
        return "NaN", 0, 0
    if sign == 0xD000:
        return "Infinity", 0, 0
    if sign == 0xF000:
        return "-Infinity", 0, 0
    digits = struct.unpack_from(f"!{ndigits}H", b, 8)
    v = 0
    for dg in digits:
        v = v * 10000 + dg
    # the digits stand for v * 10000^(weight - ndigits + 1); bring that to dscale decimals
    exp10 = 4 * (weight - ndigits + 1) + dscale
    v = v * 10**exp10 if exp10 >= 0 else v // 10 ** (-exp10)
    return "n", -v if sign == 0x4000 else v, dscale


def numeric_text_from_binary(b: bytes) -> str:
    """The text a numeric_send value prints as."""
    kind, v, dscale = bin_numeric(b)
    return plain_string(v, dscale) if kind == "n" else kind


def bin_int(b: bytes) -> int:
    return int.from_bytes(b, "big", signed=True)


def bin_float4(b: bytes) -> float:
    return _F32.unpack(b)[0]


def bin_float8(b: bytes) -> float:
    return _F64.unpack(b)[0]


def bin_timetz(b: bytes) -> tuple[int, int]:
    """timetz_send -> (local microseconds, offset seconds east of UTC)."""
    us, zone_west = _TIMETZ.unpack(b)
    return us, -zone_west


def bin_interval(b: bytes) -> tuple[int, int, int]:
    """interval_send -> (microseconds, days, months)."""
    return _INTERVAL.unpack(b)


def bin_bits(b: bytes) -> str:
    """bit_send/varbit_send -> the bit string '0101...'."""
    nbits = _I32.unpack_from(b)[0]
    if nbits == 0:
        return ""
    return bin(int.from_bytes(b[4:], "big"))[2:].zfill((len(b) - 4) * 8)[:nbits]


def bin_hstore(b: bytes) -> list[tuple[str, str | None]]:
    """hstore_send -> [(key, value or None)] in the order the text form lists them."""
    count = _I32.unpack_from(b)[0]
    pos = 4
    out: list[tuple[str, str | None]] = []
    for _ in range(count):
        n = _I32.unpack_from(b, pos)[0]
        key = b[pos + 4:pos + 4 + n].decode()
        pos += 4 + n
        n = _I32.unpack_from(b, pos)[0]
        pos += 4
        if n < 0:
            out.append((key, None))
        else:
            out.append((key, b[pos:pos + n].decode()))
            pos += n
    return out


def bin_array(b: bytes) -> tuple[int, list[bytes | None]]:
    """array_send -> (number of dimensions, flat list of element payloads or None)."""
    ndim, _flags, _elem = struct.unpack_from("!iiI", b)
    pos = 12
    count = 1 if ndim else 0
    for _ in range(ndim):
        dim, _lb = struct.unpack_from("!ii", b, pos)
        count *= dim
        pos += 8
    out: list[bytes | None] = []
    for _ in range(count):
        n = _I32.unpack_from(b, pos)[0]
        pos += 4
        if n < 0:
            out.append(None)
        else:
            out.append(b[pos:pos + n])
            pos += n
    return ndim, out


# ------------------------------------------------------------------------------ COPY text

_COPY_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}


def unescape_copy_text(field: str) -> str | None:
    """One field of COPY ... TO STDOUT (text format) -> the value's text (None for \\N)."""
    if "\\" not in field:
        return field
    if field == "\\N":
        return None
    out = []
    i, n = 0, len(field)
    while i < n:
        c = field[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        nxt = field[i + 1]
        e = _COPY_ESCAPES.get(nxt)
        if e is not None:
            out.append(e)
            i += 2
        elif nxt == "x" and i + 2 < n and field[i + 2] in "0123456789abcdefABCDEF":
            j = i + 2
            while j < n and j < i + 4 and field[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(chr(int(field[i + 2:j], 16)))
            i = j
        elif nxt in "01234567":
            j = i + 1
            while j < n and j < i + 4 and field[j] in "01234567":
                j += 1
            out.append(chr(int(field[i + 1:j], 8)))
            i = j
        else:
            out.append(nxt)
            i += 2
    return "".join(out)
