"""The `source` block: the common fields then a connector's tail, as the schema orders them."""

from __future__ import annotations

import orjson

from headwater.connectors.common.records import table_records
from headwater.connectors.common.source_info import (
    COMMON_FIELDS,
    SOURCE_VERSION,
    SourceInfo,
    SourceTemplate,
    source_schema,
    time_values,
)
from tests.connectors.common.support import SOURCE, SampleMaker, Table, context

COMMON = ["version", "connector", "name", "ts_ms", "snapshot", "db", "sequence", "ts_us", "ts_ns"]


def test_schema_has_the_common_fields_then_the_tail():
    assert [f.name for f in SOURCE.fields] == [*COMMON, "table", "server_id", "pos", "row"]
    assert [name for name, _ in COMMON_FIELDS] == COMMON
    schema = SOURCE.to_json()
    assert schema["name"] == "test.Source" and schema["version"] == 1
    snapshot = schema["fields"][4]
    assert snapshot["name"] == "io.debezium.data.Enum" and snapshot["default"] == "false"
    assert source_schema("x", []).fields == SOURCE.fields[:9]


def test_template_bytes_equal_the_schema_driven_serialization():
    maker = SampleMaker(context())
    t = Table("db", "t", ())
    te = table_records(maker.ctx, t, (), streaming=False)
    ts_us = 1_700_000_000_123_456
    src = maker.fixed_source(te, "last", ts_us, {"sequence": orjson.dumps('["a",1]')})
    assert src.open == ("pos", "row")
    data = src.render(b"4711", b"3")
    values = {"version": SOURCE_VERSION, "connector": "testdb", "name": "srv", "ts_ms": ts_us // 1000,
              "snapshot": "last", "db": "db", "sequence": '["a",1]', "ts_us": ts_us, "ts_ns": ts_us * 1000,
              "table": "t", "server_id": 223344, "pos": 4711, "row": 3}
    expected = orjson.dumps({f.name: values[f.name] for f in SOURCE.fields})  # in the schema's field order
    assert data == expected


def test_template_fills_slots_and_leaves_the_rest_open():
    pieces = SourceInfo("c", "n", 'd"b').pieces("true", [b',"x":', "x", b"}"])
    assert [p for p in pieces if isinstance(p, str)] == ["ts_ms", "sequence", "ts_us", "ts_ns", "x"]
    t = SourceTemplate(pieces, {**time_values(2_000_001), "sequence": b"null"})
    assert t.open == ("x",)
    assert orjson.loads(t.render(b"[1]")) == {
        "version": SOURCE_VERSION, "connector": "c", "name": "n", "ts_ms": 2000, "snapshot": "true", "db": 'd"b',
        "sequence": None, "ts_us": 2_000_001, "ts_ns": 2_000_001_000, "x": [1]}


def test_db_per_table_where_a_connector_says_so():
    pieces = SourceInfo("mysql", "n", "ignored").pieces("false", [b"}"], db="inventory")
    block = orjson.loads(SourceTemplate(pieces, {**time_values(0), "sequence": b"null"}).render())
    assert block["db"] == "inventory"
