"""Records of the binlog connectors: their `RecordContext`, the `source` block's tail and schema change events.

`BinlogContext` is the shared `RecordContext` with the binlog connectors' settings; a column's
converter comes from the type system (`types.converter`). MySQL and MariaDB subclass it only for
the `source.connector` name and the source schema's name (`mysql/`, `mariadb/`). `BinlogMaker` is
the shared `RecordMaker` with the binlog `source` tail (`table`, `server_id`, `gtid`, `file`, `pos`,
`row`, `thread`, `query`), `db` per table as Debezium writes it, and the schema change records
(topic `<topic.prefix>`, key `{databaseName}`, value `source`, `ts_ms`, `databaseName`,
`schemaName`, `ddl`, `tableChanges`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, cast

import orjson

from headwater.config.properties import ConnectorConfig
from headwater.connectors.binlog import types
from headwater.connectors.binlog.images import ABSENT
from headwater.connectors.binlog.schema import Column, Table
from headwater.connectors.binlog.text_kernels import BINLOG_KERNELS
from headwater.connectors.common.filters import SystemTables, TableFilters, patterns
from headwater.connectors.common.records import (
    ColumnConverter,
    RecordContext,
    RecordMaker,
    TableRecords,
    table_records,
)
from headwater.connectors.common.source_info import Piece, source_schema, time_values
from headwater.events.connect import BOOLEAN, INT32, INT64, STRING, Schema, array, primitive, struct

SYSTEM = SystemTables(schemas=("mysql", "information_schema", "performance_schema", "sys"))


def source_tail_schema() -> list[tuple[str, Schema]]:
    return [
        ("table", primitive(STRING, optional=True)),
        ("server_id", primitive(INT64)),
        ("gtid", primitive(STRING, optional=True)),
        ("file", primitive(STRING)),
        ("pos", primitive(INT64)),
        ("row", primitive(INT32)),
        ("thread", primitive(INT64, optional=True)),
        ("query", primitive(STRING, optional=True)),
    ]


def binlog_source_schema(connector: str) -> Schema:
    """`io.debezium.connector.<connector>.Source`."""
    return source_schema(f"io.debezium.connector.{connector}.Source", source_tail_schema())


def table_filters(cfg: ConnectorConfig) -> TableFilters:
    """Debezium's database and table lists (`database.*.list` are the schema lists of the shared filters);
    the server's own databases are left out unless `table.ignore.builtin` is false."""
    system = SYSTEM if cfg["table.ignore.builtin"] else SystemTables()
    return TableFilters(patterns(cfg.get("database.include.list")), patterns(cfg.get("database.exclude.list")),
                        patterns(cfg.get("table.include.list")), patterns(cfg.get("table.exclude.list")), system)


@dataclass(frozen=True, kw_only=True)
class BinlogContext(RecordContext):
    """The configuration every binlog record needs (picklable)."""

    type_settings: Any  # types.TypeSettings
    include_query: bool
    include_schema_changes: bool
    # a column a partial row image does not carry: its converter's placeholder (images.py)
    unavailable: ClassVar[object] = ABSENT
    # the snapshot's text columns written column-wise (snapshot_rows.py); streamed runs have their own kernels
    text_kernels: ClassVar[Mapping[str, Callable[..., Any]]] = BINLOG_KERNELS

    @classmethod
    def from_config(cls, cfg: ConnectorConfig, schemas_enable: bool = False,
                    replace_null_with_default: bool = True, output: str = "json") -> BinlogContext:
        return cls(**cls.common_settings(cfg, table_filters(cfg), schemas_enable, replace_null_with_default,
                                         output),
                   type_settings=types.TypeSettings.from_config(cfg), include_query=cfg["include.query"],
                   include_schema_changes=cfg["include.schema.changes"])

    def converter(self, column: Column, collection: str) -> ColumnConverter | None:
        converted: ColumnConverter | None = types.converter(column, self.type_settings)
        return converted

    def text_kind(self, conv: Any, streaming: bool) -> tuple[str, int] | None:
        kind: tuple[str, int] | None = types.json_text_kind(conv, streaming)
        return kind


def records_of(ctx: BinlogContext, table: Table, streaming: bool) -> TableRecords:
    """The shared `TableRecords` of a tracked table with its columns as they are (a column's `length` may be
    None here, where the shared protocol reads an int: only masks and truncation read it, for character
    columns, which have one)."""
    return table_records(ctx, table, cast(Sequence[Any], table.columns), streaming)


SCHEMA_CHANGE_KEY_NAME = "SchemaChangeKey"
SCHEMA_CHANGE_VALUE_NAME = "SchemaChangeValue"


def _opt(type_: str) -> Schema:
    return primitive(type_, optional=True)


#: a `tableChanges` column and table, as Debezium's ConnectTableChangeSerializer declares them
CHANGE_COLUMN = struct("io.debezium.connector.schema.Column", [
    ("name", primitive(STRING)), ("jdbcType", primitive(INT32)), ("nativeType", _opt(INT32)),
    ("typeName", primitive(STRING)), ("typeExpression", _opt(STRING)), ("charsetName", _opt(STRING)),
    ("length", _opt(INT32)), ("scale", _opt(INT32)), ("position", primitive(INT32)),
    ("optional", _opt(BOOLEAN)), ("autoIncremented", _opt(BOOLEAN)), ("generated", _opt(BOOLEAN)),
    ("comment", _opt(STRING)), ("defaultValueExpression", _opt(STRING)),
    ("enumValues", array(primitive(STRING), optional=True)),
])
CHANGE_TABLE = struct("io.debezium.connector.schema.Table", [
    ("defaultCharsetName", _opt(STRING)), ("primaryKeyColumnNames", array(primitive(STRING), optional=True)),
    ("columns", array(CHANGE_COLUMN, optional=False)), ("comment", _opt(STRING)),
], optional=True)


def schema_change_schemas(connector: str, source: Schema) -> tuple[Schema, Schema]:
    """The key and value schemas of schema change records."""
    ns = f"io.debezium.connector.{connector}"
    key = struct(f"{ns}.{SCHEMA_CHANGE_KEY_NAME}", [("databaseName", primitive(STRING))], version=1)
    change = struct("io.debezium.connector.schema.Change", [
        ("type", primitive(STRING)),
        ("id", primitive(STRING)),
        ("table", CHANGE_TABLE),
    ])
    value = struct(f"{ns}.{SCHEMA_CHANGE_VALUE_NAME}", [
        ("source", source),
        ("ts_ms", primitive(INT64)),
        ("databaseName", primitive(STRING, optional=True)),
        ("schemaName", primitive(STRING, optional=True)),
        ("ddl", primitive(STRING, optional=True)),
        ("tableChanges", array(change, optional=False)),
    ], version=1)
    return key, value


class BinlogMaker(RecordMaker):
    """The shared `RecordMaker` with the binlog `source` tail and schema change records."""

    ctx: BinlogContext

    def __init__(self, ctx: BinlogContext):
        super().__init__(ctx)
        self.change_key, self.change_value = schema_change_schemas(ctx.connector, ctx.source_schema)

    def source_tail(self, t: TableRecords | None, schema: str | None, table: str | None) -> list[Piece]:
        name = t.table_name if t is not None else table
        return [b',"table":' + orjson.dumps(name) + b',"server_id":', "server_id", b',"gtid":', "gtid",
                b',"file":', "file", b',"pos":', "pos", b',"row":', "row", b',"thread":', "thread",
                b',"query":', "query", b"}"]

    def source_db(self, t: TableRecords | None) -> str | None:
        return t.schema_name if t is not None else None

    def source_bytes(self, t: TableRecords | None, snapshot: str, ts_us: int, *, server_id: int, gtid: str | None,
                     file: str, pos: int, row: int, thread: int | None, query: str | None,
                     database: str | None = None, table: str | None = None) -> bytes:
        """A `source` block (for a schema change record without a table, `database`/`table` name it)."""
        values = {"sequence": b"null", "server_id": b"%d" % server_id, "gtid": orjson.dumps(gtid),
                  "file": orjson.dumps(file), "pos": b"%d" % pos, "row": b"%d" % row,
                  "thread": orjson.dumps(thread), "query": orjson.dumps(query), **time_values(ts_us)}
        pieces = self.source_info.pieces(snapshot, self.source_tail(t, database, table),
                                         t.schema_name if t is not None else (database or ""))
        out = []
        for p in pieces:
            out.append(p if isinstance(p, bytes) else values[p])
        return b"".join(out)

    def snapshot_source(self, t: TableRecords, ts_us: int, marker: str, position: Mapping[str, Any]) -> bytes:
        """`position`: the snapshot's binlog `file` and `pos` (read under the snapshot's lock); an incremental
        snapshot's also the `server_id`, `gtid`, `row` and `thread` of the event its window closed at."""
        return self.source_bytes(t, marker, ts_us, server_id=position.get("server_id", 0), gtid=position.get("gtid"),
                                 file=position["file"], pos=position["pos"], row=position.get("row", 0),
                                 thread=position.get("thread"), query=None)

    def schema_change(self, database: str, ddl: str, changes: list[dict[str, Any]], source: bytes,
                      version: int, ts_us: int) -> None:
        """A schema change record on the `<topic.prefix>` topic."""
        ms, _, _ = self.clock()
        value = {"source": orjson.Fragment(source), "ts_ms": ms, "databaseName": database, "schemaName": None,
                 "ddl": ddl, "tableChanges": changes}
        self.out.record(self.ctx.topics.prefix, self.change_key, {"databaseName": database},
                        self.change_value, value, None, version, ts_us)
