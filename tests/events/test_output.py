"""Typed blocks hold what Debezium's Structs hold where its JSON shows a default or a null with a schema:
a streamed event's `source.snapshot` is null (the JSON says the field's default, "false"); a null key
or header with a schema is written `{"schema": ..., "payload": null}`, a truncate's key `null`."""

from __future__ import annotations

import json

import orjson

from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from headwater.events.formats.json import JsonOptions, block_json, to_event_batch
from headwater.events.output import typed_source
from headwater.events.typed import BlockBuilder, TypedEvents


def test_typed_source_nulls_only_a_streamed_snapshot_marker():
    streamed = {"op": "c", "source": orjson.Fragment(b'{"snapshot":"false","db":"d"}')}
    assert typed_source(streamed) == {"op": "c", "source": {"snapshot": None, "db": "d"}}
    snapshot = {"op": "r", "source": orjson.Fragment(b'{"snapshot":"last","db":"d"}')}
    assert typed_source(snapshot)["source"] == {"snapshot": "last", "db": "d"}
    assert typed_source(None) is None  # a tombstone


def _typed_events(pg_server, dbname: str, during: list[str]) -> list[TypedEvents]:
    props = {**pg_server.connector_properties(dbname), "connector.class": "postgres", "topic.prefix": "t",
             "slot.name": f"{dbname}_slot", "plugin.name": "pgoutput", "skipped.operations": "none"}
    engine = Engine(validate_connector(props), schemas_enable=True, output="typed")
    try:
        out = list(engine.blocks(once=True))
        for sql in during:
            pg_server.execute(sql, dbname=dbname)
        out += list(engine.blocks(once=True))
        return out
    finally:
        engine.close()


def test_streamed_snapshot_is_null_in_blocks_and_false_in_json(pg_server, pg_db):
    pg_server.execute("CREATE TABLE t (id integer PRIMARY KEY, v text); INSERT INTO t VALUES (0, 'snap')",
                      dbname=pg_db)
    # 40 inserts in one transaction: a run decoded column-wise; then row by row: an update, a truncate
    inserts = "INSERT INTO t SELECT i, 'v' || i FROM generate_series(1, 40) i"
    batches = _typed_events(pg_server, pg_db, [inserts, "UPDATE t SET v = 'x' WHERE id = 1", "TRUNCATE t"])
    markers, ops = [], []
    options = JsonOptions(schemas_enable=True)
    for typed in batches:
        for block in typed:
            b = block.batch
            markers += b.column("value").field("source").field("snapshot").to_pylist()
            ops += b.column("op").to_pylist()
        for ev in to_event_batch(typed, options).rows():
            assert ev.value is not None  # no deletes here: no tombstones
            value = json.loads(ev.value)
            expected = "last" if value["payload"]["op"] == "r" else "false"
            assert value["payload"]["source"]["snapshot"] == expected
            if value["payload"]["op"] == "t":
                assert ev.key is None  # Debezium's truncate has no key schema
    assert ops == ["r"] + ["c"] * 40 + ["u", "t"]
    assert markers == ["last"] + [None] * 42


def test_a_null_key_or_header_with_a_schema_is_written_with_its_schema():
    builder = BlockBuilder()
    key_schema = {"type": "string", "optional": True}  # headers made by the builders hold keys
    value_schema = {"type": "struct", "optional": False, "fields": [{"field": "x", "type": "int32", "optional": True}]}
    builder.add("topic", key_schema, None, value_schema, {"x": 1}, "c", 1, 0, [("h", None)])
    builder.add("topic", key_schema, "k", value_schema, {"x": 2}, "c", 1, 0, [("h", "v")])
    builder.add("topic", key_schema, None, value_schema, {"x": 3}, "t", 1, 0)
    (block,) = builder.take()
    assert block.header_schemas == {"h": key_schema}
    for options in (JsonOptions(schemas_enable=True), JsonOptions(schemas_enable=False)):
        def written(payload: object, opts: JsonOptions = options) -> object:
            return {"schema": key_schema, "payload": payload} if opts.schemas_enable else payload

        keys, _, headers = block_json(block, options)
        assert keys[0] is not None and json.loads(keys[0]) == written(None)  # the text "null" without schemas
        assert keys[1] is not None and json.loads(keys[1]) == written("k")
        assert keys[2] is None  # a truncate's key: none at all
        assert headers[0] is not None and json.loads(headers[0][0][1]) == written(None)
        assert headers[1] is not None and json.loads(headers[1][0][1]) == written("v")
