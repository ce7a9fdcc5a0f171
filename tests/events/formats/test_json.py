"""Typed blocks made from the events the real Debezium wrote, written back as JSON: equal.

Every event of every PostgreSQL golden scenario (tests/golden/postgres/*/debezium.jsonl, recorded
from Debezium 3.6.3 with schemas) goes into typed blocks by its own Connect schemas and comes out
through the JSON format unchanged: so the Arrow types hold every value those events hold. The
hand-made cases cover what no PostgreSQL event has (tombstones beside their deletes, headers, a
null replaced by its default, maps, values beyond Python's dates).
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest

from headwater.events.formats.json import JsonOptions, to_event_batch
from headwater.events.typed import BlockBuilder, TypedEvents

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "postgres"
SCENARIOS = sorted(p.parent for p in GOLDEN.glob("*/debezium.jsonl"))


def _parts(record: dict | None) -> tuple[dict | None, object]:
    if record is None:
        return None, None
    return record["schema"], record["payload"]


@pytest.mark.parametrize("directory", SCENARIOS, ids=[d.name for d in SCENARIOS])
def test_debezium_events_round_trip(directory: Path) -> None:
    events = [json.loads(line) for line in (directory / "debezium.jsonl").read_text().splitlines() if line]
    builder = BlockBuilder()
    for i, e in enumerate(events):
        key_schema, key = _parts(e["key"])
        value_schema, value = _parts(e["value"])
        if value is None:  # a tombstone: typed by the value schema of the topic's other events
            value_schema = next((x["value"]["schema"] for x in events if x["topic"] == e["topic"] and x["value"]),
                                None)
        builder.add(e["topic"], key_schema, key, value_schema, value,
                    value.get("op") if isinstance(value, dict) else None, i, 0)
    typed = builder.take()
    assert len(typed) == len(events)
    out = list(to_event_batch(typed, JsonOptions(schemas_enable=True, replace_null_with_default=False)).rows())
    for e, row in zip(events, out, strict=True):
        assert row.topic == e["topic"]
        assert (None if row.key is None else json.loads(row.key)) == e["key"]
        assert (None if row.value is None else json.loads(row.value)) == e["value"]


KEY = {"type": "struct", "fields": [{"type": "int32", "optional": False, "field": "id"}], "optional": False,
       "name": "t.Key"}
ROW = {"type": "struct", "optional": True, "name": "t.Value", "fields": [
    {"type": "int32", "optional": False, "field": "id"},
    {"type": "string", "optional": True, "default": "none", "field": "s"},
    {"type": "map", "keys": {"type": "string", "optional": False}, "values": {"type": "int64", "optional": True},
     "optional": True, "field": "m"},
    {"type": "map", "keys": {"type": "int32", "optional": False}, "values": {"type": "string", "optional": True},
     "optional": True, "field": "pairs"},
    {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "version": 1, "field": "ts"},
    {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
     "parameters": {"scale": "2"}, "field": "big"},
    {"type": "double", "optional": True, "field": "d"},
]}
ENVELOPE = {"type": "struct", "optional": False, "name": "t.Envelope", "fields": [
    {**ROW, "field": "before"}, {**ROW, "field": "after"}, {"type": "string", "optional": False, "field": "op"}]}


def _json(typed: TypedEvents, **options: bool) -> list[tuple]:
    return [(r.topic, r.key, r.value, r.op, r.headers, r.change_type, r.commit_version)
            for r in to_event_batch(typed, JsonOptions(**options)).rows()]


def test_record_kinds_order_headers_and_defaults() -> None:
    b = BlockBuilder()
    row = {"id": 1, "s": None, "m": {"a": 1, "b": None}, "pairs": [[1, "x"], [2, None]], "ts": 2**62,
           "big": "AP////////////////////////////8=", "d": "NaN"}
    b.add("t", KEY, {"id": 1}, ENVELOPE, {"before": None, "after": row, "op": "c"}, "c", 10, 5)
    b.add("tx", None, None, {"type": "struct", "optional": False, "fields": [
        {"type": "string", "optional": False, "field": "status"}]}, {"status": "BEGIN"}, None, 11, 5)
    b.add("t", KEY, {"id": 1}, ENVELOPE, {"before": row, "after": None, "op": "d"}, "d", 12, 5,
          headers=[("__debezium.newkey", {"id": 2})])
    b.add("t", KEY, {"id": 1}, ENVELOPE, None, None, 12, 5)
    typed = b.take()
    assert [len(block) for block in typed] == [3, 1]  # one block per topic and schemas
    out = _json(typed, schemas_enable=False, replace_null_with_default=True)
    assert [o[0] for o in out] == ["t", "tx", "t", "t"]  # the order they were made in
    after = orjson.loads(out[0][2])["after"]
    assert after == {"id": 1, "s": "none", "m": {"a": 1, "b": None}, "pairs": [[1, "x"], [2, None]], "ts": 2**62,
                     "big": "AP////////////////////////////8=", "d": "NaN"}
    assert orjson.loads(_json(typed, replace_null_with_default=False)[0][2])["after"]["s"] is None
    assert out[1][1] is None and orjson.loads(out[1][2]) == {"status": "BEGIN"}
    assert out[2][4] == [("__debezium.newkey", '{"id":2}')] and out[2][5] == "delete"
    assert out[3][1:4] == ('{"id":1}', None, None) and out[3][5] is None
    with_schema = _json(typed, schemas_enable=True)
    assert orjson.loads(with_schema[2][4][0][1]) == {"schema": KEY, "payload": {"id": 2}}
    assert orjson.loads(with_schema[0][2])["schema"] == ENVELOPE
