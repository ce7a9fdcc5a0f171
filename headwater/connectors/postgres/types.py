"""PostgreSQL column types to Debezium's Connect schemas and JSON values, as Debezium 3.6.3 makes them.

`build_converter(column, settings)` returns a `ColumnConverter` holding, for one column:

- `schema`: the Connect field schema (optional unless NOT NULL; `default` parsed from the column
  default the way Debezium's PostgresDefaultValueConverter does, including its zero values for
  function defaults), or `None` from the factory for a type Debezium drops (unknown types without
  `include.unknown.datatypes`, and the arrays Debezium does not map);
- `from_text(s)`: PostgreSQL's text output of a non-null value -> the JSON value Debezium's
  JsonConverter writes for it in a *snapshot* event; `from_stream_text(s)` the same for a
  *streaming* (pgoutput) event -- they differ for a few types because Debezium reads snapshots
  through JDBC objects (see `STREAM_DIFFERENCES`);
- `from_binary(b)` / `from_stream_binary(b)`: the same from the binary send format (pgoutput binary
  mode, COPY BINARY), for the types where `binary_supported` is true;
- `null_value`: the JSON value for SQL NULL (JsonConverter writes the schema default in place of
  null; a NOT NULL column has its fallback), `fallback`: the value Debezium writes for a NOT NULL
  column whose value is absent (the non-key columns of a DELETE's before image), and
  `toast_placeholder`: the value for an unchanged TOAST column (None where Debezium writes null).

Text values must be unescaped (COPY's text format escapes backslash, tab, newline and carriage
return and writes \\N for null: the caller undoes that) and produced with DateStyle=ISO,
IntervalStyle=postgres, bytea_output=hex and extra_float_digits >= 1 (the defaults); any TimeZone
works. JSON values are JSON-ready: bytes are already base64 (or hex) strings, special floats are
the strings "NaN"/"Infinity"/"-Infinity" as Jackson writes them, structs are dicts in field order.

A conversion Debezium cannot make (NaN in a precise decimal, a timetz offset with seconds in a
snapshot, a numeric[] holding NaN, an enum[] holding NULL) gives the null value for a nullable
column and raises `ConversionError` for a NOT NULL one (Debezium stops there too).
"""

from __future__ import annotations

import logging
import re
import struct
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any, NamedTuple

from headwater.connectors.common import java
from headwater.connectors.common.semantics import (
    GEOGRAPHY,
    GEOMETRY,
    POINT,
    ZONED_TIME,
    ZONED_TIMESTAMP,
    b64,
    binary_encoder,
    binary_schema,
    date_schema,
    decimal_mode_schema,
    named,
    nanos_from_micros,
    time_schema,
    time_unit,
    timestamp_schema,
    timestamp_unit,
)
from headwater.connectors.postgres import catalog as cat
from headwater.connectors.postgres import pgvalues as pv
from headwater.connectors.postgres.pgoutput import PG_EPOCH_OFFSET_US
from headwater.events import calendar
from headwater.events.connect import (
    ARRAY,
    BOOLEAN,
    BYTES,
    FLOAT32,
    FLOAT64,
    INT16,
    INT32,
    INT64,
    MAP,
    NO_DEFAULT,
    STRING,
    Schema,
)

log = logging.getLogger("headwater.postgres")

DEFAULT_PLACEHOLDER = "__debezium_unavailable_value"

# Values Debezium 3.6.3 produces for PostgreSQL's infinities (pgjdbc's PGStatement constants used as
# microseconds or milliseconds, and what java.sql.Date/LocalDate make of them).
TS_POS_INF_MICROS, TS_NEG_INF_MICROS = 9223372036825200000, -9223372036832400000
TS_POS_INF_MILLIS, TS_NEG_INF_MILLIS = 9223372036825200, -9223372036832400
DATE_POS_INF_JDBC, DATE_NEG_INF_JDBC = -622191234, -625821272  # snapshot, and date[] elements
DATE_POS_INF_STREAM, DATE_NEG_INF_STREAM = -2147472692, -2147472691
TSTZ_NEG_INF_ARRAY = "+292269055-12-02T23:00:00"  # a -infinity element of timestamptz[]

# Where Debezium's snapshot (JDBC) and streaming (pgoutput) values differ for the same value.
STREAM_DIFFERENCES = {
    "name": "null while streaming (unless include.unknown.datatypes), the text in a snapshot",
    "date": "a snapshot loses the BC era and maps +-infinity to other constants than streaming",
    "timetz": "an offset with seconds gives null in a snapshot but stops Debezium while streaming",
}


class ConversionError(ValueError):
    """A value Debezium cannot convert for a NOT NULL column (Debezium stops the connector)."""


class _Failed(Exception):
    """Internal: Debezium's converter gives up on this value (null for a nullable column)."""


@dataclass(frozen=True)
class TypeSettings:
    """The connector properties type conversion depends on."""

    decimal_mode: str = "precise"  # decimal.handling.mode: precise | double | string
    time_precision_mode: str = "adaptive"  # one of time.precision.mode's values
    binary_mode: str = "bytes"  # binary.handling.mode: bytes | base64 | base64-url-safe | hex
    interval_mode: str = "numeric"  # interval.handling.mode: numeric | string
    hstore_mode: str = "json"  # hstore.handling.mode: json | map
    money_fraction_digits: int = 2
    include_unknown: bool = False  # include.unknown.datatypes
    placeholder: str = DEFAULT_PLACEHOLDER  # unavailable.value.placeholder
    propagate_columns: tuple[str, ...] = ()  # column.propagate.source.type (regexes on schema.table.column)
    propagate_datatypes: tuple[str, ...] = ()  # datatype.propagate.source.type (regexes on type names)

    @classmethod
    def from_config(cls, config: Any) -> TypeSettings:
        """From a ConnectorConfig (or any mapping with Debezium's property names)."""
        def get(name: str, default: Any) -> Any:
            value = config.get(name, default)
            return default if value is None else value

        return cls(
            decimal_mode=str(get("decimal.handling.mode", "precise")).lower(),
            time_precision_mode=str(get("time.precision.mode", "adaptive")).lower(),
            binary_mode=str(get("binary.handling.mode", "bytes")).lower(),
            interval_mode=str(get("interval.handling.mode", "numeric")).lower(),
            hstore_mode=str(get("hstore.handling.mode", "json")).lower(),
            money_fraction_digits=int(get("money.fraction.digits", 2)),
            include_unknown=str(get("include.unknown.datatypes", False)).lower() == "true",
            placeholder=str(get("unavailable.value.placeholder", DEFAULT_PLACEHOLDER)),
            propagate_columns=_as_tuple(get("column.propagate.source.type", ())),
            propagate_datatypes=_as_tuple(get("datatype.propagate.source.type", ())),
        )

    @property
    def placeholder_bytes(self) -> bytes:
        """The placeholder for binary columns: `hex:<hex digits>` gives raw bytes."""
        p = self.placeholder
        return bytes.fromhex(p[4:]) if p.startswith("hex:") else p.encode()

    @property
    def placeholder_text(self) -> str:
        """The placeholder for text columns: the placeholder bytes decoded (as Java's new String)."""
        return self.placeholder_bytes.decode("utf-8", "replace")


def _as_tuple(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = value.split(",")
    return tuple(v.strip() for v in value if v and v.strip())


# ------------------------------------------------------------------------------------- schemas


# ------------------------------------------------------------------------------------ encoders


def _bytea_text(s: str) -> bytes:
    """bytea's hex text ('\\xdeadbeef') -> bytes."""
    if s.startswith("\\x"):
        return bytes.fromhex(s[2:])
    raise ValueError("bytea text must be in hex format (bytea_output = hex)")


_FLOAT_SPECIAL = {"NaN": "NaN", "Infinity": "Infinity", "-Infinity": "-Infinity"}


def _float_text(s: str) -> Any:
    special = _FLOAT_SPECIAL.get(s)
    return special if special is not None else float(s)


@lru_cache(maxsize=65536)
def _float4_text(s: str) -> Any:
    # Jackson writes a float with Java's Float.toString, whose digits are not always PostgreSQL's
    # shortest ones (1.17549435E-38, not 1.1754944e-38): the JSON value is the double of those digits.
    special = _FLOAT_SPECIAL.get(s)
    return special if special is not None else float(java.java_float_to_string(float(s)))


def _float4_binary(b: bytes) -> Any:
    return java.jackson_double(float(java.java_float_to_string(pv.bin_float4(b))))


def _point_value(x: float, y: float) -> dict:
    wkb = struct.pack("<BIdd", 1, 1, x, y)
    return {"x": x, "y": y, "wkb": b64(wkb), "srid": None}


def _point_text(s: str) -> dict:
    x, y = s.strip("()").split(",")
    return _point_value(float(x), float(y))


def _bits_bytes(bits: str) -> bytes:
    n = int(bits, 2) if bits else 0
    return n.to_bytes((n.bit_length() + 7) // 8, "little")


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|Infinity|NaN)")
_GEOMETRIC = {"box", "circle", "line", "lseg", "path", "polygon"}


def _pgjdbc_geometric_text(s: str) -> str:
    """pgjdbc's PGbox/PGcircle/... getValue(): the same shape with Java-formatted doubles."""
    return _NUMBER.sub(lambda m: java.java_double_to_string(float(m.group())), s)


# ------------------------------------------------------------------------------ type "kinds"


class _Kind(NamedTuple):
    """How one PostgreSQL type converts; see build_converter."""

    schema: Schema
    text: Callable[[str], Any]  # snapshot semantics
    stream: Callable[[str], Any] | None = None  # streaming semantics when they differ
    element: Callable[[str], Any] | None = None  # as an element of an array (JDBC objects)
    binary: Callable[[bytes], Any] | None = None
    fallback: Any = None
    toast: Any = None
    fails: bool = False  # text/element may raise _Failed


def _kind_numeric(col: cat.ColumnInfo, s: TypeSettings) -> _Kind:
    length, scale = col.length, col.scale
    variable = (length in (0, cat.VARIABLE_NUMERIC_LENGTH)) and not (scale or 0)
    scale = scale or 0
    mode = s.decimal_mode
    schema = decimal_mode_schema(mode, scale, length, variable)
    if mode == "double":
        def as_double(t: str) -> Any:
            return _float_text(t)

        return _Kind(schema, as_double, binary=lambda b: as_double(pv.numeric_text_from_binary(b)),
                     fallback=0.0)
    if mode == "string":
        special = {"NaN": "NAN", "Infinity": "POSITIVE_INFINITY", "-Infinity": "NEGATIVE_INFINITY"}

        if variable:
            def as_string(t: str) -> Any:
                return special.get(t, t)
            fallback = "0"
        else:
            def as_string(t: str) -> Any:
                sp = special.get(t)
                if sp is not None:
                    return sp
                unscaled, sc = pv.split_numeric(t)
                if sc == scale:
                    return t
                return java.plain_string(java.rescale(unscaled, sc, scale), scale)
            fallback = java.plain_string(0, scale)
        return _Kind(schema, as_string, binary=lambda b: as_string(pv.numeric_text_from_binary(b)),
                     fallback=fallback)
    if variable:
        to_byte_array, big_int = java.to_byte_array, pv.big_int

        def as_vsd(t: str) -> Any:
            if t[0] in "NI-" and t in _FLOAT_SPECIAL:
                raise _Failed
            dot = t.find(".")
            if dot < 0:  # an integer keeps scale 0 (stripTrailingZeros, then setScale(0))
                return {"scale": 0, "value": b64(to_byte_array(big_int(t)))}
            t = t.rstrip("0")
            frac = len(t) - dot - 1
            unscaled = big_int(t[:dot] + t[dot + 1:])
            return {"scale": frac if unscaled else 0, "value": b64(to_byte_array(unscaled))}

        return _Kind(schema, as_vsd,
                     binary=lambda b: as_vsd(pv.numeric_text_from_binary(b)),
                     fallback={"scale": 0, "value": "AA=="}, fails=True)

    to_byte_array = java.to_byte_array

    def as_decimal(t: str) -> Any:
        if t[0] in "NI-" and t in _FLOAT_SPECIAL:
            raise _Failed
        dot = t.find(".")
        if dot > 0 and len(t) - dot - 1 == scale and len(t) < 4000:  # the usual case: the column's scale
            return b64(to_byte_array(int(t[:dot] + t[dot + 1:])))
        unscaled, sc = pv.split_numeric(t)
        return b64(to_byte_array(java.rescale(unscaled, sc, scale)))

    return _Kind(schema, as_decimal,
                 binary=lambda b: as_decimal(pv.numeric_text_from_binary(b)), fallback="AA==", fails=True)


def _kind_money(col: cat.ColumnInfo, s: TypeSettings) -> _Kind:
    digits = s.money_fraction_digits
    q = Decimal(1).scaleb(-digits)
    schema = decimal_mode_schema(s.decimal_mode, digits, None)
    if s.decimal_mode == "double":
        return _Kind(schema, lambda t: float(pv.parse_money(t)), fallback=0.0,
                     binary=lambda b: pv.bin_int(b) / 100)
    if s.decimal_mode == "string":
        def as_string(t: str) -> str:
            return format(pv.parse_money(t), "f")
        return _Kind(schema, as_string, fallback=java.plain_string(0, digits),
                     binary=lambda b: java.plain_string(pv.bin_int(b), 2))

    def as_decimal(t: str) -> str:
        d = pv.parse_money(t).quantize(q, rounding="ROUND_HALF_UP")
        return b64(java.to_byte_array(int(d.scaleb(digits))))

    def from_binary(b: bytes) -> str:
        return as_decimal(java.plain_string(pv.bin_int(b), 2))

    return _Kind(schema, as_decimal, binary=from_binary, fallback="AA==")


# --- temporal


def _kind_date(col: cat.ColumnInfo, s: TypeSettings) -> _Kind:
    mode = s.time_precision_mode

    def snapshot(t: str) -> int:
        if t[0] in "-i":
            if t == "infinity":
                return DATE_POS_INF_JDBC
            if t == "-infinity":
                return DATE_NEG_INF_JDBC
        return pv.date_days_jdbc(t)

    def stream(t: str) -> int:
        if t[0] in "-i":
            if t == "infinity":
                return DATE_POS_INF_STREAM
            if t == "-infinity":
                return DATE_NEG_INF_STREAM
        return pv.date_days(t)

    def binary(b: bytes) -> int:
        d = pv.bin_int(b)
        if d == java.INT_MAX:
            return DATE_POS_INF_JDBC
        if d == java.INT_MIN:
            return DATE_NEG_INF_JDBC
        return _jdbc_days(d + pv.PG_EPOCH_DAYS)

    if mode == "isostring":
        iso = _iso_date_value
        return _Kind(date_schema(mode), lambda t: iso(snapshot(t)), stream=lambda t: iso(stream(t)),
                     element=lambda t: iso(snapshot(t)), binary=lambda b: iso(binary(b)), fallback=iso(0))
    return _Kind(date_schema(mode), snapshot, stream=stream, element=snapshot, binary=binary, fallback=0)


def _iso_date_value(days: int) -> str:
    """IsoDate of the epoch day Debezium's int32 Date holds (its infinities unwrapped to the
    LocalDate they stand for)."""
    return java.iso_date(_DATE_UNWRAPPED.get(days, days)) + "Z"


def _jdbc_days(days: int) -> int:
    """A proleptic epoch day as java.sql.Date.toLocalDate() returns it: a BC year becomes AD."""
    if days >= -719162:  # 0001-01-01
        return days
    y, m, d = calendar.civil_from_days(days)
    return calendar.days_from_civil(1 - y, m, d)


def _time_out(unit: str) -> Callable[[int], Any]:
    """Microseconds past midnight -> a time's value in `unit` (see semantics.time_unit)."""
    if unit == "ms":
        return lambda us: us // 1000
    if unit == "ns":
        return lambda us: us * 1000
    if unit == "iso":
        return java.iso_time_utc  # IsoTime: java.time's ISO_LOCAL_TIME and 'Z', 24:00:00 wraps to 00:00
    return _identity_int


def _identity_int(us: int) -> int:
    return us


def _kind_time(col: cat.ColumnInfo, s: TypeSettings) -> _Kind:
    unit = time_unit(s.time_precision_mode, col.scale)
    out = _time_out(unit)
    time_micros = pv.time_micros
    if unit == "us":
        text: Callable[[str], Any] = time_micros
        binary: Callable[[bytes], Any] = pv.bin_int
    else:
        def text(t: str) -> Any:
            return out(time_micros(t))

        def binary(b: bytes) -> Any:
            return out(pv.bin_int(b))

    def element(t: str) -> Any:  # java.sql.Time: milliseconds, 24:00:00 wraps to 0
        return out((time_micros(t) // 1000) % 86_400_000 * 1000)

    return _Kind(time_schema(s.time_precision_mode, col.scale), text, element=element, binary=binary,
                 fallback=out(0))


def _kind_timetz(col: cat.ColumnInfo, s: TypeSettings) -> _Kind:
    def snapshot(t: str) -> str:
        local, off = pv.timetz_parts(t)
        if off % 60:
            raise _Failed  # java.time's OffsetTime pattern has no seconds in the offset
        return java.iso_time_utc(local - off * 1_000_000)

    def stream(t: str) -> str:
        local, off = pv.timetz_parts(t)
        if off % 60:
            raise ValueError(f"Debezium cannot parse the timetz {t!r} while streaming")
        return java.iso_time_utc(local - off * 1_000_000)

    def element(t: str) -> str:  # java.sql.Time drops the fraction and wraps 24:00
        local, off = pv.timetz_parts(t)
        return java.iso_time_utc((local // 1_000_000) * 1_000_000 - off * 1_000_000)

    def binary(b: bytes) -> str:
        local, off = pv.bin_timetz(b)
        if off % 60:
            raise _Failed
        return java.iso_time_utc(local - off * 1_000_000)

    return _Kind(ZONED_TIME, snapshot, stream=stream, element=element,
                 binary=binary, fallback="00:00:00Z", fails=True)


def _micros_java(us: int) -> int:
    """Epoch microseconds as Debezium computes them: seconds * 10^6 saturating, then wrapping."""
    if java.LONG_MIN <= us <= java.LONG_MAX:
        return us
    secs, frac = divmod(us, 1_000_000)
    total = min(max(secs * 1_000_000, java.LONG_MIN), java.LONG_MAX) + frac
    return (total + 2**63) % 2**64 - 2**63


def _kind_timestamp(col: cat.ColumnInfo, s: TypeSettings) -> _Kind:
    unit = timestamp_unit(s.time_precision_mode, col.scale)
    schema = timestamp_schema(s.time_precision_mode, col.scale)
    if unit in ("ns", "iso"):
        return _kind_timestamp_exact(col, schema, unit)
    millis = unit == "ms"
    pos, neg = (TS_POS_INF_MILLIS, TS_NEG_INF_MILLIS) if millis else (TS_POS_INF_MICROS, TS_NEG_INF_MICROS)
    parse = pv.timestamp_micros

    def make(parse_fn: Callable[[str], int]) -> Callable[[str], int]:
        if millis:
            def conv(t: str) -> int:
                if t[0] in "-i" and t[1] in "in":
                    return pos if t == "infinity" else neg
                return parse_fn(t) // 1000
        elif parse_fn is pv.timestamp_micros:
            days_of, day = pv.days_of, java.MICROS_PER_DAY

            def conv(t: str) -> int:
                if len(t) > 20 and t[10] == " " and t[-1] != "C":  # 4-digit AD year, with a fraction
                    f = t[20:]
                    return (days_of(t[:10]) * day + (int(t[11:13]) * 3600 + int(t[14:16]) * 60 + int(t[17:19]))
                            * 1_000_000 + int(f) * pv.POW10[6 - len(f)])
                if t[0] in "-i" and t[1] in "in":
                    return pos if t == "infinity" else neg
                return _micros_java(parse_fn(t))
        else:
            def conv(t: str) -> int:
                if t[0] in "-i" and t[1] in "in":
                    return pos if t == "infinity" else neg
                return _micros_java(parse_fn(t))
        return conv

    def out(us: int) -> int:
        return us // 1000 if millis else _micros_java(us)

    return _Kind(schema, make(parse), element=make(pv.timestamp_micros_hybrid),
                 binary=_timestamp_binary(pos, neg, out), fallback=0)


def _timestamp_binary(pos: Any, neg: Any, out: Callable[[int], Any]) -> Callable[[bytes], Any]:
    """A timestamp's binary form (microseconds since 2000-01-01; pgjdbc's infinities at the ends of
    the INT64 range) through `out`, which takes Unix epoch microseconds."""
    def binary(b: bytes) -> Any:
        us = pv.bin_int(b)
        if us == java.LONG_MAX:
            return pos
        if us == java.LONG_MIN:
            return neg
        return out(us + PG_EPOCH_OFFSET_US)

    return binary


def _kind_timestamp_exact(col: cat.ColumnInfo, schema: Schema, unit: str) -> _Kind:
    """A timestamp in nanoseconds or as an ISO string, from the exact microseconds (no wrapping).

    isostring writes pgjdbc's infinities as the timestamps they stand for in the other modes;
    nanoseconds writes them as Long.MAX_VALUE/MIN_VALUE, and a value outside the INT64 range as
    null (an element of an array too), with a warning -- a NOT NULL column cannot take that null.
    """
    if unit == "iso":
        out: Callable[[int], Any] = java.iso_local_timestamp
        pos, neg = out(TS_POS_INF_MICROS), out(TS_NEG_INF_MICROS)
    else:
        def out(us: int) -> int:
            nanos = nanos_from_micros(us)
            if nanos is None:
                log.warning("column %s: %s is outside the INT64 nanosecond range of time.precision.mode="
                            "nanoseconds (1677-09-21..2262-04-11); Debezium writes null", col.name,
                            java.iso_local_timestamp(us))
                raise _Failed
            return nanos
        pos, neg = java.LONG_MAX, java.LONG_MIN

    def make(parse_fn: Callable[[str], int]) -> Callable[[str], Any]:
        def conv(t: str) -> Any:
            if t[0] in "-i" and t[1] in "in":
                return pos if t == "infinity" else neg
            return out(parse_fn(t))
        return conv

    hybrid = make(pv.timestamp_micros_hybrid)

    def element(t: str) -> Any:
        try:
            return hybrid(t)
        except _Failed:
            return None

    return _Kind(schema, make(pv.timestamp_micros), element=element, binary=_timestamp_binary(pos, neg, out),
                 fallback=out(0), fails=unit == "ns")


def _kind_timestamptz(col: cat.ColumnInfo, s: TypeSettings) -> _Kind:
    digits = 6 if col.scale is None else col.scale
    fmt, parse = java.iso_timestamp_utc, pv.timestamptz_micros

    zeros = "0" * digits

    def text(t: str) -> str:
        if t[0] in "-i":  # PostgreSQL writes BC years with ' BC', so this is an infinity
            return t
        if t[10] == " " and t[-3:] == "+00":  # UTC, 4-digit AD year: only the layout changes
            if digits == 0:
                return f"{t[:10]}T{t[11:19]}Z"
            return f"{t[:10]}T{t[11:19]}.{(t[20:-3] + zeros)[:digits]}Z"
        return fmt(parse(t), digits)

    def element(t: str) -> str:
        if t == "-infinity":
            return TSTZ_NEG_INF_ARRAY + ("." + "0" * digits if digits else "") + "Z"
        if t == "infinity":
            return t
        return fmt(pv.timestamptz_micros_jdbc(t), digits)

    def binary(b: bytes) -> str:
        us = pv.bin_int(b)
        if us == java.LONG_MAX:
            return "infinity"
        if us == java.LONG_MIN:
            return "-infinity"
        return fmt(us + PG_EPOCH_OFFSET_US, digits)

    return _Kind(ZONED_TIMESTAMP, text, element=element, binary=binary,
                 fallback="1970-01-01T00:00:00Z")


def _kind_interval(col: cat.ColumnInfo, s: TypeSettings) -> _Kind:
    if s.interval_mode == "string":
        def text(t: str) -> str:
            return pv.interval_iso(pv.pginterval(t))

        def binary(b: bytes) -> str:
            return pv.interval_iso(_interval_fields_from_binary(b))

        return _Kind(named(STRING, "io.debezium.time.Interval"), text, binary=binary,
                     fallback="P0Y0M0DT0H0M0S")

    def micros(t: str) -> int:
        return pv.interval_micros(pv.pginterval(t))

    return _Kind(named(INT64, "io.debezium.time.MicroDuration"), micros,
                 binary=lambda b: pv.interval_micros(_interval_fields_from_binary(b)), fallback=0)


def _interval_fields_from_binary(b: bytes) -> tuple[int, int, int, int, int, float]:
    """interval_send -> the PGInterval fields pgjdbc parses from the same value's text."""
    us, days, months = pv.bin_interval(b)
    years = abs(months) // 12 * (1 if months >= 0 else -1)  # C's truncating division, as PostgreSQL
    months -= years * 12
    hours, rest = divmod(abs(us), 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    sign = "-" if us < 0 else ""
    return pv.pginterval(f"{years} years {months} mons {days} days "
                         f"{sign}{hours:02d}:{minutes:02d}:{rest // 1_000_000:02d}.{rest % 1_000_000:06d}")


# --- strings, bytes, misc


def _text_kind(schema: Schema, s: TypeSettings, binary: Callable[[bytes], Any] | None) -> _Kind:
    return _Kind(schema, _identity, binary=binary, fallback="", toast=s.placeholder_text)


def _identity(t: str) -> str:
    return t


def _utf8(b: bytes) -> str:
    return b.decode("utf-8")


def _jsonb_binary(b: bytes) -> str:
    return b[1:].decode("utf-8")  # version byte 1, then the text


def _uuid_binary(b: bytes) -> str:
    return str(uuid.UUID(bytes=b))


def _kind_bytea(col: cat.ColumnInfo, s: TypeSettings) -> _Kind:
    enc = binary_encoder(s.binary_mode)
    toast = _binary_toast(s)

    def text(t: str) -> str:
        return enc(_bytea_text(t))

    return _Kind(binary_schema(s.binary_mode), text, binary=enc, fallback="", toast=toast)


def _binary_toast(s: TypeSettings) -> Any:
    """Unchanged TOAST in a binary column: the placeholder bytes, its text in hex mode, else null."""
    if s.binary_mode == "bytes":
        return b64(s.placeholder_bytes)
    if s.binary_mode == "hex":
        return s.placeholder_text
    return None


def _kind_bits(col: cat.ColumnInfo, s: TypeSettings) -> _Kind:
    if col.length <= 1:
        def as_bool(t: str) -> bool:
            return int(t, 2) != 0 if t else False

        return _Kind(Schema(BOOLEAN), as_bool, binary=lambda b: as_bool(pv.bin_bits(b)), fallback=False)

    def as_bits(t: str) -> str:
        return b64(_bits_bytes(t))

    return _Kind(named(BYTES, "io.debezium.data.Bits", {"length": str(col.length)}), as_bits,
                 binary=lambda b: as_bits(pv.bin_bits(b)), fallback="")


def _kind_hstore(col: cat.ColumnInfo, s: TypeSettings) -> _Kind:
    p = s.placeholder_text
    if s.hstore_mode == "map":
        def map_of(pairs: list[tuple[str, str | None]]) -> dict:
            return {pairs[i][0]: pairs[i][1] for i in java.hashmap_order([k for k, _ in pairs])}

        return _Kind(Schema(MAP, keys=Schema(STRING), values=Schema(STRING, optional=True)),
                     lambda t: map_of(pv.parse_hstore(t)), binary=lambda b: map_of(pv.bin_hstore(b)),
                     fallback={}, toast={p: p})

    def json_of(pairs: list[tuple[str, str | None]]) -> str:
        order = java.hashmap_order([k for k, _ in pairs])
        parts = []
        for i in order:
            k, v = pairs[i]
            parts.append(java.jackson_quote(k) + ":" + ("null" if v is None else java.jackson_quote(v)))
        return "{" + ",".join(parts) + "}"

    return _Kind(named(STRING, "io.debezium.data.Json"), lambda t: json_of(pv.parse_hstore(t)),
                 binary=lambda b: json_of(pv.bin_hstore(b)), fallback="{}",
                 toast="{" + java.jackson_quote(p) + ":" + java.jackson_quote(p) + "}")


def _kind_unknown(col: cat.ColumnInfo, s: TypeSettings, root_name: str) -> _Kind:
    enc = binary_encoder(s.binary_mode)
    toast = _binary_toast(s)
    if root_name in _GEOMETRIC:
        def text(t: str) -> str:
            return enc(_pgjdbc_geometric_text(t).encode())
    else:
        def text(t: str) -> str:
            return enc(t.encode())
    return _Kind(binary_schema(s.binary_mode), text, fallback="", toast=toast)


def _kind_postgis(schema: Schema) -> _Kind:
    """PostGIS geometry/geography: hex EWKB text -> {wkb, srid}. Implemented from the spec, unverified."""
    def text(t: str) -> dict:
        raw = bytes.fromhex(t)
        little = raw[0] == 1
        fmt = "<I" if little else ">I"
        gtype = struct.unpack_from(fmt, raw, 1)[0]
        srid = None
        if gtype & 0x20000000:
            srid = struct.unpack_from("<i" if little else ">i", raw, 5)[0]
            raw = raw[:1] + struct.pack(fmt, gtype & ~0x20000000) + raw[9:]
        return {"wkb": b64(raw), "srid": srid}

    return _Kind(schema, text, fallback={"wkb": "", "srid": None})


# --------------------------------------------------------------------------- kind resolution

_SCALAR_BUILDERS: dict[int, Callable[[cat.ColumnInfo, TypeSettings], _Kind]] = {
    cat.NUMERIC: _kind_numeric,
    cat.MONEY: _kind_money,
    cat.DATE: _kind_date,
    cat.TIME: _kind_time,
    cat.TIMETZ: _kind_timetz,
    cat.TIMESTAMP: _kind_timestamp,
    cat.TIMESTAMPTZ: _kind_timestamptz,
    cat.INTERVAL: _kind_interval,
    cat.BYTEA: _kind_bytea,
    cat.BIT: _kind_bits,
    cat.VARBIT: _kind_bits,
}

_INT_KINDS = {cat.INT2: INT16, cat.INT4: INT32, cat.INT8: INT64, cat.OID: INT64}


def _macaddr_binary(b: bytes) -> str:
    return ":".join(f"{x:02x}" for x in b)


# string-valued types and the decoder of their binary format (None: not supported)
_STRING_OIDS: dict[int, Callable[[bytes], Any] | None] = {
    cat.CHAR: _utf8, cat.NAME: _utf8, cat.TEXT: _utf8, cat.BPCHAR: _utf8, cat.VARCHAR: _utf8,
    829: _macaddr_binary, 774: _macaddr_binary,  # macaddr, macaddr8
    869: None, 650: None,  # inet, cidr
    3904: None, 3906: None, 3908: None, 3910: None, 3912: None, 3926: None,  # the six range types
}
JSON, JSONB, XML, UUID_OID, POINT_OID, TSVECTOR = 114, 3802, 142, 2950, 600, 3614
# Element types whose arrays Debezium leaves out of its events (even with include.unknown.datatypes)
_UNMAPPED_ARRAY_ELEMENTS = {cat.MONEY, cat.NAME, cat.INTERVAL, cat.VARBIT, XML, POINT_OID, 1790}


def _scalar_kind(col: cat.ColumnInfo, s: TypeSettings, root_oid: int, root_name: str, typtype: str,
                 labels: tuple[str, ...]) -> _Kind | None:
    """The kind of a scalar of the given root type, None when Debezium does not map it."""
    builder = _SCALAR_BUILDERS.get(root_oid)
    if builder is not None:
        return builder(col, s)
    if root_oid == cat.BOOL:
        return _Kind(Schema(BOOLEAN), _bool_text, binary=_bool_binary, fallback=False)
    int_type = _INT_KINDS.get(root_oid)
    if int_type is not None:
        return _Kind(Schema(int_type), int, binary=_oid_binary if root_oid == cat.OID else pv.bin_int, fallback=0)
    if root_oid == cat.FLOAT4:
        return _Kind(Schema(FLOAT32), _float4_text, binary=_float4_binary, fallback=0.0)
    if root_oid == cat.FLOAT8:
        return _Kind(Schema(FLOAT64), _float_text, binary=lambda b: java.jackson_double(pv.bin_float8(b)), fallback=0.0)
    if root_oid in _STRING_OIDS:
        return _text_kind(Schema(STRING), s, _STRING_OIDS[root_oid])
    if root_oid in (JSON, JSONB):
        return _text_kind(named(STRING, "io.debezium.data.Json"), s,
                          binary=_jsonb_binary if root_oid == JSONB else _utf8)
    if root_oid == XML:
        return _text_kind(named(STRING, "io.debezium.data.Xml"), s, _utf8)
    if root_oid == UUID_OID:
        return _text_kind(named(STRING, "io.debezium.data.Uuid"), s, binary=_uuid_binary)
    if root_oid == TSVECTOR:
        return _text_kind(named(STRING, "io.debezium.data.Tsvector"), s, binary=None)
    if root_oid == POINT_OID:
        return _Kind(POINT, _point_text, binary=lambda b: _point_value(*struct.unpack("!dd", b)),
                     fallback=_point_value(0.0, 0.0))
    if typtype == "e":
        return _text_kind(named(STRING, "io.debezium.data.Enum", {"allowed": ",".join(labels)}), s, _utf8)
    if root_name == "citext":
        return _text_kind(Schema(STRING), s, _utf8)
    if root_name == "isbn":
        return _text_kind(Schema(STRING), s, None)
    if root_name == "ltree":
        return _text_kind(named(STRING, "io.debezium.data.Ltree"), s, binary=lambda b: b[1:].decode())
    if root_name == "hstore":
        return _kind_hstore(col, s)
    if root_name == "geometry":
        return _kind_postgis(GEOMETRY)
    if root_name == "geography":
        return _kind_postgis(GEOGRAPHY)
    return None


def _oid_binary(b: bytes) -> int:
    return int.from_bytes(b, "big")


def _bool_text(t: str) -> bool:
    return t == "t"


def _bool_binary(b: bytes) -> bool:
    return b != b"\x00"


def _kind_for(col: cat.ColumnInfo, s: TypeSettings) -> _Kind | None:
    if col.is_array:
        return _array_kind(col, s)
    kind = _scalar_kind(col, s, col.root_oid, col.root_name, col.root_typtype, col.enum_labels)
    if kind is None and s.include_unknown:
        kind = _kind_unknown(col, s, col.root_name)
    return kind


# --- arrays

_TOAST_TEXT_ARRAYS = {"_text", "_varchar", "_bpchar", "_json", "_jsonb"}
_TOAST_INT_ARRAYS = {"_int4", "_date", "_int8"}


def _array_kind(col: cat.ColumnInfo, s: TypeSettings) -> _Kind | None:
    """A one-dimensional array of a mapped element type (Debezium gives the element the array
    column's length and scale); other arrays are dropped, or opaque with include.unknown.datatypes."""
    eoid = col.element_root_oid
    if eoid == cat.BIT:
        return _bit_array_kind(col, s)
    if eoid in _UNMAPPED_ARRAY_ELEMENTS:
        return None
    elem = None
    if col.element_oid == eoid:  # not a domain: Debezium cannot map arrays of domains
        elem = _scalar_kind(col, s, eoid, col.element_root_name, col.element_typtype, col.enum_labels)
    # Debezium declares the element schema of enum arrays and opaque arrays not optional
    required = elem is None or col.element_typtype == "e"
    if elem is None:
        if not s.include_unknown:
            return None
        elem = _kind_unknown(col, s, col.element_root_name)
    item_schema = elem.schema if required else elem.schema.with_optional(True)
    convert = elem.element or elem.text
    numeric = eoid == cat.NUMERIC
    sub_array = _java_string_array if eoid in _PLAIN_TEXT_OIDS else _null_sub_array

    def text(t: str) -> list:
        out: list[Any] = []
        for v in pv.parse_array(t):
            if v is None:
                if required:
                    raise _Failed  # a null element where the schema allows none
                out.append(None)
            elif v.__class__ is list:
                out.append(sub_array(v))  # a row of a multi-dimensional array
            elif numeric and v == "NaN":
                raise _Failed  # pgjdbc cannot read NaN into the BigDecimal[] of the array
            else:
                out.append(convert(v))
        return out

    binary = None
    ebin = elem.binary
    if ebin is not None and not required and elem.element is None:
        def binary(b: bytes) -> list:  # noqa: F811
            ndim, items = pv.bin_array(b)
            if ndim > 1:
                rows = struct.unpack_from("!i", b, 12)[0]
                per = len(items) // rows if rows else 0
                return [sub_array([None if v is None else ebin(v) for v in items[i * per:(i + 1) * per]])
                        for i in range(rows)]
            if numeric and any(v is not None and v[4:6] in _NUMERIC_SPECIAL_SIGNS for v in items):
                raise _Failed
            return [None if v is None else ebin(v) for v in items]

    return _Kind(Schema(ARRAY, items=item_schema), text, binary=binary, fallback=[],
                 toast=_array_toast(col, s), fails=elem.fails or required or numeric)


_NUMERIC_SPECIAL_SIGNS = (b"\xc0\x00", b"\xd0\x00", b"\xf0\x00")  # NaN, +Infinity, -Infinity


def _bit_array_kind(col: cat.ColumnInfo, s: TypeSettings) -> _Kind:
    """bit(n)[]: Debezium's schema is that of one bit(n) and no value ever converts (always null)."""
    def fail(_v: Any) -> Any:
        raise _Failed

    return _kind_bits(col, s)._replace(text=fail, binary=fail, fails=True)


_PLAIN_TEXT_OIDS = {cat.TEXT, cat.VARCHAR, cat.BPCHAR, cat.NAME, cat.CHAR}


def _java_string_array(sub: list) -> str:
    """What Debezium writes for a row of a text[][]: Java's Object.toString of a String[].

    The identity hash code Java prints is arbitrary; this one is a CRC of the row's values.
    """
    return f"[Ljava.lang.String;@{zlib.crc32(repr(sub).encode()):x}"


def _null_sub_array(_sub: list) -> None:
    return None  # Debezium's element converters give up on the nested array objects


def _array_toast(col: cat.ColumnInfo, s: TypeSettings) -> Any:
    name = col.jdbc_type_name
    if name in _TOAST_TEXT_ARRAYS:
        return [s.placeholder_text]
    if name == "_bytea":
        return [b64(s.placeholder_bytes)] if s.binary_mode == "bytes" else None
    if name == "_date" and s.time_precision_mode in ("connect", "isostring"):
        return None  # these modes' date converters cannot take the placeholder's bytes: Debezium writes null
    if name in _TOAST_INT_ARRAYS:
        return java.signed_bytes(s.placeholder_bytes)
    if name == "_uuid":
        return [java.name_uuid_from_bytes(s.placeholder_bytes)]
    return None


# -------------------------------------------------------------------------------- defaults

_LITERAL = re.compile(r"'([^']*(?:''[^']*)*)'")
_FUNCTION = re.compile(r"^[(]?[A-Za-z0-9_.]+\((?:.+(?:, ?.+)*)?\)")
_CURRENT_DATE_TIMES = {"current_timestamp", "current_time", "current_date", "localtime", "localtimestamp"}
_NULL_AWARE = {"bool", "numeric", "float4", "float8", "int2", "int4", "serial", "int8", "bigserial", "smallserial"}
_TRIMMED = {"bit", "varbit", "bool", "numeric", "float4", "float8", "int2", "int4", "serial", "int8",
            "bigserial", "smallserial", "uuid", "date", "time", "timestamp", "timestamptz", "interval"}
_INT_RANGES = {"int2": 16, "smallserial": 16, "int4": 32, "serial": 32, "int8": 64, "bigserial": 64}
_GENERATED_PLACEHOLDER = {
    "bit": "00", "varbit": "0", "bool": "false", "bpchar": "", "varchar": "", "text": "", "numeric": "0.0",
    "float4": "0.0", "float8": "0.0", "int2": "0", "int4": "0", "serial": "0", "int8": "0", "bigserial": "0",
    "smallserial": "0", "json": "{}", "jsonb": "{}", "xml": "", "uuid": "00000000-0000-0000-0000-000000000000",
    "date": "1970-01-01", "time": "00:00", "timestamp": "1970-01-01", "timestamptz": "1970-01-01",
    "interval": "epoch",
}


def _extract_literal(expr: str) -> str | None:
    if "'" not in expr:
        return None if expr.startswith("NULL::") else expr
    m = _LITERAL.search(expr)
    return m.group(1).replace("''", "'") if m else None


def _extract(expr: str, generated: str) -> str | None:
    if _FUNCTION.search(expr) or expr.lower() in _CURRENT_DATE_TIMES:
        return generated
    return _extract_literal(expr)


def _enum_literal(expr: str, typname: str) -> str | None:
    """Debezium's extractEnumDefault: "'label'::type" when the cast names the column's type."""
    i = expr.rfind("::")
    if i < 0:
        return None
    cast = expr[i + 2:].strip('"').rsplit(".", 1)[-1].strip('"')
    head = expr[:i]
    if cast != typname or not (head.startswith("'") and head.endswith("'")) or len(head) < 2:
        return None
    return head[1:-1]


def parse_default(col: cat.ColumnInfo, kind: _Kind, s: TypeSettings) -> Any:
    """The schema default Debezium derives from the column's default expression, or NO_DEFAULT."""
    expr = col.default_expr
    if expr is None:
        return NO_DEFAULT
    name = col.jdbc_type_name
    try:
        if col.root_typtype == "e" and not col.is_array and not col.domains:
            literal = _enum_literal(expr, col.typname)
            return NO_DEFAULT if literal is None else kind.text(literal)
        placeholder = _GENERATED_PLACEHOLDER.get(name)
        if placeholder is None:
            return NO_DEFAULT
        if name in _TRIMMED:
            expr = expr.strip()
        if name in _NULL_AWARE and expr.startswith("NULL::"):
            return NO_DEFAULT
        v = _extract(expr, placeholder)
        if v is None:
            return NO_DEFAULT
        return _default_from_literal(col, kind, s, name, v)
    except (ValueError, ArithmeticError, InvalidOperation, _Failed, IndexError):
        return NO_DEFAULT


def _default_from_literal(col: cat.ColumnInfo, kind: _Kind, s: TypeSettings, name: str, v: str) -> Any:
    if name in _INT_RANGES:
        n = int(v.strip())
        bits = _INT_RANGES[name]
        if not -(2 ** (bits - 1)) <= n < 2 ** (bits - 1) or not v.strip().lstrip("+-").isdigit():
            raise ValueError(v)
        return n
    if name == "bool":
        return v.lower() == "true"
    if name == "float4":
        return _float4_text(v)  # Float.parseFloat, written with Float.toString
    if name == "float8":
        return java.jackson_double(float(v))
    if name == "numeric":
        d = Decimal(v)
        if not d.is_finite():
            raise ValueError(v)
        unscaled, scale = _decimal_parts(d)
        kind_schema = kind.schema
        if kind_schema.type == "struct":
            raise ValueError("Struct defaults are dropped (KAFKA-12694)")
        if s.decimal_mode == "double":
            return float(d)
        target = col.scale or 0
        variable = (col.length in (0, cat.VARIABLE_NUMERIC_LENGTH)) and not target
        if s.decimal_mode == "string":
            if variable:
                return java.plain_string(unscaled, scale) if scale >= 0 else str(unscaled * 10 ** -scale)
            return java.plain_string(java.rescale(unscaled, scale, target), target)
        return b64(java.to_byte_array(java.rescale(unscaled, scale, target)))
    if name in ("bit", "varbit"):
        if len(v) == 1 and kind.schema.type == BOOLEAN:
            return v == "1"
        return kind.text(v)
    if name == "uuid":
        return str(uuid.UUID(v))
    if name == "date":
        days = _date_default(v)
        return _iso_date_value(days) if s.time_precision_mode == "isostring" else days
    if name == "time":
        return _time_out(time_unit(s.time_precision_mode, col.scale))(_time_default_micros(v))
    if name == "timestamp":
        if v in ("infinity", "-infinity"):
            # pgjdbc gives OffsetDateTime.MAX/MIN; Debezium's epoch microseconds saturate (and the
            # nanoseconds of MAX then wrap around); milliseconds overflow (no default)
            if kind.schema.name != "io.debezium.time.MicroTimestamp":
                raise ValueError(v)
            return java.LONG_MIN if v == "-infinity" else java.LONG_MIN + 999_998
        return kind.text(v) if " " in v else kind.text(v + " 00:00:00")
    if name == "timestamptz":
        if v in ("infinity", "-infinity"):
            raise ValueError(v)
        return kind.text(v if " " in v else v + " 00:00:00+00")
    if name == "interval":
        return kind.text(v) if v != "epoch" else kind.fallback
    return v  # bpchar, varchar, text, json, jsonb, xml: the literal as written


def _decimal_parts(d: Decimal) -> tuple[int, int]:
    sign, digits, exp = d.as_tuple()
    if not isinstance(exp, int):
        raise ValueError(f"not a finite decimal: {d}")
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    return unscaled, -exp


# pgjdbc's TimestampUtils reads 'infinity' as LocalDateTime.MAX/MIN; Debezium's (int) epoch day of those
DATE_DEFAULT_POS_INF = java.to_int(calendar.days_from_civil(999999999, 12, 31))
DATE_DEFAULT_NEG_INF = java.to_int(calendar.days_from_civil(-999999999, 1, 1))
# the epoch days Debezium's int32 Date wraps (IsoDate writes the LocalDate itself)
_DATE_UNWRAPPED = {
    DATE_POS_INF_JDBC: calendar.days_from_civil(292278994, 8, 16), DATE_NEG_INF_JDBC: calendar.days_from_civil(292269055, 12, 2),
    DATE_DEFAULT_POS_INF: calendar.days_from_civil(999999999, 12, 31),
    DATE_DEFAULT_NEG_INF: calendar.days_from_civil(-999999999, 1, 1),
}


def _date_default(v: str) -> int:
    if v == "infinity":
        return DATE_DEFAULT_POS_INF
    if v == "-infinity":
        return DATE_DEFAULT_NEG_INF
    return pv.date_days(v.split(" ")[0] + (" BC" if v.endswith(" BC") else ""))


def _time_default_micros(v: str) -> int:
    parts = v.split(":")
    if len(parts) == 2:
        v = v + ":00"
    return pv.time_micros(v)


# ----------------------------------------------------------------------- the converter


@dataclass(frozen=True, eq=False)
class ColumnConverter:
    """Schema and value conversion for one column; see the module docstring."""

    column: cat.ColumnInfo
    settings: TypeSettings
    table_id: str | None
    schema: Schema  # in snapshot events
    stream_schema: Schema  # in streaming events (differs only in propagated source type parameters)
    from_text: Callable[[str], Any]
    from_stream_text: Callable[[str], Any]
    from_binary: Callable[[bytes], Any]
    from_stream_binary: Callable[[bytes], Any]
    binary_supported: bool
    type_fallback: Any
    fallback: Any
    null_value: Any
    toast_placeholder: Any
    stream_text_as_snapshot: bool = False  # a streamed text value converts as a snapshot's does

    def __reduce__(self) -> tuple:
        return (build_converter, (self.column, self.settings, self.table_id))


def build_converter(column: cat.ColumnInfo, settings: TypeSettings | None = None,
                    table_id: str | None = None) -> ColumnConverter | None:
    """The converter for `column`, or None when Debezium leaves the column out of its events.

    `table_id` ('schema.table') is needed only to apply column.propagate.source.type.
    """
    s = settings or TypeSettings()
    kind = _kind_for(column, s)
    if kind is None:
        return None
    schema = kind.schema.with_optional(not column.not_null)
    default = parse_default(column, kind, s)
    if default is not NO_DEFAULT and default is not None:
        schema = schema.with_default(default)
    else:
        default = NO_DEFAULT
    stream_schema = schema
    if _propagates(column, s, table_id):
        stream_schema = schema.with_parameters(source_type_parameters(column, streaming=True))
        schema = schema.with_parameters(source_type_parameters(column))
    optional = not column.not_null
    fallback = default if default is not NO_DEFAULT else kind.fallback
    null_value = default if default is not NO_DEFAULT else (None if optional else kind.fallback)

    text = kind.text
    stream = kind.stream or kind.text
    name_is_null = column.root_oid == cat.NAME and not column.is_array and not s.include_unknown
    if name_is_null:
        def stream(_t: str) -> Any:  # noqa: F811 - Debezium resolves no value for name while streaming
            return null_value
    if kind.fails:
        text = _guard(text, optional, null_value, column.name)
        stream = _guard(stream, optional, null_value, column.name)
    binary = kind.binary
    binary_supported = binary is not None
    if binary is None:
        def binary(_b: bytes) -> Any:
            raise NotImplementedError(
                f"binary format of {column.type_name} (column {column.name}) is not supported; use text mode")
    elif kind.fails:
        binary = _guard(binary, optional, null_value, column.name)
    stream_binary = binary
    if name_is_null:
        stream_binary = stream  # type: ignore[assignment]
    elif column.root_oid == cat.DATE and not column.is_array:
        stream_binary = _stream_date_binary
        if s.time_precision_mode == "isostring":
            def stream_binary(b: bytes) -> Any:  # noqa: F811
                return _iso_date_value(_stream_date_binary(b))
    return ColumnConverter(
        column=column, settings=s, table_id=table_id, schema=schema, stream_schema=stream_schema,
        from_text=text, from_stream_text=stream, from_binary=binary, from_stream_binary=stream_binary,
        binary_supported=binary_supported, type_fallback=kind.fallback, fallback=fallback,
        null_value=null_value, toast_placeholder=kind.toast,
        stream_text_as_snapshot=kind.stream is None and not name_is_null,
    )


def _stream_date_binary(b: bytes) -> int:
    """A streamed date_send value as Debezium's streaming path gives its epoch day (proleptic,
    its own infinities)."""
    d = pv.bin_int(b)
    if d == java.INT_MAX:
        return DATE_POS_INF_STREAM
    if d == java.INT_MIN:
        return DATE_NEG_INF_STREAM
    return d + pv.PG_EPOCH_DAYS


def _guard(fn: Callable[[Any], Any], optional: bool, null_value: Any, name: str) -> Callable[[Any], Any]:
    if optional:
        def guarded(v: Any) -> Any:
            try:
                return fn(v)
            except _Failed:
                return null_value
    else:
        def guarded(v: Any) -> Any:
            try:
                return fn(v)
            except _Failed:
                raise ConversionError(f"Debezium cannot convert {v!r} for the NOT NULL column {name}") from None
    return guarded


# -------------------------------------------------------------------- source type params


def source_type_parameters(column: cat.ColumnInfo, streaming: bool = False) -> dict[str, str]:
    """The schema parameters column.propagate.source.type adds, in Debezium's order.

    Debezium takes them from JDBC metadata for a snapshot and from its type registry (with the
    RELATION message's type modifier) while streaming, which differ in two ways: a serial column
    is SERIAL/BIGSERIAL/SMALLSERIAL only in a snapshot, and an unconstrained numeric has length 0
    and no scale in a snapshot but length 131089 and scale 0 while streaming.
    """
    name, length, scale = column.jdbc_type_name, column.length, column.scale
    if streaming:
        name = column.typname
        if scale is None and length == 0:
            length, scale = cat.VARIABLE_NUMERIC_LENGTH, 0
    params = {"__debezium.source.column.type": name.upper()}
    if length != -1:
        params["__debezium.source.column.length"] = str(length)
    if scale is not None:
        params["__debezium.source.column.scale"] = str(scale)
    if column.comment:
        params["__debezium.source.column.comment"] = column.comment
    params["__debezium.source.column.name"] = column.name
    return params


def _propagates(column: cat.ColumnInfo, s: TypeSettings, table_id: str | None) -> bool:
    if s.propagate_columns and table_id is not None:
        full = f"{table_id}.{column.name}"
        if any(re.fullmatch(p, full, re.IGNORECASE) for p in s.propagate_columns):
            return True
    if s.propagate_datatypes:
        # Debezium matches the type's fully-qualified name ("<schema>.<table>.<type>"); a bare type
        # name is accepted too
        names = [column.jdbc_type_name]
        if table_id is not None:
            names.append(f"{table_id}.{column.jdbc_type_name}")
        return any(re.fullmatch(p, n, re.IGNORECASE) for p in s.propagate_datatypes for n in names)
    return False


def json_text_kind(conv: ColumnConverter, streaming: bool = False) -> tuple[str, int] | None:
    """How a column's text (COPY in a snapshot, pgoutput while `streaming`) maps to its JSON in an event when no Python object is
    needed, with the kind's parameter: ("integer", 0) the text is the JSON number; ("boolean", 0)
    't'/'f'; ("text", 0) the JSON string of the text; ("decimal", scale) a numeric of fixed scale,
    precise mode (the base64 of its unscaled value's two's-complement bytes); ("timestamptz", digits)
    its UTC text re-laid as ISO-8601. None: the value goes through the converter."""
    if streaming and not conv.stream_text_as_snapshot:
        return None
    text, col = conv.from_text, conv.column
    if text is int:
        return "integer", 0
    if text is _bool_text:
        return "boolean", 0
    if text is _identity:
        return "text", 0
    if col.is_array:
        return None
    variable = col.length in (0, cat.VARIABLE_NUMERIC_LENGTH) and not (col.scale or 0)
    if col.root_oid == cat.NUMERIC and conv.settings.decimal_mode == "precise" and not variable \
            and 0 <= (col.scale or 0) <= 18:  # unscaled values of up to 18 digits (int64)
        return "decimal", col.scale or 0
    if col.root_oid == cat.TIMESTAMPTZ:
        return "timestamptz", 6 if col.scale is None else col.scale
    return None
