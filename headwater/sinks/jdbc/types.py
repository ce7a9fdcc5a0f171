"""The JDBC sink's type mapping: a field's Kafka Connect schema -> a column type, and its values ->
what the database driver binds.

`column_type` follows Debezium's JDBC sink (the spec's tables 3.1-3.4): Connect's primitives
(INT8 TINYINT ... BYTES VARBINARY), its logical types (Decimal DECIMAL, Date DATE, Time, Timestamp),
Debezium's (the Micro/Nano times and timestamps, ZonedTimestamp with time zone, VariableScaleDecimal
DOUBLE) and the dialect-specific ones (Bits, Enum, EnumSet, Json, Uuid, Xml, Year, Duration, Ltree).
A time of day becomes a TIME column (the spec's generic table says TIMESTAMP, which cannot hold a
time of day without a date). When the source propagates its column types
(`column.propagate.source.type`), `__debezium.source.column.type` with its length and scale refine
the type: VARCHAR(n), CHAR(n), NUMERIC(p,s), TINYINT(1)... The result is a generic `SqlType`; each
dialect (`dialects`) names it in its own SQL.

`copy_text` writes columns as PostgreSQL's COPY text (CSV, by Arrow, no Python per value) when
every value can go that way; `load_text` writes them as the text of MySQL's `LOAD DATA` (the same
CSV, with unquoted `NULL` for a null, booleans as 0 and 1, zoned times in `database.time_zone`); `python_values` turns one column of a typed block (`events.typed`: Arrow types over the events'
values) into Python values for the driver, whole columns at a time (`to_pylist`), with the few
values Python's types cannot hold (PostgreSQL's infinite dates and timestamps, a time of 24:00)
handed over as the text the database reads.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from headwater.events.arrow import json_text

INT_KINDS = {"int8": "tinyint", "int16": "smallint", "int32": "integer", "int64": "bigint"}
_TEMPORAL = {
    "io.debezium.time.Date": "date", "org.apache.kafka.connect.data.Date": "date",
    "io.debezium.time.Time": "time", "io.debezium.time.MicroTime": "time", "io.debezium.time.NanoTime": "time",
    "org.apache.kafka.connect.data.Time": "time",
    "io.debezium.time.Timestamp": "timestamp", "io.debezium.time.MicroTimestamp": "timestamp",
    "io.debezium.time.NanoTimestamp": "timestamp", "org.apache.kafka.connect.data.Timestamp": "timestamp",
    "io.debezium.time.ZonedTimestamp": "timestamptz", "io.debezium.time.ZonedTime": "timetz",
}
_SEMANTIC = {
    "io.debezium.data.Json": "json", "io.debezium.data.Uuid": "uuid", "io.debezium.data.Xml": "xml",
    "io.debezium.data.Enum": "enum", "io.debezium.data.EnumSet": "set", "io.debezium.time.Year": "year",
    "io.debezium.time.MicroDuration": "interval", "io.debezium.data.Bits": "bits",
    "io.debezium.data.Ltree": "ltree", "io.debezium.data.VariableScaleDecimal": "double",
}
DECIMAL = "org.apache.kafka.connect.data.Decimal"
Cells = tuple[str, pa.Array, dict]  # a column's name, its values in a typed block, its Connect schema
SOURCE_TYPE = "__debezium.source.column.type"
SOURCE_LENGTH = "__debezium.source.column.length"
SOURCE_SCALE = "__debezium.source.column.scale"
_STRING_SOURCE = {"CHAR": "char", "BPCHAR": "char", "CHARACTER": "char", "NCHAR": "char", "VARCHAR": "varchar",
                  "CHARACTER VARYING": "varchar", "NVARCHAR": "varchar", "VARCHAR2": "varchar"}


@dataclass(frozen=True)
class SqlType:
    """A column type before a dialect names it: `kind` (tinyint smallint integer bigint real double
    boolean string char varchar bytes decimal date time timestamp timestamptz timetz json uuid xml
    enum set year interval bits ltree array), with length, precision and scale where they matter,
    an enum's or set's values, an array's item type, and the source's type name when propagated."""

    kind: str
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    values: tuple[str, ...] = ()
    item: SqlType | None = None
    source: str | None = None


def column_type(schema: dict) -> SqlType:
    """The column type of a field's Connect schema (JSON form)."""
    name, t = schema.get("name"), schema["type"]
    params = schema.get("parameters") or {}
    source = params.get(SOURCE_TYPE)
    length = _int(params.get(SOURCE_LENGTH))
    scale = _int(params.get(SOURCE_SCALE))
    if name == DECIMAL:
        precision = _int(params.get("connect.decimal.precision")) or length
        return SqlType("decimal", precision=precision, scale=_int(params.get("scale")) or 0, source=source)
    if name == "io.debezium.data.VariableScaleDecimal" and source and length:
        return SqlType("decimal", precision=length, scale=scale or 0, source=source)
    if name in _TEMPORAL:
        return SqlType(_TEMPORAL[name], source=source)
    if name in _SEMANTIC:
        kind = _SEMANTIC[name]
        values = tuple(v for v in str(params.get("allowed", "")).split(",") if v) if kind in ("enum", "set") else ()
        return SqlType(kind, length=_int(params.get("length")) if kind == "bits" else length, values=values,
                       source=source)
    if t in INT_KINDS:
        return SqlType(INT_KINDS[t], length=length, source=source)
    if t == "float":
        return SqlType("real", source=source)
    if t == "double":
        return SqlType("double", source=source)
    if t == "boolean":
        return SqlType("boolean", source=source)
    if t == "string":
        kind = _STRING_SOURCE.get((source or "").upper(), "string")
        return SqlType(kind if length else "string", length=length, source=source)
    if t == "bytes":
        return SqlType("bytes", length=length, source=source)
    if t == "array":
        return SqlType("array", item=column_type(schema["items"]), source=source)
    return SqlType("json", source=source)  # a map or struct: its JSON text


def _int(v: Any) -> int | None:
    try:
        return int(v) if v is not None and str(v) != "" else None
    except ValueError:
        return None


@dataclass(frozen=True)
class Binding:
    """How a dialect wants some values bound: naive local times for zoned ones (no time-zone type),
    JSON text for arrays (no array type), bit strings or numbers for Bits, durations as interval
    text or numbers of microseconds."""

    zone: ZoneInfo
    zoned_as_local: bool
    arrays_as_json: bool
    bits_as_text: bool
    durations_as_text: bool


def python_values(arr: pa.Array, schema: dict, binding: Binding) -> list[Any]:
    """The values of one column of a typed block for the driver (see the module's docstring)."""
    name = schema.get("name")
    t = arr.type
    if pa.types.is_null(t):
        return [None] * len(arr)
    if name == "io.debezium.time.ZonedTimestamp":
        values = arr.to_pylist()
        return [_local_timestamp(v, binding.zone) for v in values] if binding.zoned_as_local else values
    if name == "io.debezium.time.ZonedTime":
        values = arr.to_pylist()
        return [None if v is None else v.rstrip("Z") for v in values] if binding.zoned_as_local else values
    if name == "io.debezium.data.VariableScaleDecimal":
        return [None if v is None else _unscaled(v["value"], v["scale"]) for v in arr.to_pylist()]
    if name == "io.debezium.time.MicroDuration":  # PostgreSQL's interval keeps its hours as given
        if binding.durations_as_text:
            return [None if v is None else f"{v} microseconds" for v in arr.to_pylist()]
        return arr.to_pylist()
    if name == "io.debezium.data.Bits":
        length = int((schema.get("parameters") or {}).get("length", 0)) or None
        return [None if v is None else _bits(v, length, binding.bits_as_text) for v in arr.to_pylist()]
    if name == DECIMAL and pa.types.is_binary(t):  # beyond 38 digits: the unscaled bytes
        scale = int((schema.get("parameters") or {}).get("scale", 0))
        return [None if v is None else _unscaled(v, scale) for v in arr.to_pylist()]
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t):
        return _temporal(arr)
    if pa.types.is_list(t):
        items = arr.to_pylist()
        if binding.arrays_as_json:
            return [None if v is None else json.dumps(v, default=str) for v in items]
        return items
    if pa.types.is_struct(t) or pa.types.is_map(t):
        return [None if v is None else json_text(v if not isinstance(v, list) else dict(v)) for v in arr.to_pylist()]
    return arr.to_pylist()


def _unscaled(b: bytes, scale: int) -> decimal.Decimal:
    return decimal.Decimal(f"{int.from_bytes(b, 'big', signed=True)}E{-scale}")


def _bits(b: bytes, length: int | None, as_text: bool) -> int | str:
    """Debezium's Bits (little-endian bytes) as a number, or as PostgreSQL's bit string."""
    n = int.from_bytes(b, "little")
    if not as_text:
        return n
    width = length if length and length <= 64 * 1024 else len(b) * 8  # bit(n); a bit varying's is unknown
    return format(n, f"0{width}b")[-width:] if width else ""


def _local_timestamp(v: str | None, zone: ZoneInfo) -> dt.datetime | str | None:
    """A ZonedTimestamp (ISO-8601 in UTC) as the naive time of `zone`, for a column without a time zone."""
    if v is None or v in ("infinity", "-infinity"):
        return v
    try:
        instant = dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        return v  # beyond Python's years: the database judges the text
    return instant.astimezone(zone).replace(tzinfo=None)


def _temporal(arr: pa.Array) -> list[Any]:
    """Dates, times and timestamps as Python's; what Python's types cannot hold as the database's text
    (`infinity` for PostgreSQL's infinite values, which Debezium writes as the type's extreme)."""
    t = arr.type
    if pa.types.is_timestamp(t) and t.unit == "ns":
        arr = pc.cast(arr, pa.timestamp("us", t.tz), safe=False)
        t = arr.type
    if pa.types.is_time(t):  # Python's time stops before 24:00, which PostgreSQL's reaches
        day = 86_400 * {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}[t.unit]
        ticks = arr.cast(pa.int32() if t == pa.time32("ms") else pa.int64())
        late = pc.max(ticks).as_py()
        if late is not None and late >= day:  # the column as text, which the database reads
            return [None if v is None else _time_text(t.unit, v) for v in ticks.to_pylist()]
    try:
        return arr.to_pylist()
    except (OverflowError, ValueError):
        pass
    out: list[Any] = []
    raw = arr.cast(pa.int32() if pa.types.is_date32(t) or t == pa.time32("ms") else pa.int64()).to_pylist()
    for i, v in enumerate(raw):
        if v is None:
            out.append(None)
            continue
        try:
            out.append(arr[i].as_py())
        except (OverflowError, ValueError):
            out.append("infinity" if v > 0 else "-infinity")
    return out


def _time_text(unit: str, v: int) -> str:
    micros = v * 1000 if unit == "ms" else v // 1000 if unit == "ns" else v
    seconds, frac = divmod(micros, 1_000_000)
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}.{frac:06d}"


# the logical types whose values COPY text cannot carry as Arrow writes them
_NOT_COPIED = {"io.debezium.data.Bits", "io.debezium.time.MicroDuration", "io.debezium.data.VariableScaleDecimal"}
# what Arrow's CSV writer formats as PostgreSQL reads it: Python's years (1..9999), times below 24:00
_RANGES = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}
_FIRST_SECOND, _LAST_SECOND = -62_135_596_800, 253_402_300_799


def copy_text(columns: list[Cells]) -> bytes | None:
    """The columns as CSV for `COPY ... FROM STDIN WITH (FORMAT csv)` (a null unquoted and empty, every
    other value quoted, bytes as bytea's hex), or None when a value could not go as COPY text."""
    arrays = []
    for _, arr, schema in columns:
        t = arr.type
        if schema.get("name") in _NOT_COPIED or not _copyable(arr):
            return None
        if pa.types.is_binary(t):
            if schema.get("name") == DECIMAL:
                return None
            arr = pa.array([None if v is None else "\\x" + v.hex() for v in arr.to_pylist()], pa.string())
        arrays.append(arr)
    if not arrays:
        return None
    table = pa.Table.from_arrays(arrays, names=[f"c{i}" for i in range(len(arrays))])
    out = pa.BufferOutputStream()
    pacsv.write_csv(table, out, pacsv.WriteOptions(include_header=False, quoting_style="all_valid"))
    return out.getvalue().to_pybytes()


def load_text(columns: list[Cells], binding: Binding) -> tuple[bytes, list[bool]] | None:
    """The columns as the text of MySQL's and MariaDB's `LOAD DATA ... FIELDS TERMINATED BY ','
    OPTIONALLY ENCLOSED BY '"' ESCAPED BY ''` (every value quoted with its quotes doubled, a null the
    unquoted word NULL, bytes as hex), and which columns are hex (for UNHEX); None when a value could
    not go as that text. Column-wise by Arrow but for the bytes' hex."""
    fields, hexed = [], []
    for _, arr, schema in columns:
        name = schema.get("name")
        if name == "io.debezium.time.ZonedTimestamp" and binding.zoned_as_local:
            try:
                instant = arr.cast(pa.timestamp("us", "UTC"))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # infinity, years beyond 9999
                return None
            arr = pc.local_timestamp(instant.cast(pa.timestamp("us", binding.zone.key)))
        elif name == "io.debezium.time.ZonedTime" and binding.zoned_as_local:
            arr = pc.replace_substring_regex(arr, "Z$", "")
        elif name in _NOT_COPIED or name == DECIMAL and pa.types.is_binary(arr.type) or not _copyable(arr):
            return None
        hexed.append(pa.types.is_binary(arr.type))
        if hexed[-1]:
            arr = pa.array([None if v is None else v.hex() for v in arr.to_pylist()], pa.string())
        if pa.types.is_boolean(arr.type):
            arr = arr.cast(pa.int8())
        text = pc.replace_substring(arr.cast(pa.large_string()), '"', '""')
        quoted = pc.binary_join_element_wise(_large('"'), text, _large('"'), _large(""))
        fields.append(pc.fill_null(quoted, _large("NULL")))
    if not fields:
        return None
    lines = pc.binary_join_element_wise(*fields, _large(","))
    lines = pc.binary_join_element_wise(lines, _large(""), _large("\n"))
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)
    start, stop = int(offsets[lines.offset]), int(offsets[lines.offset + len(lines)])
    return lines.buffers()[2][start:stop].to_pybytes(), hexed  # the lines end to end


def _large(text: str) -> pa.Scalar:
    return pa.scalar(text, pa.large_string())


def _copyable(arr: pa.Array) -> bool:
    t = arr.type
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_string(t) \
            or pa.types.is_decimal(t) or pa.types.is_binary(t) or pa.types.is_null(t):
        return True
    if pa.types.is_date32(t):
        lo, hi = _bounds(arr.cast(pa.int32()))
        return lo is None or (lo >= _FIRST_SECOND // 86_400 and hi <= _LAST_SECOND // 86_400)
    if pa.types.is_timestamp(t):
        per = _RANGES[t.unit]
        lo, hi = _bounds(arr.cast(pa.int64()))
        return lo is None or (lo >= _FIRST_SECOND * per and hi <= _LAST_SECOND * per)
    if pa.types.is_time(t):
        lo, hi = _bounds(arr.cast(pa.int32() if t == pa.time32("ms") else pa.int64()))
        return lo is None or hi < 86_400 * _RANGES[t.unit]
    return False


def _bounds(ticks: pa.Array) -> tuple[Any, Any]:
    mm = pc.min_max(ticks)
    return mm["min"].as_py(), mm["max"].as_py()
