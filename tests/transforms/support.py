"""Test helpers: change events built as Debezium's PostgreSQL connector shapes them, run through a
transformation chain, and read back as JSON (BlockBuilder -> transforms -> to_event_batch)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from headwater.events.connect import INT32, INT64, STRING, Schema, primitive, struct
from headwater.events.envelope import envelope_schema
from headwater.events.formats.json import JsonOptions, to_event_batch
from headwater.events.typed import BlockBuilder, TypedEvents
from headwater.transforms import parse_chain

TOPIC = "dbserver1.inventory.customers"

SOURCE = struct("io.debezium.connector.postgresql.Source", [
    ("version", primitive(STRING)), ("connector", primitive(STRING)), ("name", primitive(STRING)),
    ("ts_ms", primitive(INT64)), ("snapshot", primitive(STRING, optional=True, name="io.debezium.data.Enum",
                                                        version=1, parameters={"allowed": "true,false"})),
    ("db", primitive(STRING)), ("schema", primitive(STRING)), ("table", primitive(STRING)),
    ("txId", primitive(INT64, optional=True)), ("lsn", primitive(INT64, optional=True)),
])


def row_schema(topic: str = TOPIC, **columns: Schema) -> Schema:
    return struct(f"{topic}.Value", list(columns.items()) or [("id", primitive(INT32)),
                                                              ("name", primitive(STRING, optional=True))])


def key_schema(topic: str = TOPIC) -> Schema:
    return struct(f"{topic}.Key", [("id", primitive(INT32))])


def source(table: str = "customers", lsn: int = 123456789, ts_ms: int = 123456789) -> dict:
    return {"version": "3.6.3.Final", "connector": "postgresql", "name": "dbserver1", "ts_ms": ts_ms,
            "snapshot": "false", "db": "inventory", "schema": "public", "table": table, "txId": 555, "lsn": lsn}


def change(op: str, before: dict | None, after: dict | None, table: str = "customers") -> dict:
    return {"before": before, "after": after, "source": source(table), "transaction": None, "op": op,
            "ts_ms": 1000, "ts_us": 1000000, "ts_ns": 1000000000}


class Events:
    """Records of one or more topics, built into typed blocks."""

    def __init__(self) -> None:
        self.builder = BlockBuilder()

    def add(self, op: str | None, before: dict | None = None, after: dict | None = None, *, topic: str = TOPIC,
            row: Schema | None = None, key: dict | None = None, headers: list[tuple[str, Any]] | None = None
            ) -> Events:
        """A change (op c/u/d/r/t), or a tombstone (op None), of `topic`."""
        row = row or row_schema(topic)
        table = topic.rsplit(".", 1)[-1]
        ks = key_schema(topic).to_json()
        if key is None:
            image = after if after is not None else before
            key = {"id": image["id"]} if image is not None else None
        env = envelope_schema(f"{topic}.Envelope", row, SOURCE).to_json()
        if op is None:  # a tombstone: the connector gives it the envelope schema, and no op
            self.builder.add(topic, ks, key, env, None, None, 1, 1, headers)
        else:
            self.builder.add(topic, ks, key, env, change(op, before, after, table), op, 1, 1, headers)
        return self

    def record(self, topic: str, key_schema: dict | None, key: Any, value_schema: dict | None, value: Any,
               op: str | None = None) -> Events:
        self.builder.add(topic, key_schema, key, value_schema, value, op, 1, 1)
        return self

    def take(self) -> TypedEvents:
        return self.builder.take()


def run(events: TypedEvents | Events, props: Mapping[str, Any]) -> TypedEvents:
    """The events through the chain `props` configures."""
    chain = parse_chain(dict(props))
    assert chain is not None
    return chain.apply(events.take() if isinstance(events, Events) else events)


def as_json(events: TypedEvents, schemas: bool = False) -> list[dict]:
    """The events as {topic, key, value[, headers]} dicts, as JsonConverter writes them."""
    out = []
    for e in to_event_batch(events, JsonOptions(schemas_enable=schemas)).rows():
        row = {"topic": e.topic, "key": json.loads(e.key) if e.key is not None else None,
               "value": json.loads(e.value) if e.value is not None else None}
        if e.headers:
            row["headers"] = {k: json.loads(v) for k, v in e.headers}
        out.append(row)
    return out


def unwrap(**options: str) -> dict[str, str]:
    """Properties of a chain of one ExtractNewRecordState with `options` (underscores as dots)."""
    return {"transforms": "unwrap", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
            **{f"transforms.unwrap.{k.replace('_', '.')}": v for k, v in options.items()}}


def values(events: TypedEvents) -> list[Any]:
    return [e["value"] for e in as_json(events)]


def topics(events: TypedEvents) -> Sequence[str]:
    return [e["topic"] for e in as_json(events)]
