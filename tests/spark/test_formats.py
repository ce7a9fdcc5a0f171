"""headwater's Spark query (`run --once`'s, in the tests' shared local Spark session) on a real
PostgreSQL into the Avro and CloudEvents formats.

The `crud` golden scenario (snapshot, then inserts, updates, deletes, a key change) runs twice (the
setup as snapshot, then the changes), into:

- the `avro` sink: Avro container files per topic, read back with fastavro, whose schema is the one
  Confluent's AvroData makes from the value's Connect schema and whose records are the events'
  values (all but tombstones), equal to Debezium's recorded events after normalization;
- the `jsonl` sink with `value.converter: io.debezium.converters.CloudEventsConverter`: every line's
  value a CloudEvent the `cloudevents` SDK accepts, its data the event's before and after images,
  its attributes those Debezium's converter writes, in its order;
- the `jsonl` sink with Confluent's AvroConverter for keys and values and a schema registry
  directory: base64 wire-format bytes that decode, by the registered schemas, to the events.

Spark's `avro` reader is not tried: the spark-avro package is not on this machine's class path.
"""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pytest
from cloudevents.v1.http import from_json

from headwater.events.formats.avro import avro_schema
from headwater.events.formats.registry import DirectoryRegistry, open_registry
from tests.events.formats.test_avro import plain
from tests.golden_support import assert_events_equal, load_scenario, run_psql_script, scenario_dirs
from tests.spark.test_pipeline import drop_db, fresh_db
from tests.spark_support import read_sink, run_once, write_config

pytestmark = pytest.mark.spark

CRUD = next(d for d in scenario_dirs("postgres") if d.name == "crud")
RECORDED_CE = Path(__file__).resolve().parents[1] / "data" / "formats" / "postgres" / "crud" / "cloudevents.jsonl"


def run_crud(spark, pg_server, tmp_path: Path, sink: dict) -> list[dict]:
    """Run the crud scenario through the pipeline's query twice; Debezium's recorded events."""
    sc = load_scenario(CRUD)
    db = fresh_db(pg_server, "golden")
    try:
        run_psql_script(pg_server, db, sc.setup)
        config = write_config(tmp_path, pg_server, db, source=dict(sc.properties), sink=sink, name="golden")
        run_once(spark, config)
        assert sc.during is not None
        run_psql_script(pg_server, db, sc.during)
        run_once(spark, config)
    finally:
        drop_db(pg_server, db)
    return sc.events


def test_avro_container_files(spark, pg_server, tmp_path):
    events = run_crud(spark, pg_server, tmp_path, {"type": "avro", "codec": "deflate"})
    files = sorted((tmp_path / "out").rglob("*.avro"))
    assert files and all(f.parent.name == "golden.public.items" for f in files)
    assert not list((tmp_path / "out").rglob("*.tmp"))
    values = [e for e in events if e["value"] is not None]
    schema = avro_schema(values[0]["value"]["schema"])
    records = []
    for f in files:
        with open(f, "rb") as fh:
            reader = fastavro.reader(fh)
            assert reader.codec == "deflate"
            assert fastavro.parse_schema(json.loads(reader.metadata["avro.schema"])) == fastavro.parse_schema(schema)
            records.extend(reader)
    # the records as Debezium's JSON values (decimals back to base64 text) against the recording
    actual = [{"topic": "golden.public.items", "key": e["key"], "value": {"schema": e["value"]["schema"],
                                                                        "payload": as_json(r)}}
              for e, r in zip(values, records, strict=True)]
    assert_events_equal(values, actual)


def as_json(record: dict) -> dict:
    """An Avro record read by fastavro as Connect's JSON payload (the decimal `price` as base64 text)."""
    def image(row: dict | None) -> dict | None:
        if row is None:
            return None
        out = dict(row)
        if out.get("price") is not None:  # numeric(10,2)
            unscaled = int(out["price"].scaleb(2))
            size = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
            out["price"] = base64.b64encode(unscaled.to_bytes(size, "big", signed=True)).decode()
        return out
    return {**record, "before": image(record["before"]), "after": image(record["after"])}


def test_cloudevents_lines(spark, pg_server, tmp_path):
    events = run_crud(spark, pg_server, tmp_path, {"value.converter": "io.debezium.converters.CloudEventsConverter",
                                            "value.converter.json.schemas.enable": False})
    lines = read_sink(tmp_path / "out")
    assert len(lines) == len(events)
    recorded = json.loads(next(line for line in RECORDED_CE.read_text().splitlines() if line != "null")
                          )["no_schemas"]
    order = list(json.loads(recorded))
    for line, e in zip(lines, events, strict=True):
        assert line["topic"] == e["topic"] and line["key"] == (e["key"] and e["key"]["payload"])
        if e["value"] is None:
            assert line["value"] is None
            continue
        ce, payload = line["value"], e["value"]["payload"]
        assert list(ce) == order
        assert from_json(json.dumps(ce))["source"] == "/debezium/postgresql/golden"
        assert ce["id"] == (f"name:golden;lsn:{ce['iodebeziumlsn']};txId:{ce['iodebeziumtxId']};"
                            f"sequence:{ce['iodebeziumsequence']}")
        assert ce["iodebeziumop"] == payload["op"] and ce["iodebeziumtable"] == payload["source"]["table"]
        assert ce["data"] == {"before": payload["before"], "after": payload["after"]}


def test_avro_converter_lines_and_registry(spark, pg_server, tmp_path):
    url = (tmp_path / "registry").as_uri()
    events = run_crud(spark, pg_server, tmp_path, {"key.converter": "io.confluent.connect.avro.AvroConverter",
                                            "key.converter.schema.registry.url": url,
                                            "value.converter": "avro", "value.converter.schema.registry.url": url})
    registry = open_registry(url)
    assert isinstance(registry, DirectoryRegistry)
    assert registry.versions("golden.public.items-key") == [1] and registry.versions("golden.public.items-value") == [2]
    lines = read_sink(tmp_path / "out")
    assert len(lines) == len(events)
    readers = {i: fastavro.parse_schema(plain(json.loads(registry.schema(i)))) for i in (1, 2)}
    actual = []
    for line in lines:
        decoded: dict[str, Any] = {}
        for part in ("key", "value"):
            if line[part] is None:
                decoded[part] = None
                continue
            wire = base64.b64decode(line[part])
            schema_id = int.from_bytes(wire[1:5], "big")
            assert wire[0] == 0 and schema_id == (1 if part == "key" else 2)
            decoded[part] = fastavro.schemaless_reader(io.BytesIO(wire[5:]), readers[schema_id], None)
        actual.append(decoded)
    for a, e in zip(actual, events, strict=True):
        assert a["key"] == e["key"]["payload"]
        if e["value"] is None:
            assert a["value"] is None
            continue
        payload = e["value"]["payload"]
        assert a["value"]["op"] == payload["op"]
        for image in ("before", "after"):
            assert (a["value"][image] and a["value"][image]["id"]) == (payload[image] and payload[image]["id"])
            assert (a["value"][image] and a["value"][image]["name"]) == (payload[image] and payload[image]["name"])
