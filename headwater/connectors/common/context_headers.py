"""Debezium 3's context headers on every data change record: which connector, task and run made it.

With `extended.headers.enabled` (default true), Debezium 3.x's `EventDispatcher` adds four string
headers (Kafka's `Schema.STRING_SCHEMA`), after the record's own, to each data change record (snapshot
rows, creates, updates, deletes, truncates, the tombstone after a delete, the records of a key change)
and each schema change record: `__debezium.context.connectorLogicalName` (`topic.prefix`),
`__debezium.context.taskId` (`"0"`: one task), `__debezium.context.connectorName` (the connector's
`Module.name()`: `postgresql`, `mysql`, `mariadb`) and `__debezium.context.runId` (a UUIDv7 made when
the connector's task starts). Logical decoding messages, transaction BEGIN/END records, heartbeats
and notifications carry none. Facts from Debezium 3.6.3's `DebeziumHeaderProducer`,
`CdcSourceTaskContext` and `EventDispatcher` (bytecode) and its recorded events
(tests/data/transforms/with_headers/README.md).

`ContextHeaders.start` makes the headers of one run (one `Engine`, one start of a Spark query: its
stream reader); `apply` adds them to a batch a work unit made, column-wise (the same entries for every
data change row: offsets and one `take`), whatever the batch's form (JSON rows or typed blocks), before
post processors and transformations run, as Debezium adds them before its SMTs. A batch that Spark
replays after a restart is read again by the new run, so it carries the new run's id, as a Debezium
record re-sent after a restart does.
"""

from __future__ import annotations

import functools
import os
import time
import uuid
from dataclasses import dataclass, replace

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from headwater.config.properties import ConnectorConfig
from headwater.connectors.registry import lookup
from headwater.events.arrays import bool_values, lit, string_array, valid_mask
from headwater.events.batch import ARROW_SCHEMA, HEADER_TYPE, ArrowEvents, Events, PieceEvents
from headwater.events.formats.json import JsonOptions
from headwater.events.headers import STRING_SCHEMA, append_entries, append_string_headers, text_header_entries
from headwater.events.typed import TypedBlock, TypedEvents

PREFIX = "__debezium.context."
LOGICAL_NAME, TASK_ID, CONNECTOR_NAME, RUN_ID = (PREFIX + n for n in ("connectorLogicalName", "taskId",
                                                                       "connectorName", "runId"))
#: the ops of data change records (a tombstone has none, and no value)
DATA_OPS = ("c", "u", "d", "r", "t")
_DATA_OPS = string_array(list(DATA_OPS))


@functools.lru_cache(maxsize=16)
def _text_entries(pairs: tuple[tuple[str, str], ...], head: bytes, tail: bytes) -> pa.Array:
    """The header entries of JSON rows for `pairs`, each value a string's JSON between `head` and `tail` (made
    once a run: every batch adds the same)."""
    return text_header_entries([(n, (head + orjson.dumps(v) + tail).decode()) for n, v in pairs])


def uuid7() -> uuid.UUID:
    """A version 7 UUID (RFC 9562): 48 bits of Unix time in milliseconds, then random bits."""
    ms = time.time_ns() // 1_000_000
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & (2**48 - 1)) << 80 | rand & ~(0xF << 76) & ~(0b11 << 62)
    value |= 0x7 << 76 | 0b10 << 62  # version 7, variant 10
    return uuid.UUID(int=value)


@dataclass(frozen=True)
class ContextHeaders:
    """The context headers of one run (picklable: it travels to Spark's executors with the reader)."""

    logical_name: str
    connector_name: str
    run_id: str
    task_id: str = "0"

    @classmethod
    def start(cls, config: ConnectorConfig) -> ContextHeaders | None:
        """The headers of a run starting now (a new run id); None with `extended.headers.enabled=false`."""
        if not config["extended.headers.enabled"]:
            return None
        return cls(config["topic.prefix"], lookup(config.connector).plugin_name, str(uuid7()))

    @property
    def pairs(self) -> list[tuple[str, str]]:
        """The headers' names and values, in Debezium's order."""
        return [(LOGICAL_NAME, self.logical_name), (TASK_ID, self.task_id), (CONNECTOR_NAME, self.connector_name),
                (RUN_ID, self.run_id)]

    def apply(self, batch: Events, options: JsonOptions) -> Events:
        """`batch` with the headers added to its data change (and schema change) records; JSON rows' header
        values written as JsonConverter writes a string with `options`."""
        if isinstance(batch, TypedEvents):
            return TypedEvents([self._typed(block) for block in batch])
        if not len(batch):
            return batch
        head, tail = options.wrap(STRING_SCHEMA)
        entries = _text_entries(tuple(self.pairs), head, tail)
        if isinstance(batch, PieceEvents):  # (one topic and op, every row with a value: its key and value not joined)
            every = batch.op in DATA_OPS or batch.topic == self.logical_name
            if every and batch.headers is None and batch.shared_headers is None:  # (a snapshot block's)
                return replace(batch, shared_headers=entries)
            headers = batch.header_column()
            headers = append_entries(headers if headers is not None else pa.nulls(len(batch), HEADER_TYPE), entries,
                                     np.full(len(batch), every))
            return replace(batch, headers=headers.cast(HEADER_TYPE), shared_headers=None)
        rows = batch.to_arrow()
        schema_changes = bool_values(pc.fill_null(pc.equal(rows.column("topic"), lit(self.logical_name)), lit(False)))
        mask = self._rows(schema_changes, rows.column("op"), rows.column("value"))
        headers = append_entries(rows.column("headers"), entries, mask)
        i = ARROW_SCHEMA.get_field_index("headers")
        return ArrowEvents(rows.set_column(i, ARROW_SCHEMA.field(i), headers.cast(ARROW_SCHEMA.field(i).type)))

    def _typed(self, block: TypedBlock) -> TypedBlock:
        mask = self._rows(block.topic == self.logical_name, block.batch.column("op"), block.batch.column("value"))
        return append_string_headers(block, self.pairs, mask)

    @staticmethod
    def _rows(schema_changes: np.ndarray | bool, op: pa.Array, value: pa.Array) -> np.ndarray:
        """Which rows are data change records (an op of `DATA_OPS`, or a tombstone) or schema change records
        (a value on the schema change topic, `topic.prefix`: where `schema_changes`)."""
        data = bool_values(pc.is_in(op, value_set=_DATA_OPS))
        present = valid_mask(value)
        out: np.ndarray = data | ~present | (present & schema_changes)
        return out
