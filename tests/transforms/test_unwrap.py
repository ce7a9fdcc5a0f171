"""ExtractNewRecordState: the spec's examples and every option, through BlockBuilder -> chain -> JSON."""

from __future__ import annotations

import pytest

from headwater.config.errors import ConfigErrors
from headwater.events.connect import INT32, STRING, array, primitive
from headwater.events.envelope import HEARTBEAT_KEY, HEARTBEAT_VALUE
from tests.transforms.support import TOPIC, Events, as_json, row_schema, run, topics, unwrap, values

ROW = row_schema(TOPIC, id=primitive(INT32), field1=primitive(STRING, optional=True),
                 field2=primitive(STRING, optional=True))


def crud() -> Events:
    """A create, an update, a delete and its tombstone, a truncate."""
    return (Events()
            .add("c", None, {"id": 1, "field1": "a", "field2": "b"}, row=ROW)
            .add("u", {"id": 1, "field1": "oldvalue1", "field2": "b"}, {"id": 1, "field1": "newvalue1",
                                                                        "field2": "newvalue2"}, row=ROW)
            .add("d", {"id": 2, "field1": None, "field2": "x"}, None, row=ROW)
            .add(None, key={"id": 2})
            .add("t", None, None, row=ROW, key=None))


def test_default_config_gives_the_after_state_and_a_delete_becomes_a_null_value():
    out = run(crud(), unwrap())
    assert values(out) == [{"id": 1, "field1": "a", "field2": "b"},
                           {"id": 1, "field1": "newvalue1", "field2": "newvalue2"},
                           None]  # the delete, as a record with a null value; tombstone and truncate dropped
    assert [e["key"] for e in as_json(out)] == [{"id": 1}, {"id": 1}, {"id": 2}]


def test_the_value_schema_is_the_row_schema_rebuilt_and_a_null_value_keeps_the_optional_row_schema():
    out = as_json(run(crud(), unwrap()), schemas=True)
    assert out[0]["value"]["schema"] == {**ROW.to_json(), "optional": False}
    assert out[2]["value"] == {"schema": {**ROW.to_json(), "optional": True}, "payload": None}


@pytest.mark.parametrize("mode, expected", [
    ("drop", [{"id": 1, "field1": "a", "field2": "b"}, {"id": 1, "field1": "newvalue1", "field2": "newvalue2"}]),
    ("tombstone", [{"id": 1, "field1": "a", "field2": "b"}, {"id": 1, "field1": "newvalue1", "field2": "newvalue2"},
                   None]),
    ("rewrite", [{"id": 1, "field1": "a", "field2": "b", "__deleted": "false"},
                 {"id": 1, "field1": "newvalue1", "field2": "newvalue2", "__deleted": "false"},
                 {"id": 2, "field1": None, "field2": "x", "__deleted": "true"}]),
    ("rewrite-with-tombstone", [{"id": 1, "field1": "a", "field2": "b", "__deleted": "false"},
                                {"id": 1, "field1": "newvalue1", "field2": "newvalue2", "__deleted": "false"},
                                {"id": 2, "field1": None, "field2": "x", "__deleted": "true"},
                                None]),
])
def test_delete_tombstone_handling_mode(mode, expected):
    assert values(run(crud(), unwrap(**{"delete_tombstone_handling_mode": mode}))) == expected


@pytest.mark.parametrize("options, expected", [
    ({}, None),  # not given: Debezium 3's default (tombstone)
    ({"delete.handling.mode": "drop"}, ["c", "u"]),
    ({"drop.tombstones": "true"}, ["c", "u"]),  # the older pair's defaults: deletes and tombstones dropped
    ({"delete.handling.mode": "none"}, ["c", "u", "d"]),
    ({"delete.handling.mode": "none", "drop.tombstones": "false"}, ["c", "u", "d", "tombstone", "t"]),
    ({"delete.handling.mode": "rewrite"}, ["c", "u", "d"]),
    ({"delete.handling.mode": "rewrite", "drop.tombstones": "false"}, ["c", "u", "d", "tombstone", "t"]),
    ({"delete.handling.mode": "rewrite", "delete.tombstone.handling.mode": "drop"}, ["c", "u"]),  # precedence
])
def test_the_older_options(options, expected):
    props = {"transforms": "unwrap", "transforms.unwrap.type": "ExtractNewRecordState",
             **{f"transforms.unwrap.{k}": v for k, v in options.items()}}
    out = as_json(run(crud(), props))
    kinds = ["tombstone" if e["value"] is None and e["key"] == {"id": 2} and i == 3 else None for i, e in
             enumerate(out)]
    if expected is None:
        assert len(out) == 3
        return
    assert len(out) == len(expected), out
    del kinds
    if "delete.handling.mode" in options and options["delete.handling.mode"] == "rewrite" and \
            "delete.tombstone.handling.mode" not in options:
        assert out[2]["value"]["__deleted"] == "true"
    if expected[-1] == "t":  # the truncate is kept unchanged with the tombstones
        assert out[-1]["value"]["op"] == "t"


def test_spec_example_add_fields_and_rewrite():
    props = unwrap(add_fields="op,table,lsn,source.ts_ms", add_headers="db", delete_handling_mode="rewrite")
    out = as_json(run(Events()
                      .add("c", None, {"id": 1, "field1": "a", "field2": None}, row=ROW)
                      .add("d", {"id": 2, "field1": None, "field2": None}, None, row=ROW), props))
    assert out[0]["value"] == {"id": 1, "field1": "a", "field2": None, "__deleted": "false", "__op": "c",
                               "__table": "customers", "__lsn": 123456789, "__source_ts_ms": 123456789}
    assert out[0]["headers"] == {"__db": "inventory"}
    assert out[1]["value"] == {"id": 2, "field1": None, "field2": None, "__deleted": "true", "__op": "d",
                               "__table": "customers", "__lsn": 123456789, "__source_ts_ms": 123456789}


def test_added_field_schemas_are_optional_copies_and_the_value_schema_is_required():
    props = unwrap(add_fields="op,source.snapshot:snap,ts_ms")
    value = as_json(run(Events().add("c", None, {"id": 1, "field1": "a", "field2": None}, row=ROW), props),
                    schemas=True)[0]["value"]
    schema = value["schema"]
    assert schema["optional"] is False and schema["name"] == f"{TOPIC}.Value"
    assert schema["fields"][-3:] == [
        {"type": "string", "optional": True, "field": "__op"},
        {"type": "string", "optional": True, "name": "io.debezium.data.Enum", "version": 1,
         "parameters": {"allowed": "true,false"}, "field": "__snap"},
        {"type": "int64", "optional": True, "field": "__ts_ms"}]
    assert value["payload"]["__snap"] == "false" and value["payload"]["__ts_ms"] == 1000


def test_add_fields_prefix_rename_transaction_and_absent_fields():
    props = unwrap(add_fields="op:OPERATION,transaction.id,total_order,nosuch,source.nosuch", add_fields_prefix="m_")
    out = as_json(run(Events().add("r", None, {"id": 1, "field1": None, "field2": None}, row=ROW), props))
    assert out[0]["value"] == {"id": 1, "field1": None, "field2": None, "m_OPERATION": "r", "m_transaction_id": None,
                               "m_total_order": None}


def test_add_headers_with_prefix_and_the_op_header_of_a_kept_tombstone():
    props = unwrap(add_headers="op,source.table,nosuch", add_headers_prefix="h.",
                   delete_tombstone_handling_mode="rewrite-with-tombstone")
    out = as_json(run(crud(), props), schemas=True)
    assert out[0]["headers"] == {"h.op": {"schema": {"type": "string", "optional": True}, "payload": "c"},
                                 "h.source_table": {"schema": {"type": "string", "optional": True},
                                                    "payload": "customers"}}
    assert out[3]["value"] is None and out[3]["headers"] == {"h.op": {"schema": {"type": "string", "optional": False},
                                                                      "payload": "d"}}


def test_route_by_field_uses_after_or_before_and_keeps_the_topic_on_null_or_blank():
    row = row_schema(TOPIC, id=primitive(INT32), dest=primitive(STRING, optional=True))
    events = (Events().add("c", None, {"id": 1, "dest": "east"}, row=row)
              .add("c", None, {"id": 2, "dest": None}, row=row)
              .add("c", None, {"id": 3, "dest": " "}, row=row)
              .add("d", {"id": 4, "dest": "west"}, None, row=row))
    out = run(events, unwrap(route_by_field="dest", delete_tombstone_handling_mode="rewrite"))
    assert topics(out) == ["east", TOPIC, TOPIC, "west"]
    assert values(out)[3] == {"id": 4, "dest": "west", "__deleted": "true"}


def test_route_by_field_must_name_a_string_field():
    from headwater.transforms.base import TransformError
    with pytest.raises(TransformError, match="not a string"):
        run(crud(), unwrap(route_by_field="id"))


def test_drop_fields_header():
    names = array(primitive(STRING, optional=True))
    row = row_schema(TOPIC, id=primitive(INT32), a=primitive(STRING, optional=True), b=primitive(STRING))
    events = Events()
    for i in (1, 2, 3):
        events.add("u", None, {"id": i, "a": "x", "b": "y"}, row=row)
    blocks = events.take()
    import numpy as np
    import pyarrow as pa

    from headwater.events.typed import TypedEvents
    from headwater.transforms.blocks import add_header
    block = add_header(blocks.blocks[0], "Unchanged", names.to_json(),
                       pa.array([["a", "b", "id"], None, ["a"]], pa.list_(pa.string())), np.array([True, False, True]))
    compatible = values(run(TypedEvents([block]), unwrap(drop_fields_header_name="Unchanged")))
    assert compatible == [{"id": 1, "b": "y"}, {"id": 2, "a": "x", "b": "y"}, {"id": 3, "b": "y"}]
    everything = values(run(TypedEvents([block]), unwrap(drop_fields_header_name="Unchanged",
                                                         **{"drop_fields_keep_schema_compatible": "false"})))
    assert everything == [{}, {"id": 2, "a": "x", "b": "y"}, {"id": 3, "b": "y"}]
    keys = [e["key"] for e in as_json(run(TypedEvents([block]), unwrap(
        drop_fields_header_name="Unchanged", drop_fields_from_key="true", drop_fields_keep_schema_compatible="false")))]
    assert keys == [{}, {"id": 2}, {"id": 3}]


def test_records_that_are_not_envelopes_pass_unchanged_without_headers():
    events = Events().record("__debezium-heartbeat.dbserver1", HEARTBEAT_KEY.to_json(), {"serverName": "dbserver1"},
                             HEARTBEAT_VALUE.to_json(), {"ts_ms": 5})
    out = as_json(run(events, unwrap(add_headers="op")))
    assert out == [{"topic": "__debezium-heartbeat.dbserver1", "key": {"serverName": "dbserver1"},
                    "value": {"ts_ms": 5}}]


def test_replace_null_with_default_in_rewrite_mode():
    row = row_schema(TOPIC, id=primitive(INT32), qty=primitive(INT32, optional=True).with_default(7))
    events = Events().add("c", None, {"id": 1, "qty": None}, row=row)
    import json

    from headwater.events.formats.json import JsonOptions, to_event_batch
    raw = JsonOptions(replace_null_with_default=False)

    def qty(props):
        out = run(Events().add("c", None, {"id": 1, "qty": None}, row=row), props)
        value = next(to_event_batch(out, raw).rows()).value
        assert value is not None
        return json.loads(value)["qty"]

    del events
    assert qty(unwrap(delete_tombstone_handling_mode="rewrite")) == 7
    assert qty(unwrap(delete_tombstone_handling_mode="rewrite", replace_null_with_default="false")) is None
    assert qty(unwrap()) is None  # only the rewrite (InsertField) replaces


@pytest.mark.parametrize("props, message", [
    (unwrap(delete_tombstone_handling_mode="keep"), "transforms.unwrap.delete.tombstone.handling.mode"),
    (unwrap(add_feilds="op"), "did you mean transforms.unwrap.add.fields"),
    (unwrap(drop_tombstones="maybe"), "transforms.unwrap.drop.tombstones"),
    (unwrap(add_fields="a:b:c"), "transforms.unwrap.add.fields"),
])
def test_bad_options_are_refused_by_name(props, message):
    from headwater.transforms import parse_chain
    with pytest.raises(ConfigErrors, match=message.replace(".", r"\.")):
        parse_chain(props)


def test_drop_fields_comes_after_add_fields_for_records_and_before_for_deletes():
    import numpy as np
    import pyarrow as pa

    from headwater.events.typed import TypedEvents
    from headwater.transforms.blocks import add_header
    names = array(primitive(STRING, optional=True))
    events = (Events().add("u", None, {"id": 1, "field1": "a", "field2": "b"}, row=ROW)
              .add("d", {"id": 2, "field1": "a", "field2": "b"}, None, row=ROW)).take()
    block = add_header(events.blocks[0], "Drop", names.to_json(),
                       pa.array([["__op", "field1"], ["__op", "field1"]], pa.list_(pa.string())), np.array([True, True]))
    out = values(run(TypedEvents([block]), unwrap(drop_fields_header_name="Drop", add_fields="op",
                                                  delete_tombstone_handling_mode="rewrite")))
    assert out == [{"id": 1, "field2": "b", "__deleted": "false"},
                   {"id": 2, "field2": "b", "__deleted": "true", "__op": "d"}]
