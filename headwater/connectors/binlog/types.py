"""MySQL and MariaDB column types to Debezium's Connect schemas and JSON values.

`converter(column, settings)` gives a column's `ColumnConverter` (the protocol of
`connectors/common/records.py`): its Connect schema (with the column's default) and functions from
a value to the JSON value Debezium's MySQL/MariaDB connector writes for it, as
`bigint.unsigned.handling.mode`, `time.precision.mode`, `decimal.handling.mode`,
`binary.handling.mode` and `enable.time.adjuster` (`TypeSettings`) ask. The type comes from the
column's `type_name` as Debezium's relational model holds it: a column the snapshot reads through
SHOW CREATE TABLE says TINYINT(1) and LONGTEXT where DDL parsed from the binlog says BOOLEAN and
JSON, and the events differ as Debezium's do. `json_text_kind` says which columns' text the common
column-wise kernels (`common/columnar.py`) can write without the converter.

Value forms accepted (the binlog reader and the snapshot produce exactly these):

- **Snapshot** (`from_text` for `str`, `from_binary` for `bytes`): what PyMySQL returns over the
  text protocol with its decoders removed (``conv`` holding only its encoders) and
  ``charset="utf8mb4"``: `str` for every column whose result charset is not binary (numbers, temporal
  text, character columns decoded from utf8mb4, ENUM, SET, MariaDB's JSON and UUID), `bytes` for
  binary-charset columns (BINARY, VARBINARY, BLOBs, BIT, spatial). The session must have
  ``time_zone='+00:00'`` (TIMESTAMP text is then UTC); zero dates arrive as their text.
- **Streaming** (`from_stream_text` for `str`, `from_stream_binary` for anything else): the values of
  python-mysql-replication's row events with binlog_row_metadata=FULL: int (signed or unsigned as
  the column is; a negative value of an unsigned column is wrapped back), Decimal, float (FLOAT as
  its float32 value), str (character columns, ENUM members), bytes (binary columns with trailing
  zero bytes dropped, which BINARY(n) pads back; UUID images; spatial values), a '0'/'1' string for
  BIT, a set of members for SET (python-mysql-replication gives None for an empty SET: pass an empty
  set when its none_sources say "empty set"), date/datetime (naive UTC for TIMESTAMP) and timedelta
  for TIME, YEAR as an int (0000 arrives as 1900), and decoded JSON (dict, list, ...) for MySQL 8's
  binary JSON. A zero date arrives as None (python-mysql-replication) or as the zero TIMESTAMP
  1970-01-01 00:00:00; either gives the column's null value.

Zero and partial zero dates become null in nullable columns and the column's default (else the
type's zero: epoch day 0) in NOT NULL ones, as Debezium writes them.
"""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from headwater.connectors.binlog import values as v
from headwater.connectors.binlog.images import DEFAULT_PLACEHOLDER, placeholder_able, placeholder_bytes
from headwater.connectors.binlog.schema import Column
from headwater.connectors.common import java
from headwater.connectors.common.semantics import (
    GEOMETRY,
    POINT,
    ZONED_TIMESTAMP,
    b64,
    binary_encoder,
    binary_schema,
    date_schema,
    decimal_mode_schema,
    decimal_schema,
    named,
    time_schema,
    timestamp_schema,
    timestamp_unit,
)
from headwater.events.connect import BOOLEAN, BYTES, FLOAT32, FLOAT64, INT16, INT32, INT64, STRING, Schema

TIME_PRECISION_MODES = ("adaptive_time_microseconds", "connect")
DECIMAL_MODES = ("precise", "double", "string")
BIGINT_UNSIGNED_MODES = ("long", "precise")
BINARY_MODES = ("bytes", "base64", "base64-url-safe", "hex")


class UnsupportedType(ValueError):
    """A column type Debezium's binlog connectors do not map (its DDL parser rejects INET4/INET6)."""


@dataclass(frozen=True)
class TypeSettings:
    """The connector properties the type mapping depends on."""

    bigint_unsigned_mode: str = "long"  # bigint.unsigned.handling.mode
    time_precision_mode: str = "adaptive_time_microseconds"  # time.precision.mode
    decimal_mode: str = "precise"  # decimal.handling.mode
    binary_mode: str = "bytes"  # binary.handling.mode
    time_adjuster: bool = True  # enable.time.adjuster
    placeholder: str = DEFAULT_PLACEHOLDER  # unavailable.value.placeholder (an absent BLOB/TEXT value)

    def __post_init__(self) -> None:
        for prop, value, allowed in (
            ("bigint.unsigned.handling.mode", self.bigint_unsigned_mode, BIGINT_UNSIGNED_MODES),
            ("time.precision.mode", self.time_precision_mode, TIME_PRECISION_MODES),
            ("decimal.handling.mode", self.decimal_mode, DECIMAL_MODES),
            ("binary.handling.mode", self.binary_mode, BINARY_MODES),
        ):
            if value not in allowed:
                hint = " ('adaptive' is no longer supported by the MySQL connectors)" if value == "adaptive" else ""
                raise ValueError(f"{prop}={value!r} is not allowed{hint}: use one of {', '.join(allowed)}")

    @classmethod
    def from_config(cls, config: Any) -> TypeSettings:
        """From a ConnectorConfig (or any mapping with Debezium's property names); missing ones take defaults."""
        def get(name: str, default: str) -> str:
            value = config.get(name)
            return default if value is None else str(value).lower()

        return cls(
            bigint_unsigned_mode=get("bigint.unsigned.handling.mode", "long"),
            time_precision_mode=get("time.precision.mode", "adaptive_time_microseconds"),
            decimal_mode=get("decimal.handling.mode", "precise"),
            binary_mode=get("binary.handling.mode", "bytes"),
            time_adjuster=get("enable.time.adjuster", "true") == "true",
            placeholder=str(config.get("unavailable.value.placeholder") or DEFAULT_PLACEHOLDER),
        )


@dataclass(frozen=True, eq=False)
class ColumnConverter:
    """One column's schema and value conversions (see the module docstring); pickles as its inputs."""

    column: Column
    settings: TypeSettings
    schema: Schema
    stream_schema: Schema
    from_text: Callable[[str], Any]
    from_stream_text: Callable[[str], Any]
    from_binary: Callable[[bytes], Any]
    from_stream_binary: Callable[[Any], Any]
    fallback: Any
    null_value: Any
    text_kind: tuple[str, int] | None = None  # see json_text_kind
    stream_text_kind: tuple[str, int] | None = None
    toast_placeholder: Any = None

    def __reduce__(self) -> tuple:
        return (converter, (self.column, self.settings))


@dataclass(frozen=True)
class _Kind:
    """A type's schema, its four value functions, its zero value (Debezium's fallback for a NOT NULL
    column), whether a default applies and whether a value can read as None (`gaps`: a zero date, a
    TIME out of Connect's range), which the column's null value then stands for."""

    schema: Schema
    text: Callable[[str], Any]
    binary: Callable[[bytes], Any]
    stream_text: Callable[[str], Any]
    stream: Callable[[Any], Any]
    zero: Any = None
    defaults: bool = True
    gaps: bool = False


# ------------------------------------------------------------------------------------ type names

_ALIASES = {
    "INTEGER": "INT", "INT1": "TINYINT", "INT2": "SMALLINT", "INT3": "MEDIUMINT", "MIDDLEINT": "MEDIUMINT",
    "INT4": "INT", "INT8": "BIGINT", "DEC": "DECIMAL", "NUMERIC": "DECIMAL", "FIXED": "DECIMAL",
    "FLOAT4": "FLOAT", "FLOAT8": "DOUBLE",
    "BOOL": "BOOLEAN", "SERIAL": "BIGINT UNSIGNED", "GEOMCOLLECTION": "GEOMETRYCOLLECTION",
    "CHARACTER": "CHAR", "NCHAR": "CHAR", "NATIONAL CHAR": "CHAR", "NATIONAL CHARACTER": "CHAR",
    "CHAR VARYING": "VARCHAR", "CHARACTER VARYING": "VARCHAR", "NCHAR VARYING": "VARCHAR", "NVARCHAR": "VARCHAR",
    "NCHAR VARCHAR": "VARCHAR", "NATIONAL VARCHAR": "VARCHAR", "NATIONAL CHAR VARYING": "VARCHAR",
    "NATIONAL CHARACTER VARYING": "VARCHAR", "LONG": "MEDIUMTEXT", "LONG VARCHAR": "MEDIUMTEXT",
    "LONG VARBINARY": "MEDIUMBLOB",
}
_MODIFIERS = {"SIGNED", "UNSIGNED", "ZEROFILL", "BINARY", "PRECISION"}
INTEGERS = {  # type -> (bits, signed schema, unsigned schema)
    "TINYINT": (8, INT16, INT16), "SMALLINT": (16, INT16, INT32), "MEDIUMINT": (24, INT32, INT32),
    "INT": (32, INT32, INT64), "BIGINT": (64, INT64, INT64),
}
STRINGS = {"CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT"}
_BINARIES = {"BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB"}
_GEOMETRIES = {"GEOMETRY", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING", "MULTIPOLYGON",
               "GEOMETRYCOLLECTION"}
# Java charsets of MySQL's character sets where Python's codec name differs (latin1 is cp1252)
_CODECS = {"utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "latin1": "cp1252", "binary": "latin-1"}


def base_type(type_name: str) -> tuple[str, bool]:
    """A column's `type_name` (Debezium's: the type's words, with SIGNED/UNSIGNED/ZEROFILL/BINARY)
    -> (base type without modifiers or aliases, unsigned)."""
    words = type_name.upper().split("(", 1)[0].split()
    unsigned = "UNSIGNED" in words
    kept = [w for i, w in enumerate(words) if i == 0 or w not in _MODIFIERS]
    name = " ".join(kept)
    name = _ALIASES.get(name, name)
    if name == "BIGINT UNSIGNED":  # SERIAL
        return "BIGINT", True
    return name, unsigned


# ------------------------------------------------------------------------------------ the kinds


def _passthrough(value: str) -> str:
    return value


def _utf8(value: bytes) -> str:
    return value.decode("utf-8")


def _kind_integer(bits: int, unsigned: bool, schema_type: str, s: TypeSettings) -> _Kind:
    if bits == 64 and unsigned:
        if s.bigint_unsigned_mode == "precise":
            def precise(n: int) -> str:
                return b64(java.to_byte_array(n + (1 << 64) if n < 0 else n))
            return _numeric(decimal_schema(0, 20), lambda t: precise(int(t)), precise, zero=b64(b"\0"))

        def wrap(n: int) -> int:
            return n - (1 << 64) if n >= 1 << 63 else n
        return _numeric(Schema(INT64), lambda t: wrap(int(t)), wrap, zero=0)
    if unsigned:
        modulus = 1 << bits

        def positive(n: int) -> int:
            return n + modulus if n < 0 else n
        return _numeric(Schema(schema_type), lambda t: positive(int(t)), positive, zero=0)
    return _numeric(Schema(schema_type), int, int, zero=0)


def _numeric(schema: Schema, text: Callable[[str], Any], stream: Callable[[Any], Any], zero: Any,
             gaps: bool = False) -> _Kind:
    """A type whose snapshot values are ASCII text and streamed values Python numbers."""
    def binary(b: bytes) -> Any:
        return text(b.decode("ascii"))
    return _Kind(schema, text, binary, text, stream, zero, gaps=gaps)


def _truthy(n: Any) -> bool:
    return int(n) != 0


def _kind_decimal(column: Column, s: TypeSettings) -> _Kind:
    scale = column.scale or 0
    schema = decimal_mode_schema(s.decimal_mode, scale, column.length)
    if s.decimal_mode == "double":
        def as_double(d: Decimal) -> float:
            return float(d)
        return _numeric(schema, lambda t: float(Decimal(t)), as_double, zero=0.0)
    if s.decimal_mode == "string":
        def as_string(d: Decimal) -> str:
            return java.plain_string(v.unscaled(d, scale), scale)
        return _numeric(schema, lambda t: as_string(Decimal(t)), as_string, zero="0")

    def as_bytes(d: Decimal) -> str:
        return b64(java.to_byte_array(v.unscaled(d, scale)))
    return _numeric(schema, lambda t: as_bytes(Decimal(t)), as_bytes, zero=b64(b"\0"))


_F32 = struct.Struct("<f")


def _float32(x: float) -> float:
    """The float32 nearest `x`, widened (what Java's Float holds)."""
    return float(_F32.unpack(_F32.pack(x))[0])


def _java_float(x: float) -> float:
    """A FLOAT as Jackson writes Java's Float (Float.toString's digits), read back."""
    return float(java.java_float_to_string(_float32(x)))


def _kind_float(column: Column) -> _Kind:
    # FLOAT without a scale and of precision <= 24 is Connect's FLOAT32; FLOAT(M,D) and FLOAT(p>24)
    # are FLOAT64 holding the float32 value (the driver reads a FLOAT column as a Java Float)
    if column.scale is None and (column.length is None or column.length <= 24):
        return _numeric(Schema(FLOAT32), lambda t: _java_float(float(t)), _java_float, zero=0.0)
    return _numeric(Schema(FLOAT64), lambda t: _float32(float(t)), _float32, zero=0.0)


def _kind_double() -> _Kind:
    return _numeric(Schema(FLOAT64), float, float, zero=0.0)


def _kind_bit(column: Column) -> _Kind:
    length = column.length
    if (length or 1) == 1:
        return _Kind(Schema(BOOLEAN), lambda t: t not in ("0", "\0", ""), lambda b: any(b),
                     lambda t: t not in ("0", ""), _truthy, zero=False)
    schema = named(BYTES, "io.debezium.data.Bits", {"length": str(length)})

    def from_bytes(b: bytes) -> str:
        return b64(v.bits_from_bytes(b, length))

    def from_string(t: str) -> str:
        return b64(v.bits_from_string(t, length))

    def stream(x: Any) -> str:
        if isinstance(x, (bytes, bytearray)):
            return from_bytes(bytes(x))
        return b64(int(x).to_bytes(v.bit_bytes(length), "little"))
    return _Kind(schema, from_string, from_bytes, from_string, stream, zero=b64(bytes(v.bit_bytes(length))))


def _kind_string(column: Column) -> _Kind:
    codec = _CODECS.get((column.charset or "utf8mb4").lower(), column.charset or "utf-8")

    def stream(b: Any) -> str:
        return bytes(b).decode(codec)
    return _Kind(Schema(STRING), _passthrough, _utf8, _passthrough, stream, zero="")


def _kind_binary(column: Column, s: TypeSettings) -> _Kind:
    encode = binary_encoder(s.binary_mode)
    length = column.length or 0
    pad = column.type_name.upper().startswith("BINARY") and length > 0

    def binary(b: bytes) -> str:
        if pad and len(b) < length:
            b = b.ljust(length, b"\0")
        return encode(bytes(b))

    def text(t: str) -> str:
        return binary(t.encode("latin-1"))
    return _Kind(binary_schema(s.binary_mode), text, binary, text, binary, zero=encode(b""), defaults=False)


def _kind_enum(column: Column) -> _Kind:
    members = [v.member_value(m) for m in column.enum_values or ()]
    escaped = [v.escape_option(m) for m in column.enum_values or ()]
    schema = named(STRING, "io.debezium.data.Enum", {"allowed": ",".join(escaped)})
    position = {m: i for i, m in enumerate(members)}

    def stream_text(t: str) -> str:
        i = position.get(t)
        return "" if i is None else escaped[i]

    def stream(x: Any) -> str:
        if isinstance(x, int):  # the 1-based index of the member, 0 for an invalid value
            return escaped[x - 1] if 0 < x <= len(escaped) else ""
        return stream_text(bytes(x).decode("utf-8"))
    return _Kind(schema, _passthrough, _utf8, stream_text, stream, zero="")


def _kind_set(column: Column) -> _Kind:
    members = [v.member_value(m) for m in column.enum_values or ()]
    escaped = [v.escape_option(m) for m in column.enum_values or ()]
    schema = named(STRING, "io.debezium.data.EnumSet", {"allowed": ",".join(escaped)})
    position = {m: i for i, m in enumerate(members)}

    def from_members(chosen: Iterable[str]) -> str:
        indexes = sorted(position[m] for m in chosen if m in position)
        return ",".join(escaped[i] for i in indexes)

    def stream_text(t: str) -> str:
        return from_members(t.split(",") if t else ())

    def stream(x: Any) -> str:
        if isinstance(x, int):  # the bit mask
            return ",".join(e for i, e in enumerate(escaped) if x >> i & 1)
        if isinstance(x, (bytes, bytearray)):
            return stream_text(bytes(x).decode("utf-8"))
        return from_members(x)
    return _Kind(schema, _passthrough, _utf8, stream_text, stream, zero="")


def _json_text(x: Any) -> str:
    """MySQL 8's binary JSON, as python-mysql-replication decodes it, as Debezium's binlog client
    writes it (mysql-binlog-connector-java's JsonStringFormatter): no whitespace, only '"', '\\' and
    control characters escaped, a double in Java's digits or, where those have an exponent, as its
    exact plain decimal. Written from that formatter: not verified against Debezium on MySQL."""
    out: list[str] = []
    _write_json(x, out)
    return "".join(out)


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\f": "\\f", "\n": "\\n", "\r": "\\r"}


def _json_string(s: str, out: list[str]) -> None:
    out.append('"')
    for c in s:
        if c in _JSON_ESCAPES:
            out.append(_JSON_ESCAPES[c])
        elif ord(c) < 32:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    out.append('"')


def _write_json(x: Any, out: list[str]) -> None:
    if x is None:
        out.append("null")
    elif x is True or x is False:
        out.append("true" if x else "false")
    elif isinstance(x, int):
        out.append(str(x))
    elif isinstance(x, float):
        text = java.java_double_to_string(x)
        out.append(format(Decimal(x), "f") if "E" in text else text)
    elif isinstance(x, Decimal):
        out.append(format(x, "f"))
    elif isinstance(x, (bytes, bytearray)):
        _json_string(bytes(x).decode("utf-8"), out)
    elif isinstance(x, str):
        _json_string(x, out)
    elif isinstance(x, dict):
        out.append("{")
        for i, (k, val) in enumerate(x.items()):
            if i:
                out.append(",")
            _json_string(k.decode("utf-8") if isinstance(k, (bytes, bytearray)) else str(k), out)
            out.append(":")
            _write_json(val, out)
        out.append("}")
    elif isinstance(x, (list, tuple)):
        out.append("[")
        for i, item in enumerate(x):
            if i:
                out.append(",")
            _write_json(item, out)
        out.append("]")
    else:
        _json_string(str(x), out)


def _kind_json() -> _Kind:
    return _Kind(named(STRING, "io.debezium.data.Json"), _passthrough, _utf8, _passthrough, _json_text,
                 zero="{}", defaults=False)


def _kind_uuid() -> _Kind:
    def text(t: str) -> str:
        return str(uuid.UUID(t))

    def stream_text(t: str) -> str:  # python-mysql-replication decodes an all-zero image as ''
        return v.uuid_from_bytes(t.encode("latin-1"))

    def stream(b: Any) -> str:
        return v.uuid_from_bytes(bytes(b))
    return _Kind(named(STRING, "io.debezium.data.Uuid"), text, lambda b: text(b.decode("ascii")),
                 stream_text, stream, zero="", defaults=False)


def _kind_geometry(point: bool) -> _Kind:
    def value(b: bytes) -> dict:
        srid, wkb = v.split_geometry(bytes(b))
        if point:
            x, y = v.point_xy(wkb)
            return {"x": x, "y": y, "wkb": b64(wkb), "srid": srid}
        return {"wkb": b64(wkb), "srid": srid}

    def text(t: str) -> dict:
        return value(t.encode("latin-1"))
    return _Kind(POINT if point else GEOMETRY, text, value, text, value, defaults=False)


def _kind_year(s: TypeSettings) -> _Kind:
    adjust = s.time_adjuster

    def year(n: Any) -> int:
        y = int(n)
        return v.adjust_year(y) if adjust else y
    return _numeric(named(INT32, "io.debezium.time.Year"), year, year, zero=0)


def _kind_date(s: TypeSettings) -> _Kind:
    adjust = s.time_adjuster
    schema = date_schema("connect" if s.time_precision_mode == "connect" else "adaptive")

    def text(t: str) -> int | None:
        return v.parse_date(t, adjust)

    def stream(d: Any) -> int | None:
        if isinstance(d, dt.datetime):
            d = d.date()
        return v.date_days(d, adjust)
    return _numeric(schema, text, stream, zero=0, gaps=True)


def _kind_time(column: Column, s: TypeSettings) -> _Kind:
    if s.time_precision_mode == "connect":
        schema = time_schema("connect", column.length or 0)

        def out(us: int) -> int | None:  # Connect's Time holds 00:00:00 .. 24:00:00 only
            return us // 1000 if 0 <= us <= v.MICROS_PER_DAY else None
    else:
        schema = named(INT64, "io.debezium.time.MicroTime")

        def out(us: int) -> int | None:
            return us

    def text(t: str) -> int | None:
        return out(v.parse_time(t))

    def stream(x: Any) -> int | None:
        return out(v.replication_time_micros(x) if isinstance(x, dt.timedelta) else v.parse_time(str(x)))
    return _numeric(schema, text, stream, zero=0, gaps=True)


def _kind_datetime(column: Column, s: TypeSettings) -> _Kind:
    adjust = s.time_adjuster
    mode = "connect" if s.time_precision_mode == "connect" else "adaptive"
    precision = column.length or 0
    schema = timestamp_schema(mode, precision)
    millis = timestamp_unit(mode, precision) == "ms"

    def out(us: int | None) -> int | None:
        if us is None:
            return None
        return us // 1000 if millis else us

    def text(t: str) -> int | None:
        return out(v.parse_datetime(t, adjust))

    def stream(x: Any) -> int | None:
        if isinstance(x, dt.datetime):
            return out(v.datetime_micros(x, adjust))
        if isinstance(x, dt.date):
            return out(v.date_days(x, adjust) * v.MICROS_PER_DAY)
        return text(str(x))
    return _numeric(schema, text, stream, zero=0, gaps=True)


def _kind_timestamp(column: Column) -> _Kind:
    digits = column.length or 0

    def text(t: str) -> str | None:  # the snapshot's text (session time zone UTC): Java's ISO form
        us = v.parse_datetime(t, False)
        if us is None:
            return None
        iso = java.iso_timestamp_utc(us, 6)
        return iso[:-1].rstrip("0").rstrip(".") + "Z" if "." in iso else iso

    def stream(x: Any) -> str | None:  # streamed: the column's fraction digits, all of them
        if not isinstance(x, dt.datetime):
            return stream_text(str(x))
        us = v.datetime_micros(x, False)
        return None if us == 0 else java.iso_timestamp_utc(us, digits)

    def stream_text(t: str) -> str | None:
        us = v.parse_datetime(t, False)
        return None if not us else java.iso_timestamp_utc(us, digits)
    return _Kind(ZONED_TIMESTAMP, text, lambda b: text(b.decode("ascii")), stream_text, stream,
                 zero="1970-01-01T00:00:00Z", gaps=True)


def _kind_for(column: Column, s: TypeSettings) -> _Kind:
    name, unsigned = base_type(column.type_name)
    if name in INTEGERS:
        bits, signed_type, unsigned_type = INTEGERS[name]
        return _kind_integer(bits, unsigned, unsigned_type if unsigned else signed_type, s)
    if name == "BOOLEAN":
        return _Kind(Schema(BOOLEAN), lambda t: int(t) != 0, lambda b: int(b) != 0, lambda t: int(t) != 0,
                     _truthy, zero=False)
    if name == "DECIMAL":
        return _kind_decimal(column, s)
    if name == "FLOAT":
        return _kind_float(column)
    if name == "DOUBLE":
        return _kind_double()
    if name == "REAL":  # Connect's FLOAT32 (MariaDB's SHOW CREATE TABLE says DOUBLE for it)
        return _numeric(Schema(FLOAT32), lambda t: _java_float(float(t)), _java_float, zero=0.0)
    if name == "BIT":
        return _kind_bit(column)
    if name in STRINGS:
        return _kind_string(column)
    if name in _BINARIES:
        return _kind_binary(column, s)
    if name == "ENUM":
        return _kind_enum(column)
    if name == "SET":
        return _kind_set(column)
    if name == "JSON":
        return _kind_json()
    if name == "UUID":
        return _kind_uuid()
    if name == "POINT":
        return _kind_geometry(point=True)
    if name in _GEOMETRIES:
        return _kind_geometry(point=False)
    if name == "YEAR":
        return _kind_year(s)
    if name == "DATE":
        return _kind_date(s)
    if name == "TIME":
        return _kind_time(column, s)
    if name == "DATETIME":
        return _kind_datetime(column, s)
    if name == "TIMESTAMP":
        return _kind_timestamp(column)
    raise UnsupportedType(f"column {column.name}: type {column.type_name} has no Debezium mapping")


# ---------------------------------------------------------------------------------- defaults


_NOW = ("CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP")


def _default(column: Column, kind: _Kind) -> Any:
    """The column's default as its JSON value (None: no default), as Debezium's default value
    converter makes it: a zero date is the epoch in a NOT NULL column and no default otherwise."""
    expr = column.default_expression
    if not column.has_default or expr is None or not kind.defaults:
        return None
    if len(expr) >= 2 and expr[0] == expr[-1] == "'":
        expr = expr[1:-1].replace("''", "'")
    elif expr.upper() == "NULL":
        return None
    elif expr.upper().startswith(_NOW):  # the current time is the epoch in a schema default
        expr = "1970-01-01 00:00:00"
    elif expr[:2] in ("b'", "B'") and expr.endswith("'"):  # a BIT literal
        expr = expr[2:-1]
    name = base_type(column.type_name)[0]
    try:
        if name == "BOOLEAN":
            return expr.upper() in ("TRUE", "1") or (expr.isdigit() and int(expr) != 0)
        if name in INTEGERS and not expr.lstrip("-").isdigit():
            expr = str(java.java_round(float(expr)))  # a decimal default of an integer column: rounded
        value = kind.text(expr)
    except (ValueError, ArithmeticError, KeyError, IndexError):
        return None  # Debezium logs it and leaves the column without a default
    if value is None and not column.optional:
        return kind.zero
    return value


# ---------------------------------------------------------------------------------- converter


def _or_missing(fn: Callable[[Any], Any], missing: Any) -> Callable[[Any], Any]:
    """`fn`, with `missing` where it gives None."""
    def guarded(x: Any) -> Any:
        out = fn(x)
        return missing if out is None else out
    return guarded


def _text_kind(text: Callable[[str], Any], column: Column, s: TypeSettings, snapshot: bool) -> tuple[str, int] | None:
    """How a column's text maps to its JSON without a Python object (common/columnar.py's kernels):
    ("integer", 0) the text is the JSON number, ("text", 0) the JSON string of the text, ("decimal",
    scale) a DECIMAL in precise mode (MySQL writes exactly `scale` fraction digits), ("timestamp", 0)
    a snapshot's TIMESTAMP (`text_kernels.timestamp_json`); None otherwise."""
    if snapshot and base_type(column.type_name)[0] == "TIMESTAMP":
        return "timestamp", 0
    if text is int:
        return None if "ZEROFILL" in column.type_name.upper() else ("integer", 0)  # '000042' is no JSON
    if text is _passthrough:
        return "text", 0
    if base_type(column.type_name)[0] == "DECIMAL" and s.decimal_mode == "precise":
        return "decimal", column.scale or 0
    return None


def json_text_kind(conv: ColumnConverter, streaming: bool = False) -> tuple[str, int] | None:
    """The text kind of a converter's snapshot text (or streamed text), for `RecordContext.text_kind`."""
    return conv.stream_text_kind if streaming else conv.text_kind


def converter(column: Column, settings: TypeSettings) -> ColumnConverter:
    """The converter of `column` under `settings` (UnsupportedType for a type Debezium cannot map)."""
    kind = _kind_for(column, settings)
    default = _default(column, kind)
    schema = kind.schema.with_optional(column.optional)
    if default is not None:
        schema = schema.with_default(default)
    fallback = kind.zero if default is None else default
    null_value = fallback if not column.optional else default
    text, stream_text, binary, stream = kind.text, kind.stream_text, kind.binary, kind.stream
    if kind.gaps and null_value is not None:
        text, stream_text = _or_missing(text, null_value), _or_missing(stream_text, null_value)
        binary, stream = _or_missing(binary, null_value), _or_missing(stream, null_value)
    toast = None  # an absent value of a partial row image (images.py)
    if placeholder_able(column.type_name):
        raw = placeholder_bytes(settings.placeholder)
        toast = kind.stream(raw) if base_type(column.type_name)[0] in _BINARIES else \
            kind.stream_text(raw.decode("utf-8", "replace"))
    return ColumnConverter(
        column=column, settings=settings, schema=schema, stream_schema=schema,
        from_text=text, from_stream_text=stream_text, from_binary=binary, from_stream_binary=stream,
        fallback=fallback, null_value=null_value,
        text_kind=_text_kind(kind.text, column, settings, snapshot=True),
        stream_text_kind=_text_kind(kind.stream_text, column, settings, snapshot=False),
        toast_placeholder=toast,
    )
