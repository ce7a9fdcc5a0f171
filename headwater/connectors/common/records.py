"""Debezium's change records, for any connector: the parts every connector builds the same way.

`RecordContext` holds the configuration every record needs (picklable, shipped to executors); a
connector subclasses it with its own settings and supplies its column types (`converter`,
`text_kind`), its `source` schema and its `source` tail. `TableRecords` holds one table's schemas
and per-column converters for one column layout. `RecordMaker` appends records to a
`RecordOutput` (JSON text rows, or typed blocks, as `RecordContext.output` says): creates, updates
(a key change as a delete and a create), deletes and their tombstones (`emit`, `update`, `delete`,
`tombstone`), truncates, transaction BEGIN/END records (`TxnCounters` counts the events of a
transaction) and heartbeats; `take()` hands over the records made so far.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from headwater.config.properties import ConnectorConfig
from headwater.connectors.common.filters import TableFilters
from headwater.connectors.common.java import hashmap_order
from headwater.connectors.common.semantics import binary_encoder
from headwater.connectors.common.source_info import Piece, SourceInfo, SourceTemplate, time_values
from headwater.connectors.common.topics import TopicNames
from headwater.events.batch import Events
from headwater.events.columns import ColumnOptions, adjust_field_name, adjust_schema_name
from headwater.events.connect import Schema, struct
from headwater.events.envelope import (
    HEARTBEAT_KEY,
    HEARTBEAT_VALUE,
    TRANSACTION_KEY,
    TRANSACTION_VALUE,
    Serializer,
    envelope_schema,
)
from headwater.events.formats.json import JsonOptions
from headwater.events.output import OUTPUTS, JsonOutput, RecordOutput, TypedOutput

#: stands for "no value is unavailable" where a connector has no marker of its own
NEVER = object()


class Column(Protocol):
    """What record building reads of a column."""

    @property
    def name(self) -> str: ...

    @property
    def length(self) -> int: ...


class Table(Protocol):
    """What record building reads of a table: its names and its key columns."""

    @property
    def schema(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def key_columns(self) -> tuple[str, ...]: ...


class ColumnConverter(Protocol):
    """A column's Connect schema and its value converters (a connector's type mapping makes them)."""

    @property
    def schema(self) -> Schema:
        """The column's schema in snapshot records."""

    @property
    def stream_schema(self) -> Schema:
        """The column's schema in streamed records."""

    @property
    def from_text(self) -> Callable[[str], Any]: ...

    @property
    def from_stream_text(self) -> Callable[[str], Any]: ...

    @property
    def from_binary(self) -> Callable[[bytes], Any]: ...

    @property
    def from_stream_binary(self) -> Callable[[bytes], Any]: ...

    @property
    def fallback(self) -> Any:
        """The value of a required column that has none."""

    @property
    def null_value(self) -> Any:
        """What Kafka's JsonConverter writes for null (the field's default)."""

    @property
    def toast_placeholder(self) -> Any:
        """The value written for an unavailable value."""


@dataclass(frozen=True, kw_only=True)
class RecordContext(ABC):
    """The configuration every record needs (picklable). A connector subclasses it: its settings,
    its column types (`converter`, `text_kind`, `text_kernels`), its `connector` name, `source_schema`
    and `unavailable` marker."""

    connector: ClassVar[str]
    source_schema: ClassVar[Schema]
    unavailable: ClassVar[object] = NEVER  # the marker of a value the source did not send
    # column-wise JSON kernels by text kind (common/columnar.py); a kind without one goes row by row
    text_kernels: ClassVar[Mapping[str, Callable[..., Any]]] = {}

    topics: TopicNames
    dbname: str
    columns: ColumnOptions
    filters: TableFilters
    tombstones: bool
    skipped: frozenset[str]
    skip_unchanged: bool
    transaction_metadata: bool
    heartbeat_interval_ms: int
    heartbeat_query: str | None
    binary_mode: str
    # the records' form: "json" (JSON text, with the two JsonConverter settings below) or "typed"
    output: str = "json"
    schemas_enable: bool = False
    replace_null_with_default: bool = True
    batch_rows: int = 10_000

    def __post_init__(self) -> None:
        if self.output not in OUTPUTS:
            raise ValueError(f"output must be one of {', '.join(OUTPUTS)}, not {self.output!r}")

    @staticmethod
    def common_settings(cfg: ConnectorConfig, filters: TableFilters, schemas_enable: bool,
                        replace_null_with_default: bool, output: str = "json") -> dict[str, Any]:
        """The fields of this class from Debezium's common properties (for a subclass's constructor)."""
        skipped = cfg["skipped.operations"] or []
        return dict(
            topics=TopicNames.from_config(cfg), dbname=cfg.get("database.dbname") or "",
            columns=ColumnOptions.from_config(cfg), filters=filters,
            tombstones=cfg["tombstones.on.delete"],
            skipped=frozenset(s for s in skipped if s != "none"),
            skip_unchanged=cfg["skip.messages.without.change"],
            transaction_metadata=cfg["provide.transaction.metadata"],
            heartbeat_interval_ms=cfg["heartbeat.interval.ms"],
            heartbeat_query=cfg.get("heartbeat.action.query"),
            binary_mode=cfg["binary.handling.mode"],
            schemas_enable=schemas_enable,
            replace_null_with_default=replace_null_with_default,
            output=output,
        )

    @property
    def json_options(self) -> JsonOptions:
        return JsonOptions(self.schemas_enable, self.replace_null_with_default)

    @property
    def fills_defaults(self) -> bool:
        """Whether a null is written as its field's default when the record is built: JSON output with
        `replace.null.with.default` (typed output keeps the null; its JSON format writes the default)."""
        return self.output == "json" and self.replace_null_with_default

    def new_output(self) -> RecordOutput:
        """An empty output of this context's kind."""
        return JsonOutput(self.json_options) if self.output == "json" else TypedOutput()

    @abstractmethod
    def converter(self, column: Any, collection: str) -> ColumnConverter | None:
        """The converter of `column` of `collection` ('schema.table'), None when Debezium leaves the
        column out of its records."""

    def text_kind(self, conv: Any, streaming: bool) -> tuple[str, int] | None:
        """How the column's text maps to its JSON without a Python object (see common/columnar.py),
        None when it goes through the converter."""
        return None

    @property
    def prefix(self) -> str:
        return self.topics.prefix

    @property
    def delimiter(self) -> str:
        return self.topics.delimiter

    def topic(self, schema: str, table: str) -> str:
        return self.topics.data(schema, table)

    def encode_bytes(self, data: bytes) -> str:
        """Binary data as `binary.handling.mode` writes it in JSON."""
        return binary_encoder(self.binary_mode)(data)


class ValueColumn:
    """One column of a struct: where it is in the tuple and how to convert it."""

    __slots__ = ("from_binary", "from_text", "index", "maskers", "missing", "name", "null_value", "optional",
                 "text_kind", "toast")

    def __init__(self, index: int, name: str, conv: ColumnConverter, maskers: Sequence[Callable[[Any], Any]],
                 replace_null: bool, streaming: bool, text_kind: tuple[str, int] | None = None):
        self.index = index
        self.name = name
        self.from_text = conv.from_stream_text if streaming else conv.from_text
        self.from_binary = conv.from_stream_binary if streaming else conv.from_binary
        self.maskers = tuple(maskers)
        self.optional = conv.schema.optional
        self.missing = conv.fallback  # a required column without a value (e.g. a delete's old key tuple)
        # Kafka's JsonConverter writes a field's default in place of null (replace.null.with.default)
        self.null_value = conv.null_value if replace_null else None
        self.toast = conv.toast_placeholder
        # this column's JSON is built column-wise (see common/columnar.py) when the kind allows
        self.text_kind = None if self.maskers else text_kind


def compile_fill(columns: Sequence[ValueColumn], unavailable: object = NEVER) -> Callable[[Sequence[Any]], dict]:
    """A function making a struct payload from a tuple of values: each value converted (text by
    `from_text`, anything else by `from_binary`), absent or null values replaced by Debezium's
    fill-ins (a default, or the type's fallback for a NOT NULL column), an `unavailable` value by
    the column's placeholder, masks applied. Generated as straight-line code (no loop, no attribute
    lookups), once per layout."""
    ns: dict[str, Any] = {"TOAST": unavailable, "str": str}
    lines = ["def fill(values):"]
    names = []
    for i, c in enumerate(columns):
        ns[f"N{i}"] = c.null_value if c.optional else c.missing
        ns[f"T{i}"], ns[f"F{i}"], ns[f"B{i}"] = c.toast, c.from_text, c.from_binary
        lines += [f"    v = values[{c.index}]",
                  "    if v is None:", f"        v = N{i}",
                  "    elif v is TOAST:", f"        v = T{i}",
                  "    elif v.__class__ is str:", f"        v = F{i}(v)",
                  "    else:", f"        v = B{i}(v)"]
        for j, m in enumerate(c.maskers):
            ns[f"M{i}_{j}"] = m
            lines.append(f"    v = M{i}_{j}(v)")
        lines.append(f"    r{i} = v")
        names.append(f"{c.name!r}: r{i}")
    lines.append("    return {" + ", ".join(names) + "}")
    exec("\n".join(lines), ns)  # noqa: S102 - code built from our own column list, names quoted by repr
    fill: Callable[[Sequence[Any]], dict] = ns["fill"]
    return fill


class TableRecords:
    """The schemas and converters of one table's records, for one column layout."""

    def __init__(self, ctx: RecordContext, table: Table, layout: Sequence[Column], streaming: bool):
        self.ctx = ctx
        self.table = table
        self.schema_name, self.table_name = table.schema, table.name
        self.topic = ctx.topic(table.schema, table.name)
        self.collection = f"{table.schema}.{table.name}"
        opts = ctx.columns
        base = adjust_schema_name(self.topic, opts.schema_adjust)
        replace_null = ctx.fills_defaults
        value_fields: list[tuple[str, Schema]] = []
        self.columns: list[ValueColumn] = []
        key_names = opts.key_columns_for(self.collection) or table.key_columns
        keyed: dict[str, tuple[str, Schema, ValueColumn]] = {}
        for idx, col in enumerate(layout):
            conv = ctx.converter(col, self.collection)
            if conv is None:
                continue
            fq = f"{table.schema}.{table.name}.{col.name}"
            fname = adjust_field_name(col.name, opts.field_adjust)
            schema = conv.stream_schema if streaming else conv.schema
            kind = ctx.text_kind(conv, streaming)
            if col.name in key_names:
                # the key's fields carry no propagated source-type parameters
                keyed[col.name] = (fname, schema.without_parameters("__debezium.source.").with_optional(False),
                                   ValueColumn(idx, fname, conv, (), replace_null, streaming, kind))
            if not opts.included(fq):
                continue
            maskers, params = opts.maskers(fq, col.length)
            if params:
                schema = schema.with_parameters(params)
            self.columns.append(ValueColumn(idx, fname, conv, maskers, replace_null, streaming, kind))
            value_fields.append((fname, schema))
        ordered = [keyed[n] for n in key_names if n in keyed]
        self.key_columns = [c for _, _, c in ordered]
        self.key_schema = struct(f"{base}.Key", [(f, s) for f, s, _ in ordered]) if ordered else None
        self.value_schema = struct(f"{base}.Value", value_fields, optional=True)
        self.envelope = envelope_schema(f"{base}.Envelope", self.value_schema, ctx.source_schema)
        # the JSON output's serializers, for records built column-wise (common/columnar.py)
        self.key_out = Serializer(self.key_schema, ctx.schemas_enable)
        self.value_out = Serializer(self.envelope, ctx.schemas_enable)

        self.row = compile_fill(self.columns, ctx.unavailable)
        self._key = compile_fill(self.key_columns, ctx.unavailable) if self.key_columns else None

    def key(self, values: Sequence[Any]) -> dict[str, Any] | None:
        """The key, from the same filled-in values as the row (Debezium builds it from them)."""
        if self._key is None:
            return None
        return self._key(values)


_TABLES: dict[tuple, TableRecords] = {}


def table_records(ctx: RecordContext, table: Table, layout: Sequence[Column], streaming: bool) -> TableRecords:
    """`TableRecords`, built once per process for a table, layout and configuration (building them
    compiles every column's converter; a Spark worker decodes many slices of the same tables)."""
    key = (ctx, table, tuple(layout), streaming)
    te = _TABLES.get(key)
    if te is None:
        if len(_TABLES) > 256:
            _TABLES.clear()
        te = _TABLES[key] = TableRecords(ctx, table, layout, streaming)
    return te


def now_ts() -> tuple[int, int, int]:
    ns = time.time_ns()
    return ns // 1_000_000, ns // 1_000, ns


@dataclass
class TxnCounters:
    """Transaction metadata counters (Debezium's total_order / data_collection_order)."""

    total: int = 0
    per_collection: dict[str, int] = field(default_factory=dict)

    def next(self, collection: str) -> tuple[int, int]:
        self.total += 1
        n = self.per_collection.get(collection, 0) + 1
        self.per_collection[collection] = n
        return self.total, n

    def in_java_order(self) -> list[tuple[str, int]]:
        """The per-collection counts in the order Debezium writes them: the iteration order of the
        Java `HashMap` it keeps them in (by bucket of the name's hash, then insertion order)."""
        items = list(self.per_collection.items())
        return [items[i] for i in hashmap_order([name for name, _ in items])]

    def block(self, collection: str, tid: str) -> dict[str, Any]:
        """The `transaction` block of the next event of `collection` in transaction `tid`."""
        total, per = self.next(collection)
        return {"id": tid, "total_order": total, "data_collection_order": per}

    def to_json(self) -> dict:
        return {"total": self.total, "per_collection": dict(self.per_collection)}

    @classmethod
    def from_json(cls, data: dict | None) -> TxnCounters:
        if not data:
            return cls()
        return cls(int(data.get("total", 0)), dict(data.get("per_collection", {})))


class Clock:
    """Processing time for the envelope's ts_ms/ts_us/ts_ns, read once per 256 events (a wall-clock
    field: Debezium reads it per event; to the millisecond the difference does not show)."""

    __slots__ = ("n", "now")

    def __init__(self) -> None:
        self.n = 0
        self.now = (0, 0, 0)

    def __call__(self) -> tuple[int, int, int]:
        if self.n & 255 == 0:
            self.now = now_ts()
        self.n += 1
        return self.now


class RecordMaker(ABC):
    """Appends Debezium records to a `RecordOutput` (by default a new one of the context's kind;
    `take()` hands over the records so far). A connector's subclass says what its `source` tail
    holds (`source_tail`) and fills the block's open slots."""

    def __init__(self, ctx: RecordContext, out: RecordOutput | None = None):
        self.ctx = ctx
        self.out = out if out is not None else ctx.new_output()
        self.clock = Clock()
        self.source_info = SourceInfo(ctx.connector, ctx.prefix, ctx.dbname,
                                      streamed_null=ctx.output == "json" and not ctx.replace_null_with_default)

    # ---- source block
    @abstractmethod
    def source_tail(self, t: TableRecords | None, schema: str | None, table: str | None) -> list[Piece]:
        """The connector's fields of the `source` block as pieces (constant JSON and slot names)."""

    def source_template(self, t: TableRecords | None, snapshot: str, schema: str | None = None,
                        table: str | None = None) -> list[Piece]:
        """The `source` block's JSON as constant pieces between the names of its open slots
        (`ts_ms`, `sequence`, `ts_us`, `ts_ns`, then the connector's), in order."""
        return self.source_info.pieces(snapshot, self.source_tail(t, schema, table), self.source_db(t))

    def source_db(self, t: TableRecords | None) -> str | None:
        """The `source.db` of `t`'s records, None for the connector's database (`database.dbname`)."""
        return None

    @abstractmethod
    def snapshot_source(self, t: TableRecords, ts_us: int, marker: str, position: Mapping[str, Any]) -> bytes:
        """The JSON `source` block of a snapshot row of `t` with the `source.snapshot` `marker`, at
        the snapshot's time and (connector-specific) position."""

    def fixed_source(self, t: TableRecords | None, snapshot: str, ts_us: int, values: dict[str, bytes],
                     schema: str | None = None, table: str | None = None) -> SourceTemplate:
        """The `source` block with the time slots (from `ts_us`) and `values` filled in."""
        return SourceTemplate(self.source_template(t, snapshot, schema, table), {**time_values(ts_us), **values})

    def take(self) -> Events:
        """The records made since the last `take`, as one batch."""
        return self.out.take()

    # ---- data records
    def envelope(self, op: str, before: Any, after: Any, source: Any, transaction: Any) -> dict[str, Any]:
        ms, us, ns = self.clock()
        return {"before": before, "after": after, "source": source, "transaction": transaction, "op": op,
                "ts_ms": ms, "ts_us": us, "ts_ns": ns}

    def emit(self, t: TableRecords, op: str, key: Any, before: Any, after: Any, source: Any, transaction: Any,
             version: int, ts_us: int, headers: list[tuple[str, Any]] | None = None) -> None:
        """A data record; `headers` hold keys (`__debezium.newkey`, `__debezium.oldkey`)."""
        self.out.record(t.topic, t.key_schema, key, t.envelope, self.envelope(op, before, after, source, transaction),
                        op, version, ts_us, headers)

    def update(self, t: TableRecords, old: Sequence[Any] | None, new: Sequence[Any], source: Any,
               transaction: Callable[[], Any], version: int, ts_us: int) -> None:
        """An update of the row `old` (None when the source did not send it) to `new`: an `u` record (none
        with `skip.messages.without.change` when nothing changed), or, when the key changed, as Debezium
        writes it: a delete of the old key (header `__debezium.newkey`), its tombstone, and a create of
        the new key (header `__debezium.oldkey`). `transaction` makes each record's transaction block."""
        key_new = t.key(new)
        key_old = t.key(old) if old is not None else key_new
        if old is not None and t.key_schema is not None and key_old != key_new:
            self.emit(t, "d", key_old, t.row(old), None, source, transaction(), version, ts_us,
                      headers=[("__debezium.newkey", key_new)])
            if self.ctx.tombstones:
                self.tombstone(t, key_old, version, ts_us)
            self.emit(t, "c", key_new, None, t.row(new), source, transaction(), version, ts_us,
                      headers=[("__debezium.oldkey", key_old)])
            return
        before = t.row(old) if old is not None else None
        after = t.row(new)
        if self.ctx.skip_unchanged and before is not None and before == after:
            return
        self.emit(t, "u", key_new, before, after, source, transaction(), version, ts_us)

    def delete(self, t: TableRecords, old: Sequence[Any], source: Any, transaction: Any, version: int,
               ts_us: int) -> None:
        """A delete of the row `old`, and its tombstone (`tombstones.on.delete`)."""
        key = t.key(old)
        self.emit(t, "d", key, t.row(old), None, source, transaction, version, ts_us)
        if self.ctx.tombstones:
            self.tombstone(t, key, version, ts_us)

    def tombstone(self, t: TableRecords, key: Any, version: int, ts_us: int) -> None:
        self.out.record(t.topic, t.key_schema, key, t.envelope, None, None, version, ts_us)

    def truncate(self, t: TableRecords, source: Any, transaction: Any, version: int, ts_us: int) -> None:
        """A truncate record: no key, no before or after image."""
        self.out.record(t.topic, t.key_schema, None, t.envelope, self.envelope("t", None, None, source, transaction),
                        "t", version, ts_us)

    # ---- transaction metadata
    def begin_record(self, tid: str, ts_us: int, version: int) -> None:
        """A transaction's BEGIN record (`tid`: the connector's transaction id)."""
        self.out.record(self.ctx.topics.transaction(), TRANSACTION_KEY, {"id": tid}, TRANSACTION_VALUE,
                        {"status": "BEGIN", "id": tid, "event_count": None, "data_collections": None,
                         "ts_ms": ts_us // 1000}, None, version, ts_us)

    def end_record(self, tid: str, ts_us: int, counters: TxnCounters, version: int) -> None:
        """A transaction's END record, with its event counts."""
        collections = [{"data_collection": k, "event_count": v} for k, v in counters.in_java_order()]
        self.out.record(self.ctx.topics.transaction(), TRANSACTION_KEY, {"id": tid}, TRANSACTION_VALUE,
                        {"status": "END", "id": tid, "event_count": counters.total,
                         "data_collections": collections, "ts_ms": ts_us // 1000}, None, version, ts_us)

    def heartbeat(self, ts_ms: int, version: int) -> None:
        self.out.record(self.ctx.topics.heartbeat(), HEARTBEAT_KEY, {"serverName": self.ctx.prefix},
                        HEARTBEAT_VALUE, {"ts_ms": ts_ms}, None, version, ts_ms * 1000)
