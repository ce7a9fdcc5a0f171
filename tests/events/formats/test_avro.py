"""Avro schemas and bytes of typed blocks against what Confluent's AvroConverter wrote for the same events.

tests/data/formats/postgres/<scenario>/avro.json holds, for every event of a PostgreSQL golden
scenario, the Avro schema `AvroData.fromConnectSchema` made and the Confluent wire-format bytes
`AvroConverter` wrote (recorded by scripts/record_formats.py with Confluent 7.0.16 in a JVM). The
events go into typed blocks by their own Connect schemas; each block's schemas and encoded columns
must equal the recording (the schema as JSON data, the Avro body byte for byte), and fastavro must
read the bytes back to the events' values.
"""

from __future__ import annotations

import base64
import io
import json
import math
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pytest

from headwater.events.formats.avro import AvroBlockWriter, AvroSchemaError, avro_schema, valid_name
from headwater.events.typed import BlockBuilder, TypedEvents

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "data" / "formats" / "postgres"
GOLDEN = ROOT / "golden" / "postgres"
SCENARIOS = sorted(p.parent.name for p in RECORDED.glob("*/avro.json"))


def golden_blocks(name: str) -> tuple[list[dict], TypedEvents]:
    """The golden events of a scenario and their typed blocks (a tombstone typed by its topic's value schema)."""
    events = [json.loads(line) for line in (GOLDEN / name / "debezium.jsonl").read_text().splitlines() if line]
    builder = BlockBuilder()
    for i, e in enumerate(events):
        key_schema, key = (None, None) if e["key"] is None else (e["key"]["schema"], e["key"]["payload"])
        value_schema, value = (None, None) if e["value"] is None else (e["value"]["schema"], e["value"]["payload"])
        if value is None:
            value_schema = next((x["value"]["schema"] for x in events if x["topic"] == e["topic"] and x["value"]),
                                None)
        builder.add(e["topic"], key_schema, key, value_schema, value,
                    value.get("op") if isinstance(value, dict) else None, i, 0)
    return events, builder.take()


def plain(schema: Any) -> Any:
    """An Avro schema without logical types: fastavro then reads the numbers and bytes themselves."""
    if isinstance(schema, dict):
        return {k: plain(v) for k, v in schema.items() if k != "logicalType"}
    if isinstance(schema, list):
        return [plain(s) for s in schema]
    return schema


def datum(schema: dict, value: Any) -> Any:
    """A JSON-form Connect value as the datum fastavro reads back (bytes decoded, map kinds kept)."""
    if value is None:
        return None
    t = schema["type"]
    if t == "bytes":
        return base64.b64decode(value)
    if t in ("float", "double") and isinstance(value, str):
        return float(value.replace("Infinity", "inf"))
    if t == "struct":
        return {f["field"]: datum(f, value.get(f["field"], f.get("default"))) for f in schema["fields"]}
    if t == "array":
        return [datum(schema["items"], v) for v in value]
    if t == "map":
        if schema["keys"]["type"] == "string":
            return {k: datum(schema["values"], v) for k, v in value.items()}
        return [{"key": datum(schema["keys"], k), "value": datum(schema["values"], v)} for k, v in value]
    return value


def same_schema(mine: Any, java: Any) -> bool:
    """Equal, but where the recording holds 0.0 for a NaN or infinite default: the recorder read the
    golden schema back with Kafka's JsonConverter, which reads the default "NaN" as 0.0 (Debezium's own
    schema holds NaN, which headwater writes as Jackson does, "NaN")."""
    if isinstance(mine, dict) and isinstance(java, dict):
        return mine.keys() == java.keys() and all(same_schema(mine[k], java[k]) for k in mine)
    if isinstance(mine, list) and isinstance(java, list):
        return len(mine) == len(java) and all(same_schema(a, b) for a, b in zip(mine, java, strict=True))
    return bool(mine == java or (mine in ("NaN", "Infinity", "-Infinity") and java == 0.0))


def same_floats(a: Any, b: Any, lost_by_json: bool = False) -> bool:
    """Equal, a float32 compared at float32 precision and NaN equal to NaN; with `lost_by_json`, `b` may
    hold 0.0 where `a` holds NaN, an infinity or -0.0 (Kafka's JsonConverter reads the "NaN" and
    "Infinity" of the golden JSON, and -0.0 through BigDecimal, as 0.0: an artifact of the recorder)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_floats(a[k], b[k], lost_by_json) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_floats(x, y, lost_by_json) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float):
        if lost_by_json and b == 0.0 and (not math.isfinite(a) or a == 0.0):
            return True
        return bool(a == b or (a != a and b != b) or np.float32(a) == np.float32(b))
    return bool(a == b)


@pytest.mark.parametrize("name", SCENARIOS)
def test_schemas_and_bytes_equal_confluents(name: str) -> None:
    recorded = json.loads((RECORDED / name / "avro.json").read_text())
    events, typed = golden_blocks(name)
    writer = AvroBlockWriter()
    checked = differing = 0
    for block in typed:
        order = block.batch.column("_order").to_pylist()
        for part, schema in (("key", block.key_schema), ("value", block.value_schema)):
            expected = [recorded["events"][i][part] for i in order]
            if schema is None or all(e is None for e in expected):
                assert all(e is None for e in expected)
                continue
            errors = [e["error"] for e in expected if isinstance(e, dict)]
            if errors:  # Confluent refused the schema: so must we, for the same name
                with pytest.raises(AvroSchemaError, match=f"Illegal character in: {errors[0]}".split(": ")[1]):
                    avro_schema(schema)
                continue
            text, parsed = writer.schema(schema)
            bodies = writer.encode(block.batch.column(part), schema)
            reader = fastavro.parse_schema(plain(json.loads(text)))
            for i, exp, body in zip(order, expected, bodies, strict=True):
                if exp is None:
                    assert body is None
                    continue
                assert same_schema(json.loads(text), json.loads(recorded["schemas"][exp[0]])), (part, events[i]["topic"])
                wire = base64.b64decode(exp[1])
                assert body is not None
                back = fastavro.schemaless_reader(io.BytesIO(body), reader, None)
                if body != wire[5:]:
                    java = fastavro.schemaless_reader(io.BytesIO(wire[5:]), reader, None)
                    if java == back:  # a map's entries in another order: the recorder's Java HashMap's
                        assert '"type": "map"' in json.dumps(schema), (part, i)
                    else:  # the recorder's JsonConverter lost a NaN, an infinity or -0.0
                        assert same_floats(back, java, lost_by_json=True), (part, i)
                        assert any(t in json.dumps(events[i][part]) for t in ('"NaN"', "Infinity", "-0.0")), (part, i)
                    differing += 1
                assert same_floats(back, datum(schema, events[i][part]["payload"])), (part, i)
                checked += 1
    assert checked > differing


def test_every_connect_type_of_the_golden_events_is_covered() -> None:
    """The recordings hold every Connect type and logical type name the golden events hold (int8: no
    Debezium type maps to it; `test_names` checks it against what Confluent's AvroData wrote)."""
    def kinds(schema: dict, out: set) -> None:
        out.add((schema["type"], schema.get("name") if schema["type"] != "struct" else None))
        for f in schema.get("fields", []):
            kinds(f, out)
        for part in ("items", "keys", "values"):
            if part in schema:
                kinds(schema[part], out)

    everything: set = set()
    covered: set = set()
    for d in GOLDEN.glob("*/debezium.jsonl"):
        for line in d.read_text().splitlines():
            e = json.loads(line)
            for part in ("key", "value"):
                if e[part] is not None:
                    kinds(e[part]["schema"], everything)
                    if d.parent.name in SCENARIOS:
                        kinds(e[part]["schema"], covered)
    assert everything == covered
    assert {"int16", "int32", "int64", "float", "double", "boolean", "string", "bytes", "array",
            "map", "struct"} <= {t for t, _ in covered}


def test_names() -> None:
    assert valid_name("_1col") and valid_name("übung") and valid_name("a1")
    assert not valid_name("1col") and not valid_name("a-b") and not valid_name("v w") and not valid_name("")
    unnamed: dict[str, Any] = {"type": "struct", "optional": False, "fields": [
        {"field": "a", "type": "struct", "optional": True, "fields": [{"field": "x", "type": "int8", "optional": False}]},
        {"field": "m", "type": "map", "optional": False, "keys": {"type": "int32", "optional": False},
         "values": {"type": "string", "optional": True}},
        {"field": "n", "type": "map", "optional": False, "keys": {"type": "int32", "optional": False},
         "values": {"type": "string", "optional": True}}]}
    with pytest.raises(AvroSchemaError, match="Can't redefine: io.confluent.connect.avro.MapEntry"):
        avro_schema(unnamed)  # as Confluent's AvroData 7.0 (checked in a JVM)
    del unnamed["fields"][2]
    # what AvroData 7.0.16 wrote for this schema
    assert avro_schema(unnamed) == {
        "type": "record", "name": "ConnectDefault", "namespace": "io.confluent.connect.avro", "fields": [
            {"name": "a", "type": ["null", {"type": "record", "name": "ConnectDefault2", "fields": [
                {"name": "x", "type": {"type": "int", "connect.type": "int8"}}]}], "default": None},
            {"name": "m", "type": {"type": "array", "items": {"type": "record", "name": "MapEntry", "fields": [
                {"name": "key", "type": "int"}, {"name": "value", "type": ["null", "string"], "default": None}]}}}]}
