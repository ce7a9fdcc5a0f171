"""Typed event blocks written as Kafka's JsonConverter writes them: the JSON rows of `EventBatch`.

`JsonOptions` holds the converter's settings: `schemas.enable` (each key and value as
`{"schema": ..., "payload": ...}`, else the payload alone) and `replace.null.with.default` (a null
whose schema has a default is written as the default, at every level, as JsonConverter does).
`json_values` turns a typed column back into JSON-form values column by column (temporal values
as their numbers, decimals and bytes as base64 text, NaN and the infinities as Jackson's strings);
`to_event_batch` writes the blocks of a batch as JSON rows in the batch's order, equal byte for
byte to what the record builders write directly (tests compare the two on Debezium's own events).
"""

from __future__ import annotations

import base64
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.arrays import bool_values, int32_array, int64_array, lit, string_array
from headwater.events.batch import HEADER_TYPE, EventBatch
from headwater.events.formats.decimals import unscaled_bytes
from headwater.events.headers import list_entries
from headwater.events.typed import DECIMAL, TEMPORAL, TypedBlock, TypedEvents, physical_int


@dataclass(frozen=True)
class JsonOptions:
    """Kafka JsonConverter's settings."""

    schemas_enable: bool = False
    replace_null_with_default: bool = True

    def wrap(self, schema: dict | None) -> tuple[bytes, bytes]:
        """The bytes around a payload for `schema`."""
        if self.schemas_enable and schema is not None:
            return b'{"schema":' + orjson.dumps(schema) + b',"payload":', b"}"
        return b"", b""


def _null(schema: dict | None, options: JsonOptions) -> Any:
    """What JsonConverter writes for a null of `schema`."""
    if schema is not None and options.replace_null_with_default and "default" in schema:
        return schema["default"]
    return None


def json_values(arr: pa.Array, schema: dict | None, options: JsonOptions) -> list[Any]:
    """The JSON-form value of each element of a typed column of Connect schema `schema`."""
    if schema is None:
        return [None] * len(arr)
    values = _valid_values(arr, schema, options)
    if arr.null_count:
        null = _null(schema, options)
        return [null if not ok else v for v, ok in zip(values, arr.is_valid().to_pylist(), strict=True)]
    return values


def _valid_values(arr: pa.Array, schema: dict, options: JsonOptions) -> list[Any]:
    """The JSON-form values of `arr` (anything at a null)."""
    name, t = schema.get("name"), schema["type"]
    if name in TEMPORAL:
        return arr.view(physical_int(arr.type)).to_pylist()
    if name == DECIMAL and pa.types.is_decimal(arr.type):
        return _decimals(arr)
    if t == "bytes":
        return [None if v is None else base64.b64encode(v).decode() for v in arr.to_pylist()]
    if t in ("float", "double"):
        return [v if v is None or math.isfinite(v) else _SPECIAL[repr(v)] for v in arr.to_pylist()]
    if t == "struct":
        names = [f["field"] for f in schema["fields"]]
        if not names:
            return [{} for _ in range(len(arr))]
        children = [json_values(arr.field(i), f, options) for i, f in enumerate(schema["fields"])]
        return [dict(zip(names, row, strict=True)) for row in zip(*children, strict=True)]
    if t == "array":
        offsets = arr.offsets.to_pylist()
        items = json_values(arr.values, schema["items"], options)
        return [items[a:b] for a, b in zip(offsets, offsets[1:], strict=False)]
    if t == "map":
        offsets = arr.offsets.to_pylist()
        keys = json_values(arr.keys, schema["keys"], options)
        items = json_values(arr.items, schema["values"], options)
        if schema["keys"]["type"] == "string":
            return [dict(zip(keys[a:b], items[a:b], strict=True)) for a, b in zip(offsets, offsets[1:], strict=False)]
        return [[[k, v] for k, v in zip(keys[a:b], items[a:b], strict=True)]
                for a, b in zip(offsets, offsets[1:], strict=False)]
    return arr.to_pylist()


_SPECIAL = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}  # as Jackson writes them


def _decimals(arr: pa.Array) -> list[str]:
    """A decimal128 column as Connect writes Decimals in JSON: base64 of the unscaled bytes."""
    return [base64.b64encode(b).decode() for b in unscaled_bytes(arr)]


def column_json(column: pa.Array, schema: dict | None, options: JsonOptions,
                written_null: list[bool] | bool = False) -> list[str | None]:
    """The JSON text of each element of a typed column: at a null, None (no key, a tombstone's
    value), or where `written_null` says so (True: everywhere) the text JsonConverter writes for a
    null of `schema`."""
    if schema is None:
        return [None] * len(column)
    head, tail = options.wrap(schema)
    valid = column.is_valid().to_pylist()
    null = (head + orjson.dumps(_null(schema, options)) + tail).decode()
    everywhere = written_null is True
    return [(head + orjson.dumps(v) + tail).decode() if ok
            else null if everywhere or (isinstance(written_null, list) and written_null[i]) else None
            for i, (v, ok) in enumerate(zip(json_values(column, schema, options), valid, strict=True))]


def block_json(block: TypedBlock, options: JsonOptions) -> tuple[list[str | None], list[str | None],
                                                                  list[list[tuple[str, str]] | None]]:
    """The key and value JSON text of each event of `block` (None: no key, a tombstone's value), and
    its headers with their values as JSON text. A null with a schema is written as JsonConverter
    writes it (`null`, or the schema with a null payload): a header's; a key's, except a truncate's
    (Debezium's has no key schema); a value's with an `op` (a delete flattened by
    ExtractNewRecordState; without one it is a tombstone: no value at all)."""
    b = block.batch
    ops = b.column("op")
    keys = column_json(b.column("key"), block.key_schema, options, pc.not_equal(ops, "t").fill_null(True).to_pylist())
    values = column_json(b.column("value"), block.value_schema, options, ops.is_valid().to_pylist())
    return keys, values, header_json(block, options)


def header_texts(block: TypedBlock, options: JsonOptions) -> pa.Array:
    """The block's headers as JSON rows hold them (`events.batch.HEADER_TYPE`: each value as JSON text by
    its own schema, a null as JsonConverter writes it), column-wise: each header name's values written
    together, a string header's distinct values once each."""
    column = block.batch.column("headers")
    n = len(column)
    if column.null_count == n:
        return pa.nulls(n, HEADER_TYPE)
    entries, rows = list_entries(column)
    keys = entries.field("key")
    parts, positions = [], []
    for name, schema in block.header_schemas.items():
        where = np.flatnonzero(bool_values(pc.fill_null(pc.equal(keys, lit(name)), lit(False))))
        if len(where):
            parts.append(_texts(entries.field("value").field(name).take(int64_array(where)), schema, options))
            positions.append(where)
    order = np.concatenate(positions) if positions else np.zeros(0, dtype=np.int64)
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.arange(len(order))
    texts = (pa.concat_arrays(parts) if parts else string_array([])).take(int64_array(inverse))
    counts = np.bincount(rows, minlength=n) if len(rows) else np.zeros(n, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    entry = pa.StructArray.from_arrays([keys, texts], names=["key", "value"])
    return pa.ListArray.from_arrays(int32_array(offsets), entry, type=HEADER_TYPE, mask=column.is_null())


def _texts(values: pa.Array, schema: dict | None, options: JsonOptions) -> pa.Array:
    """JSON text of each value (a null as JsonConverter writes it); a string column by its distinct values."""
    if schema is not None and schema.get("type") == "string" and pa.types.is_string(values.type):
        encoded = values.dictionary_encode()
        head, tail = options.wrap(schema)
        distinct = [(head + orjson.dumps(v) + tail).decode() for v in encoded.dictionary.to_pylist()]
        null = (head + orjson.dumps(_null(schema, options)) + tail).decode()
        return pc.fill_null(string_array(distinct).take(encoded.indices), lit(null))
    return string_array(column_json(values, schema, options, True))


def header_json(block: TypedBlock, options: JsonOptions) -> list[list[tuple[str, str]] | None]:
    """Each event's headers (None: none), their values as JSON text by their own schemas (a null as
    JsonConverter writes it): `header_texts` as Python lists."""
    return [None if h is None else [(e["key"], e["value"]) for e in h]
            for h in header_texts(block, options).to_pylist()]


def to_event_batch(events: TypedEvents, options: JsonOptions) -> EventBatch:
    """The events of typed blocks as JSON rows, in the order they were made."""
    rows: list[tuple] = [()] * len(events)
    for block in events:
        b = block.batch
        keys, values, headers = block_json(block, options)
        topic = block.topic
        ts = b.column("_commit_timestamp").view(pa.int64()).to_pylist()
        for i, (order, op, version) in enumerate(zip(b.column("_order").to_pylist(), b.column("op").to_pylist(),
                                                     b.column("_commit_version").to_pylist(), strict=True)):
            rows[order] = (topic, keys[i], values[i], op, version, ts[i], headers[i])
    out = EventBatch()
    for topic, key, value, op, version, ts_us, hdrs in rows:
        out.append(topic, key, value, op, version, ts_us, hdrs)
    return out
