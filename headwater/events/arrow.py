"""Kafka Connect schemas as Arrow types, and change events' row images as typed Arrow columns.

`arrow_type` maps a Connect schema (the JSON form events carry with `schemas.enable`) to an Arrow
type and a converter from the JSON value to the Arrow value: Debezium's semantic types become
Arrow's (Decimal -> decimal128, MicroTimestamp -> timestamp, Date -> date32, MicroTime -> time64,
ZonedTimestamp -> timestamp with time zone UTC, bytes -> binary, ...); a type Arrow has no
equivalent for (a VariableScaleDecimal, a Decimal beyond 38 digits) is its text. Temporal values
stay numbers (days, time units), so that dates Python cannot hold (PostgreSQL's infinity, years
beyond 9999) pass through. `RowImages` gathers the row image of each event of one table (`after`,
or `before` for a delete) into such columns, plus the change columns of `META`. Sinks that write
tables (Parquet, JDBC, Delta, Iceberg) build on it; nothing here needs Spark.
"""

from __future__ import annotations

import base64
import decimal
import re
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import orjson
import pyarrow as pa

from headwater.events.calendar import days_from_civil

Converter = Callable[[Any], Any]
Column = tuple[str, pa.DataType, Converter]  # name, Arrow type, JSON value -> Arrow value

# the change columns after the row image's: operation, change type, commit order and time, source time
META = [("_op", pa.string()), ("_change_type", pa.string()), ("_commit_version", pa.int64()),
        ("_commit_timestamp", pa.timestamp("us", tz="UTC")), ("_source_ts_ms", pa.int64())]

_PRIMITIVE = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
              "boolean": pa.bool_(), "string": pa.string()}
# NaN and the infinities are JSON strings ("NaN", "Infinity", "-Infinity"), which float() reads
_FLOATS = {"float": pa.float32(), "double": pa.float64()}
# Debezium's and Connect's temporal types whose JSON value (a number: days, or time units since the
# epoch or since midnight) is Arrow's own representation; taken as it is, so that values Python's
# datetime cannot hold (PostgreSQL's infinity, years beyond 9999) pass through
_TEMPORAL = {
    "io.debezium.time.Date": pa.date32(),
    "org.apache.kafka.connect.data.Date": pa.date32(),
    "io.debezium.time.Timestamp": pa.timestamp("ms"),
    "org.apache.kafka.connect.data.Timestamp": pa.timestamp("ms"),
    "io.debezium.time.MicroTimestamp": pa.timestamp("us"),
    "io.debezium.time.NanoTimestamp": pa.timestamp("ns"),
    "io.debezium.time.Time": pa.time32("ms"),
    "org.apache.kafka.connect.data.Time": pa.time32("ms"),
    "io.debezium.time.MicroTime": pa.time64("us"),
    "io.debezium.time.NanoTime": pa.time64("ns"),
}
# an ISO-8601 instant in UTC as Debezium writes it: a year of 4 or more digits, maybe signed
_ZONED = re.compile(r"([+-]?\d{4,})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?Z")
_INT64 = (-(2**63), 2**63 - 1)


def arrow_type(schema: dict) -> tuple[pa.DataType, Converter]:
    """Arrow type for a Connect schema (JSON form), and a function from JSON value to Arrow value.

    The function is called on values that are not null; nulls inside arrays, maps and structs stay null."""
    name, t = schema.get("name"), schema["type"]
    if name in _TEMPORAL:
        return _TEMPORAL[name], _same
    if name == "io.debezium.time.ZonedTimestamp":
        return pa.timestamp("us", tz="UTC"), _zoned
    if name == "org.apache.kafka.connect.data.Decimal":
        params = schema.get("parameters") or {}
        scale = int(params.get("scale", 0))
        precision = int(params.get("connect.decimal.precision", 38))
        if 0 < precision <= 38 and scale <= precision:
            return pa.decimal128(precision, scale), lambda v: _decimal(v, scale)
        return pa.string(), lambda v: str(_decimal(v, scale))
    if name == "io.debezium.data.VariableScaleDecimal":  # each value has its own scale: exact text
        return pa.string(), lambda v: str(_decimal(v["value"], v["scale"]))
    if t in _PRIMITIVE:
        return _PRIMITIVE[t], _same
    if t in _FLOATS:
        return _FLOATS[t], float
    if t == "bytes":
        return pa.binary(), _bytes
    if t == "array":
        item_t, item_f = arrow_type(schema["items"])
        return pa.list_(item_t), lambda v: [None if x is None else item_f(x) for x in v]
    if t == "map":
        key_t, key_f = arrow_type(schema["keys"])
        value_t, value_f = arrow_type(schema["values"])
        # JsonConverter writes a map with string keys as an object, any other as [key, value] pairs
        return pa.map_(key_t, value_t), lambda v: [(key_f(k), None if x is None else value_f(x))
                                                   for k, x in (v.items() if isinstance(v, dict) else v)]
    if t == "struct":
        fields = [(f["field"], *arrow_type(f)) for f in schema["fields"]]
        return (pa.struct([(n, ft) for n, ft, _ in fields]),
                lambda v: {n: (None if v.get(n) is None else fn(v[n])) for n, _, fn in fields})
    return pa.string(), json_text


def _same(v: Any) -> Any:
    return v


def _bytes(v: str | bytes) -> bytes:
    """Connect bytes: base64 text in JSON (binary.handling.mode=bytes)."""
    return base64.b64decode(v) if isinstance(v, str) else v


def _decimal(b64: str, scale: int) -> decimal.Decimal:
    """A Connect Decimal's value: its unscaled big-endian two's-complement bytes and its scale, exactly
    (made from text: arithmetic would round to the context's 28 digits)."""
    unscaled = int.from_bytes(base64.b64decode(b64), "big", signed=True)
    return decimal.Decimal(f"{unscaled}E{-scale}")


def _zoned(v: str) -> int:
    """Microseconds since the epoch of a ZonedTimestamp, within Arrow's range (int64): PostgreSQL's
    'infinity' and '-infinity', and instants beyond the range, are its ends."""
    if v == "infinity":
        return _INT64[1]
    if v == "-infinity":
        return _INT64[0]
    m = _ZONED.fullmatch(v)
    if m is None:
        raise ValueError(f"not an io.debezium.time.ZonedTimestamp: {v!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    micros = int((m.group(7) or "0").ljust(9, "0")) // 1000
    seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    return min(max(seconds * 1_000_000 + micros, _INT64[0]), _INT64[1])


def json_text(v: Any) -> str:
    """A value as text: a string as it is, anything else as JSON."""
    return v if isinstance(v, str) else orjson.dumps(v).decode()


def row_schema(value_schema: dict) -> tuple[dict, bool]:
    """The schema of the row image inside an envelope (or the whole payload for other records), and
    whether the value is an envelope."""
    fields = {f["field"]: f for f in value_schema.get("fields", [])}
    if "after" in fields and "before" in fields:
        return fields["after"], True
    return value_schema, False


class RowImages:
    """Rows of one topic as typed Arrow columns: the row image of each event plus the META columns.

    `schema` is the row's Connect schema (the envelope's `after`, or the whole payload for other
    records, as `envelope` says); `columns` may replace the converters (name, Arrow type, function)."""

    def __init__(self, schema: dict, envelope: bool, columns: list[Column] | None = None):
        self.envelope = envelope
        self.columns = columns if columns is not None else [(f["field"], *arrow_type(f))
                                                            for f in schema.get("fields", [])]
        self.data: dict[str, list] = defaultdict(list)

    def add(self, payload: dict, op: str | None, change: str | None, version: int, ts: Any) -> None:
        """One event: its payload (envelope or record), `op`, and the change columns of its row."""
        if self.envelope:
            image = (payload.get("before") if op == "d" else payload.get("after")) or {}
            src_ts = (payload.get("source") or {}).get("ts_ms")
        else:
            image, src_ts = payload, None
        for name, _, fn in self.columns:
            v = image.get(name)
            self.data[name].append(None if v is None else fn(v))
        for (name, _), v in zip(META, (op, change, version, ts, src_ts), strict=True):
            self.data[name].append(v)

    def table(self) -> pa.Table:
        """The rows added so far."""
        columns = [(name, typ) for name, typ, _ in self.columns] + META
        return pa.Table.from_arrays([pa.array(self.data[name], type=typ) for name, typ in columns],
                                    names=[name for name, _ in columns])
