"""Key and value converters: the sink block's `key.converter`/`value.converter` (bad ones refused by the
real CLI with exit 2 and the closest name), and what each writes for the golden events' typed blocks,
also as the lines of the jsonl sink."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import fastavro
import pytest
import yaml

from headwater.events.formats.converters import Converters, parse_converters, specs_from_json, specs_json
from headwater.events.formats.json import JsonOptions
from headwater.events.formats.registry import DirectoryRegistry, open_registry
from headwater.pipeline_config import parse_config
from headwater.spark.converted import converted_lines
from tests.events.formats.test_avro import golden_blocks, plain

SOURCE = {"connector.class": "postgres", "database.hostname": "127.0.0.1", "database.user": "postgres",
          "database.password": "s3cret-pw", "database.dbname": "inventory", "topic.prefix": "dbserver1"}


def validate(tmp_path: Path, sink: dict[str, Any]) -> subprocess.CompletedProcess:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "source": SOURCE, "sink": {"type": "jsonl", "path": "out/", **sink}}))
    return subprocess.run([sys.executable, "-m", "headwater.cli.main", "validate", str(path)],
                          capture_output=True, text=True)


@pytest.mark.parametrize(("sink", "words"), [
    ({"value.converter": "io.confluent.connect.avro.AvroConvertor"},
     ["sink.value.converter", "did you mean io.confluent.connect.avro.AvroConverter"]),
    ({"value.converter": "avro"}, ["sink.value.converter.schema.registry.url", "is required"]),
    ({"value.converter": "cloudevents", "value.converter.serializer.typ": "avro"},
     ["sink.value.converter.serializer.typ", "did you mean sink.value.converter.serializer.type"]),
    ({"value.converter": "cloudevents", "value.converter.serializer.type": "xml"},
     ["sink.value.converter.serializer.type", "'xml' is not allowed", "json, avro"]),
    ({"value.converter": "cloudevents", "value.converter.serializer.type": "avro",
      "value.converter.avro.schema.registry.url": "/tmp/r"}, ["data.serializer.type", "set data.serializer.type: avro"]),
    ({"key.converter": "io.debezium.converters.CloudEventsConverter"}, ["sink.key.converter", "values only"]),
    ({"value.converter": "cloudevents", "value.converter.metadata.source": "value"},
     ["sink.value.converter.metadata.source", "give id and type their sources", "header,id:generate,type:generate"]),
    ({"value.converter": "cloudevents", "value.converter.metadata.source": "header,ids:generate"},
     ["sink.value.converter.metadata.source", "'ids:generate' is not <field>:<source>", "traceparent"]),
    ({"key.converter": "json", "key.converter.schema.enable": True}, ["did you mean sink.key.converter.schemas.enable"]),
    ({"value.convertr": "json"}, ["sink.value.convertr", "did you mean value.converter"]),
    ({"value.converter": "io.apicurio.registry.utils.converter.AvroConverter"}, ["ccompat"]),
], ids=["class", "registry", "option", "value", "avro-json", "key-cloudevents", "metadata-value", "metadata-field",
        "key-option", "property", "apicurio"])
def test_bad_converters_exit_2(tmp_path: Path, sink: dict, words: list[str]) -> None:
    res = validate(tmp_path, sink)
    assert res.returncode == 2, res.stderr
    for w in words:
        assert w in res.stderr, res.stderr
    assert "s3cret-pw" not in res.stderr + res.stdout


def test_run_refuses_a_bad_converter_before_starting(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "source": SOURCE, "sink": {
        "type": "jsonl", "path": str(tmp_path / "out"), "value.converter": "cloudevents",
        "value.converter.data.serializer.type": "protobuf"}}))
    res = subprocess.run([sys.executable, "-m", "headwater.cli.main", "run", str(path), "--once"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 2, res.stderr
    assert "sink.value.converter.data.serializer.type" in res.stderr and "json, avro" in res.stderr
    assert not (tmp_path / "out").exists()


def test_good_converters_and_the_sink_keys_they_keep(tmp_path: Path) -> None:
    assert validate(tmp_path, {"key.converter": "org.apache.kafka.connect.json.JsonConverter",
                               "value.converter": "io.debezium.converters.CloudEventsConverter",
                               "value.converter.json.schemas.enable": False}).returncode == 0
    base = {"name": "x", "source": SOURCE}
    legacy = parse_config({**base, "sink": {"type": "jsonl", "path": "o", "schemas.enable": True}}).sink
    assert legacy.json_options() == JsonOptions(schemas_enable=True)
    mixed = parse_config({**base, "sink": {"type": "jsonl", "path": "o", "schemas.enable": True,
                                           "key.converter": "json", "key.converter.schemas.enable": "false"}}).sink
    assert mixed.json_options() is None  # key without schemas, value with: the sink writes from typed blocks
    assert mixed.value_converter.json_options() == JsonOptions(schemas_enable=True)
    res = validate(tmp_path, {"value.converter": "json"})
    assert res.returncode == 0
    avro_sink = {**base, "sink": {"type": "avro", "path": "o", "codec": "deflate"}}
    assert parse_config(avro_sink).sink.codec == "deflate"


def test_per_side_json_and_avro_with_a_registry(tmp_path: Path) -> None:
    events, typed = golden_blocks("crud")
    url = (tmp_path / "reg").as_uri()
    key, value = parse_converters({"key.converter": "avro", "key.converter.schema.registry.url": url,
                                   "value.converter": "json", "value.converter.schemas.enable": True},
                                  JsonOptions())
    converters = Converters(*specs_from_json(specs_json(key, value)))
    registry = open_registry(url)
    assert isinstance(registry, DirectoryRegistry)
    for block in typed:
        for i, k, v in zip(block.batch.column("_order").to_pylist(), converters.keys(block), converters.values(block),
                           strict=True):
            assert (None if v is None else json.loads(v)) == events[i]["value"]
            if events[i]["key"] is None:
                assert k is None
                continue
            assert isinstance(k, bytes) and k[0] == 0
            schema_id = int.from_bytes(k[1:5], "big")
            assert registry.versions(f"{block.topic}-key") == [schema_id]
            reader = fastavro.parse_schema(plain(json.loads(registry.schema(schema_id))))
            assert fastavro.schemaless_reader(io.BytesIO(k[5:]), reader, None) == events[i]["key"]["payload"]


def test_jsonl_lines_of_cloudevents_and_avro(tmp_path: Path) -> None:
    events, typed = golden_blocks("crud")
    ce = Converters(*parse_converters({"value.converter": "cloudevents",
                                       "value.converter.json.schemas.enable": "false"}, JsonOptions()))
    lines = [json.loads(line) for line in converted_lines(typed.blocks, ce).to_pylist()]
    assert [(line["topic"], line["key"]) for line in lines] == \
        [(e["topic"], e["key"] and e["key"]["payload"]) for e in events]
    for line, e in zip(lines, events, strict=True):
        if e["value"] is None:
            assert line["value"] is None
        else:
            assert line["value"]["data"]["after"] == e["value"]["payload"]["after"]
            assert line["value"]["iodebeziumop"] == e["value"]["payload"]["op"]
    binary = Converters(*parse_converters({"value.converter": "avro",
                                           "value.converter.schema.registry.url": str(tmp_path / "r")}, JsonOptions()))
    lines = [json.loads(line) for line in converted_lines(typed.blocks, binary).to_pylist()]
    for line, e in zip(lines, events, strict=True):
        assert (line["value"] is None) == (e["value"] is None)
        if line["value"] is not None:
            assert base64.b64decode(line["value"])[:1] == b"\x00"


def test_the_driver_of_headwater_run_does_not_import_pandas():
    """`headwater run` imports the converters (through its configuration): a module-level `pa.scalar` there
    imported pandas into the driver (~40 MB of its memory and ~0.15 s of its start)."""
    import subprocess
    import sys

    code = "import sys, headwater.cli.main, headwater.spark.pipeline; print('pandas' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False"]
