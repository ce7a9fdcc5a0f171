"""A made-up connector for the shared record code's tests: a MySQL-like `source` tail, plain
converters, no server."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from headwater.connectors.common import records as common
from headwater.connectors.common.filters import TableFilters
from headwater.connectors.common.records import RecordContext, TableRecords
from headwater.connectors.common.source_info import Piece, source_schema
from headwater.connectors.common.topics import TopicNames
from headwater.events.columns import ColumnOptions
from headwater.events.connect import INT32, INT64, STRING, Schema, primitive

SOURCE = source_schema("test.Source", [
    ("table", primitive(STRING, optional=True)),
    ("server_id", primitive(INT64)),
    ("pos", primitive(INT64)),
    ("row", primitive(INT32)),
])

UNSENT = object()  # the test connector's marker of a value it did not receive


@dataclass(frozen=True)
class Col:
    name: str
    type: str  # "int" or "text"
    not_null: bool = False
    default: Any = None
    length: int = 2147483647


@dataclass(frozen=True)
class Table:
    schema: str
    name: str
    columns: tuple[Col, ...]
    key_columns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Converter:
    """A column's schema and converters: text is parsed, anything else taken as it is."""

    schema: Schema
    stream_schema: Schema
    from_text: Callable[[str], Any]
    from_stream_text: Callable[[str], Any]
    from_binary: Callable[[Any], Any]
    from_stream_binary: Callable[[Any], Any]
    fallback: Any
    null_value: Any
    toast_placeholder: Any


def converter(col: Col) -> Converter:
    parse: Callable[[str], Any] = int if col.type == "int" else str
    schema = primitive(INT32 if col.type == "int" else STRING, optional=not col.not_null)
    if col.default is not None:
        schema = schema.with_default(col.default)
    fallback = col.default if col.default is not None else (0 if col.type == "int" else "")
    return Converter(schema, schema, parse, parse, lambda v: v, lambda v: v, fallback, col.default, "__unsent__")


@dataclass(frozen=True, kw_only=True)
class SampleContext(RecordContext):
    connector: ClassVar[str] = "testdb"
    source_schema: ClassVar[Schema] = SOURCE
    unavailable: ClassVar[object] = UNSENT

    def converter(self, column: Col, collection: str) -> Converter | None:
        return None if column.type == "skip" else converter(column)


def context(columns: ColumnOptions = ColumnOptions(), **settings: Any) -> SampleContext:
    base: dict[str, Any] = dict(
        topics=TopicNames("srv", ".", "transaction", "__debezium-heartbeat"), dbname="db", columns=columns,
        filters=TableFilters(), tombstones=True, skipped=frozenset(), skip_unchanged=False,
        transaction_metadata=False, heartbeat_interval_ms=0, heartbeat_query=None, binary_mode="bytes")
    return SampleContext(**{**base, **settings})


class SampleMaker(common.RecordMaker):
    """A tail like MySQL's: `table`, `server_id` (constant), then the slots `pos` and `row`."""

    def source_tail(self, t: TableRecords | None, schema: str | None, table: str | None) -> list[Piece]:
        name = t.table_name if t is not None else table
        return [b',"table":' + orjson.dumps(name) + b',"server_id":223344,"pos":', "pos", b',"row":', "row", b"}"]

    def snapshot_source(self, t: TableRecords, ts_us: int, marker: str, position: Mapping[str, Any]) -> bytes:
        src = self.fixed_source(t, marker, ts_us, {"sequence": b"null", "pos": b"%d" % position["pos"]})
        return src.render(b"0")
