"""Change events as data: typed blocks, the events of one topic with one key and one value schema.

A `TypedBlock` is an Arrow record batch: `key` and `value` are struct columns typed from their
Kafka Connect schemas (`connect_type`), `value` null for a tombstone (a row without `op`; a null
value with an `op` is a record whose value is null but has a schema, as ExtractNewRecordState makes
of a delete); an envelope's `before`,
`after`, `source`, `op`, `ts_*` and `transaction` are fields of `value`, and so are the fields of
every other record kind (transaction BEGIN/END, heartbeats, logical messages). Beside them the
meta columns of `META`: `_order` (the event's place in the batch it came in, so that the global
order across the blocks of a batch is recoverable), `op`, `headers`, `_change_type`,
`_commit_version` and `_commit_timestamp`. The topic and the two Connect schemas (JSON form) ride
in the schema's metadata, and so do the Connect schemas of the headers, by header name.

Kafka headers are a list per record of (name, value), each value with its own Connect schema. The
`headers` column is a list of `{key, value}` entries whose `value` is a struct with one field per
header name of the block, typed by that header's schema (`headers_type`): an entry sets only the
field of its own name. The key a key-changing update carries (`__debezium.newkey`,
`__debezium.oldkey`) is a header whose schema is the key's; Debezium 3's context headers
(`connectors.common.context_headers`) are strings; transformations add headers of any Connect type.

The Arrow types hold exactly what the events hold, so that every serialization (JSON, Avro and
CloudEvents, in `events.formats`) can be written from a block: Connect's primitives and
containers as Arrow's; the logical types whose value is a number (Date, Time, Timestamp and
Debezium's Micro/Nano variants) as Arrow's temporal types over the same number; a Decimal of known
precision up to 38 as decimal128; anything else by its physical type (a ZonedTimestamp stays its
ISO text, a VariableScaleDecimal its struct of scale and bytes, a Decimal beyond 38 digits its
unscaled bytes). A `float` (Connect float32) is held as float64: the value Debezium writes is the
double of Java's Float.toString digits, which a float32 cannot give back. The table view of a row
image (`events.arrow`) is built from these columns.

`TypedEvents` is what a work unit yields in typed output: the blocks of one batch, in order of
their first event. `BlockBuilder` makes them from records given as JSON-form values (what
`RecordMaker` builds: base64 text for bytes and decimals, numbers for temporal values).
"""

from __future__ import annotations

import base64
import decimal
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from headwater.events.arrays import int64_array, int64_values, string_array
from headwater.events.changes import CHANGE_TYPES

ToArrow = Callable[[Any], Any]  # a JSON-form value (not null) -> what pa.array takes for its type

TOPIC_META = b"headwater.topic"
KEY_SCHEMA_META = b"headwater.key.schema"
VALUE_SCHEMA_META = b"headwater.value.schema"
HEADERS_SCHEMA_META = b"headwater.headers.schema"

PRIMITIVE = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
              "boolean": pa.bool_(), "string": pa.string()}
# logical types whose JSON value (a number of days or time units) is the Arrow type's own value
TEMPORAL = {
    "io.debezium.time.Date": pa.date32(),
    "org.apache.kafka.connect.data.Date": pa.date32(),
    "io.debezium.time.Timestamp": pa.timestamp("ms"),
    "org.apache.kafka.connect.data.Timestamp": pa.timestamp("ms"),
    "io.debezium.time.MicroTimestamp": pa.timestamp("us"),
    "io.debezium.time.NanoTimestamp": pa.timestamp("ns"),
    "io.debezium.time.Time": pa.time32("ms"),
    "org.apache.kafka.connect.data.Time": pa.time32("ms"),
    "io.debezium.time.MicroTime": pa.time64("us"),
    "io.debezium.time.NanoTime": pa.time64("ns"),
}
DECIMAL = "org.apache.kafka.connect.data.Decimal"
_PHYSICAL = {pa.date32(): pa.int32(), pa.time32("ms"): pa.int32()}  # else int64


def physical_int(t: pa.DataType) -> pa.DataType:
    """The integer type a temporal Arrow type is stored as."""
    return _PHYSICAL.get(t, pa.int64())


def decimal_scale(schema: dict) -> tuple[int, int | None]:
    """A Decimal schema's scale, and its precision when Arrow's decimal128 can hold every value."""
    params = schema.get("parameters") or {}
    scale = int(params.get("scale", 0))
    precision = params.get("connect.decimal.precision")
    p = int(precision) if precision is not None else None
    return scale, p if p is not None and 0 < p <= 38 and 0 <= scale <= p else None


def connect_type(schema: dict | None) -> tuple[pa.DataType, ToArrow]:
    """The Arrow type of a Connect schema (JSON form; None: no schema, all nulls) and a function from a
    JSON-form value to the value `pa.array` takes for that type."""
    if schema is None:
        return pa.null(), same
    name, t = schema.get("name"), schema["type"]
    if name in TEMPORAL:
        return TEMPORAL[name], same
    if name == DECIMAL:
        scale, precision = decimal_scale(schema)
        if precision is not None:
            return pa.decimal128(precision, scale), lambda v: decimal_value(v, scale)
        return pa.binary(), bytes_value
    if t in PRIMITIVE:
        return PRIMITIVE[t], same
    if t in ("float", "double"):
        return pa.float64(), float  # NaN and the infinities are the strings "NaN", "Infinity", "-Infinity"
    if t == "bytes":
        return pa.binary(), bytes_value
    container = container_type(schema, connect_type)
    if container is None:
        raise ValueError(f"not a Connect schema type: {t!r}")
    return container


def container_type(schema: dict, part: Callable[[dict], tuple[pa.DataType, ToArrow]]
                   ) -> tuple[pa.DataType, ToArrow] | None:
    """The Arrow type and converter of a Connect array, map or struct whose parts' schemas `part`
    maps; None for any other schema."""
    t = schema["type"]
    if t == "array":
        item_t, item_f = part(schema["items"])
        return pa.list_(item_t), lambda v: [None if x is None else item_f(x) for x in v]
    if t == "map":
        key_t, key_f = part(schema["keys"])
        value_t, value_f = part(schema["values"])
        # JsonConverter writes a map with string keys as an object, any other as [key, value] pairs
        return pa.map_(key_t, value_t), lambda v: [(key_f(k), None if x is None else value_f(x))
                                                   for k, x in (v.items() if isinstance(v, dict) else v)]
    if t == "struct":
        fields = [(f["field"], *part(f)) for f in schema["fields"]]
        return (pa.struct([(n, ft) for n, ft, _ in fields]),
                lambda v: {n: (None if v.get(n) is None else fn(_plain(v[n]))) for n, _, fn in fields})
    return None


def same(v: Any) -> Any:
    """A value Arrow takes as it is."""
    return v


def _plain(v: Any) -> Any:
    """A value as JSON data: JSON text handed on as it is (an `orjson.Fragment`, such as the `source`
    block the record builders render from a template) becomes the data it stands for."""
    return orjson.loads(orjson.dumps(v)) if isinstance(v, orjson.Fragment) else v


def bytes_value(v: str | bytes) -> bytes:
    """Connect bytes: base64 text in JSON (binary.handling.mode=bytes)."""
    return base64.b64decode(v) if isinstance(v, str) else v


def decimal_value(b64: str, scale: int) -> decimal.Decimal:
    """A Connect Decimal's value from its base64 unscaled big-endian two's-complement bytes, exactly."""
    unscaled = int.from_bytes(base64.b64decode(b64), "big", signed=True)
    return decimal.Decimal(f"{unscaled}E{-scale}")


#: the meta columns after `key` and `value`; `headers` is typed by the block's header schemas
META = [("_order", pa.int64()), ("op", pa.string()), ("headers", None), ("_change_type", pa.string()),
        ("_commit_version", pa.int64()), ("_commit_timestamp", pa.timestamp("us", tz="UTC"))]


def headers_type(schemas: dict[str, dict | None]) -> pa.DataType:
    """The Arrow type of the `headers` column for headers of these Connect schemas, by name."""
    value = pa.struct([(name, _converter(s)[0]) for name, s in schemas.items()]) if schemas else pa.null()
    return pa.list_(pa.struct([("key", pa.string()), ("value", value)]))


@dataclass(frozen=True)
class TypedBlock:
    """Events of one topic with one key schema and one value schema (see the module's docstring)."""

    batch: pa.RecordBatch

    @property
    def topic(self) -> str:
        return self.batch.schema.metadata[TOPIC_META].decode()

    @property
    def key_schema(self) -> dict | None:
        return orjson.loads(self.batch.schema.metadata[KEY_SCHEMA_META])

    @property
    def value_schema(self) -> dict | None:
        return orjson.loads(self.batch.schema.metadata[VALUE_SCHEMA_META])

    @property
    def header_schemas(self) -> dict[str, dict | None]:
        """The Connect schema of each header name the block's `headers` column can hold."""
        raw = self.batch.schema.metadata.get(HEADERS_SCHEMA_META)
        return orjson.loads(raw) if raw else {}

    def __len__(self) -> int:
        return self.batch.num_rows


def order_moved(block: TypedBlock, offset: int) -> TypedBlock:
    """The block with its `_order` moved by `offset` (the events of earlier batches of a partition)."""
    if not offset:
        return block
    b = block.batch
    i = b.schema.get_field_index("_order")
    return TypedBlock(b.set_column(i, b.schema.field(i), int64_array(int64_values(b.column(i)) + offset)))


def ipc_bytes(block: TypedBlock, order_offset: int = 0) -> bytes:
    """The block as an Arrow IPC stream (schema, metadata included, then the batch), its `_order`
    moved by `order_offset`."""
    b = order_moved(block, order_offset).batch
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, b.schema) as writer:
        writer.write_batch(b)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> TypedBlock:
    """A block from `ipc_bytes`."""
    with pa.ipc.open_stream(data) as reader:
        return TypedBlock(reader.read_next_batch())


@dataclass
class TypedEvents:
    """The typed blocks of one batch of events; `_order` gives each event's place in the batch."""

    blocks: list[TypedBlock]

    def __len__(self) -> int:
        return sum(len(b) for b in self.blocks)

    def __iter__(self) -> Iterator[TypedBlock]:
        return iter(self.blocks)


class _Pending:
    """The records of one block so far."""

    __slots__ = ("headers", "key_schema", "keys", "ops", "order", "topic", "ts", "value_schema", "values",
                 "versions")

    def __init__(self, topic: str, key_schema: dict | None, value_schema: dict | None):
        self.topic, self.key_schema, self.value_schema = topic, key_schema, value_schema
        self.order: list[int] = []
        self.keys: list[Any] = []
        self.values: list[Any] = []
        self.ops: list[str | None] = []
        self.headers: list[list[tuple[str, Any]] | None] = []
        self.versions: list[int] = []
        self.ts: list[int] = []


@dataclass
class BlockBuilder:
    """Gathers records into typed blocks, one per (topic, key schema, value schema)."""

    pending: dict[tuple, _Pending] = field(default_factory=dict)
    count: int = 0
    _fingerprints: dict[int, tuple[Any, bytes]] = field(default_factory=dict)

    def __len__(self) -> int:
        return self.count

    def _fingerprint(self, schema: dict | None) -> bytes:
        if schema is None:
            return b""
        hit = self._fingerprints.get(id(schema))
        if hit is None or hit[0] is not schema:
            hit = self._fingerprints[id(schema)] = (schema, orjson.dumps(schema))
        return hit[1]

    def add(self, topic: str, key_schema: dict | None, key: Any, value_schema: dict | None, value: Any,
            op: str | None, version: int, ts_us: int, headers: list[tuple[str, Any]] | None = None) -> None:
        """One record: `key` and `value` in JSON form (dicts for structs), `headers` holding keys (their
        schema is the key's)."""
        group = (topic, self._fingerprint(key_schema), self._fingerprint(value_schema))
        p = self.pending.get(group)
        if p is None:
            p = self.pending[group] = _Pending(topic, key_schema, value_schema)
        p.order.append(self.count)
        p.keys.append(key)
        p.values.append(value)
        p.ops.append(op)
        p.headers.append(headers)
        p.versions.append(version)
        p.ts.append(ts_us)
        self.count += 1

    def take(self) -> TypedEvents:
        """The blocks of the records added since the last `take`, in order of their first record."""
        blocks = [build_block(p) for p in self.pending.values()]
        self.pending = {}
        self.count = 0
        return TypedEvents(blocks)


_CONVERTERS: dict[bytes, tuple[pa.DataType, ToArrow]] = {}


def _converter(schema: dict | None) -> tuple[pa.DataType, ToArrow]:
    fp = orjson.dumps(schema)
    hit = _CONVERTERS.get(fp)
    if hit is None:
        if len(_CONVERTERS) > 256:
            _CONVERTERS.clear()
        hit = _CONVERTERS[fp] = connect_type(schema)
    return hit


def _column(values: Sequence[Any], schema: dict | None) -> pa.Array:
    """Keys or values (structs, JSON form) as one column; temporal values go in as their numbers."""
    typ, fn = _converter(schema)
    return pa.array([None if v is None else fn(v) for v in values], type=typ)


def build_block(p: _Pending) -> TypedBlock:
    """The typed block of pending records."""
    key = _column(p.keys, p.key_schema)
    value = _column(p.values, p.value_schema)
    headers, header_schemas = None, None
    if any(p.headers):
        _, key_f = _converter(p.key_schema)
        header_schemas = {name: p.key_schema for h in p.headers if h for name, _ in h}
        headers = pa.array([None if h is None else [{"key": k, "value": {k: None if v is None else key_f(v)}}
                                                    for k, v in h] for h in p.headers],
                           type=headers_type(header_schemas))
    return make_block(p.topic, p.key_schema, key, p.value_schema, value, string_array(p.ops),
                      np.array(p.order, dtype=np.int64), np.array(p.versions, dtype=np.int64),
                      np.array(p.ts, dtype=np.int64), headers, header_schemas)


def make_block(topic: str, key_schema: dict | None, key: pa.Array, value_schema: dict | None, value: pa.Array,
               op: pa.Array, order: np.ndarray, version: np.ndarray, ts_us: np.ndarray,
               headers: pa.Array | None = None, header_schemas: dict[str, dict | None] | None = None) -> TypedBlock:
    """A typed block from its columns: `key` and `value` typed by `connect_type` of their schemas,
    `op`, and per event its place in the batch, commit version and commit time (microseconds);
    `headers` typed by `headers_type` of `header_schemas` (None: no headers)."""
    n = len(op)
    header_schemas = header_schemas or {}
    if headers is None:
        headers = pa.nulls(n, headers_type(header_schemas))
    change = change_types(op, value)
    columns = [key, value, int64_array(np.broadcast_to(order, n)), op, headers, change,
               int64_array(np.broadcast_to(version, n)),
               int64_array(np.broadcast_to(ts_us, n)).cast(pa.timestamp("us", tz="UTC"))]
    names = ["key", "value"] + [name for name, _ in META]
    metadata = {TOPIC_META: topic.encode(), KEY_SCHEMA_META: orjson.dumps(key_schema),
                VALUE_SCHEMA_META: orjson.dumps(value_schema)}
    if header_schemas:
        metadata[HEADERS_SCHEMA_META] = orjson.dumps(header_schemas)
    schema = pa.schema([pa.field(name, c.type) for name, c in zip(names, columns, strict=True)], metadata=metadata)
    return TypedBlock(pa.RecordBatch.from_arrays(columns, schema=schema))


def change_types(op: pa.Array, value: pa.Array) -> pa.Array:
    """Spark's `_change_type` of each event (none for a tombstone)."""
    valid = value.is_valid().to_pylist()
    return string_array([CHANGE_TYPES.get(o) if o is not None and ok else None
                         for o, ok in zip(op.to_pylist(), valid, strict=True)])
