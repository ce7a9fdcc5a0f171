"""Debezium's record shapes: envelope, transaction metadata, heartbeat; and their JSON serialization.

Serialization follows Kafka's JsonConverter: with `schemas.enable` the record is
`{"schema": ..., "payload": ...}`, otherwise the payload alone. Schemas are serialized once per
table and spliced in as bytes, so per-event work is one `orjson.dumps` of the payload.
"""

from __future__ import annotations

import orjson

from headwater.events.connect import INT64, STRING, Schema, array, primitive, struct
from headwater.events.formats.json import JsonOptions

ENVELOPE_VERSION = 2


def envelope_schema(name: str, row: Schema, source: Schema) -> Schema:
    """`<prefix>.<schema>.<table>.Envelope` (version 2, as in Debezium 3)."""
    return struct(name, [
        ("before", row.with_optional(True)),
        ("after", row.with_optional(True)),
        ("source", source),
        ("transaction", TRANSACTION_BLOCK),
        ("op", primitive(STRING)),
        ("ts_ms", primitive(INT64, optional=True)),
        ("ts_us", primitive(INT64, optional=True)),
        ("ts_ns", primitive(INT64, optional=True)),
    ], version=ENVELOPE_VERSION)


TRANSACTION_BLOCK = struct("event.block", [
    ("id", primitive(STRING)),
    ("total_order", primitive(INT64)),
    ("data_collection_order", primitive(INT64)),
], optional=True, version=1)

TRANSACTION_KEY = struct("io.debezium.connector.common.TransactionMetadataKey", [
    ("id", primitive(STRING)),
], version=1)

TRANSACTION_VALUE = struct("io.debezium.connector.common.TransactionMetadataValue", [
    ("status", primitive(STRING)),
    ("id", primitive(STRING)),
    ("event_count", primitive(INT64, optional=True)),
    ("data_collections", array(struct("event.collection", [
        ("data_collection", primitive(STRING)),
        ("event_count", primitive(INT64)),
    ], optional=True, version=1), optional=True)),
    ("ts_ms", primitive(INT64)),
], version=1)

HEARTBEAT_KEY = struct("io.debezium.connector.common.ServerNameKey", [("serverName", primitive(STRING))], version=1)
HEARTBEAT_VALUE = struct("io.debezium.connector.common.Heartbeat", [("ts_ms", primitive(INT64))], version=1)


class Serializer:
    """Writes records for one schema, with or without the schema, as JsonConverter does."""

    __slots__ = ("head", "schemas", "tail")

    def __init__(self, schema: Schema | None, schemas_enable: bool):
        self.head, self.tail = JsonOptions(schemas_enable).wrap(None if schema is None else schema.to_json())
        self.schemas = bool(self.head)

    def dumps(self, payload) -> str:
        body = orjson.dumps(payload)
        if self.schemas:
            return (self.head + body + self.tail).decode()
        return body.decode()
