"""Topic routers: ByLogicalTableRouter (regex over the topic) and ContentBasedRouter (an expression).

`ByLogicalTableRouter` reroutes the blocks whose topic matches `topic.regex` (as a whole) to
`topic.replacement`; with `key.enforce.uniqueness` (default) the key gains a string field
`key.field.name` holding the original topic, or `key.field.replacement` of `key.field.regex`'s groups.
The key schema is renamed `<new topic>.Key`; an envelope's schema `<new topic>.Envelope` and its
`before`/`after` row schemas `<new topic>.Value` (`schema.name.adjustment.mode` adjusts these names).
Tombstones and records that are not envelopes keep their value as it is. Everything is decided per
block, as the block has one topic.

`ContentBasedRouter` moves each record to the topic its `topic.expression` gives (null: it stays),
with the options of `filter.Scripting`.
"""

from __future__ import annotations

import re
from functools import lru_cache

import pyarrow as pa

from headwater.config.properties import prop
from headwater.events.arrays import string_scalar, valid_mask
from headwater.events.columns import adjust_schema_name
from headwater.events.typed import TypedBlock
from headwater.transforms.base import Transform, TransformError
from headwater.transforms.blocks import (
    rebuild,
    schema_basics,
    schema_fields,
    split_by_topic,
    struct_array,
    struct_children,
    struct_schema,
)
from headwater.transforms.filter import Scripting
from headwater.transforms.regex import check_replacement, java_regex, java_replacement
from headwater.transforms.registry import register


@register
class ByLogicalTableRouter(Transform):
    """io.debezium.transforms.ByLogicalTableRouter (see the module's docstring)."""

    CLASS_NAMES = ("io.debezium.transforms.ByLogicalTableRouter",)
    SHORT_NAME = "ByLogicalTableRouter"
    OPTIONS = (
        prop("topic.regex", required=True),
        prop("topic.replacement", required=True),
        prop("key.enforce.uniqueness", "boolean", default=True),
        prop("key.field.name", default="__dbz__physicalTableIdentifier"),
        prop("key.field.regex", default=""),
        prop("key.field.replacement", default=""),
        prop("schema.name.adjustment.mode", "enum", default="none", allowed=("none", "avro", "avro_unicode")),
        prop("logical.table.cache.size", "int", default=16, minimum=1),
    )

    def configure(self) -> None:
        self.topic_regex = self._regex("topic.regex")
        self.replacement = self.values["topic.replacement"]
        check_replacement(self, "topic.replacement", self.replacement, self.topic_regex)
        self.key_regex: re.Pattern[str] | None = None
        if self.values["key.field.regex"].strip():
            self.key_regex = self._regex("key.field.regex")
            if not self.values["key.field.replacement"]:
                self.fail("key.field.replacement", "must be non-empty if key.field.regex is set",
                          "give the key field's value in terms of key.field.regex's groups, e.g. $1")
            check_replacement(self, "key.field.replacement", self.values["key.field.replacement"], self.key_regex)
        self.new_topic = lru_cache(maxsize=self.values["logical.table.cache.size"])(self._new_topic)

    def _regex(self, option: str) -> re.Pattern[str]:
        return java_regex(self, option, self.values[option])

    def _new_topic(self, topic: str) -> str | None:
        m = self.topic_regex.fullmatch(topic)
        return java_replacement(self.replacement, m) if m else None

    def _identifier(self, topic: str) -> str:
        if self.key_regex is not None:
            m = self.key_regex.fullmatch(topic)
            if m:
                return java_replacement(self.values["key.field.replacement"], m)
        return topic

    def _name(self, name: str) -> str:
        return adjust_schema_name(name, self.values["schema.name.adjustment.mode"])

    def apply(self, block: TypedBlock) -> list[TypedBlock]:
        old = block.topic
        new = self.new_topic(old)
        if not new:  # no match, or an empty topic name (Debezium logs it and keeps the record)
            return [block]
        n = len(block)
        out = rebuild(block, topic=new)
        key_schema = block.key_schema
        key = block.batch.column("key")
        if key_schema is not None and key_schema.get("type") == "struct" and valid_mask(key).any():
            fields = schema_fields(key_schema)
            children = struct_children(key)
            if self.values["key.enforce.uniqueness"]:
                fields.append((self.values["key.field.name"], {"type": "string", "optional": False}))
                children.append((self.values["key.field.name"], pa.repeat(string_scalar(self._identifier(old)), n)))
            basics = {**schema_basics(key_schema), "name": self._name(new + ".Key")}
            new_key_schema = struct_schema(fields, key_schema.get("optional", False), **basics)
            out = rebuild(out, key=(new_key_schema, struct_array(children, valid_mask(key), length=n)))
        envelope = block.value_schema
        value = block.batch.column("value")
        if envelope is None or not str(envelope.get("name") or "").endswith(".Envelope") or not valid_mask(value).any():
            return [out]
        return [rebuild(out, value=self._envelope(envelope, value, new))]

    def _envelope(self, envelope: dict, value: pa.Array, topic: str) -> tuple[dict, pa.Array]:
        """The envelope with its schema and its row schemas renamed for the new topic."""
        fields = schema_fields(envelope)
        row = dict(fields)["before"]
        row_schema = struct_schema(schema_fields(row), row.get("optional", False),
                                   **{**schema_basics(row), "name": self._name(topic + ".Value")})
        fields = [(n, row_schema if n in ("before", "after") else s) for n, s in fields]
        new = struct_schema(fields, envelope.get("optional", False),
                            **{**schema_basics(envelope), "name": self._name(topic + ".Envelope")})
        return new, value


@register
class ContentBasedRouter(Scripting):
    """io.debezium.transforms.ContentBasedRouter: the topic of each record from `topic.expression`."""

    CLASS_NAMES = ("io.debezium.transforms.ContentBasedRouter",)
    SHORT_NAME = "ContentBasedRouter"
    EXPRESSION = "topic.expression"
    OPTIONS = (*Scripting.COMMON, prop("topic.expression", required=True))

    def run(self, block: TypedBlock) -> list[TypedBlock]:
        topics = self.value(block)
        if not topics.column:
            if topics.data is not None and not isinstance(topics.data, str):
                raise TransformError(f"topic.expression gave {topics.data!r}, not a topic name")
            return [block] if topics.data is None else [rebuild(block, topic=topics.data)]
        if not (pa.types.is_string(topics.data.type) or pa.types.is_null(topics.data.type)):
            raise TransformError(f"topic.expression gave a column of {topics.data.type}, not topic names")
        return split_by_topic(block, topics.data.cast(pa.string()))
