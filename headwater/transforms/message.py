"""Logical decoding messages decoded: `io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent`.

A PostgreSQL logical decoding message (value schema `io.debezium.connector.postgresql.MessageValue`)
becomes a change event the outbox router can take: its binary `message.content`, read as UTF-8 JSON
(it must start with `{`; anything else fails the event, as in Debezium), is the `after` struct, with
the schema `jsonschema.infer` gives (`fields.null.include`: a null field kept as optional bytes, else
left out); the `message` field is dropped, `op` becomes `c`, the key (the prefix) is cleared, and the
value schema is named `<MessageValue name>.Envelope`. Every other record passes unchanged.

The content is parsed message by message (JSON); the other columns are carried over whole.
"""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa

from headwater.config.properties import prop
from headwater.events.arrays import string_array
from headwater.events.typed import TypedBlock, change_types, connect_type
from headwater.transforms.base import Transform, TransformError
from headwater.transforms.blocks import rebuild, struct_array, struct_schema, take
from headwater.transforms.jsonschema import Unexpandable, conform, infer, parse
from headwater.transforms.registry import register

MESSAGE_VALUE = "io.debezium.connector.postgresql.MessageValue"


@register
class DecodeLogicalDecodingMessageContent(Transform):
    """A logical decoding message's JSON content as the `after` of a create event (see the module's docstring)."""

    CLASS_NAMES = ("io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent",)
    SHORT_NAME = "DecodeLogicalDecodingMessageContent"
    OPTIONS = (prop("fields.null.include", "boolean", False),)

    def apply(self, block: TypedBlock) -> list[TypedBlock]:
        schema = block.value_schema
        if schema is None or schema.get("name") != MESSAGE_VALUE:
            return [block]
        value = block.batch.column("value")
        if value.null_count:
            raise TransformError("Retrieve a record value: only Struct values are supported, found null")
        names = [f["field"] for f in schema["fields"]]
        message = value.field(names.index("message"))
        message_schema = schema["fields"][names.index("message")]
        content_at = [f["field"] for f in message_schema["fields"]].index("content")
        if message_schema["fields"][content_at]["type"] != "bytes":
            raise TransformError("The content of a logical decoding message is non-binary")
        contents = message.field(content_at).to_pylist()
        decoded = [self._decode(c) for c in contents]
        groups: dict[bytes, list[int]] = {}
        for i, (s, _) in enumerate(decoded):
            groups.setdefault(orjson.dumps(s), []).append(i)
        kept = [(n, f) for n, f in zip(names, schema["fields"], strict=True) if n != "message"]
        out = []
        for rows in groups.values():
            after_schema = decoded[rows[0]][0]
            typ, fn = connect_type(after_schema)
            after = pa.array([fn(decoded[i][1]) for i in rows], typ)
            idx = pa.array(rows, pa.int64())
            columns = [(n, string_array(["c"] * len(rows)) if n == "op" else value.field(names.index(n)).take(idx))
                       for n, _ in kept]
            new_schema = struct_schema([*kept, ("after", after_schema)], name=f"{MESSAGE_VALUE}.Envelope")
            out.append(_as_create(rebuild(take(block, idx), key=(None, pa.nulls(len(rows))),
                                          value=(new_schema, struct_array([*columns, ("after", after)], length=len(rows))))))
        return out

    def _decode(self, content: bytes | None) -> tuple[dict, Any]:
        text = (content or b"").decode("utf-8", errors="replace")
        try:
            if not text.startswith("{"):
                raise Unexpandable(text[:1])
            node = parse(text)
        except Unexpandable as exc:
            raise TransformError(f"Unable to parse logical decoding message content JSON string {text[:80]!r}") from exc
        schema = infer(None, node, self.values["fields.null.include"])
        assert schema is not None
        return schema, conform(node, schema)



def _as_create(block: TypedBlock) -> TypedBlock:
    """`block` with its `op` column (and so `_change_type`) that of a create."""
    b = block.batch
    op = string_array(["c"] * b.num_rows)
    i, j = b.schema.get_field_index("op"), b.schema.get_field_index("_change_type")
    b = b.set_column(i, b.schema.field(i), op)
    return TypedBlock(b.set_column(j, b.schema.field(j), change_types(op, b.column("value"))))
