"""PostgreSQL change events exactly as Debezium's PostgreSQL connector writes them.

`EventContext` holds what every event needs from the configuration (picklable, shipped to
executors). `TableEvents` holds one table's schemas and per-column converters, built once per
table and relation layout. `RecordMaker` turns snapshot rows and decoded pgoutput messages into
rows of an `EventBatch`: creates, updates (a primary-key change becomes delete + tombstone +
create with the `__debezium.newkey`/`__debezium.oldkey` headers), deletes with tombstones,
truncates, logical messages, transaction BEGIN/END events and heartbeats.
"""

from __future__ import annotations

import base64
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from headwater import __version__
from headwater.config.properties import ConnectorConfig
from headwater.connectors.common.topics import TopicNames
from headwater.connectors.postgres import pgoutput
from headwater.connectors.postgres.catalog import ColumnInfo, TableFilters, TableSchema
from headwater.connectors.postgres.pgoutput import UNCHANGED_TOAST
from headwater.connectors.postgres.types import TypeSettings, column_converter, json_text_kind
from headwater.events.batch import EventBatch
from headwater.events.columns import ColumnOptions, adjust_field_name, adjust_schema_name
from headwater.events.connect import BYTES, INT64, STRING, Schema, primitive, struct
from headwater.events.envelope import (
    HEARTBEAT_KEY,
    HEARTBEAT_VALUE,
    TRANSACTION_BLOCK,
    TRANSACTION_KEY,
    TRANSACTION_VALUE,
    Serializer,
    envelope_schema,
)

SOURCE_VERSION = f"headwater-{__version__}"

SOURCE_SCHEMA = struct("io.debezium.connector.postgresql.Source", [
    ("version", primitive(STRING)),
    ("connector", primitive(STRING)),
    ("name", primitive(STRING)),
    ("ts_ms", primitive(INT64)),
    ("snapshot", Schema(STRING, optional=True, name="io.debezium.data.Enum", version=1,
                        parameters=(("allowed", "true,first,first_in_data_collection,last_in_data_collection,"
                                                "last,false,incremental"),), default="false")),
    ("db", primitive(STRING)),
    ("sequence", primitive(STRING, optional=True)),
    ("ts_us", primitive(INT64, optional=True)),
    ("ts_ns", primitive(INT64, optional=True)),
    ("schema", primitive(STRING)),
    ("table", primitive(STRING)),
    ("txId", primitive(INT64, optional=True)),
    ("lsn", primitive(INT64, optional=True)),
    ("xmin", primitive(INT64, optional=True)),
    ("origin", primitive(STRING, optional=True)),
    ("origin_lsn", primitive(INT64, optional=True)),
], version=1)

NEWKEY, OLDKEY = "__debezium.newkey", "__debezium.oldkey"


@dataclass(frozen=True)
class EventContext:
    """The configuration every event needs (picklable)."""

    topics: TopicNames
    dbname: str
    types: TypeSettings
    columns: ColumnOptions
    filters: TableFilters
    tombstones: bool
    skipped: frozenset[str]
    skip_unchanged: bool
    transaction_metadata: bool
    heartbeat_interval_ms: int
    heartbeat_query: str | None
    message_include: tuple[re.Pattern[str], ...]
    message_exclude: tuple[re.Pattern[str], ...]
    binary_mode: str
    schemas_enable: bool = False
    replace_null_with_default: bool = True
    batch_rows: int = 10_000

    @classmethod
    def from_config(cls, cfg: ConnectorConfig, schemas_enable: bool = False,
                    replace_null_with_default: bool = True) -> EventContext:
        skipped = cfg["skipped.operations"] or []
        return cls(
            topics=TopicNames.from_config(cfg), dbname=cfg["database.dbname"],
            types=TypeSettings.from_config(cfg), columns=ColumnOptions.from_config(cfg),
            filters=TableFilters.from_config(cfg),
            tombstones=cfg["tombstones.on.delete"],
            skipped=frozenset(s for s in skipped if s != "none"),
            skip_unchanged=cfg["skip.messages.without.change"],
            transaction_metadata=cfg["provide.transaction.metadata"],
            heartbeat_interval_ms=cfg["heartbeat.interval.ms"],
            heartbeat_query=cfg.get("heartbeat.action.query"),
            message_include=tuple(re.compile(p) for p in cfg.get("message.prefix.include.list") or ()),
            message_exclude=tuple(re.compile(p) for p in cfg.get("message.prefix.exclude.list") or ()),
            binary_mode=cfg["binary.handling.mode"],
            schemas_enable=schemas_enable,
            replace_null_with_default=replace_null_with_default,
        )

    def with_serialization(self, schemas_enable: bool, replace_null_with_default: bool) -> EventContext:
        from dataclasses import replace

        return replace(self, schemas_enable=schemas_enable, replace_null_with_default=replace_null_with_default)

    @property
    def prefix(self) -> str:
        return self.topics.prefix

    @property
    def delimiter(self) -> str:
        return self.topics.delimiter

    def topic(self, schema: str, table: str) -> str:
        return self.topics.data(schema, table)

    def message_included(self, prefix: str) -> bool:
        if self.message_include:
            return any(p.fullmatch(prefix) for p in self.message_include)
        return not any(p.fullmatch(prefix) for p in self.message_exclude)

    def encode_bytes(self, data: bytes) -> str:
        mode = self.binary_mode
        if mode == "hex":
            return data.hex()
        if mode == "base64-url-safe":
            return base64.urlsafe_b64encode(data).decode()
        return base64.b64encode(data).decode()  # bytes (JsonConverter's base64) and base64


class ValueColumn:
    """One column of a struct: where it is in the tuple and how to convert it."""

    __slots__ = ("index", "name", "from_text", "from_binary", "maskers", "optional", "missing",
                 "null_value", "toast", "text_kind")

    def __init__(self, index: int, name: str, conv, maskers, replace_null: bool, streaming: bool):
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
        # this column's JSON is built column-wise (see columnar.py) when the kind allows
        self.text_kind = None if self.maskers else json_text_kind(conv, streaming)


def compile_fill(columns: Sequence[ValueColumn]):
    """A function making a struct payload from a tuple of values: each value converted, absent or null
    values replaced by Debezium's fill-ins (a default, or the type's fallback for a NOT NULL column),
    masks applied. Generated as straight-line code (no loop, no attribute lookups), once per layout."""
    ns: dict[str, Any] = {"TOAST": UNCHANGED_TOAST, "str": str}
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
    return ns["fill"]


class TableEvents:
    """Schemas and converters of one table, for one column layout (catalog or RELATION order)."""

    def __init__(self, ctx: EventContext, table: TableSchema, layout: Sequence[ColumnInfo], streaming: bool):
        self.ctx = ctx
        self.table = table
        self.schema_name, self.table_name = table.schema, table.name
        self.topic = ctx.topic(table.schema, table.name)
        self.collection = f"{table.schema}.{table.name}"
        opts = ctx.columns
        base = adjust_schema_name(self.topic, opts.schema_adjust)
        replace_null = ctx.replace_null_with_default
        value_fields: list[tuple[str, Schema]] = []
        self.columns: list[ValueColumn] = []
        key_names = opts.key_columns_for(self.collection) or table.key_columns
        keyed: dict[str, tuple[str, Schema, ValueColumn]] = {}
        for idx, col in enumerate(layout):
            conv = column_converter(col, ctx.types, self.collection)
            if conv is None:
                continue
            fq = f"{table.schema}.{table.name}.{col.name}"
            fname = adjust_field_name(col.name, opts.field_adjust)
            schema = conv.stream_schema if streaming else conv.schema
            if col.name in key_names:
                # the key's fields carry no propagated source-type parameters
                keyed[col.name] = (fname, schema.without_parameters("__debezium.source.").with_optional(False),
                                   ValueColumn(idx, fname, conv, (), replace_null, streaming))
            if not opts.included(fq):
                continue
            maskers, params = opts.maskers(fq, col.length)
            if params:
                schema = schema.with_parameters(params)
            self.columns.append(ValueColumn(idx, fname, conv, maskers, replace_null, streaming))
            value_fields.append((fname, schema))
        ordered = [keyed[n] for n in key_names if n in keyed]
        self.key_columns = [c for _, _, c in ordered]
        self.key_schema = struct(f"{base}.Key", [(f, s) for f, s, _ in ordered]) if ordered else None
        self.value_schema = struct(f"{base}.Value", value_fields, optional=True)
        self.envelope = envelope_schema(f"{base}.Envelope", self.value_schema, SOURCE_SCHEMA)
        self.key_out = Serializer(self.key_schema, ctx.schemas_enable)
        self.value_out = Serializer(self.envelope, ctx.schemas_enable)

        self.row = compile_fill(self.columns)
        self._key = compile_fill(self.key_columns) if self.key_columns else None

    def key(self, values: Sequence[Any]) -> dict[str, Any] | None:
        """The key, from the same filled-in values as the row (Debezium builds it from them)."""
        if self._key is None:
            return None
        return self._key(values)

    def key_text(self, key: dict[str, Any] | None) -> str | None:
        return None if key is None else self.key_out.dumps(key)


_TABLES: dict[tuple, TableEvents] = {}


def table_events(ctx: EventContext, table: TableSchema, layout: Sequence[ColumnInfo], streaming: bool) -> TableEvents:
    """`TableEvents`, built once per process for a table, layout and configuration (building them
    compiles every column's converter; a Spark worker decodes many slices of the same tables)."""
    key = (ctx, table, tuple(layout), streaming)
    te = _TABLES.get(key)
    if te is None:
        if len(_TABLES) > 256:
            _TABLES.clear()
        te = _TABLES[key] = TableEvents(ctx, table, layout, streaming)
    return te


def layout_index(layout: Sequence[ColumnInfo], name: str) -> int:
    for i, c in enumerate(layout):
        if c.name == name:
            return i
    raise KeyError(name)


def now_ts() -> tuple[int, int, int]:
    ns = time.time_ns()
    return ns // 1_000_000, ns // 1_000, ns


def _java_bucket(name: str, capacity: int) -> int:
    """The bucket of a Java `HashMap` of `capacity` buckets that the string `name` falls in."""
    h = 0
    units = name.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return (h ^ (h >> 16)) & (capacity - 1)


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
        capacity = 16
        while len(self.per_collection) > capacity * 3 // 4:
            capacity *= 2
        items = list(self.per_collection.items())
        order = sorted(range(len(items)), key=lambda i: (_java_bucket(items[i][0], capacity), i))
        return [items[i] for i in order]

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


class RecordMaker:
    """Appends Debezium records to an `EventBatch`."""

    def __init__(self, ctx: EventContext, out: EventBatch):
        self.ctx = ctx
        self.out = out
        self.clock = Clock()
        self.txn_key = Serializer(TRANSACTION_KEY, ctx.schemas_enable)
        self.txn_value = Serializer(TRANSACTION_VALUE, ctx.schemas_enable)
        self._head = (b'{"version":' + orjson.dumps(SOURCE_VERSION) + b',"connector":"postgresql","name":'
                      + orjson.dumps(ctx.prefix) + b',"ts_ms":')
        self._db = orjson.dumps(ctx.dbname)
        self._src_key: tuple | None = None
        self._src_parts = (b"", b"", b"")

    # ---- source block
    def source(self, t: TableEvents | None, ts_us: int, snapshot: str, sequence: str | None,
               txid: int | None, lsn: int | None, schema: str | None = None,
               table: str | None = None) -> orjson.Fragment:
        """The `source` block, serialized from a template that only changes with the transaction."""
        return orjson.Fragment(self.source_bytes(t, ts_us, snapshot, sequence, txid, lsn, schema, table))

    def source_template(self, t: TableEvents | None, snapshot: str, schema: str | None = None,
                        table: str | None = None) -> list[bytes | str]:
        """The `source` block's JSON as constant pieces between the names of its per-event fields
        ("ts_ms", "sequence" (a JSON string), "ts_us", "ts_ns", "txId", "lsn"), in order."""
        sch = t.schema_name if t is not None else schema
        tab = t.table_name if t is not None else table
        return [self._head, "ts_ms", b',"snapshot":' + orjson.dumps(snapshot) + b',"db":' + self._db
                + b',"sequence":', "sequence", b',"ts_us":', "ts_us", b',"ts_ns":', "ts_ns", b',"schema":'
                + orjson.dumps(sch) + b',"table":' + orjson.dumps(tab) + b',"txId":', "txId", b',"lsn":', "lsn",
                b',"xmin":null,"origin":null,"origin_lsn":null}']

    def source_bytes(self, t: TableEvents | None, ts_us: int, snapshot: str, sequence: str | None,
                     txid: int | None, lsn: int | None, schema: str | None = None,
                     table: str | None = None) -> bytes:
        """The `source` block's JSON."""
        key = (t, ts_us, snapshot, txid, schema, table)
        if key != self._src_key:
            self._src_key = key
            fixed = {"ts_ms": b"%d" % (ts_us // 1000), "ts_us": b"%d" % ts_us, "ts_ns": b"%d" % (ts_us * 1000),
                     "txId": orjson.dumps(txid)}
            parts = [b""]  # the pieces around "sequence" and "lsn", the fields that change per event
            for piece in self.source_template(t, snapshot, schema, table):
                if isinstance(piece, bytes):
                    parts[-1] += piece
                elif piece in fixed:
                    parts[-1] += fixed[piece]
                else:
                    parts.append(b"")
            self._src_parts = tuple(parts)
        head, mid, tail = self._src_parts
        return head + orjson.dumps(sequence) + mid + orjson.dumps(lsn) + tail

    def _envelope(self, t: TableEvents, op: str, before, after, source, transaction) -> str:
        ms, us, ns = self.clock()
        return t.value_out.dumps({"before": before, "after": after, "source": source,
                                  "transaction": transaction, "op": op, "ts_ms": ms, "ts_us": us, "ts_ns": ns})

    def emit(self, t: TableEvents, op: str, key, before, after, source, transaction,
             version: int, ts_us: int, headers=None) -> None:
        self.out.append(t.topic, t.key_text(key), self._envelope(t, op, before, after, source, transaction),
                        op, version, ts_us, headers)

    def tombstone(self, t: TableEvents, key, version: int, ts_us: int) -> None:
        self.out.append(t.topic, t.key_text(key), None, None, version, ts_us)

    # ---- snapshot
    def snapshot_row(self, t: TableEvents, values, marker: str, lsn: int, txid: int, ts_us: int,
                     sequence: str, version: int) -> None:
        src = self.source(t, ts_us, marker, sequence, txid, lsn)
        self.emit(t, "r", t.key(values), None, t.row(values), src, None, version, ts_us)

    # ---- transaction metadata
    def begin(self, xid: int, lsn: int, ts_us: int, version: int) -> None:
        tid = f"{xid}:{lsn}"
        self.out.append(self.ctx.topics.transaction(), self.txn_key.dumps({"id": tid}),
                        self.txn_value.dumps({"status": "BEGIN", "id": tid, "event_count": None,
                                              "data_collections": None, "ts_ms": ts_us // 1000}),
                        None, version, ts_us)

    def end(self, xid: int, lsn: int, ts_us: int, counters: TxnCounters, version: int) -> None:
        tid = f"{xid}:{lsn}"
        collections = [{"data_collection": k, "event_count": v} for k, v in counters.in_java_order()]
        self.out.append(self.ctx.topics.transaction(), self.txn_key.dumps({"id": tid}),
                        self.txn_value.dumps({"status": "END", "id": tid, "event_count": counters.total,
                                              "data_collections": collections, "ts_ms": ts_us // 1000}),
                        None, version, ts_us)

    def heartbeat(self, ts_ms: int, version: int) -> None:
        key = Serializer(HEARTBEAT_KEY, self.ctx.schemas_enable).dumps({"serverName": self.ctx.prefix})
        value = Serializer(HEARTBEAT_VALUE, self.ctx.schemas_enable).dumps({"ts_ms": ts_ms})
        self.out.append(self.ctx.topics.heartbeat(), key, value, None, version, ts_ms * 1000)


MESSAGE_KEY = struct("io.debezium.connector.postgresql.MessageKey",
                     [("prefix", primitive(STRING, optional=True))], version=1)


def message_value_schema(ctx: EventContext) -> Schema:
    content = primitive(BYTES if ctx.binary_mode == "bytes" else STRING, optional=True)
    block = struct("io.debezium.connector.postgresql.Message", [
        ("prefix", primitive(STRING, optional=True)), ("content", content)], version=1)
    return struct("io.debezium.connector.postgresql.MessageValue", [
        ("op", primitive(STRING)), ("ts_ms", primitive(INT64, optional=True)), ("source", SOURCE_SCHEMA),
        ("transaction", TRANSACTION_BLOCK), ("message", block)], version=1)


def truncate_value(maker: RecordMaker, t: TableEvents, source) -> str:
    ms, us, ns = now_ts()
    return t.value_out.dumps({"before": None, "after": None, "source": source, "transaction": None,
                              "op": "t", "ts_ms": ms, "ts_us": us, "ts_ns": ns})


def decode_relation(payload: bytes) -> pgoutput.Relation:
    msg = pgoutput.decode(payload)
    assert isinstance(msg, pgoutput.Relation)
    return msg


def dumps(obj: Any) -> str:
    return orjson.dumps(obj).decode()
