"""The change-log connector's tables, column types and records, on the shared record layer.

`read_tables` reads the captured tables' columns and primary keys from information_schema (plain
SQL). `ChangelogContext` is the connector's `RecordContext`: it maps a column's SQL type to a
`Converter` (int, bigint, text, numeric with a scale, boolean, timestamp; other types are left out
of the records, as Debezium leaves out types it does not know). `ChangelogMaker` is the shared
`RecordMaker` with this connector's `source` tail: `schema`, `table`, `seq` (the log row) and
`txId`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar

import orjson

from headwater.config.properties import ConnectorConfig
from headwater.connectors.common import java, semantics
from headwater.connectors.common.filters import SystemTables, TableFilters
from headwater.connectors.common.records import RecordContext, RecordMaker, TableRecords
from headwater.connectors.common.source_info import Piece, source_schema
from headwater.events.connect import BOOLEAN, INT32, INT64, STRING, Schema, primitive

SOURCE_SCHEMA = source_schema("headwater.connector.changelog.Source", [
    ("schema", primitive(STRING)),
    ("table", primitive(STRING)),
    ("seq", primitive(INT64, optional=True)),
    ("txId", primitive(INT64, optional=True)),
])

SYSTEM = SystemTables(schemas=("pg_catalog", "information_schema"), schema_prefixes=("pg_toast", "pg_temp"))
EPOCH = dt.datetime(1970, 1, 1)


@dataclass(frozen=True)
class Column:
    name: str
    type: str  # information_schema.columns.data_type
    nullable: bool
    scale: int | None = None
    precision: int | None = None  # numeric precision, or a timestamp's fraction digits
    length: int = -1


@dataclass(frozen=True)
class Table:
    schema: str
    name: str
    columns: tuple[Column, ...]
    key_columns: tuple[str, ...]

    @property
    def collection(self) -> str:
        return f"{self.schema}.{self.name}"


def read_tables(cur: Any, filters: TableFilters, log_table: str) -> list[Table]:
    """The base tables `filters` capture (never the log table itself), with their columns and keys."""
    cur.execute("SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE'"
                " ORDER BY 1, 2")
    names = [(s, t) for s, t in cur.fetchall() if filters.includes(s, t) and f"{s}.{t}" != log_table]
    tables = []
    for schema, name in names:
        cur.execute("SELECT column_name, data_type, is_nullable = 'YES', numeric_scale,"
                    " coalesce(numeric_precision, datetime_precision) FROM information_schema.columns"
                    " WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position", (schema, name))
        columns = tuple(Column(*row) for row in cur.fetchall())
        cur.execute("SELECT k.column_name FROM information_schema.table_constraints c"
                    " JOIN information_schema.key_column_usage k USING (constraint_schema, constraint_name)"
                    " WHERE c.constraint_type = 'PRIMARY KEY' AND c.table_schema = %s AND c.table_name = %s"
                    " ORDER BY k.ordinal_position", (schema, name))
        tables.append(Table(schema, name, columns, tuple(r[0] for r in cur.fetchall())))
    return tables


@dataclass(frozen=True)
class Converter:
    """A column's Connect schema and value conversion (the shared `ColumnConverter`): `convert`
    takes what psycopg2 reads in a snapshot or JSON holds in the log, `parse` the text form."""

    schema: Schema
    convert: Callable[[Any], Any]
    parse: Callable[[str], Any] = field(default=str)
    fallback: Any = None  # a row image in the log is whole: a required column always has a value
    null_value: Any = None  # no column default is written for null
    toast_placeholder: Any = None  # a trigger sees every value

    @property
    def stream_schema(self) -> Schema:
        return self.schema

    @property
    def from_text(self) -> Callable[[str], Any]:
        return lambda text: self.convert(self.parse(text))

    @property
    def from_stream_text(self) -> Callable[[str], Any]:
        return self.from_text

    @property
    def from_binary(self) -> Callable[[Any], Any]:
        return self.convert

    @property
    def from_stream_binary(self) -> Callable[[Any], Any]:
        return self.convert


def _decimal(mode: str, scale: int) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        d = Decimal(value).quantize(Decimal(1).scaleb(-scale))
        if mode == "double":
            return float(d)
        if mode == "string":
            return format(d, "f")
        return semantics.b64(java.to_byte_array(int(d.scaleb(scale))))
    return convert


def _timestamp(unit: str) -> Callable[[Any], Any]:
    divisor = {"ms": 1000, "us": 1, "ns": 1}[unit]

    def convert(value: dt.datetime) -> Any:
        micros = (value - EPOCH) // dt.timedelta(microseconds=1)
        return micros * 1000 if unit == "ns" else micros // divisor
    return convert


@dataclass(frozen=True, kw_only=True)
class ChangelogContext(RecordContext):
    """The configuration every change-log record needs (picklable)."""

    connector: ClassVar[str] = "changelog"
    source_schema: ClassVar[Schema] = SOURCE_SCHEMA

    time_mode: str
    decimal_mode: str

    @classmethod
    def from_config(cls, cfg: ConnectorConfig, schemas_enable: bool = False,
                    replace_null_with_default: bool = True, output: str = "json") -> ChangelogContext:
        return cls(**cls.common_settings(cfg, TableFilters.from_config(cfg, SYSTEM), schemas_enable,
                                         replace_null_with_default, output),
                   time_mode=cfg["time.precision.mode"], decimal_mode=cfg["decimal.handling.mode"])

    def converter(self, column: Column, collection: str) -> Converter | None:
        t, opt = column.type, column.nullable
        if t in ("integer", "smallint"):
            return Converter(Schema(INT32, optional=opt), int, int)
        if t == "bigint":
            return Converter(Schema(INT64, optional=opt), int, int)
        if t in ("text", "character varying"):
            return Converter(Schema(STRING, optional=opt), str)
        if t == "boolean":
            return Converter(Schema(BOOLEAN, optional=opt), bool, lambda s: s in ("t", "true"))
        if t == "numeric" and column.scale is not None:
            schema = semantics.decimal_mode_schema(self.decimal_mode, column.scale, column.precision)
            return Converter(schema.with_optional(opt), _decimal(self.decimal_mode, column.scale), Decimal)
        if t == "timestamp without time zone":  # (time.precision.mode=isostring is refused)
            unit = semantics.timestamp_unit(self.time_mode, column.precision)
            schema = semantics.timestamp_schema(self.time_mode, column.precision).with_optional(opt)
            return Converter(schema, _timestamp(unit), dt.datetime.fromisoformat)
        return None  # a type this connector does not map: left out, as Debezium leaves out unknown types


class ChangelogMaker(RecordMaker):
    """The shared `RecordMaker` with the change log's `source` tail."""

    def source_tail(self, t: TableRecords | None, schema: str | None, table: str | None) -> list[Piece]:
        assert t is not None, "every change-log record belongs to a table"
        return [b',"schema":' + orjson.dumps(t.schema_name) + b',"table":' + orjson.dumps(t.table_name)
                + b',"seq":', "seq", b',"txId":', "txId", b"}"]

    def source_bytes(self, t: TableRecords, ts_us: int, snapshot: str, seq: int | None, txid: int | None) -> bytes:
        values = {"sequence": b"null", "seq": orjson.dumps(seq), "txId": orjson.dumps(txid)}
        return self.fixed_source(t, snapshot, ts_us, values).render()

    def source(self, t: TableRecords, ts_us: int, snapshot: str, seq: int | None,
               txid: int | None) -> orjson.Fragment:
        return orjson.Fragment(self.source_bytes(t, ts_us, snapshot, seq, txid))

    def snapshot_source(self, t: TableRecords, ts_us: int, marker: str, position: Mapping[str, Any]) -> bytes:
        """`position`: the snapshot's `seq` (the last log row it includes)."""
        return self.source_bytes(t, ts_us, marker, position["seq"], None)
