"""Column helpers the transformations share: fields of `value` and `key`, blocks rebuilt with new
columns and schemas, rows taken or split by topic, and headers of any Connect type.

Everything works on whole Arrow columns; none loops over events in Python. Connect schemas are in
their JSON form (dicts, as `TypedBlock.key_schema` gives them); `connect_type` gives a schema's
Arrow type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.arrays import bool_array, string_scalar, valid_mask
from headwater.events.typed import (
    HEADERS_SCHEMA_META,
    KEY_SCHEMA_META,
    TOPIC_META,
    VALUE_SCHEMA_META,
    TypedBlock,
    change_types,
    headers_type,
)

_UNSET: Any = object()


def field_schema(schema: dict | None, path: str) -> dict | None:
    """The Connect schema of the (dotted, nested) struct field `path` of `schema`; None if absent."""
    for part in path.split("."):
        if schema is None or schema.get("type") != "struct":
            return None
        schema = next((f for f in schema["fields"] if f["field"] == part), None)
    return schema


def struct_field(column: pa.Array, schema: dict | None, path: str) -> tuple[pa.Array, dict] | None:
    """The (dotted, nested) field `path` of a struct column and its Connect schema (a field without its
    `field` name); null wherever the field or a struct above it is null; None if the schema has no such
    field."""
    fs = field_schema(schema, path)
    if fs is None:
        return None
    indices, t = [], column.type
    for part in path.split("."):
        i = t.get_field_index(part)
        indices.append(i)
        t = t.field(i).type
    return pc.struct_field(column, indices), {k: v for k, v in fs.items() if k != "field"}


def value_field(block: TypedBlock, path: str) -> tuple[pa.Array, dict] | None:
    """The field `path` of the block's `value` (e.g. `after`, `source.ts_ms`) and its schema."""
    return struct_field(block.batch.column("value"), block.value_schema, path)


def key_field(block: TypedBlock, path: str) -> tuple[pa.Array, dict] | None:
    """The field `path` of the block's `key` and its schema."""
    return struct_field(block.batch.column("key"), block.key_schema, path)


def struct_array(fields: Sequence[tuple[str, pa.Array]], valid: np.ndarray | None = None,
                 length: int | None = None) -> pa.Array:
    """A struct column of named child columns (`length` rows when there are none); `valid` False rows
    are null."""
    if not fields:
        n = length if length is not None else (len(valid) if valid is not None else 0)
        bits = None if valid is None or valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
        return pa.StructArray.from_buffers(pa.struct([]), n, [bits], children=[])
    mask = None if valid is None or valid.all() else bool_array(~valid)
    return pa.StructArray.from_arrays([a for _, a in fields], names=[n for n, _ in fields], mask=mask)


def schema_basics(schema: dict) -> dict:
    """A Connect schema's name, version, doc and parameters (Kafka's `SchemaUtil.copySchemaBasics`)."""
    return {k: schema[k] for k in ("name", "version", "doc", "parameters") if k in schema}


def struct_schema(fields: Sequence[tuple[str, dict]], optional: bool = False, **basics: Any) -> dict:
    """A Connect struct schema (JSON form, keys in JsonConverter's order) of named field schemas;
    `basics` are `schema_basics` (name, version, doc, parameters)."""
    out: dict[str, Any] = {"type": "struct",
                           "fields": [{**{k: v for k, v in s.items() if k != "field"}, "field": n} for n, s in fields],
                           "optional": optional}
    out.update((k, basics[k]) for k in ("name", "version", "doc", "parameters") if basics.get(k) is not None)
    return out


def schema_fields(schema: dict) -> list[tuple[str, dict]]:
    """A struct schema's fields as (name, schema without its `field` name)."""
    return [(f["field"], {k: v for k, v in f.items() if k != "field"}) for f in schema["fields"]]


def struct_children(column: pa.Array) -> list[tuple[str, pa.Array]]:
    """A struct column's child columns by name (without the struct's own nulls)."""
    return [(column.type.field(i).name, column.field(i)) for i in range(column.type.num_fields)]


def rebuild(block: TypedBlock, *, topic: str | None = None, key: tuple[dict | None, pa.Array] = _UNSET,
            value: tuple[dict | None, pa.Array] = _UNSET,
            headers: tuple[dict[str, dict | None], pa.Array] = _UNSET) -> TypedBlock:
    """`block` with a new topic, key (schema and column), value (schema and column; `_change_type` follows
    the new value) or headers (schemas by name and column); the other columns unchanged."""
    b = block.batch
    meta = dict(b.schema.metadata)
    columns = {name: b.column(name) for name in b.schema.names}
    if topic is not None:
        meta[TOPIC_META] = topic.encode()
    if key is not _UNSET:
        meta[KEY_SCHEMA_META] = orjson.dumps(key[0])
        columns["key"] = key[1]
    if value is not _UNSET:
        meta[VALUE_SCHEMA_META] = orjson.dumps(value[0])
        columns["value"] = value[1]
        columns["_change_type"] = change_types(columns["op"], value[1])
    if headers is not _UNSET:
        if headers[0]:
            meta[HEADERS_SCHEMA_META] = orjson.dumps(headers[0])
        else:
            meta.pop(HEADERS_SCHEMA_META, None)
        columns["headers"] = headers[1]
    schema = pa.schema([pa.field(n, c.type) for n, c in columns.items()], metadata=meta)
    return TypedBlock(pa.RecordBatch.from_arrays(list(columns.values()), schema=schema))


def take(block: TypedBlock, rows: np.ndarray | pa.Array) -> TypedBlock:
    """The rows of `block` at `rows` (a boolean mask or indices), metadata kept."""
    b = block.batch
    if isinstance(rows, np.ndarray) and rows.dtype == bool:
        if rows.all():
            return block
        return TypedBlock(b.filter(bool_array(rows)))
    return TypedBlock(b.take(rows))


def split_by_topic(block: TypedBlock, topics: pa.Array) -> list[TypedBlock]:
    """`block`'s rows rerouted: row i to topic `topics[i]` (null: stays on the block's topic)."""
    if topics.null_count == len(topics):
        return [block]
    topics = pc.fill_null(topics, block.topic)
    unique = pc.unique(topics)
    if len(unique) == 1:
        return [rebuild(block, topic=unique[0].as_py())]
    out = []
    for t in unique.to_pylist():
        out.append(rebuild(take(block, pc.equal(topics, t).to_numpy(zero_copy_only=False)), topic=t))
    return out


def header_entries(block: TypedBlock) -> tuple[pa.Array, np.ndarray]:
    """The header entries of every row (`{key, value}` structs) in order, and the row of each."""
    column = block.batch.column("headers")
    offsets = np.asarray(column.offsets)
    rows = np.repeat(np.arange(len(column)), np.diff(offsets))
    entries = column.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    if column.null_count:
        valid = valid_mask(column)[rows]
        entries, rows = entries.filter(bool_array(valid)), rows[valid]
    return entries, rows


def header_values(block: TypedBlock, name: str) -> tuple[pa.Array, dict | None, np.ndarray] | None:
    """Per row, the value of the last header named `name` (null where absent), its Connect schema, and
    which rows have such a header; None when the block can hold no header of that name."""
    schemas = block.header_schemas
    if name not in schemas:
        return None
    entries, rows = header_entries(block)
    hit = pc.equal(entries.field("key"), name).to_numpy(zero_copy_only=False)
    n = len(block)
    where = np.full(n, -1, dtype=np.int64)
    where[rows[hit]] = np.flatnonzero(hit)  # the last entry of a row wins
    present = where >= 0
    picked = pc.struct_field(entries.field("value"), [entries.type.field("value").type.get_field_index(name)])
    return picked.take(pa.array(where, mask=~present)), schemas[name], present


def set_headers(block: TypedBlock, schemas: dict[str, dict | None], entries: pa.Array, rows: np.ndarray) -> TypedBlock:
    """`block` with these header entries (`{key, value}` structs typed by `headers_type(schemas)`), entry
    j belonging to row `rows[j]` (non-decreasing); rows without entries get null headers."""
    n = len(block)
    counts = np.bincount(rows, minlength=n) if len(rows) else np.zeros(n, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    mask = None if (counts > 0).all() else bool_array(counts == 0)
    column = pa.ListArray.from_arrays(pa.array(offsets), entries.cast(headers_type(schemas).value_type), mask=mask)
    return rebuild(block, headers=(schemas, column))


def _widen(entries: pa.Array, old: dict[str, dict | None], new: dict[str, dict | None]) -> pa.Array:
    """Header entries typed by `old` schemas retyped for `new` (a superset): the new fields null."""
    n = len(entries)
    value_t = headers_type(new).value_type.field("value").type
    values = entries.field("value") if old else None
    fields = []
    for i, name in enumerate(new):
        if name in old and values is not None:
            fields.append((name, values.field(_index(old, name))))
        else:
            fields.append((name, pa.nulls(n, value_t.field(i).type)))
    value = pa.StructArray.from_arrays([a for _, a in fields], names=[f for f, _ in fields]) if fields else pa.nulls(n)
    return pa.StructArray.from_arrays([entries.field("key"), value], names=["key", "value"])


def _index(schemas: dict[str, dict | None], name: str) -> int:
    """The place of header `name` in the value struct of `headers_type(schemas)`."""
    return list(schemas).index(name)


def add_header(block: TypedBlock, name: str, schema: dict | None, values: pa.Array,
               present: np.ndarray | None = None) -> TypedBlock:
    """`block` with a header `name` of Connect `schema` appended to each row where `present` (default:
    every row), its value from `values` (typed by `connect_type(schema)`; null allowed)."""
    old = block.header_schemas
    if name in old and old[name] != schema:
        raise ValueError(f"header {name} already has another schema in this block")
    schemas = {**old, name: schema}
    n = len(block)
    present = np.ones(n, dtype=bool) if present is None else present
    entries, rows = header_entries(block)
    entries = _widen(entries, old, schemas)
    new_rows = np.flatnonzero(present)
    k = len(new_rows)
    value_t = headers_type(schemas).value_type.field("value").type
    fields = [(f, values.filter(bool_array(present)) if f == name else pa.nulls(k, value_t.field(f).type))
              for f in schemas]
    added = pa.StructArray.from_arrays([pa.repeat(string_scalar(name), k),
                                        pa.StructArray.from_arrays([a for _, a in fields], names=list(schemas))],
                                       names=["key", "value"])
    all_rows = np.concatenate([rows, new_rows])
    order = np.argsort(all_rows, kind="stable")
    combined = pa.concat_arrays([entries, added]).take(pa.array(order))
    return set_headers(block, schemas, combined, all_rows[order])


def remove_header(block: TypedBlock, name: str) -> TypedBlock:
    """`block` without its headers named `name`."""
    old = block.header_schemas
    if name not in old:
        return block
    entries, rows = header_entries(block)
    keep = pc.not_equal(entries.field("key"), name).to_numpy(zero_copy_only=False)
    schemas = {k: v for k, v in old.items() if k != name}
    entries = entries.filter(bool_array(keep))
    rows = rows[keep]
    value = entries.field("value")
    fields = [(k, value.field(_index(old, k))) for k in schemas]
    typed = pa.StructArray.from_arrays(
        [entries.field("key"), pa.StructArray.from_arrays([a for _, a in fields], names=list(schemas))
         if fields else pa.nulls(len(entries))], names=["key", "value"])
    return set_headers(block, schemas, typed, rows)
