"""Typed event blocks as CloudEvents, as Debezium's `io.debezium.converters.CloudEventsConverter` writes them.

Structured mode only, as Debezium. Each data change event (a value whose schema is an `...Envelope`)
becomes one CloudEvent: `id` (PostgreSQL `name:<name>;lsn:<lsn>;txId:<txId>;sequence:<sequence>`,
MySQL and MariaDB `name:<name>;file:<file>;pos:<pos>`), `source` (`/debezium/<connector>/<name>`),
`specversion` `1.0`, `type` (`io.debezium.connector.<connector>.DataChangeEvent`), `time` (the
source's `ts_ms`, `yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`), `datacontenttype`, `dataschema` (Avro data
only: `<registry url>/schemas/ids/<id>`), the extension attributes (`extension.attributes.enable`):
`iodebeziumop`, `iodebezium<source field>` for every field of `source` and `iodebeziumtx<field>` for
the transaction block's `id`, `total_order`, `data_collection_order` (names keep only ASCII letters
and digits; int64 values as strings, int32 as numbers), then `data`: a struct
`io.debezium.connector.<connector>.Data` of `before` and `after` (for MariaDB, every field of the
value, as Debezium's MariaDbCloudEventsMaker asks). Any other value (transaction metadata,
heartbeats, logical messages, schema changes) and a tombstone give no CloudEvent (None), as the
converter returns null for them.

`serializer.type` json: the envelope as JSON (never with a schema), `data` as JSON with the data
schema (`json.schemas.enable`, default true: `{"schema", "payload"}`), or as base64 text of the
Confluent wire-format Avro bytes when `data.serializer.type` is avro. `serializer.type` avro (data
must then be Avro too): the envelope as Avro in Confluent's wire format, its schema named
`schema.cloudevents.name` (default `<name>.<db>.CloudEvents.Envelope`, adjusted by
`schema.name.adjustment.mode`), `data` the Avro bytes registered under `<topic>-data-value`.
`metadata.source` (`MetadataSource`, parsed as Debezium 3.6.3's `CloudEventsConverterConfig` parses it):
the global source of the metadata, then `id:` and `type:` (`generate` or `header`; an omitted one takes
the global source). `value` (the default `value,id:generate,type:generate`): `source`, `op` and
`transaction` come from the envelope. `header`: they come from the headers named `source`, `op` and
`transaction` (Kafka's `HeaderFrom$Value` copies them there before an SMT that strips the envelope,
such as the outbox `EventRouter`), as the converter reads them back with JsonConverter (a null field
that has a default reads as the default: a streamed event's `source.snapshot` is "false"); an event
without a `source` or `op` header gives no CloudEvent; `data` is the whole value (a struct, else the
event fails: "Mismatching schema"), as `io.debezium.connector.<connector>.Data`. `id:header` and
`type:header` take the attribute from the header named `id` (the outbox router sets it) or `type`; an
event that makes a CloudEvent without it fails ("Header `id` was not provided"). `traceparent:` and
`dataSchemaName:` are accepted and, as in Debezium without `opentelemetry.tracing.attributes.enable`
and `schema.data.name.source.header.enable` (options headwater does not take), change nothing.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.arrays import bool_array, lit, valid_mask
from headwater.events.formats.avro import AvroBlockWriter, encode_datums, wire_bytes
from headwater.events.formats.json import JsonOptions, json_values
from headwater.events.formats.registry import SchemaRegistry
from headwater.events.headers import header_values
from headwater.events.typed import TypedBlock

SPECVERSION = "1.0"
CONTENT_TYPES = {"json": "application/json", "avro": "application/avro"}
#: the source fields of each connector's CloudEvents id
ID_FIELDS = {"postgresql": ("name", "lsn", "txId", "sequence"), "mysql": ("name", "file", "pos"),
             "mariadb": ("name", "file", "pos")}
#: the value fields `data` holds (None: all of them)
DATA_FIELDS: dict[str, tuple[str, ...] | None] = {"postgresql": ("before", "after"), "mysql": ("before", "after"),
                                                 "mariadb": None}
#: Debezium's transaction block (TransactionMonitor.TRANSACTION_BLOCK_SCHEMA): the tx extension attributes
TX_FIELDS = (("id", "string"), ("total_order", "int64"), ("data_collection_order", "int64"))
DATA_SUBJECT_SUFFIX = "-data"


VALUE, HEADER, GENERATE = "value", "header", "generate"
#: the fields `metadata.source` may set after the global source (Debezium's names, case-sensitive)
METADATA_FIELDS = ("id", "type", "traceparent", "dataSchemaName")


@dataclass(frozen=True)
class MetadataSource:
    """Where the converter takes an event's metadata (`source`, `op`, `transaction`), `id` and `type`."""

    global_source: str = VALUE  # value | header
    id: str = GENERATE  # generate | header
    type: str = GENERATE  # generate | header

    @classmethod
    def parse(cls, text: str) -> MetadataSource:
        """`metadata.source` as Debezium 3.6.3 reads it (a comma-separated list; names of sources in any
        case); ValueError saying what is wrong. With the global source `value`, `id` and `type` must be
        given (Debezium's converter then writes a null id or type and fails on every change event)."""
        items = [i.strip() for i in text.split(",")]
        first = items[0].lower()
        if first not in (VALUE, HEADER):
            raise ValueError(f"the global source {items[0]!r} is not value or header")
        chosen: dict[str, str] = {}
        for item in items[1:]:
            field, colon, source = item.partition(":")
            if not colon or field.strip() not in METADATA_FIELDS:
                raise ValueError(f"{item!r} is not <field>:<source> with a field of {', '.join(METADATA_FIELDS)}")
            if source.strip().lower() not in (HEADER, GENERATE):
                raise ValueError(f"the source of {field.strip()} is {source.strip()!r}, not header or generate")
            chosen[field.strip()] = source.strip().lower()
        out = cls(first, chosen.get("id", first), chosen.get("type", first))
        if VALUE in (out.id, out.type):
            raise ValueError("with the global source value, give id and type their sources (e.g. "
                             "value,id:generate,type:generate): Debezium 3.6.3's converter writes a null id or type "
                             "otherwise and fails on every change event")
        return out


@dataclass(frozen=True)
class CloudEventsOptions:
    """The converter's settings (option names in `converters`)."""

    serializer_type: str = "json"
    data_serializer_type: str = "json"
    json: JsonOptions = JsonOptions(schemas_enable=True)
    extension_attributes_enable: bool = True
    schema_name_adjustment_mode: str = "none"
    schema_cloudevents_name: str | None = None
    metadata_source: MetadataSource = MetadataSource()


def extension_name(name: str) -> str:
    """A CloudEvents extension attribute name: `iodebezium` and the name's ASCII letters and digits."""
    return "iodebezium" + "".join(c for c in name if c.isascii() and c.isalnum())


def adjust_schema_name(name: str, mode: str) -> str:
    """Debezium's `schema.name.adjustment.mode` for a full schema name: `avro` replaces every character
    Avro does not allow with `_`, `avro_unicode` with `_uxxxx` (and `_` itself as `_u005f`)."""
    if mode == "none":
        return name
    out = []
    for i, c in enumerate(name):
        ok = c.isascii() and (c.isalpha() or c == "_" or (i > 0 and (c.isdigit() or c == ".")))
        if mode == "avro_unicode" and (c == "_" or not ok):
            out.append(f"_u{ord(c):04x}")
        else:
            out.append(c if ok else "_")
    return "".join(out)


def is_envelope(schema: dict | None) -> bool:
    """Debezium's `Envelope.isEnvelopeSchema`: a value schema named `...Envelope`."""
    return bool(schema and schema.get("type") == "struct" and str(schema.get("name", "")).endswith(".Envelope"))


@dataclass
class CloudEventsWriter:
    """Writes the CloudEvents of typed blocks; `registry` is needed for Avro."""

    options: CloudEventsOptions
    registry: SchemaRegistry | None = None
    avro: AvroBlockWriter | None = None

    def __post_init__(self) -> None:
        if self.avro is None:
            self.avro = AvroBlockWriter()

    def values(self, block: TypedBlock) -> list[bytes | None]:
        """The CloudEvent of each event of `block` (JSON text or Avro wire bytes; None: no CloudEvent)."""
        meta = self._metadata(block)
        n = len(block)
        if meta is None:
            return [None] * n
        made = meta.made
        connector = meta.connector
        attributes = self._attributes(meta, block)
        data_schema = {"type": "struct", "fields": [f for _, f in meta.data_fields], "optional": False,
                       "name": f"io.debezium.connector.{connector}.Data"}
        data_column = pa.StructArray.from_arrays([c for c, _ in meta.data_fields],
                                                 names=[f["field"] for _, f in meta.data_fields])
        out: list[bytes | None] = [None] * n
        rows = np.flatnonzero(made).tolist()
        if self.options.data_serializer_type == "json":
            data = self._json_data(data_column, data_schema)
            for i in rows:
                out[i] = orjson.dumps({**attributes(i), "data": data[i]})
            return out
        data_subject = block.topic + (DATA_SUBJECT_SUFFIX if self.options.serializer_type == "avro" else "")
        data_bytes, data_id = self._avro(data_column, data_schema, data_subject)
        assert self.registry is not None
        uri = f"{self.registry.url}/schemas/ids/{data_id}"
        if self.options.serializer_type == "json":
            for i in rows:
                body = data_bytes[i]
                assert body is not None
                out[i] = orjson.dumps({**attributes(i, uri), "data": base64.b64encode(body).decode()})
            return out
        envelope = [{**attributes(i, uri), "data": data_bytes[i]} if made[i] else None for i in range(n)]
        ce_schema = self._envelope_schema(connector, meta, rows[0], uri is not None)
        return self._avro_datums(envelope, ce_schema, block.topic)

    def _metadata(self, block: TypedBlock) -> _Metadata | None:
        """Where each event's metadata is, by `metadata.source`; None when no event makes a CloudEvent."""
        mode = self.options.metadata_source
        schema = block.value_schema
        value = block.batch.column("value")
        made = valid_mask(value)
        if mode.global_source == VALUE:
            if not is_envelope(schema) or not made.any():
                return None
            assert schema is not None
            fields = {f["field"]: (i, f) for i, f in enumerate(schema["fields"])}
            source_i, source_schema = fields["source"]
            source = value.field(source_i)
            op = value.field(fields["op"][0])
            tx = (value.field(fields["transaction"][0]), fields["transaction"][1]) if "transaction" in fields else None
            data_names: tuple[str, ...] | None = None
        else:
            found_source, found_op = header_values(block, "source"), header_values(block, "op")
            if found_source is None or found_op is None:
                return None
            made &= found_source[2] & found_op[2]
            if not made.any():
                return None
            if schema is None or schema.get("type") != "struct":
                raise ValueError(f"CloudEvents of {block.topic}: Mismatching schema (metadata.source header needs "
                                 f"a struct value, the value's schema is {(schema or {}).get('type')})")
            source_schema = found_source[1] or {}
            if source_schema.get("type") != "struct" or not valid_mask(found_source[0])[made].all():
                raise ValueError(f"CloudEvents of {block.topic}: the source header is not a struct")
            source = _with_defaults(found_source[0], source_schema)
            op = found_op[0]
            found_tx = header_values(block, "transaction")
            tx = None if found_tx is None else (found_tx[0], found_tx[1] or {})
            data_names = tuple(f["field"] for f in schema["fields"])
        made_rows = bool_array(made)
        connectors = pc.unique(source.field(_index(source_schema, "connector")).filter(made_rows)).to_pylist()
        if len(connectors) != 1 or connectors[0] not in ID_FIELDS:
            raise ValueError(f"No usable CloudEvents converters for connector type \"{','.join(map(str, connectors))}\" "
                             f"(topic {block.topic}); headwater writes CloudEvents for " + ", ".join(sorted(ID_FIELDS)))
        connector = connectors[0]
        ids = self._header_text(block, "id", made) if mode.id == HEADER else None
        types = self._header_text(block, "type", made) if mode.type == HEADER else None
        if data_names is None:
            data_names = DATA_FIELDS[connector] or tuple(f["field"] for f in (schema or {})["fields"])
        by_name = {f["field"]: (i, f) for i, f in enumerate((schema or {})["fields"])}
        data_fields = [(value.field(by_name[f][0]), by_name[f][1]) for f in data_names if f in by_name]
        return _Metadata(made, connector, source, source_schema, op, tx, ids, types, data_fields)

    @staticmethod
    def _header_text(block: TypedBlock, name: str, made: np.ndarray) -> list[Any]:
        """The string header `name` of each event (`id:header`, `type:header`); every event that makes a
        CloudEvent must have one."""
        found = header_values(block, name)
        if found is None or not found[2][made].all():
            raise ValueError(f"CloudEvents of {block.topic}: Header `{name}` was not provided")
        if (found[1] or {}).get("type") != "string":
            raise ValueError(f"CloudEvents of {block.topic}: the header `{name}` is not a string")
        return found[0].to_pylist()

    def _attributes(self, meta: _Metadata, block: TypedBlock) -> Callable[..., dict[str, Any]]:
        """A function from an event's index (and the data schema URI) to its attributes before `data`."""
        connector, source, source_schema = meta.connector, meta.source, meta.source_schema
        source_fields = source_schema["fields"]
        columns = {f["field"]: _extension_values(source.field(i), f["type"]) for i, f in enumerate(source_fields)}
        ids = meta.ids if meta.ids is not None else \
            _ids(connector, {k: source.field(_index(source_schema, k)) for k in ID_FIELDS[connector]})
        kind = f"io.debezium.connector.{connector}.DataChangeEvent"
        types = meta.types
        names = source.field(_index(source_schema, "name")).to_pylist()
        ts = source.field(_index(source_schema, "ts_ms")).cast(pa.int64()).cast(pa.timestamp("ms"))
        times = pc.strftime(ts, format="%Y-%m-%dT%H:%M:%SZ").to_pylist()
        ops = meta.op.to_pylist()
        n = len(block)
        tx: dict[str, list[Any]] = {}
        if meta.tx is not None:
            tx_column, tx_schema = meta.tx
            present = tx_column.is_valid().to_pylist()
            for name, tx_type in TX_FIELDS:
                values = (_extension_values(tx_column.field(_index(tx_schema, name)), tx_type)
                          if tx_schema.get("type") == "struct" and _has(tx_schema, name) else [None] * n)
                tx[name] = [v if ok else None for v, ok in zip(values, present, strict=True)]
        content_type = CONTENT_TYPES[self.options.data_serializer_type]
        extensions = self.options.extension_attributes_enable
        source_names = [(extension_name(f["field"]), columns[f["field"]]) for f in source_fields]
        tx_names = [(extension_name("tx" + name), tx.get(name)) for name, _ in TX_FIELDS]

        def attributes(i: int, dataschema: str | None = None) -> dict[str, Any]:
            out: dict[str, Any] = {"id": ids[i], "source": f"/debezium/{connector}/{names[i]}",
                                   "specversion": SPECVERSION, "type": kind if types is None else types[i],
                                   "time": times[i], "datacontenttype": content_type}
            if dataschema is not None:
                out["dataschema"] = dataschema
            if extensions:
                out["iodebeziumop"] = ops[i]
                for name, values in source_names:
                    out[name] = values[i]
                for name, tx_values in tx_names:
                    out[name] = None if tx_values is None else tx_values[i]
            return out
        return attributes

    def _json_data(self, column: pa.StructArray, schema: dict) -> list[Any]:
        """The `data` of each event as JSON (an `orjson.Fragment` of `{"schema", "payload"}` with schemas)."""
        options = self.options.json
        payloads = json_values(column, schema, options)
        if not options.schemas_enable:
            return payloads
        head, tail = options.wrap(schema)
        return [orjson.Fragment(head + orjson.dumps(p) + tail) for p in payloads]

    def _avro(self, column: pa.Array, schema: dict, topic: str) -> tuple[list[bytes | None], int]:
        """Each event's Avro wire bytes for `schema` registered under `<topic>-value`, and the schema id."""
        assert self.avro is not None and self.registry is not None
        text, _ = self.avro.schema(schema)
        schema_id = self.registry.register(f"{topic}-value", text)
        bodies = self.avro.encode(column, schema, f"the data of an event of {topic}")
        return [None if b is None else wire_bytes(schema_id, b) for b in bodies], schema_id

    def _avro_datums(self, datums: list[dict | None], schema: dict, topic: str) -> list[bytes | None]:
        assert self.avro is not None and self.registry is not None
        text, parsed = self.avro.schema(schema)
        schema_id = self.registry.register(f"{topic}-value", text)
        return [None if b is None else wire_bytes(schema_id, b) for b in encode_datums(parsed, datums)]

    def _envelope_schema(self, connector: str, meta: _Metadata, first: int, with_dataschema: bool) -> dict:
        """The Connect schema of the CloudEvents envelope, as the converter builds it for Avro (named after
        the `source` of the event `first`)."""
        name = self.options.schema_cloudevents_name
        source_schema = meta.source_schema
        if name is None:
            at = {k: meta.source.field(_index(source_schema, k))[first].as_py() for k in ("name", "db")}
            name = f"{at['name']}.{at['db']}.CloudEvents.Envelope"
        string = {"type": "string", "optional": False}
        fields = [{**string, "field": f} for f in ("id", "source", "specversion", "type", "time", "datacontenttype")]
        if with_dataschema:
            fields.append({**string, "field": "dataschema"})
        if self.options.extension_attributes_enable:
            fields.append({**string, "field": "iodebeziumop"})
            for f in source_schema["fields"]:
                fields.append({"type": _extension_type(f["type"]), "optional": bool(f.get("optional", False)),
                               "field": extension_name(f["field"])})
            for tx_name, tx_type in TX_FIELDS:
                fields.append({"type": _extension_type(tx_type), "optional": True, "field": extension_name("tx" + tx_name)})
        fields.append({"type": "bytes", "optional": False, "field": "data"})
        return {"type": "struct", "fields": fields, "optional": False,
                "name": adjust_schema_name(name, self.options.schema_name_adjustment_mode)}


@dataclass
class _Metadata:
    """Per event of a block: whether it makes a CloudEvent (`made`), its `source` struct and schema, `op`,
    transaction block (column and schema; None: none), `id` and `type` from headers (None: generated),
    and the fields of `data` (columns and schemas)."""

    made: np.ndarray
    connector: str
    source: pa.Array
    source_schema: dict
    op: pa.Array
    tx: tuple[pa.Array, dict] | None
    ids: list[Any] | None
    types: list[Any] | None
    data_fields: list[tuple[pa.Array, dict]]


def _with_defaults(struct: pa.Array, schema: dict) -> pa.Array:
    """A struct column with each null of a field that has a default replaced by the default, as Kafka's
    JsonConverter reads back what it wrote (a header's value)."""
    children = []
    for i, f in enumerate(schema["fields"]):
        child = struct.field(i)
        if f.get("default") is not None and child.null_count:
            child = pc.fill_null(child, lit(f["default"]).cast(child.type))
        children.append(child)
    valid = valid_mask(struct)
    return pa.StructArray.from_arrays(children, names=[f["field"] for f in schema["fields"]],
                                      mask=None if valid.all() else bool_array(~valid))


def _index(schema: dict, name: str) -> int:
    for i, f in enumerate(schema["fields"]):
        if f["field"] == name:
            return i
    raise KeyError(f"no field {name} in schema {schema.get('name')}")


def _has(schema: dict, name: str) -> bool:
    return any(f["field"] == name for f in schema["fields"])


def _extension_type(connect_type: str) -> str:
    """The CloudEvents extension attribute type of a source field (CloudEventsConverter's rules)."""
    if connect_type == "boolean":
        return "boolean"
    if connect_type in ("int8", "int16", "int32"):
        return "int32"
    if connect_type in ("string", "int64"):
        return "string"
    raise ValueError(f"Source field of type {connect_type} cannot be converted into CloudEvents extension attribute.")


def _extension_values(column: pa.Array, connect_type: str) -> list[Any]:
    """A source field's values as extension attributes: int64 as decimal text."""
    if _extension_type(connect_type) == "string" and connect_type == "int64":
        return column.cast(pa.string()).to_pylist()
    return column.to_pylist()


def _ids(connector: str, columns: dict[str, pa.Array]) -> list[str]:
    """The CloudEvents id of each event from its source fields, as Debezium's `ceId` of the connector
    concatenates them (a null as `null`), column-wise."""
    parts: list[Any] = []
    for i, k in enumerate(ID_FIELDS[connector]):
        text = columns[k].cast(pa.string()).fill_null("null")
        parts += [pa.scalar(("" if i == 0 else ";") + k + ":"), text]
    return pc.binary_join_element_wise(*parts, "").to_pylist()
