"""Key and value converters, set separately as Kafka Connect sets them: `key.converter`, `value.converter`.

A converter is named by Kafka Connect's class name or a short name (`CONVERTERS`) and takes its
options with the converter's prefix (`value.converter.schemas.enable`, ...), as a Kafka Connect
worker does:

- `org.apache.kafka.connect.json.JsonConverter` (`json`): `schemas.enable`,
  `replace.null.with.default`. Their defaults are the sink's own `schemas.enable` (false) and
  `replace.null.with.default` (true), so a sink that sets only those keeps meaning what it meant.
- `io.confluent.connect.avro.AvroConverter` (`avro`): `schema.registry.url` (required: a directory,
  `file:///path` or Confluent-compatible `http(s)://` URLs, see `registry`); the key's schema is
  registered under `<topic>-key`, the value's under `<topic>-value`; Confluent's wire format.
- `io.debezium.converters.CloudEventsConverter` (`cloudevents`, values only): `serializer.type`,
  `data.serializer.type` (json | avro), `json.schemas.enable`, `json.replace.null.with.default`,
  `avro.schema.registry.url` (required with Avro), `extension.attributes.enable`,
  `schema.name.adjustment.mode` (none | avro | avro_unicode), `schema.cloudevents.name`,
  `metadata.source` (`value` or `header`, then `id:` and `type:` `generate` or `header`: see
  `cloudevents.MetadataSource`).

Apicurio's `io.apicurio.registry.utils.converter.AvroConverter` is refused with a hint: it writes
Apicurio's own ids; Apicurio's Confluent-compatible API serves Confluent's converter. An unknown
converter or option is refused with the closest known name (`parse_converters`). `Converters`
writes the keys and values of typed blocks: JSON text (`str`) or bytes (Avro, Avro CloudEvents).
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any

from headwater.config.errors import ConfigError, ConfigErrors
from headwater.events.formats.avro import AvroBlockWriter, wire_bytes
from headwater.events.formats.cloudevents import CloudEventsOptions, CloudEventsWriter, MetadataSource
from headwater.events.formats.json import JsonOptions, column_json
from headwater.events.formats.registry import SchemaRegistry, open_registry
from headwater.events.typed import TypedBlock

JSON, AVRO, CLOUDEVENTS = "json", "avro", "cloudevents"
CONVERTERS = {
    "org.apache.kafka.connect.json.JsonConverter": JSON, JSON: JSON,
    "io.confluent.connect.avro.AvroConverter": AVRO, AVRO: AVRO,
    "io.debezium.converters.CloudEventsConverter": CLOUDEVENTS, CLOUDEVENTS: CLOUDEVENTS,
}
APICURIO = "io.apicurio.registry.utils.converter.AvroConverter"
BOOLEAN = ("true", "false")
#: each converter's options: allowed values (None: any text) and default (None: none)
OPTIONS: dict[str, dict[str, tuple[tuple[str, ...] | None, str | None]]] = {
    JSON: {"schemas.enable": (BOOLEAN, None), "replace.null.with.default": (BOOLEAN, None)},
    AVRO: {"schema.registry.url": (None, None)},
    CLOUDEVENTS: {
        "serializer.type": ((JSON, AVRO), JSON), "data.serializer.type": ((JSON, AVRO), JSON),
        "json.schemas.enable": (BOOLEAN, "true"), "json.replace.null.with.default": (BOOLEAN, "true"),
        "avro.schema.registry.url": (None, None), "extension.attributes.enable": (BOOLEAN, "true"),
        "schema.name.adjustment.mode": (("none", "avro", "avro_unicode"), "none"),
        "schema.cloudevents.name": (None, None), "metadata.source": (None, "value,id:generate,type:generate"),
    },
}
#: forms of `metadata.source` named in its error's hint
METADATA_SOURCES = ("value,id:generate,type:generate", "value,id:header,type:header", "header",
                    "header,id:generate,type:generate")


@dataclass(frozen=True)
class ConverterSpec:
    """A validated converter: its kind (`json`, `avro`, `cloudevents`) and options (text, defaults filled)."""

    kind: str
    options: dict[str, str] = field(default_factory=dict)

    def flag(self, name: str) -> bool:
        return self.options[name] == "true"

    def json_options(self, prefix: str = "") -> JsonOptions:
        return JsonOptions(schemas_enable=self.flag(prefix + "schemas.enable"),
                           replace_null_with_default=self.flag(prefix + "replace.null.with.default"))


def parse_converters(props: dict[str, Any], legacy: JsonOptions, where: str = "sink"
                     ) -> tuple[ConverterSpec, ConverterSpec]:
    """The key and value converters of `props` (keys `key.converter[.*]`, `value.converter[.*]`);
    `legacy` holds the sink's own `schemas.enable`/`replace.null.with.default`, the JSON converter's
    defaults. Raises `ConfigErrors` naming each bad property."""
    errors: list[ConfigError] = []
    specs = []
    for side in ("key", "value"):
        prefix = f"{side}.converter"
        options = {k[len(prefix) + 1:]: v for k, v in props.items() if k.startswith(prefix + ".")}
        strays = [k for k in props if k.startswith(side) and k != prefix and not k.startswith(prefix + ".")]
        errors.extend(ConfigError(f"{where}.{k}", "unknown property", f"did you mean {prefix}?") for k in strays)
        specs.append(_spec(side, props.get(prefix), options, legacy, f"{where}.{prefix}", errors))
    if errors:
        raise ConfigErrors(errors)
    return specs[0], specs[1]


def _text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _spec(side: str, name: Any, options: dict[str, Any], legacy: JsonOptions, where: str,
          errors: list[ConfigError]) -> ConverterSpec:
    if name is None:
        kind = JSON
    else:
        kind = CONVERTERS.get(str(name), "")
        if str(name) == APICURIO:
            errors.append(ConfigError(where, f"{APICURIO} is not supported",
                                      "Apicurio's converter writes Apicurio's own schema ids: use "
                                      "io.confluent.connect.avro.AvroConverter with schema.registry.url set to "
                                      "Apicurio's Confluent-compatible API (<apicurio>/apis/ccompat/v7)"))
            return ConverterSpec(JSON)
        if not kind:
            close = difflib.get_close_matches(str(name), list(CONVERTERS) + [APICURIO], n=1, cutoff=0.5)
            hint = f"did you mean {close[0]}?" if close else "allowed: " + ", ".join(CONVERTERS)
            errors.append(ConfigError(where, f"unknown converter {name!r}", hint))
            return ConverterSpec(JSON)
    if kind == CLOUDEVENTS and side == "key":
        errors.append(ConfigError(where, "CloudEventsConverter converts record values only",
                                  "use it as value.converter; set key.converter to json or avro"))
    known = OPTIONS[kind]
    out: dict[str, str] = {}
    for option, raw in options.items():
        if option not in known:
            close = difflib.get_close_matches(option, list(known), n=1)
            hint = f"did you mean {where}.{close[0]}?" if close else "allowed: " + ", ".join(known)
            errors.append(ConfigError(f"{where}.{option}", f"unknown option of the {kind} converter", hint))
            continue
        value = _text(raw).strip()
        allowed = known[option][0]
        if allowed is not None and value.lower() not in allowed:
            errors.append(ConfigError(f"{where}.{option}", f"{value!r} is not allowed",
                                      "allowed values: " + ", ".join(allowed)))
            continue
        out[option] = value.lower() if allowed is not None else value
    for option, (_, default) in known.items():
        if default is not None:
            out.setdefault(option, default)
    if kind == JSON:
        out.setdefault("schemas.enable", _text(legacy.schemas_enable))
        out.setdefault("replace.null.with.default", _text(legacy.replace_null_with_default))
    elif kind == AVRO and not out.get("schema.registry.url"):
        errors.append(ConfigError(f"{where}.schema.registry.url", "is required for the Avro converter",
                                  "a directory (file:///path) or a Confluent-compatible registry URL"))
    elif kind == CLOUDEVENTS:
        _check_cloudevents(out, where, errors)
    return ConverterSpec(kind, out)


def _check_cloudevents(out: dict[str, str], where: str, errors: list[ConfigError]) -> None:
    if out["serializer.type"] == AVRO and out["data.serializer.type"] == JSON:
        errors.append(ConfigError(f"{where}.data.serializer.type", "json is not allowed with serializer.type avro",
                                  "Cannot use 'application/json' data content type within Avro events: "
                                  "set data.serializer.type: avro"))
    if AVRO in (out["serializer.type"], out["data.serializer.type"]) and not out.get("avro.schema.registry.url"):
        errors.append(ConfigError(f"{where}.avro.schema.registry.url", "is required when CloudEvents use Avro",
                                  "a directory (file:///path) or a Confluent-compatible registry URL"))
    try:
        MetadataSource.parse(out["metadata.source"])
    except ValueError as exc:
        errors.append(ConfigError(f"{where}.metadata.source", f"{out['metadata.source']!r}: {exc}",
                                  "the global source value or header, then id:<generate|header> and "
                                  "type:<generate|header>, e.g. " + "; ".join(METADATA_SOURCES)))


def plain_json(key: ConverterSpec, value: ConverterSpec) -> JsonOptions | None:
    """The JSON options when both converters are JSON converters with the same options (the source then
    writes the JSON itself), else None."""
    if key.kind == JSON and value.kind == JSON and key.options == value.options:
        return key.json_options()
    return None


def specs_json(key: ConverterSpec, value: ConverterSpec) -> str:
    """The two converters as JSON text (a Spark option)."""
    return json.dumps({"key": [key.kind, key.options], "value": [value.kind, value.options]})


def specs_from_json(text: str) -> tuple[ConverterSpec, ConverterSpec]:
    data = json.loads(text)
    return ConverterSpec(*data["key"]), ConverterSpec(*data["value"])


class Converters:
    """Writes the keys and values of typed blocks with a key and a value converter."""

    def __init__(self, key: ConverterSpec, value: ConverterSpec):
        self.key_spec, self.value_spec = key, value
        self.avro = AvroBlockWriter()
        self._registries: dict[str, SchemaRegistry] = {}
        self._cloudevents: CloudEventsWriter | None = None

    def registry(self, url: str) -> SchemaRegistry:
        hit = self._registries.get(url)
        if hit is None:
            hit = self._registries[url] = open_registry(url)
        return hit

    def keys(self, block: TypedBlock) -> list[str | bytes | None]:
        return self._write("key", self.key_spec, block)

    def values(self, block: TypedBlock) -> list[str | bytes | None]:
        return self._write("value", self.value_spec, block)

    def _write(self, side: str, spec: ConverterSpec, block: TypedBlock) -> list[str | bytes | None]:
        schema = block.key_schema if side == "key" else block.value_schema
        column = block.batch.column(side)
        if spec.kind == JSON:
            return list(column_json(column, schema, spec.json_options()))
        if spec.kind == AVRO:
            if schema is None:
                return [None] * len(block)
            registry = self.registry(spec.options["schema.registry.url"])
            text, _ = self.avro.schema(schema)
            schema_id = registry.register(f"{block.topic}-{side}", text)
            return [None if b is None else wire_bytes(schema_id, b)
                    for b in self.avro.encode(column, schema, f"the {side} of an event of {block.topic}")]
        if self._cloudevents is None:
            url = spec.options.get("avro.schema.registry.url")
            self._cloudevents = CloudEventsWriter(cloudevents_options(spec), self.registry(url) if url else None,
                                                  self.avro)
        written = self._cloudevents.values(block)
        if spec.options["serializer.type"] == JSON:
            return [None if v is None else v.decode() for v in written]
        return list(written)


def cloudevents_options(spec: ConverterSpec) -> CloudEventsOptions:
    """The CloudEvents writer's options of a `cloudevents` converter."""
    o = spec.options
    return CloudEventsOptions(serializer_type=o["serializer.type"], data_serializer_type=o["data.serializer.type"],
                              json=spec.json_options("json."),
                              extension_attributes_enable=spec.flag("extension.attributes.enable"),
                              schema_name_adjustment_mode=o["schema.name.adjustment.mode"],
                              schema_cloudevents_name=o.get("schema.cloudevents.name"),
                              metadata_source=MetadataSource.parse(o["metadata.source"]))
