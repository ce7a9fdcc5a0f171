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
`metadata.source` takes the metadata from the value (`value,id:generate,type:generate`, the
default); the `header` modes need the headers Kafka's `HeaderFrom` transform sets, which headwater's
events do not carry, and are refused by the configuration.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.formats.avro import AvroBlockWriter, encode_datums, wire_bytes
from headwater.events.formats.json import JsonOptions, json_values
from headwater.events.formats.registry import SchemaRegistry
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


@dataclass(frozen=True)
class CloudEventsOptions:
    """The converter's settings (option names in `converters`)."""

    serializer_type: str = "json"
    data_serializer_type: str = "json"
    json: JsonOptions = JsonOptions(schemas_enable=True)
    extension_attributes_enable: bool = True
    schema_name_adjustment_mode: str = "none"
    schema_cloudevents_name: str | None = None


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
        schema = block.value_schema
        n = len(block)
        if not is_envelope(schema):
            return [None] * n
        assert schema is not None
        value = block.batch.column("value")
        valid = value.is_valid().to_pylist()
        fields = {f["field"]: (i, f) for i, f in enumerate(schema["fields"])}
        source_i, source_schema = fields["source"]
        source = value.field(source_i)
        connectors = sorted({c for c, ok in zip(source.field(_index(source_schema, "connector")).to_pylist(), valid,
                                                strict=True) if ok and c is not None})
        if not connectors:
            return [None] * n  # tombstones only
        if len(connectors) != 1 or connectors[0] not in ID_FIELDS:
            raise ValueError(f"No usable CloudEvents converters for connector type \"{','.join(map(str, connectors))}\" "
                             f"(topic {block.topic}); headwater writes CloudEvents for "
                             + ", ".join(sorted(ID_FIELDS)))
        connector = connectors[0]
        attributes = self._attributes(connector, value, fields, source, source_schema)
        data_fields = DATA_FIELDS[connector] or tuple(f["field"] for f in schema["fields"])
        data_schema = {"type": "struct", "fields": [fields[f][1] for f in data_fields if f in fields],
                       "optional": False, "name": f"io.debezium.connector.{connector}.Data"}
        data_column = pa.StructArray.from_arrays([value.field(fields[f][0]) for f in data_fields if f in fields],
                                                 names=[f for f in data_fields if f in fields])
        out: list[bytes | None] = [None] * n
        if self.options.data_serializer_type == "json":
            data = self._json_data(data_column, data_schema)
            for i in range(n):
                if valid[i]:
                    out[i] = orjson.dumps({**attributes(i), "data": data[i]})
            return out
        data_subject = block.topic + (DATA_SUBJECT_SUFFIX if self.options.serializer_type == "avro" else "")
        data_bytes, data_id = self._avro(data_column, data_schema, data_subject)
        assert self.registry is not None
        uri = f"{self.registry.url}/schemas/ids/{data_id}"
        if self.options.serializer_type == "json":
            for i in range(n):
                if valid[i]:
                    body = data_bytes[i]
                    assert body is not None
                    out[i] = orjson.dumps({**attributes(i, uri), "data": base64.b64encode(body).decode()})
            return out
        envelope = [{**attributes(i, uri), "data": data_bytes[i]} if valid[i] else None for i in range(n)]
        ce_schema = self._envelope_schema(connector, source_schema, block, uri is not None)
        return self._avro_datums(envelope, ce_schema, block.topic)

    def _attributes(self, connector: str, value: pa.Array, fields: dict,
                    source: pa.StructArray, source_schema: dict) -> Callable[..., dict[str, Any]]:
        """A function from an event's index (and the data schema URI) to its attributes before `data`."""
        source_fields = source_schema["fields"]
        columns = {f["field"]: _extension_values(source.field(i), f["type"]) for i, f in enumerate(source_fields)}
        ids = _ids(connector, {k: source.field(_index(source_schema, k)) for k in ID_FIELDS[connector]})
        names = source.field(_index(source_schema, "name")).to_pylist()
        ts = source.field(_index(source_schema, "ts_ms")).cast(pa.int64()).cast(pa.timestamp("ms"))
        times = pc.strftime(ts, format="%Y-%m-%dT%H:%M:%SZ").to_pylist()
        ops = value.field(fields["op"][0]).to_pylist()
        tx: dict[str, list[Any]] = {}
        if "transaction" in fields:
            block_i = fields["transaction"][0]
            tx_column = value.field(block_i)
            tx_schema = fields["transaction"][1]
            present = tx_column.is_valid().to_pylist()
            for name, tx_type in TX_FIELDS:
                values = (_extension_values(tx_column.field(_index(tx_schema, name)), tx_type)
                          if _has(tx_schema, name) else [None] * len(value))
                tx[name] = [v if ok else None for v, ok in zip(values, present, strict=True)]
        content_type = CONTENT_TYPES[self.options.data_serializer_type]
        extensions = self.options.extension_attributes_enable
        source_names = [(extension_name(f["field"]), columns[f["field"]]) for f in source_fields]
        tx_names = [(extension_name("tx" + name), tx.get(name)) for name, _ in TX_FIELDS]

        def attributes(i: int, dataschema: str | None = None) -> dict[str, Any]:
            out: dict[str, Any] = {"id": ids[i], "source": f"/debezium/{connector}/{names[i]}",
                                   "specversion": SPECVERSION, "type": f"io.debezium.connector.{connector}.DataChangeEvent",
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

    def _envelope_schema(self, connector: str, source_schema: dict, block: TypedBlock, with_dataschema: bool) -> dict:
        """The Connect schema of the CloudEvents envelope, as the converter builds it for Avro."""
        name = self.options.schema_cloudevents_name
        if name is None:
            source = block.batch.column("value").field(_index(block.value_schema or {}, "source"))
            first = {k: source.field(_index(source_schema, k))[0].as_py() for k in ("name", "db")}
            name = f"{first['name']}.{first['db']}.CloudEvents.Envelope"
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
