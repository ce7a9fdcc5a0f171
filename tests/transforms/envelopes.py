"""Change events made by hand for the transformations' test vectors: typed blocks of Debezium envelopes."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from headwater.events.formats.json import JsonOptions, to_event_batch
from headwater.events.typed import BlockBuilder, TypedBlock, TypedEvents, connect_type
from headwater.transforms import parse_chain
from headwater.transforms.blocks import add_header

SOURCE = {"type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.Source", "fields": [
    {"type": "string", "optional": False, "field": "schema"}, {"type": "string", "optional": False, "field": "table"}]}


def field(field_name: str, type_: str, optional: bool = True, **extra: Any) -> dict:
    return {"type": type_, "optional": optional, **extra, "field": field_name}


def envelope_schema(topic: str, row_fields: list[dict]) -> dict:
    row = {"type": "struct", "optional": True, "name": f"{topic}.Value", "fields": row_fields}
    return {"type": "struct", "optional": False, "name": f"{topic}.Envelope", "fields": [
        {**row, "field": "before"}, {**row, "field": "after"}, {**SOURCE, "field": "source"},
        {"type": "string", "optional": False, "field": "op"}, {"type": "int64", "optional": True, "field": "ts_ms"}]}


KEY = {"type": "struct", "optional": False, "name": "k.Key", "fields": [field("id", "int32", False)]}


def block(topic: str, row_fields: list[dict], events: list[tuple[str | None, dict | None, dict | None]],
          table: str = "t") -> TypedBlock:
    """One block of envelopes `(op, before, after)` of rows with `row_fields`, keyed by their place;
    op None: a tombstone."""
    builder = BlockBuilder()
    schema = envelope_schema(topic, row_fields)
    for i, (op, before, after) in enumerate(events):
        value = None if op is None else {"before": before, "after": after, "op": op, "ts_ms": 1,
                                         "source": {"schema": "public", "table": table}}
        builder.add(topic, KEY, {"id": i}, schema, value, op or "d", 1, 0)
    blocks = builder.take().blocks
    assert len(blocks) == 1
    return blocks[0]


def with_header(b: TypedBlock, name: str, schema: dict, values: list[Any]) -> TypedBlock:
    """`b` with a header `name` of `schema` on every event (values in JSON form)."""
    typ, fn = connect_type(schema)
    return add_header(b, name, schema, pa.array([None if v is None else fn(v) for v in values], typ))


def run(props: dict[str, Any], b: TypedBlock) -> list[dict]:
    """The events `b` becomes through the chain of `props` (`transforms`, ...), as JSON data without
    schemas: topic, key, value, headers."""
    chain = parse_chain(props)
    assert chain is not None
    out = []
    for ev in to_event_batch(chain.apply(TypedEvents([b])), JsonOptions()).rows():
        out.append({"topic": ev.topic, "key": ev.key_json(), "value": ev.value_json(),
                    "headers": {k: json.loads(v) for k, v in ev.headers or []}})
    return out
