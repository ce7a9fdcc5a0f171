"""Where record builders put the records they make: JSON text rows, or typed blocks.

A `RecordOutput` takes records as the builders make them (topic, key schema and key, value schema
and value, the values in JSON form; op, commit version and time; headers holding keys) and gives
the batch so far with `take()`. `JsonOutput` writes each record at once as Kafka's JsonConverter
would (`formats.json.JsonOptions`) into an `EventBatch`: the JSON text rows stages exchanged
before typed blocks, byte for byte. `TypedOutput` gathers them into typed blocks
(`events.typed.TypedEvents`), which any format can be written from later.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

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


class TypedOutput(RecordOutput):
    """Records as typed blocks."""

    def __init__(self) -> None:
        self.builder = BlockBuilder()

    def record(self, topic: str, key_schema: Schema | None, key: Any, value_schema: Schema | None, value: Any,
               op: str | None, version: int, ts_us: int, headers: list[tuple[str, Any]] | None = None) -> None:
        self.builder.add(topic, None if key_schema is None else key_schema.to_json(), key,
                         None if value_schema is None else value_schema.to_json(), value, op, version, ts_us, headers)

    def __len__(self) -> int:
        return len(self.builder)

    def take(self) -> TypedEvents:
        return self.builder.take()
