"""Typed event blocks as Avro, as Confluent's AvroConverter writes Kafka Connect data.

`avro_schema` maps a Connect schema (JSON form) to an Avro schema exactly as Confluent's
`AvroData.fromConnectSchema` does (7.x, `connect.meta.data` on): structs become records named
after the Connect schema (namespace and name split at the last dot; unnamed ones
`io.confluent.connect.avro.ConnectDefault`, `ConnectDefault2`, ...), int8/int16 an `int` with
`connect.type`, every named schema carries `connect.name` (and `connect.version`,
`connect.parameters`, `connect.default`, `connect.doc` where the Connect schema has them),
Connect's Decimal, Date, Time and Timestamp the Avro logical types `decimal` (precision from
`connect.decimal.precision`, else 64), `date`, `time-millis` and `timestamp-millis`, a map with
a non-optional string key an Avro map and any other map an array of `MapEntry` records, and an
optional schema a union with null (`["null", T]` with a null default, or `[T, "null"]` when the
schema has a default of its own). Names are written as Java's `Schema.toString` writes them
(relative to the enclosing namespace), so the text registered is Java's but for the digits of
floating-point defaults (`1e300` for Java's `1.0E300`). A
record or field name Avro does not allow is refused, as Avro refuses it (Debezium's
`schema.name.adjustment.mode`/`field.name.adjustment.mode: avro` make names valid at the source).

`AvroBlockWriter` keeps each Connect schema's Avro schema (text, and fastavro's parsed form) and
encodes typed columns column-wise (`avro_columns.encode_column`); `encode_datums` encodes Python
datums with fastavro (the CloudEvents envelope, built per event); `wire_bytes` frames a body in
Confluent's wire format (magic byte 0, the 4-byte big-endian schema id, the Avro binary).
"""

from __future__ import annotations

import base64
import io
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import fastavro
import numpy as np
import orjson
import pyarrow as pa

from headwater.events.formats.avro_columns import AvroDataError, encode_column
from headwater.events.typed import DECIMAL

NAMESPACE = "io.confluent.connect.avro"
DEFAULT_NAME = "ConnectDefault"
MAP_ENTRY = "MapEntry"
CONNECT_DATE = "org.apache.kafka.connect.data.Date"
CONNECT_TIME = "org.apache.kafka.connect.data.Time"
CONNECT_TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
DECIMAL_PRECISION_DEFAULT = 64
LOGICAL = {DECIMAL: "decimal", CONNECT_DATE: "date", CONNECT_TIME: "time-millis",
           CONNECT_TIMESTAMP: "timestamp-millis"}
PRIMITIVES = {"int8": "int", "int16": "int", "int32": "int", "int64": "long", "float": "float",
              "double": "double", "boolean": "boolean", "string": "string", "bytes": "bytes"}
MAGIC = b"\x00"


class AvroSchemaError(ValueError):
    """A Connect schema Avro cannot express (an invalid name, a name defined twice)."""


def valid_name(name: str) -> bool:
    """Avro's (Java's) rule for a name: a letter or `_`, then letters, digits or `_`."""
    if not name:
        return False

    def letter(c: str) -> bool:
        return unicodedata.category(c).startswith("L") or c == "_"
    return letter(name[0]) and all(letter(c) or unicodedata.category(c) == "Nd" for c in name[1:])


def _split(full: str) -> tuple[str | None, str]:
    space, dot, name = full.rpartition(".")
    return (space, name) if dot else (None, full)


@dataclass
class _Names:
    """What `Schema.toString` tracks: the named types written so far and the enclosing namespace."""

    defined: set[str] = field(default_factory=set)
    space: str | None = None
    unnamed: int = 0

    def full(self, space: str | None, name: str) -> str:
        return f"{space}.{name}" if space else name

    def ref(self, space: str | None, name: str) -> str:
        return name if space == self.space or space is None else self.full(space, name)


def avro_schema(schema: dict) -> Any:
    """The Avro schema (JSON data) of a Connect schema, as `AvroData.fromConnectSchema` makes it."""
    return _schema(schema, _Names(), optional_union=True)


def _schema(schema: dict, names: _Names, optional_union: bool) -> Any:
    t, cname = schema["type"], schema.get("name")
    props: dict[str, Any] = {}
    if t == "struct":
        base = _record(schema, names)
    elif t == "array":
        base = {"type": "array", "items": _schema(schema["items"], names, True)}
    elif t == "map":
        keys = schema["keys"]
        if keys["type"] == "string" and not keys.get("optional", False):
            base = {"type": "map", "values": _schema(schema["values"], names, True)}
        else:
            base = {"type": "array", "items": _map_entry(schema, names)}
    elif t in PRIMITIVES:
        base = {"type": PRIMITIVES[t]}
        if cname == DECIMAL and t == "bytes":
            params = schema.get("parameters") or {}
            props["scale"] = int(params.get("scale", 0))
            props["precision"] = int(params.get("connect.decimal.precision", DECIMAL_PRECISION_DEFAULT))
    else:
        raise AvroSchemaError(f"not a Connect schema type: {t!r}")
    if isinstance(base, dict) and base["type"] != "record":  # a record has its metadata; a str is a name
        meta = _metadata(schema)
        if t in ("int8", "int16"):
            meta["connect.type"] = t
        if cname in LOGICAL and (cname != DECIMAL or t == "bytes"):
            meta["logicalType"] = LOGICAL[cname]
        base = {**base, **props, **meta}
        if len(base) == 1:
            base = base["type"]
    if optional_union and schema.get("optional", False):
        return [base, "null"] if schema.get("default") is not None else ["null", base]
    return base


def _metadata(schema: dict) -> dict[str, Any]:
    """The `connect.*` properties of a schema, in the order AvroData adds them."""
    meta: dict[str, Any] = {}
    if schema.get("doc") is not None:
        meta["connect.doc"] = schema["doc"]
    if schema.get("version") is not None:
        meta["connect.version"] = schema["version"]
    if schema.get("parameters"):
        meta["connect.parameters"] = schema["parameters"]
    if schema.get("default") is not None:
        meta["connect.default"] = avro_default(schema, schema["default"])
    if schema.get("name") is not None:
        meta["connect.name"] = schema["name"]
    return meta


def _record(schema: dict, names: _Names) -> Any:
    cname = schema.get("name")
    if cname is not None:
        space, name = _split(cname)
    else:
        names.unnamed += 1
        space, name = NAMESPACE, DEFAULT_NAME if names.unnamed == 1 else f"{DEFAULT_NAME}{names.unnamed}"
    full = names.full(space, name)
    if full in names.defined:
        return names.ref(space, name)
    _check_name(name, "record", cname or full)
    names.defined.add(full)
    out: dict[str, Any] = {"type": "record", "name": name}
    if space != names.space:
        out["namespace"] = space or ""
    saved, names.space = names.space, space
    record_doc = (schema.get("parameters") or {}).get("connect.record.doc")
    if record_doc is not None:
        out["doc"] = record_doc
    out["fields"] = [_field(f["field"], f, names, cname or full) for f in schema["fields"]]
    names.space = saved
    out.update(_metadata(schema))
    return out


def _map_entry(schema: dict, names: _Names) -> Any:
    space, name = (NAMESPACE, MAP_ENTRY) if schema.get("name") is None else _split(schema["name"])
    full = names.full(space, name)
    if full in names.defined:
        raise AvroSchemaError(f"Can't redefine: {full} (Confluent's AvroData gives every map with a "
                              f"non-string key the same record name)")
    names.defined.add(full)
    out: dict[str, Any] = {"type": "record", "name": name}
    if space != names.space:
        out["namespace"] = space or ""
    saved, names.space = names.space, space
    out["fields"] = [_field("key", schema["keys"], names, full), _field("value", schema["values"], names, full)]
    names.space = saved
    if schema.get("name") is not None:
        out["connect.internal.type"] = MAP_ENTRY
    out.update(_metadata(schema))
    return out


def _field(name: str, schema: dict, names: _Names, owner: str) -> dict[str, Any]:
    _check_name(name, "field", owner)
    out = {"name": name, "type": _schema(schema, names, True)}
    if schema.get("default") is not None:
        default = avro_default(schema, schema["default"])
        # a field's default goes through Java's Object form: a float32 becomes the double it widens to
        out["default"] = float(np.float32(default)) if schema["type"] == "float" and isinstance(default, float) \
            else default
    elif schema.get("optional", False):
        out["default"] = None
    return out


def _check_name(name: str, kind: str, owner: str) -> None:
    if not valid_name(name):
        raise AvroSchemaError(f"Illegal character in: {name} ({kind} of {owner}): Avro names are letters, digits "
                              f"and _; set the source's field.name.adjustment.mode / schema.name.adjustment.mode "
                              f"to avro")


def avro_default(schema: dict, value: Any) -> Any:
    """A Connect default (JSON form) as an Avro schema's JSON default (`connect.default`): bytes as
    ISO-8859-1 text."""
    t = schema["type"]
    if t == "bytes":
        return base64.b64decode(value).decode("latin-1")
    if t == "struct":
        return {f["field"]: avro_default(f, value.get(f["field"])) for f in schema["fields"]
                if value.get(f["field"]) is not None}
    if t == "array":
        return [avro_default(schema["items"], v) for v in value]
    return value


def parseable(schema: Any) -> Any:
    """The schema without the decimal logical types Avro ignores as invalid (a scale beyond the
    precision: Java's Avro logs and drops them, fastavro refuses the schema); the bytes stay bytes."""
    if isinstance(schema, list):
        return [parseable(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: parseable(v) if k in ("type", "items", "values", "fields") else v for k, v in schema.items()}
    if out.get("logicalType") == "decimal" and not 0 <= out.get("scale", 0) <= out.get("precision", 0):
        del out["logicalType"]
    return out


def wire_bytes(schema_id: int, body: bytes) -> bytes:
    """Confluent's wire format: magic byte 0, the schema id (4 bytes, big-endian), the Avro binary."""
    return MAGIC + schema_id.to_bytes(4, "big") + body


@dataclass
class AvroBlockWriter:
    """Avro schemas (parsed by fastavro, cached by Connect schema) and binary encoding of columns."""

    _parsed: dict[bytes, tuple[str, Any]] = field(default_factory=dict)

    def schema(self, connect: dict) -> tuple[str, Any]:
        """The Avro schema text of a Connect schema and fastavro's parsed form of it."""
        fp = orjson.dumps(connect)
        hit = self._parsed.get(fp)
        if hit is None:
            data = avro_schema(connect)
            hit = self._parsed[fp] = (orjson.dumps(data).decode(), fastavro.parse_schema(parseable(data)))
        return hit

    def encode(self, column: pa.Array, connect: dict, where: str = "") -> list[bytes | None]:
        """The Avro binary of each element of a typed column (None at a null without a default);
        `where` names the column in errors (topic, key or value)."""
        self.schema(connect)  # refuses what Avro cannot name
        encoded = encode_column(column, connect, where or str(connect.get("name"))).to_pylist()
        return [b if ok else None for b, ok in zip(encoded, column.is_valid().to_pylist(), strict=True)]


def encode_datums(parsed: Any, datums: Sequence[Any], where: str = "") -> list[bytes | None]:
    """Each datum's Avro binary (schemaless) in one buffer, then cut; None stays None."""
    buf = io.BytesIO()
    ends: list[int] = []
    write: Callable[..., Any] = fastavro.schemaless_writer
    for d in datums:
        if d is not None:
            try:
                write(buf, parsed, d)
            except (TypeError, ValueError, AttributeError) as exc:
                raise AvroDataError(f"cannot write {where} as Avro ({exc}): a null in a required field? Confluent's "
                                    f"AvroConverter refuses it too") from None
        ends.append(buf.tell())
    data = buf.getbuffer()
    out: list[bytes | None] = []
    start = 0
    for d, end in zip(datums, ends, strict=True):
        out.append(None if d is None else bytes(data[start:end]))
        start = end
    return out
