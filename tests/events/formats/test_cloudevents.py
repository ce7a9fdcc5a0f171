"""CloudEvents of typed blocks against what Debezium's CloudEventsConverter wrote for the same events.

tests/data/formats/postgres/<scenario>/cloudevents.jsonl holds, per golden event, the converter's
output under three configurations (scripts/record_formats.py: Debezium 3.6.3's converter in a JVM):
`no_schemas` (`json.schemas.enable=false`) for every event, `default` (data with its schema) and
`no_extensions` (`extension.attributes.enable=false`) for the first change event of each topic;
null where the converter writes nothing (transaction metadata, heartbeats, logical messages). Each
CloudEvent headwater writes must equal it (as JSON data, attributes in the same order) and be a valid
CloudEvent to the `cloudevents` SDK: its `v1.http.from_json` accepts them all; its strict
`core` validator (SDK 2.x) accepts them but for Debezium's own `iodebeziumtxId` (PostgreSQL's `txId`
source field keeps its capital I, where the CloudEvents spec wants lower case): headwater writes what
Debezium writes.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import fastavro
import pytest
from cloudevents.core.exceptions import CloudEventValidationError
from cloudevents.core.formats.json import JSONFormat
from cloudevents.v1.http import from_json

from headwater.events.formats.cloudevents import (
    CloudEventsOptions,
    CloudEventsWriter,
    adjust_schema_name,
    extension_name,
)
from headwater.events.formats.json import JsonOptions
from headwater.events.formats.registry import DirectoryRegistry, open_registry
from tests.events.formats.test_avro import golden_blocks, plain

RECORDED = Path(__file__).resolve().parents[2] / "data" / "formats" / "postgres"
SCENARIOS = sorted(p.parent.name for p in RECORDED.glob("*/cloudevents.jsonl"))
CONFIGS = {
    "no_schemas": CloudEventsOptions(json=JsonOptions(schemas_enable=False)),
    "default": CloudEventsOptions(),
    "no_extensions": CloudEventsOptions(json=JsonOptions(schemas_enable=False), extension_attributes_enable=False),
}


def same_json(mine: object, java: object) -> bool:
    """Equal, but where the recording holds 0.0 (0 in a float32 array's JSON) for a NaN, an infinity or
    -0.0: the recorder read the golden JSON back with Kafka's JsonConverter, which reads them so."""
    if isinstance(mine, dict) and isinstance(java, dict):
        return mine.keys() == java.keys() and all(same_json(mine[k], java[k]) for k in mine)
    if isinstance(mine, list) and isinstance(java, list):
        return len(mine) == len(java) and all(same_json(a, b) for a, b in zip(mine, java, strict=True))
    lost = mine in ("NaN", "Infinity", "-Infinity") or (isinstance(mine, float) and mine == 0.0)
    return bool(mine == java or (lost and java == 0.0))


def strict(text: bytes, extensions: bool) -> None:
    """The SDK's strict validator accepts the event, but for Debezium's `iodebeziumtxId`."""
    if not extensions:
        assert JSONFormat().read(None, text).get_specversion() == "1.0"
        return
    with pytest.raises(CloudEventValidationError) as refused:
        JSONFormat().read(None, text)
    assert set(refused.value.errors) == {"iodebeziumtxId"}


@pytest.mark.parametrize("name", SCENARIOS)
def test_cloudevents_equal_debeziums(name: str) -> None:
    recorded = [json.loads(line) for line in (RECORDED / name / "cloudevents.jsonl").read_text().splitlines()]
    _, typed = golden_blocks(name)
    checked = 0
    for config, options in CONFIGS.items():
        writer = CloudEventsWriter(options)
        for block in typed:
            for i, mine in zip(block.batch.column("_order").to_pylist(), writer.values(block), strict=True):
                row = recorded[i]
                if row is None or config not in row:
                    if row is None:
                        assert mine is None, i
                    continue
                expected = row[config]
                if expected is None:
                    assert mine is None, i
                    continue
                assert mine is not None, i
                got, want = json.loads(mine), json.loads(expected)
                assert list(got) == list(want), i  # the attributes, in Debezium's order
                assert same_json(got, want), (config, i)
                assert from_json(mine)["id"] == want["id"]  # a valid CloudEvent to the SDK
                strict(mine, options.extension_attributes_enable)
                checked += 1
    if name not in ("messages", "heartbeat"):
        assert checked > 0


def test_avro_data_and_avro_envelope(tmp_path: Path) -> None:
    """`data.serializer.type: avro` (JSON envelope, base64 data, `dataschema`) and `serializer.type: avro`
    (the envelope in Confluent's wire format): the schemas are registered and fastavro reads both back to
    the events' before and after images."""
    events, typed = golden_blocks("crud")
    registry = open_registry(str(tmp_path / "registry"))
    assert isinstance(registry, DirectoryRegistry)
    json_avro = CloudEventsWriter(CloudEventsOptions(data_serializer_type="avro"), registry)
    avro_avro = CloudEventsWriter(CloudEventsOptions(serializer_type="avro", data_serializer_type="avro"), registry)
    checked = 0
    for block in typed:
        if block.topic != "golden.public.items":
            continue
        for i, text, wire in zip(block.batch.column("_order").to_pylist(), json_avro.values(block),
                                 avro_avro.values(block), strict=True):
            payload = events[i]["value"] and events[i]["value"]["payload"]
            if payload is None:
                assert text is None and wire is None
                continue
            assert text is not None and wire is not None
            ce = json.loads(text)
            assert ce["datacontenttype"] == "application/avro" and from_json(text)["id"] == ce["id"]
            strict(text, True)
            data = base64.b64decode(ce["data"])
            schema_id = int.from_bytes(data[1:5], "big")
            assert data[0] == 0 and ce["dataschema"] == f"{registry.url}/schemas/ids/{schema_id}"
            assert registry.versions("golden.public.items-value")[0] == schema_id
            reader = fastavro.parse_schema(plain(json.loads(registry.schema(schema_id))))
            back = fastavro.schemaless_reader(io.BytesIO(data[5:]), reader, None)
            for image in ("before", "after"):
                assert (back[image] and back[image]["id"]) == (payload[image] and payload[image]["id"])
                assert (back[image] and back[image]["name"]) == (payload[image] and payload[image]["name"])
            envelope_id = int.from_bytes(wire[1:5], "big")
            assert registry.versions("golden.public.items-value")[-1] == envelope_id
            envelope_schema = json.loads(registry.schema(envelope_id))
            assert envelope_schema["name"] == "Envelope" and envelope_schema["namespace"] == "golden.golden.CloudEvents"
            envelope = fastavro.schemaless_reader(io.BytesIO(wire[5:]), fastavro.parse_schema(envelope_schema), None)
            assert {k: v for k, v in envelope.items() if k not in ("data", "dataschema")} == \
                {k: v for k, v in ce.items() if k not in ("data", "dataschema")}
            inner = envelope["data"]
            data_id = int.from_bytes(inner[1:5], "big")
            assert registry.versions("golden.public.items-data-value") == [data_id]
            assert envelope["dataschema"].endswith(f"/schemas/ids/{data_id}")
            assert inner[5:] == data[5:]
            checked += 1
    assert checked > 3


def test_names() -> None:
    assert extension_name("ts_ms") == "iodebeziumtsms" and extension_name("txId") == "iodebeziumtxId"
    assert adjust_schema_name("my-server.db.CloudEvents.Envelope", "avro") == "my_server.db.CloudEvents.Envelope"
    assert adjust_schema_name("a_b-c", "avro_unicode") == "a_u005fb_u002dc"
    assert adjust_schema_name("1a", "avro") == "_a"


@pytest.mark.parametrize("name", ["crud", "transaction_metadata"])
def test_avro_cloudevents_equal_debeziums(name: str, tmp_path: Path) -> None:
    """Debezium's converter with `data.serializer.type: avro` and with `serializer.type: avro`, recorded
    against a small Confluent-compatible registry: the same attributes, the same registered schemas
    (`dataschema` and the wire-format ids compared by the schema they name) and the same Avro bodies."""
    recorded = [json.loads(line) for line in (RECORDED / name / "cloudevents_avro.jsonl").read_text().splitlines()]
    java_registry = json.loads((RECORDED / name / "cloudevents_avro_registry.json").read_text())
    java_schemas = {i + 1: json.loads(t) for i, t in enumerate(java_registry["schemas"])}
    registry = open_registry(str(tmp_path / "registry"))
    assert isinstance(registry, DirectoryRegistry)
    _, typed = golden_blocks(name)
    writers = {"avro_data": CloudEventsWriter(CloudEventsOptions(data_serializer_type="avro"), registry),
               "avro_avro": CloudEventsWriter(CloudEventsOptions(serializer_type="avro", data_serializer_type="avro"),
                                              registry)}

    def mine_schema(wire: bytes) -> object:
        return json.loads(registry.schema(int.from_bytes(wire[1:5], "big")))

    def java_schema(wire: bytes) -> object:
        return java_schemas[int.from_bytes(wire[1:5], "big")]

    def named(uri: str, base: str, schemas) -> object:
        assert uri.startswith(base + "/schemas/ids/")
        return schemas(int(uri.rsplit("/", 1)[1]))

    checked = 0
    for block in typed:
        written = {k: w.values(block) for k, w in writers.items()}
        for j, i in enumerate(block.batch.column("_order").to_pylist()):
            if recorded[i] is None:
                assert all(written[k][j] is None for k in writers)
                continue
            # JSON envelope, Avro data
            text = written["avro_data"][j]
            assert text is not None
            got, want = json.loads(text), json.loads(recorded[i]["avro_data"])
            assert list(got) == list(want)
            mine_data, java_data = base64.b64decode(got.pop("data")), base64.b64decode(want.pop("data"))
            assert mine_data[5:] == java_data[5:] and mine_schema(mine_data) == java_schema(java_data)
            assert named(got.pop("dataschema"), registry.url, lambda n: json.loads(registry.schema(n))) == \
                named(want.pop("dataschema"), java_registry["url"], java_schemas.__getitem__)
            assert got == want
            # Avro envelope
            mine_wire, java_wire = written["avro_avro"][j], base64.b64decode(recorded[i]["avro_avro"])
            assert mine_wire is not None
            assert mine_schema(mine_wire) == java_schema(java_wire)
            parsed = fastavro.parse_schema(plain(java_schema(java_wire)))
            got = fastavro.schemaless_reader(io.BytesIO(mine_wire[5:]), parsed, None)
            want = fastavro.schemaless_reader(io.BytesIO(java_wire[5:]), parsed, None)
            mine_data, java_data = got.pop("data"), want.pop("data")
            assert mine_data[5:] == java_data[5:] and mine_schema(mine_data) == java_schema(java_data)
            assert named(got.pop("dataschema"), registry.url, lambda n: json.loads(registry.schema(n))) == \
                named(want.pop("dataschema"), java_registry["url"], java_schemas.__getitem__)
            assert got == want
            checked += 1
    assert checked > 5

    def canonical(schemas: list) -> list[str]:
        return sorted(json.dumps(x, sort_keys=True) for x in schemas)
    # the same schemas under the same subjects (<topic>-value, and <topic>-data-value for Avro envelopes)
    assert {s: canonical([java_schemas[i] for i in ids]) for s, ids in java_registry["subjects"].items()} == \
        {s: canonical([json.loads(registry.schema(i)) for i in registry.versions(s)]) for s in java_registry["subjects"]}
