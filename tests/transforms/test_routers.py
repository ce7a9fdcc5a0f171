"""ByLogicalTableRouter: the spec's examples and every option; Java's regex replacement syntax."""

from __future__ import annotations

import re

import pytest

from headwater.config.errors import ConfigErrors
from headwater.transforms import parse_chain
from headwater.transforms.regex import java_replacement
from tests.transforms.support import Events, as_json, run

SHARDS = {"transforms": "route", "transforms.route.type": "io.debezium.transforms.ByLogicalTableRouter",
          "transforms.route.topic.regex": "(.*)customers_shard(.)",
          "transforms.route.topic.replacement": "$1customers_all_shards"}


def shard_events() -> Events:
    events = Events()
    for shard in (1, 2, 3):
        events.add("c", None, {"id": 1, "name": f"n{shard}"}, topic=f"myserver.mydb.customers_shard{shard}")
    events.add(None, key={"id": 1}, topic="myserver.mydb.customers_shard1")
    events.add("c", None, {"id": 7, "name": "x"}, topic="myserver.mydb.orders")
    return events


def test_default_uniqueness_adds_the_original_topic_to_the_key():
    out = as_json(run(shard_events(), SHARDS))
    assert [e["topic"] for e in out] == ["myserver.mydb.customers_all_shards"] * 4 + ["myserver.mydb.orders"]
    assert out[0]["key"] == {"id": 1, "__dbz__physicalTableIdentifier": "myserver.mydb.customers_shard1"}
    assert out[3]["key"] == {"id": 1, "__dbz__physicalTableIdentifier": "myserver.mydb.customers_shard1"}
    assert out[3]["value"] is None  # the tombstone keeps its null value
    assert out[4]["key"] == {"id": 7}  # no match: unchanged


def test_key_field_name_regex_and_replacement():
    props = {**SHARDS, "transforms.route.key.field.name": "shard_id",
             "transforms.route.key.field.regex": "(.*)customers_shard(.)", "transforms.route.key.field.replacement": "$2"}
    assert [e["key"] for e in as_json(run(shard_events(), props))][:3] == [
        {"id": 1, "shard_id": "1"}, {"id": 1, "shard_id": "2"}, {"id": 1, "shard_id": "3"}]


def test_without_uniqueness_only_the_topic_and_schema_names_change():
    props = {**SHARDS, "transforms.route.key.enforce.uniqueness": "false"}
    out = as_json(run(shard_events(), props), schemas=True)
    assert out[0]["key"]["payload"] == {"id": 1}
    assert out[0]["key"]["schema"]["name"] == "myserver.mydb.customers_all_shards.Key"
    value = out[0]["value"]["schema"]
    assert value["name"] == "myserver.mydb.customers_all_shards.Envelope"
    rows = {f["field"]: f for f in value["fields"]}
    assert rows["before"]["name"] == rows["after"]["name"] == "myserver.mydb.customers_all_shards.Value"
    assert rows["before"]["optional"] is True
    assert out[0]["value"]["payload"]["after"] == {"id": 1, "name": "n1"}


def test_the_added_key_field_is_a_required_string():
    key = as_json(run(shard_events(), SHARDS), schemas=True)[0]["key"]["schema"]
    assert key["fields"][-1] == {"type": "string", "optional": False, "field": "__dbz__physicalTableIdentifier"}


def test_schema_name_adjustment_avro():
    props = {**SHARDS, "transforms.route.topic.replacement": "$1all-shards",
             "transforms.route.schema.name.adjustment.mode": "avro"}
    out = as_json(run(shard_events(), props), schemas=True)
    assert out[0]["topic"] == "myserver.mydb.all-shards"
    assert out[0]["key"]["schema"]["name"] == "myserver.mydb.all_shards.Key"
    assert out[0]["value"]["schema"]["name"] == "myserver.mydb.all_shards.Envelope"


def test_blocks_merged_on_one_topic_keep_the_batch_order():
    out = run(shard_events(), SHARDS)
    assert [len(b) for b in out.blocks] == [4, 1]  # the three shards joined in one block (a tombstone too)
    assert [e["value"]["after"]["name"] if e["value"] else None for e in as_json(out)][:4] == ["n1", "n2", "n3", None]


@pytest.mark.parametrize("template, expected", [
    ("$1x", "ax"), ("${g}-$2", "a-b"), (r"\$1", "$1"), ("$12", "a2"), ("plain", "plain"),
])
def test_java_replacement(template, expected):
    m = re.fullmatch("(?P<g>a)(b)", "ab")
    assert m is not None
    assert java_replacement(template, m) == expected


@pytest.mark.parametrize("extra, message", [
    ({"transforms.route.topic.replacement": "$3"}, "transforms.route.topic.replacement"),
    ({"transforms.route.topic.regex": "("}, "transforms.route.topic.regex"),
    ({"transforms.route.key.field.regex": "(.*)"}, "transforms.route.key.field.replacement"),
    ({"transforms.route.key.field.nam": "x"}, "did you mean transforms.route.key.field.name"),
    ({"transforms.route.schema.name.adjustment.mode": "ascii"}, "transforms.route.schema.name.adjustment.mode"),
])
def test_bad_options_are_refused(extra, message):
    with pytest.raises(ConfigErrors, match=re.escape(message)):
        parse_chain({**SHARDS, **extra})


def test_required_options():
    with pytest.raises(ConfigErrors, match="transforms.route.topic.regex: is required"):
        parse_chain({"transforms": "route", "transforms.route.type": "ByLogicalTableRouter",
                     "transforms.route.topic.replacement": "x"})
