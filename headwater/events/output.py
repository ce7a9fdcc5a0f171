"""Where record builders put the records they make: JSON text rows, or typed blocks.

A `RecordOutput` takes records as the builders make them (topic, key schema and key, value schema
and value, the values in JSON form; op, commit version and time; headers holding keys) and gives
the batch so far with `take()`. `JsonOutput` writes each record at once as Kafka's JsonConverter
would (`formats.json.JsonOptions`) into an `EventBatch`: the JSON text rows stages exchanged
before typed blocks, byte for byte. `TypedOutput` gathers them into typed blocks
(`events.typed.TypedEvents`), which any format can be written from later; `typed_source` gives
a value's `source` block as typed blocks hold it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import orjson

from headwater.events.batch import EventBatch
from headwater.events.connect import Schema
from headwater.events.envelope import Serializer
from headwater.events.formats.json import JsonOptions
from headwater.events.typed import BlockBuilder, TypedEvents

#: the output kinds a source can be asked for
OUTPUTS = ("json", "typed")


class RecordOutput(ABC):
    """Records in, a batch of events out."""

    @abstractmethod
    def record(self, topic: str, key_schema: Schema | None, key: Any, value_schema: Schema | None, value: Any,
               op: str | None, version: int, ts_us: int, headers: list[tuple[str, Any]] | None = None) -> None:
        """One record; `value` None is a tombstone; each header's value is a key of `key_schema`."""

    @abstractmethod
    def __len__(self) -> int:
        """Records since the last `take`."""

    @abstractmethod
    def take(self) -> EventBatch | TypedEvents:
        """The records since the last `take`, as one batch."""


class JsonOutput(RecordOutput):
    """Records as JSON text rows (an `EventBatch`)."""

    def __init__(self, options: JsonOptions):
        self.options = options
        self.batch = EventBatch()
        self._serializers: dict[int, tuple[Schema | None, Serializer]] = {}

    def serializer(self, schema: Schema | None) -> Serializer:
        hit = self._serializers.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        serializer = Serializer(schema, self.options.schemas_enable)
        self._serializers[id(schema)] = (schema, serializer)
        return serializer

    def record(self, topic: str, key_schema: Schema | None, key: Any, value_schema: Schema | None, value: Any,
               op: str | None, version: int, ts_us: int, headers: list[tuple[str, Any]] | None = None) -> None:
        keys = self.serializer(key_schema)
        self.batch.append(topic, None if key is None else keys.dumps(key),
                          None if value is None else self.serializer(value_schema).dumps(value), op, version, ts_us,
                          None if headers is None else [(name, keys.dumps(k)) for name, k in headers])

    def __len__(self) -> int:
        return len(self.batch)

    def take(self) -> EventBatch:
        out, self.batch = self.batch, EventBatch()
        return out


#: `source.snapshot` of a streamed event as JsonConverter writes it (the field's default)
STREAMED_SNAPSHOT = "false"


def typed_source(value: Any) -> Any:
    """A record's value with its `source` block (JSON text the builders render, an `orjson.Fragment`)
    as data, and a streamed event's `source.snapshot` null: Debezium's Struct holds null there (its
    `SnapshotRecord.FALSE` puts nothing) and JsonConverter writes the field's default, "false", which
    is what the rendered text says. The JSON written from a typed block applies the default too."""
    source = value.get("source") if isinstance(value, dict) else None
    if not isinstance(source, orjson.Fragment):
        return value
    data = orjson.loads(orjson.dumps(source))
    if data.get("snapshot") == STREAMED_SNAPSHOT:
        data["snapshot"] = None
    return {**value, "source": data}


class TypedOutput(RecordOutput):
    """Records as typed blocks (the `source` block as `typed_source` gives it)."""

    def __init__(self) -> None:
        self.builder = BlockBuilder()

    def record(self, topic: str, key_schema: Schema | None, key: Any, value_schema: Schema | None, value: Any,
               op: str | None, version: int, ts_us: int, headers: list[tuple[str, Any]] | None = None) -> None:
        self.builder.add(topic, None if key_schema is None else key_schema.to_json(), key,
                         None if value_schema is None else value_schema.to_json(), typed_source(value), op, version,
                         ts_us, headers)

    def __len__(self) -> int:
        return len(self.builder)

    def take(self) -> TypedEvents:
        return self.builder.take()
