"""Column helpers the transformations share: fields of `value` and `key`, blocks rebuilt with new
columns and schemas, rows taken or split by topic; headers of any Connect type are
`events.headers`'s (re-exported here).

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

from headwater.events.arrays import bool_array
from headwater.events.headers import (  # noqa: F401 - the transformations' header helpers, re-exported
    add_header,
    header_entries,
    header_values,
    remove_header,
    set_headers,
)
from headwater.events.typed import (
    HEADERS_SCHEMA_META,
    KEY_SCHEMA_META,
    TOPIC_META,
    VALUE_SCHEMA_META,
    TypedBlock,
    change_types,
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
