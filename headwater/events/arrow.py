"""The table view of change events: row images as Arrow columns of the types a table wants.

`arrow_type` maps a Connect schema (JSON form) to an Arrow type and a converter from the JSON-form
value to the Arrow value: Debezium's semantic types become Arrow's (Decimal -> decimal128,
MicroTimestamp -> timestamp, Date -> date32, MicroTime -> time64, ZonedTimestamp -> timestamp with
time zone UTC, bytes -> binary, ...); a type Arrow has no equivalent for (a VariableScaleDecimal, a
Decimal beyond 38 digits) is its text. Temporal values stay numbers (days, time units), so that
dates Python cannot hold (PostgreSQL's infinity, years beyond 9999) pass through. Unlike the typed
blocks of `events.typed`, which hold exactly what an event holds (a ZonedTimestamp stays its text),
these are the types a table column wants. `RowImages` gathers the row image of each event of one
table (`after`, or `before` for a delete) from typed blocks into such columns, plus the change
columns of `META`. Sinks that write tables (Parquet, JDBC, Delta, Iceberg) build on it; nothing
here needs Spark.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.calendar import days_from_civil
from headwater.events.formats.json import JsonOptions, json_values
from headwater.events.typed import (
    PRIMITIVE,
    TEMPORAL,
    TypedBlock,
    bytes_value,
    container_type,
    decimal_value,
    same,
)

Converter = Callable[[Any], Any]
Column = tuple[str, pa.DataType, Converter]  # name, Arrow type, JSON value -> Arrow value

# the change columns after the row image's: operation, change type, commit order and time, source time
META = [("_op", pa.string()), ("_change_type", pa.string()), ("_commit_version", pa.int64()),
        ("_commit_timestamp", pa.timestamp("us", tz="UTC")), ("_source_ts_ms", pa.int64())]

# NaN and the infinities are JSON strings ("NaN", "Infinity", "-Infinity"), which float() reads
_FLOATS = {"float": pa.float32(), "double": pa.float64()}
# an ISO-8601 instant in UTC as Debezium writes it: a year of 4 or more digits, maybe signed
_ZONED = re.compile(r"([+-]?\d{4,})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?Z")
_INT64 = (-(2**63), 2**63 - 1)


def arrow_type(schema: dict) -> tuple[pa.DataType, Converter]:
    """Arrow type for a Connect schema (JSON form), and a function from JSON value to Arrow value.

    The function is called on values that are not null; nulls inside arrays, maps and structs stay null."""
    name, t = schema.get("name"), schema["type"]
    if name in TEMPORAL:
        return TEMPORAL[name], same
    if name == "io.debezium.time.ZonedTimestamp":
        return pa.timestamp("us", tz="UTC"), _zoned
    if name == "org.apache.kafka.connect.data.Decimal":
        params = schema.get("parameters") or {}
        scale = int(params.get("scale", 0))
        precision = int(params.get("connect.decimal.precision", 38))
        if 0 < precision <= 38 and scale <= precision:
            return pa.decimal128(precision, scale), lambda v: decimal_value(v, scale)
        return pa.string(), lambda v: str(decimal_value(v, scale))
    if name == "io.debezium.data.VariableScaleDecimal":  # each value has its own scale: exact text
        return pa.string(), lambda v: str(decimal_value(v["value"], v["scale"]))
    if t in PRIMITIVE:
        return PRIMITIVE[t], same
    if t in _FLOATS:
        return _FLOATS[t], float
    if t == "bytes":
        return pa.binary(), bytes_value
    container = container_type(schema, arrow_type)
    return container if container is not None else (pa.string(), json_text)


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
    """Rows of one topic as typed Arrow columns: the row image of each event of typed blocks
    (`events.typed`) plus the change columns of `META`.

    `schema` is the row's Connect schema (the envelope's `after`, or the whole payload for other
    records, as `envelope` says); `columns` may replace the converters (name, Arrow type, function).
    A block's column whose Arrow type is already the row's is taken as it is; any other goes through
    its JSON-form values (`formats.json.json_values`) and the converter. `replace_null` writes a null
    whose field has a default as the default, as Kafka's JsonConverter does
    (`replace.null.with.default`). A column a block does not have is null in its rows."""

    def __init__(self, schema: dict, envelope: bool, columns: list[Column] | None = None, replace_null: bool = True):
        self.envelope = envelope
        self.columns = columns if columns is not None else [(f["field"], *arrow_type(f))
                                                            for f in schema.get("fields", [])]
        self.options = JsonOptions(replace_null_with_default=replace_null)
        self.parts: list[pa.Table] = []

    def add(self, block: TypedBlock, ops: Sequence[str] | None = None) -> None:
        """The events of `block` that have a value (not tombstones), of `ops` only if given."""
        b = block.batch
        keep = b.column("value").is_valid()
        if ops is not None:
            keep = pc.and_(keep, pc.fill_null(pc.is_in(b.column("op"), value_set=pa.array(ops, pa.string())), False))
        b = b.filter(keep)
        n = b.num_rows
        if not n:
            return
        value, op = b.column("value"), b.column("op")
        value_schema = block.value_schema or {}
        if self.envelope:
            fields = {f["field"]: f for f in value_schema.get("fields", [])}
            deleted = pc.fill_null(pc.equal(op, pa.scalar("d")), False)
            image = pc.if_else(deleted, value.field("before"), value.field("after"))
            image_schema = fields["after"]
            source = value.field("source")
            src_ts = source.field("ts_ms") if source.type.get_field_index("ts_ms") >= 0 else pa.nulls(n, pa.int64())
        else:
            image, image_schema, src_ts = value, value_schema, pa.nulls(n, pa.int64())
        found = {f["field"]: (i, f) for i, f in enumerate(image_schema.get("fields", []))}
        children = image.flatten() if found else []
        valid = image.is_valid()
        arrays = []
        for name, typ, fn in self.columns:
            if name not in found:
                arrays.append(pa.nulls(n, typ))
                continue
            i, field_schema = found[name]
            arrays.append(self._column(children[i], field_schema, typ, fn, valid))
        meta = [op, b.column("_change_type"), b.column("_commit_version"), b.column("_commit_timestamp"),
                src_ts.cast(pa.int64())]
        names = [name for name, _, _ in self.columns] + [name for name, _ in META] + ["_order"]
        self.parts.append(pa.Table.from_arrays([*arrays, *meta, b.column("_order")], names=names))

    def _column(self, arr: pa.Array, schema: dict, typ: pa.DataType, fn: Converter, valid: pa.Array) -> pa.Array:
        if not (self.options.replace_null_with_default and "default" in schema and arr.null_count):
            if arr.type == typ:
                return arr
            if pa.types.is_floating(arr.type) and pa.types.is_floating(typ):  # a Connect float, held as float64
                return arr.cast(typ)
            if schema.get("name") == "io.debezium.time.ZonedTimestamp":
                # ISO-8601 in UTC to the microsecond, as Arrow reads it; the rest (infinity, other years,
                # nanoseconds) by `_zoned`
                with contextlib.suppress(pa.ArrowInvalid):
                    return arr.cast(typ)
        values = json_values(arr, schema, self.options)
        return pa.array([None if v is None or not ok else fn(v) for v, ok in zip(values, valid.to_pylist(), strict=True)],
                        type=typ)

    def table(self) -> pa.Table:
        """The rows added so far, in the order of their events."""
        columns = [(name, typ) for name, typ, _ in self.columns] + META
        schema = pa.schema(columns)
        if not self.parts:
            return schema.empty_table()
        rows = pa.concat_tables(self.parts)
        if len(self.parts) > 1:
            rows = rows.take(pc.sort_indices(rows.column("_order")))
        return rows.drop_columns(["_order"]).cast(schema)
