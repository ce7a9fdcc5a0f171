"""The outbox EventRouter: Debezium's events for three configurations on a real PostgreSQL, and the
cases a recording cannot show (bad options, fatal updates, what JSON expansion infers)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from headwater.config.errors import ConfigErrors
from headwater.events.connect import INT32, INT64, STRING, Schema, primitive, struct
from headwater.events.formats.converters import Converters, parse_converters
from headwater.events.formats.json import JsonOptions
from headwater.events.typed import TypedEvents
from headwater.spark.converted import converted_lines
from headwater.transforms import parse_chain
from headwater.transforms.base import TransformError
from tests.golden_support import assert_events_equal
from tests.transforms.golden_transforms import ROOT, expected_events, run_scenario
from tests.transforms.support import Events, as_json, row_schema, run

DATA = Path(__file__).resolve().parents[1] / "data"
TOPIC = "t.outbox"
COLUMNS = {"id": primitive(STRING, name="io.debezium.data.Uuid", version=1), "aggregatetype": primitive(STRING),
           "aggregateid": primitive(STRING), "type": primitive(STRING),
           "payload": primitive(STRING, optional=True, name="io.debezium.data.Json", version=1)}
OUTBOX = row_schema(TOPIC, **COLUMNS)


def block(events: Sequence[tuple[str | None, dict | None, dict | None]], row: Schema = OUTBOX) -> TypedEvents:
    """Changes `(op, before, after)` of the outbox table (op None: a tombstone), keyed by their place."""
    out = Events()
    for i, (op, before, after) in enumerate(events):
        out.add(op, before, after, topic=TOPIC, row=row, key={"id": i})
    return out.take()


def results(props: dict[str, str], events: TypedEvents | Events) -> list[dict]:
    return as_json(run(events, props))


def outbox(**options: str) -> dict[str, str]:
    return {"transforms": "outbox", "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
            **{f"transforms.outbox.{k.replace('_', '.')}": v for k, v in options.items()}}


def row(i: int, payload: str | None, kind: str = "Order") -> dict:
    return {"id": f"406c07f3-0000-0000-0000-00000000000{i}", "aggregatetype": kind, "aggregateid": str(i),
            "type": "OrderCreated", "payload": payload}


def test_outbox_equals_debezium(pg_server):
    directory = ROOT / "outbox"
    assert_events_equal(expected_events(directory), run_scenario(pg_server, directory), keep_headers=True)


def test_spec_vector_default_and_header_placement():
    """The documentation's example: topic outbox.event.Order, key "1", header id, value the payload;
    `type:header:eventType` adds a header."""
    b = block([("c", None, row(1, '{"id": 1}'))])
    [event] = results(outbox(**{"table_fields_additional_placement": "type:header:eventType"}), b)
    assert event == {"topic": "outbox.event.Order", "key": "1", "value": '{"id": 1}',
                     "headers": {"id": "406c07f3-0000-0000-0000-000000000001", "eventType": "OrderCreated"}}


def test_updates_deletes_and_tombstones_are_dropped_and_fatal_stops():
    events = [("c", None, row(1, "{}")), ("u", row(1, "{}"), row(1, "{}")), ("d", row(2, "{}"), None), (None, row(2, "{}"), None)]
    b = block(events)
    assert [e["key"] for e in results(outbox(), b)] == ["1"]
    with pytest.raises(TransformError, match="Unexpected update"):
        results(outbox(**{"table_op_invalid_behavior": "fatal"}), b)
    with pytest.raises(TransformError, match="Unexpected update"):  # the older name of the option
        results(outbox(**{"debezium_op_invalid_behavior": "fatal"}), b)


def test_records_that_are_not_envelopes_pass():
    schema = struct("io.debezium.connector.common.Heartbeat", [("ts_ms", primitive(INT64))]).to_json()
    [event] = results(outbox(), Events().record("__debezium-heartbeat.x", None, None, schema, {"ts_ms": 5}))
    assert event["topic"] == "__debezium-heartbeat.x" and event["value"] == {"ts_ms": 5}


def test_expansion_infers_schemas_and_keeps_what_does_not_parse():
    payloads = ['{"n": 1, "big": 3000000000, "x": 0.5, "list": [{"a": 1}, {"b": "s"}], "none": null, "e": []} tail',
                "plain", '{"mixed": [1, "a"]}', '{"nums": [null, null]}']
    b = block([("c", None, row(i, p)) for i, p in enumerate(payloads)])
    got = results(outbox(**{"table_expand_json_payload": "true"}), b)
    assert got[0]["value"] == {"n": 1, "big": 3000000000, "x": 0.5, "list": [{"a": 1, "b": None}, {"a": None, "b": "s"}]}
    assert [e["value"] for e in got[1:]] == payloads[1:]  # not JSON, not homogenous, no element schema


def test_expansion_schema_and_null_behavior():
    b = block([("c", None, row(1, '{"a": {"b": [1, 2]}, "c": null}'))])
    options = {"table_expand_json_payload": "true", "table_json_payload_null_behavior": "optional_bytes"}
    [event] = as_json(run(b, outbox(**options)), schemas=True)
    assert event["value"]["schema"] == {
        "type": "struct", "optional": True, "name": "payload", "fields": [
            {"type": "struct", "optional": True, "name": "payload.a", "field": "a", "fields": [
                {"type": "array", "items": {"type": "int32", "optional": True}, "optional": True, "field": "b"}]},
            {"type": "bytes", "optional": True, "field": "c"}]}


def test_what_fails_debezium_fails_the_event():
    """A top-level array, or an integer beyond a long, cannot be put in the schema Debezium infers."""
    for payload, message in (("[1, 2]", "array"), ('{"n": 123456789012345678901234567890}', "beyond a long")):
        with pytest.raises(TransformError, match=message):
            results(outbox(**{"table_expand_json_payload": "true"}), block([("c", None, row(1, payload))]))


def test_envelope_placement_version_and_tombstone_on_empty():
    with_version = row_schema(TOPIC, **COLUMNS, ver=primitive(INT32))
    events = [("c", None, {**row(1, "x"), "ver": 2}), ("c", None, {**row(2, "  "), "ver": 2})]
    got = results(outbox(**{"table_fields_additional_placement": "type:envelope:eventType",
                            "table_field_event_schema_version": "ver", "route_tombstone_on_empty_payload": "true",
                            "route_topic_replacement": "orders-$1", "route_topic_regex": "(.*)"}),
                  block(events, with_version))
    assert got[0] == {"topic": "orders-Order", "key": "1", "value": {"payload": "x", "eventType": "OrderCreated"},
                      "headers": {"id": "406c07f3-0000-0000-0000-000000000001"}}
    assert got[1]["value"] is None and got[1]["topic"] == "orders-Order"


@pytest.mark.parametrize(("options", "bad"), [
    ({"table_fields_additional_placement": "type:body"}, "transforms.outbox.table.fields.additional.placement"),
    ({"route_topic_regex": "(unclosed"}, "transforms.outbox.route.topic.regex"),
    ({"table_op_invalid_behavior": "ignore"}, "transforms.outbox.table.op.invalid.behavior"),
    ({"table_field_event_ids": "id"}, "transforms.outbox.table.field.event.ids"),
])
def test_bad_options_are_refused_by_name(options, bad):
    with pytest.raises(ConfigErrors) as exc:
        parse_chain(outbox(**options))
    assert bad in str(exc.value)


def test_missing_columns_fail_the_event():
    b = block([("c", None, row(1, "x"))])
    with pytest.raises(TransformError, match="payload field body"):
        results(outbox(**{"table_field_event_payload": "body"}), b)
    with pytest.raises(TransformError, match="Unsupported field type"):
        results(outbox(**{"table_field_event_timestamp": "type"}), b)


def test_decoded_messages_through_the_outbox_equal_debezium(pg_server):
    directory = ROOT / "message_outbox"
    assert_events_equal(expected_events(directory), run_scenario(pg_server, directory), keep_headers=True)


def test_java_group_references_survive_the_environment_substitution(monkeypatch):
    from headwater.pipeline_config import resolve_env

    monkeypatch.setenv("TOPICS", "t")
    errors: list = []
    source = {"transforms.o.route.topic.replacement": "${TOPICS}.${routedByValue}", "database.password": "${NOPE}"}
    resolved = resolve_env({"source": source}, "", errors)["source"]
    assert resolved["transforms.o.route.topic.replacement"] == "t.${routedByValue}"
    assert [e.property for e in errors] == ["source.database.password"]  # elsewhere an unset variable is an error


#: CloudEvents attributes that carry positions and times of the run that made them
VOLATILE = {"time", "iodebeziumversion", "iodebeziumtsms", "iodebeziumtsus", "iodebeziumtsns", "iodebeziumlsn",
            "iodebeziumtxId", "iodebeziumsequence", "iodebeziumtxid", "iodebeziumxmin"}


def test_the_cloudevents_chain_equals_debezium(pg_server):
    """HeaderFrom$Value (source, op, transaction into headers) then the outbox router, as the CloudEvents
    converter's `metadata.source: header` is documented for; a second table and the transaction records
    pass untouched. Then headwater's events as the jsonl sink writes them with the CloudEvents converter
    (`metadata.source: header`) equal the CloudEvents Debezium's converter wrote for Debezium's events
    (tests/events/formats/test_cloudevents_headers.py compares the converters on the same input), but for
    the run's positions and times."""
    directory = ROOT / "outbox_cloudevents"
    typed: list[TypedEvents] = []
    assert_events_equal(expected_events(directory), run_scenario(pg_server, directory, typed), keep_headers=True)
    key, value = parse_converters({"key.converter": "json", "value.converter": "cloudevents",
                                   "value.converter.metadata.source": "header"}, JsonOptions())
    lines = [json.loads(line) for batch in typed
             for line in converted_lines(list(batch), Converters(key, value)).to_pylist()]
    recorded = [json.loads(line)["header"] for line in
                (DATA / "formats" / "postgres" / "outbox_cloudevents" / "cloudevents_headers.jsonl").read_text().splitlines()]
    assert len(lines) == len(recorded)
    made = 0
    for line, java in zip(lines, recorded, strict=True):
        if java is None:
            assert line["value"] is None, line
            continue
        want = json.loads(java)
        assert list(line["value"]) == list(want)
        assert {k: v for k, v in line["value"].items() if k not in VOLATILE} == \
            {k: v for k, v in want.items() if k not in VOLATILE}
        made += 1
    assert made == 4
