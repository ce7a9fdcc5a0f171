"""Debezium's semantic types, the same for every connector: what `time.precision.mode`,
`decimal.handling.mode` and `binary.handling.mode` make of a column's Connect schema and value.

- temporal: `time_unit(mode, precision)` / `timestamp_unit(mode, precision)` say how a time or
  timestamp of `precision` fraction digits is written ("ms", "us" or "ns" since the epoch or
  midnight, or "iso" for an ISO-8601 string), and `date_schema`, `time_schema`, `timestamp_schema`
  give the Connect schema (`ZONED_TIME` and `ZONED_TIMESTAMP` are the same in every mode);
  `nanos_from_micros` is the INT64 nanosecond value Debezium computes (None out of its range);
- decimals: `decimal_schema` (org.apache.kafka.connect.data.Decimal), `VARIABLE_SCALE_DECIMAL`
  and `decimal_mode_schema(mode, scale, precision, variable)` for precise, double and string;
- binary: `binary_schema(mode)` and `binary_encoder(mode)`: bytes -> the JSON text JsonConverter
  writes (base64 for bytes and base64, base64 URL-safe, or hex);
- spatial: the `POINT`, `GEOMETRY` and `GEOGRAPHY` structs (WKB and SRID).

The database-specific parsing of values lives with each connector.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable

from headwater.events.connect import BYTES, FLOAT64, INT32, INT64, STRING, Field, Schema

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


def named(type_: str, name: str, parameters: dict[str, str] | None = None, doc: str | None = None) -> Schema:
    """A named Connect schema of version 1 (how Debezium declares its semantic types)."""
    return Schema(type_, name=name, version=1, doc=doc, parameters=tuple(parameters.items()) if parameters else None)


def struct_schema(name: str, fields: list[tuple[str, Schema]], doc: str | None = None) -> Schema:
    """A named struct schema of version 1."""
    return Schema("struct", name=name, version=1, doc=doc, fields=tuple(Field(n, s) for n, s in fields))


# ------------------------------------------------------------------------------------ temporal

ZONED_TIME = named(STRING, "io.debezium.time.ZonedTime")
ZONED_TIMESTAMP = named(STRING, "io.debezium.time.ZonedTimestamp")

_TIME_SCHEMAS = {
    "ms": named(INT32, "io.debezium.time.Time"),
    "us": named(INT64, "io.debezium.time.MicroTime"),
    "ns": named(INT64, "io.debezium.time.NanoTime"),
    "iso": named(STRING, "io.debezium.time.IsoTime"),
}
_TIMESTAMP_SCHEMAS = {
    "ms": named(INT64, "io.debezium.time.Timestamp"),
    "us": named(INT64, "io.debezium.time.MicroTimestamp"),
    "ns": named(INT64, "io.debezium.time.NanoTimestamp"),
    "iso": named(STRING, "io.debezium.time.IsoTimestamp"),
}
CONNECT_DATE = named(INT32, "org.apache.kafka.connect.data.Date")
CONNECT_TIME = named(INT32, "org.apache.kafka.connect.data.Time")
CONNECT_TIMESTAMP = named(INT64, "org.apache.kafka.connect.data.Timestamp")


def _adaptive_unit(precision: int | None) -> str:
    """adaptive: milliseconds up to 3 fraction digits, microseconds up to 6, nanoseconds above;
    an unknown precision (None) counts as microseconds."""
    if precision is None or precision < 0:
        return "us"
    return "ms" if precision <= 3 else "us" if precision <= 6 else "ns"


_FIXED_UNITS = {"connect": "ms", "microseconds": "us", "nanoseconds": "ns", "isostring": "iso"}


def time_unit(mode: str, precision: int | None) -> str:
    """How a time (of day) with `precision` fraction digits is written: 'ms', 'us', 'ns' or 'iso'."""
    if mode == "adaptive_time_microseconds":
        return "us"
    return timestamp_unit(mode, precision)


def timestamp_unit(mode: str, precision: int | None) -> str:
    """How a timestamp without zone with `precision` fraction digits is written ('ms', 'us', 'ns', 'iso');
    adaptive_time_microseconds writes timestamps as adaptive does."""
    return _FIXED_UNITS.get(mode) or _adaptive_unit(precision)


def date_schema(mode: str) -> Schema:
    """A date: days since the epoch (Debezium's or Connect's Date), or an ISO string."""
    if mode == "connect":
        return CONNECT_DATE
    if mode == "isostring":
        return named(STRING, "io.debezium.time.IsoDate")
    return named(INT32, "io.debezium.time.Date")


def time_schema(mode: str, precision: int | None) -> Schema:
    """A time of day with `precision` fraction digits."""
    return CONNECT_TIME if mode == "connect" else _TIME_SCHEMAS[time_unit(mode, precision)]


def timestamp_schema(mode: str, precision: int | None) -> Schema:
    """A timestamp without zone with `precision` fraction digits."""
    return CONNECT_TIMESTAMP if mode == "connect" else _TIMESTAMP_SCHEMAS[timestamp_unit(mode, precision)]


def nanos_from_micros(micros: int) -> int | None:
    """Microseconds as the INT64 nanoseconds time.precision.mode=nanoseconds writes; None outside
    that range (1677-09-21T00:12:43.145224192..2262-04-11T23:47:16.854775807), where Debezium
    writes null."""
    nanos = micros * 1000
    return nanos if LONG_MIN <= nanos <= LONG_MAX else None


# ------------------------------------------------------------------------------------ decimals

VARIABLE_SCALE_DECIMAL = struct_schema("io.debezium.data.VariableScaleDecimal",
                                [("scale", Schema(INT32)), ("value", Schema(BYTES))], "Variable scaled decimal")


def decimal_schema(scale: int, precision: int | None) -> Schema:
    """Connect's Decimal of a fixed scale (with the precision as a parameter when known)."""
    params = {"scale": str(scale)}
    if precision is not None:
        params["connect.decimal.precision"] = str(precision)
    return named(BYTES, "org.apache.kafka.connect.data.Decimal", params)


def decimal_mode_schema(mode: str, scale: int, precision: int | None, variable: bool = False) -> Schema:
    """The schema of a decimal under decimal.handling.mode: precise (Decimal, or
    VariableScaleDecimal when the scale is `variable`), double (FLOAT64) or string (STRING)."""
    if mode == "double":
        return Schema(FLOAT64)
    if mode == "string":
        return Schema(STRING)
    return VARIABLE_SCALE_DECIMAL if variable else decimal_schema(scale, precision)


# -------------------------------------------------------------------------------------- binary


def binary_schema(mode: str) -> Schema:
    """bytes (BYTES) or a string for base64, base64-url-safe and hex."""
    return Schema(BYTES) if mode == "bytes" else Schema(STRING)


def b64(b: bytes) -> str:
    """Standard base64 (JsonConverter's text of BYTES)."""
    return binascii.b2a_base64(b, newline=False).decode("ascii")


def b64_url(b: bytes) -> str:
    """URL-safe base64 with padding (java.util.Base64.getUrlEncoder)."""
    return base64.urlsafe_b64encode(b).decode("ascii")


def binary_encoder(mode: str) -> Callable[[bytes], str]:
    """bytes -> JSON text for binary.handling.mode (bytes and base64 both give base64 text in JSON)."""
    if mode == "hex":
        return bytes.hex
    if mode == "base64-url-safe":
        return b64_url
    return b64


# ------------------------------------------------------------------------------------- spatial

POINT = struct_schema("io.debezium.data.geometry.Point",
                      [("x", Schema(FLOAT64)), ("y", Schema(FLOAT64)), ("wkb", Schema(BYTES, optional=True)),
                       ("srid", Schema(INT32, optional=True))], "Geometry (POINT)")
GEOMETRY = struct_schema("io.debezium.data.geometry.Geometry",
                         [("wkb", Schema(BYTES)), ("srid", Schema(INT32, optional=True))], "Geometry")
GEOGRAPHY = struct_schema("io.debezium.data.geometry.Geography",
                          [("wkb", Schema(BYTES)), ("srid", Schema(INT32, optional=True))], "Geography")
