"""PostgreSQL's part of Debezium's records: its settings, its `source` tail and its messages.

`EventContext` is the `RecordContext` of the PostgreSQL connector: its type settings (the column
converters of types.py), the logical decoding message prefixes, the `source` schema. `RecordMaker`
fills the PostgreSQL tail of the `source` block (`schema`, `table`, `txId`, `lsn`, `xmin`,
`origin`, `origin_lsn`), makes snapshot rows and transaction records with PostgreSQL's ids
(`<xid>:<lsn>`). `MESSAGE_KEY` and `message_value_schema` are the schemas of logical decoding
message records (`pg_logical_emit_message`), `message_collection` what a transactional one counts
as in the transaction metadata.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from headwater.config.properties import ConnectorConfig
from headwater.connectors.common import records as common
from headwater.connectors.common.records import RecordContext, TableRecords, TxnCounters
from headwater.connectors.common.source_info import Piece, SourceTemplate, source_schema
from headwater.connectors.postgres.catalog import ColumnInfo, table_filters
from headwater.connectors.postgres.columnar import PG_KERNELS
from headwater.connectors.postgres.pgoutput import UNCHANGED_TOAST
from headwater.connectors.postgres.types import (
    ColumnConverter,
    TypeSettings,
    build_converter,
    json_text_kind,
)
from headwater.events.connect import BYTES, INT64, STRING, Schema, primitive, struct
from headwater.events.envelope import TRANSACTION_BLOCK
from headwater.events.output import RecordOutput

SOURCE_SCHEMA = source_schema("io.debezium.connector.postgresql.Source", [
    ("schema", primitive(STRING)),
    ("table", primitive(STRING)),
    ("txId", primitive(INT64, optional=True)),
    ("lsn", primitive(INT64, optional=True)),
    ("xmin", primitive(INT64, optional=True)),
    ("origin", primitive(STRING, optional=True)),
    ("origin_lsn", primitive(INT64, optional=True)),
])


@dataclass(frozen=True, kw_only=True)
class EventContext(RecordContext):
    """The configuration every PostgreSQL record needs (picklable)."""

    connector: ClassVar[str] = "postgresql"
    source_schema: ClassVar[Schema] = SOURCE_SCHEMA
    unavailable: ClassVar[object] = UNCHANGED_TOAST
    text_kernels: ClassVar[Mapping[str, Callable[..., Any]]] = PG_KERNELS

    types: TypeSettings
    message_include: tuple[re.Pattern[str], ...]
    message_exclude: tuple[re.Pattern[str], ...]

    @classmethod
    def from_config(cls, cfg: ConnectorConfig, schemas_enable: bool = False,
                    replace_null_with_default: bool = True, output: str = "json") -> EventContext:
        return cls(
            **cls.common_settings(cfg, table_filters(cfg), schemas_enable, replace_null_with_default, output),
            types=TypeSettings.from_config(cfg),
            message_include=tuple(re.compile(p) for p in cfg.get("message.prefix.include.list") or ()),
            message_exclude=tuple(re.compile(p) for p in cfg.get("message.prefix.exclude.list") or ()),
        )

    def converter(self, column: ColumnInfo, collection: str) -> ColumnConverter | None:
        return build_converter(column, self.types, collection)

    def text_kind(self, conv: ColumnConverter, streaming: bool) -> tuple[str, int] | None:
        return json_text_kind(conv, streaming)

    def message_included(self, prefix: str) -> bool:
        if self.message_include:
            return any(p.fullmatch(prefix) for p in self.message_include)
        return not any(p.fullmatch(prefix) for p in self.message_exclude)


class RecordMaker(common.RecordMaker):
    """Appends PostgreSQL's Debezium records to a `RecordOutput`."""

    def __init__(self, ctx: EventContext, out: RecordOutput | None = None):
        super().__init__(ctx, out)
        self._src_key: tuple | None = None
        self._src = SourceTemplate([b""], {})

    def source_tail(self, t: TableRecords | None, schema: str | None, table: str | None) -> list[Piece]:
        """`schema`, `table` (of `t`, else as given), then the slots `txId` and `lsn`."""
        sch = t.schema_name if t is not None else schema
        tab = t.table_name if t is not None else table
        return [b',"schema":' + orjson.dumps(sch) + b',"table":' + orjson.dumps(tab) + b',"txId":', "txId",
                b',"lsn":', "lsn", b',"xmin":null,"origin":null,"origin_lsn":null}']

    def source(self, t: TableRecords | None, ts_us: int, snapshot: str, sequence: str | None,
               txid: int | None, lsn: int | None, schema: str | None = None,
               table: str | None = None) -> orjson.Fragment:
        """The `source` block, serialized from a template that only changes with the transaction."""
        return orjson.Fragment(self.source_bytes(t, ts_us, snapshot, sequence, txid, lsn, schema, table))

    def source_bytes(self, t: TableRecords | None, ts_us: int, snapshot: str, sequence: str | None,
                     txid: int | None, lsn: int | None, schema: str | None = None,
                     table: str | None = None) -> bytes:
        """The `source` block's JSON."""
        key = (t, ts_us, snapshot, txid, schema, table)
        if key != self._src_key:
            self._src_key = key
            self._src = self.fixed_source(t, snapshot, ts_us, {"txId": orjson.dumps(txid)}, schema, table)
        return self._src.render(orjson.dumps(sequence), orjson.dumps(lsn))

    def snapshot_source(self, t: TableRecords, ts_us: int, marker: str, position: Mapping[str, Any]) -> bytes:
        """`position`: the snapshot's `lsn`, `txid` and `sequence`."""
        return self.source_bytes(t, ts_us, marker, position["sequence"], position["txid"], position["lsn"])

    def snapshot_row(self, t: TableRecords, values: Any, marker: str, lsn: int, txid: int, ts_us: int,
                     sequence: str, version: int) -> None:
        source_block = self.source(t, ts_us, marker, sequence, txid, lsn)
        self.emit(t, "r", t.key(values), None, t.row(values), source_block, None, version, ts_us)

    def begin(self, xid: int, lsn: int, ts_us: int, version: int) -> None:
        self.begin_record(f"{xid}:{lsn}", ts_us, version)

    def end(self, xid: int, lsn: int, ts_us: int, counters: TxnCounters, version: int) -> None:
        self.end_record(f"{xid}:{lsn}", ts_us, counters, version)


MESSAGE_KEY = struct("io.debezium.connector.postgresql.MessageKey",
                     [("prefix", primitive(STRING, optional=True))], version=1)


def message_collection(lsn: int) -> str:
    """The data collection a transactional message at `lsn` counts as in the transaction metadata
    (its `data_collection_order`, its END entry). Debezium 3.6.3 names each message by a new Java
    object's `toString()`, `LogicalDecodingMessageId@<identity hash>`, so every message is its own
    collection; the hash is arbitrary there and is the message's LSN in hexadecimal here (unique in
    the transaction, the same on every replay)."""
    return f"io.debezium.connector.postgresql.LogicalDecodingMessageMonitor$LogicalDecodingMessageId@{lsn:x}"


def message_value_schema(ctx: RecordContext) -> Schema:
    return _message_value_schema(ctx.binary_mode == "bytes")


@functools.cache
def _message_value_schema(as_bytes: bool) -> Schema:
    content = primitive(BYTES if as_bytes else STRING, optional=True)
    block = struct("io.debezium.connector.postgresql.Message", [
        ("prefix", primitive(STRING, optional=True)), ("content", content)], version=1)
    return struct("io.debezium.connector.postgresql.MessageValue", [
        ("op", primitive(STRING)), ("ts_ms", primitive(INT64, optional=True)), ("source", SOURCE_SCHEMA),
        ("transaction", TRANSACTION_BLOCK), ("message", block)], version=1)
