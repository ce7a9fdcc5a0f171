"""The chain: properties parsed and refused by name, predicates, order across blocks, errors.tolerance."""

from __future__ import annotations

import re

import pytest

from headwater.config.errors import ConfigErrors
from headwater.transforms import parse_chain
from headwater.transforms.base import TransformError
from headwater.transforms.registry import known_predicates, known_transforms
from tests.transforms.support import Events, as_json, run, unwrap

A, B = "db.public.a", "db.public.b"


def mixed() -> Events:
    return (Events().add("c", None, {"id": 1, "name": "a1"}, topic=A)
            .add("c", None, {"id": 1, "name": "b1"}, topic=B)
            .add("d", {"id": 1, "name": "a1"}, None, topic=A)
            .add(None, key={"id": 1}, topic=A)
            .add("u", None, {"id": 1, "name": "b2"}, topic=B))


def test_no_transforms_no_chain():
    assert parse_chain({}) is None
    assert parse_chain({"predicates": "p", "predicates.p.type": "RecordIsTombstone"}) is None


def test_class_and_short_names_are_known():
    assert "io.debezium.transforms.ExtractNewRecordState" in known_transforms()
    assert {"TopicNameMatches", "org.apache.kafka.connect.transforms.predicates.HasHeaderKey"} <= set(known_predicates())


def test_steps_apply_in_order_and_the_batch_order_is_kept():
    props = {**unwrap(), "transforms": "route,unwrap", "transforms.route.type": "ByLogicalTableRouter",
             "transforms.route.topic.regex": "db\\.public\\.(a|b)", "transforms.route.topic.replacement": "all",
             "transforms.route.key.enforce.uniqueness": "false"}
    out = as_json(run(mixed(), props))
    assert [(e["topic"], e["value"]) for e in out] == [
        ("all", {"id": 1, "name": "a1"}), ("all", {"id": 1, "name": "b1"}), ("all", None),
        ("all", {"id": 1, "name": "b2"})]


def test_topic_name_matches_and_negate():
    props = {**unwrap(), "transforms.unwrap.predicate": "isA", "predicates": "isA",
             "predicates.isA.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
             "predicates.isA.pattern": "db\\.public\\.a"}
    out = as_json(run(mixed(), props))
    assert [e["value"] for e in out][:2] == [{"id": 1, "name": "a1"}, {**out[1]["value"]}]
    assert "after" in out[1]["value"]  # b is not unwrapped
    assert len(out) == 4  # a's tombstone dropped
    negated = as_json(run(mixed(), {**props, "transforms.unwrap.negate": "true"}))
    assert "after" in negated[0]["value"] and negated[1]["value"] == {"id": 1, "name": "b1"}
    assert len(negated) == 5


def test_topic_name_matches_is_a_whole_match():
    props = {**unwrap(), "transforms.unwrap.predicate": "p", "predicates": "p",
             "predicates.p.type": "TopicNameMatches", "predicates.p.pattern": "db\\.public"}
    assert all("after" in e["value"] for e in as_json(run(mixed(), props)) if e["value"])


def test_record_is_tombstone_and_has_header_key():
    props = {**unwrap(delete_tombstone_handling_mode="drop"), "transforms.unwrap.predicate": "t",
             "transforms.unwrap.negate": "true", "predicates": "t", "predicates.t.type": "RecordIsTombstone"}
    out = as_json(run(mixed(), props))
    assert [e["value"] for e in out] == [{"id": 1, "name": "a1"}, {"id": 1, "name": "b1"}, None,
                                         {"id": 1, "name": "b2"}]  # the delete dropped, the tombstone kept
    headers = {**unwrap(), "transforms.unwrap.predicate": "h", "predicates": "h", "predicates.h.type": "HasHeaderKey",
               "predicates.h.name": "__debezium.oldkey"}
    events = (Events().add("c", None, {"id": 3, "name": "x"}, headers=[("__debezium.oldkey", {"id": 2})])
              .add("c", None, {"id": 4, "name": "y"}))
    out = as_json(run(events, headers))
    assert out[0]["value"] == {"id": 3, "name": "x"} and out[0]["headers"] == {"__debezium.oldkey": {"id": 2}}
    assert "after" in out[1]["value"]


@pytest.mark.parametrize("props, message", [
    ({"transforms": "x"}, "transforms.x.type: is required"),
    ({"transforms": "x", "transforms.x.type": "ExtractNewRecordStat"},
     "transforms.x.type: unknown transformation 'ExtractNewRecordStat' (did you mean ExtractNewRecordState?)"),
    ({**unwrap(), "transforms.unwrap.predicate": "nope"}, "transforms.unwrap.predicate: unknown predicate alias"),
    ({**unwrap(), "transforms.unwrap.negate": "true"}, "transforms.unwrap.negate: needs a predicate"),
    ({**unwrap(), "transforms.other.type": "X"}, "transforms.other.type: its alias is not listed in transforms"),
    ({**unwrap(), "predicates": "p", "predicates.p.type": "TopicNameMatchs"},
     "did you mean TopicNameMatches?"),
    ({**unwrap(), "predicates": "p", "predicates.p.type": "HasHeaderKey"}, "predicates.p.name: is required"),
    ({**unwrap(), "predicates": "p", "predicates.p.type": "TopicNameMatches", "predicates.p.pattern": "("},
     "predicates.p.pattern: not a valid regular expression"),
    ({**unwrap(), "errors.tolerance": "some"}, "errors.tolerance"),
    ({"transforms": "a,a", "transforms.a.type": "ExtractNewRecordState"}, "lists a more than once"),
])
def test_bad_chains_are_refused_by_name(props, message):
    with pytest.raises(ConfigErrors, match=re.escape(message)):
        parse_chain(props)


def test_spark_lower_cased_keys_still_find_their_alias():
    chain = parse_chain({"transforms": "Unwrap", "transforms.unwrap.type": "ExtractNewRecordState"})
    assert chain is not None and chain.steps[0].transform.alias == "Unwrap"


BAD_ROUTE = {**unwrap(route_by_field="name")}


def events_with_one_bad_row() -> Events:
    from headwater.events.connect import INT32, primitive
    from tests.transforms.support import row_schema
    row = row_schema("db.public.c", id=primitive(INT32), name=primitive(INT32, optional=True))
    return (Events().add("c", None, {"id": 1, "name": "ok"}, topic=A)
            .add("c", None, {"id": 2, "name": 5}, topic="db.public.c", row=row)
            .add("c", None, {"id": 3, "name": "fine"}, topic=A))


def test_errors_tolerance_none_stops_with_the_topic_and_key():
    with pytest.raises(TransformError, match=re.escape("transforms.unwrap failed on the event of topic "
                                                       "'db.public.c' with key {\"id\":2}")):
        run(events_with_one_bad_row(), BAD_ROUTE)


def test_errors_tolerance_all_skips_the_event_and_logs_it(caplog):
    out = as_json(run(events_with_one_bad_row(), {**BAD_ROUTE, "errors.tolerance": "all"}))
    assert [e["topic"] for e in out] == ["ok", "fine"]
    assert "db.public.c" in caplog.text and '{"id":2}' in caplog.text
