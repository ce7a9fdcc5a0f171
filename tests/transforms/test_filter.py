"""Filter and ContentBasedRouter: the spec's examples in Groovy, JavaScript and Python, every option,
and the expression forms accepted and refused."""

from __future__ import annotations

import re

import pytest

from headwater.config.errors import ConfigErrors
from headwater.events.connect import INT32, STRING, primitive
from headwater.transforms import parse_chain
from headwater.transforms.base import TransformError
from tests.transforms.support import TOPIC, Events, as_json, row_schema, run, topics

ROW = row_schema(TOPIC, id=primitive(INT32), name=primitive(STRING, optional=True))


def events() -> Events:
    return (Events().add("u", {"id": 2, "name": "a"}, {"id": 2, "name": "b"}, row=ROW)
            .add("u", {"id": 3, "name": "a"}, {"id": 3, "name": "c"}, row=ROW)
            .add("c", None, {"id": 4, "name": None}, row=ROW)
            .add(None, key={"id": 4}, row=ROW))


def filter_props(condition: str, language: str = "jsr223.groovy", **extra: str) -> dict[str, str]:
    return {"transforms": "filter", "transforms.filter.type": "io.debezium.transforms.Filter",
            "transforms.filter.language": language, "transforms.filter.condition": condition,
            **{f"transforms.filter.{k}": v for k, v in extra.items()}}


def router_props(expression: str, language: str = "jsr223.groovy", **extra: str) -> dict[str, str]:
    return {"transforms": "route", "transforms.route.type": "io.debezium.transforms.ContentBasedRouter",
            "transforms.route.language": language, "transforms.route.topic.expression": expression,
            **{f"transforms.route.{k}": v for k, v in extra.items()}}


def kept(props: dict[str, str]) -> list:
    return [e["key"]["id"] if e["value"] is not None else "tombstone" for e in as_json(run(events(), props))]


@pytest.mark.parametrize("condition, language", [
    ("value.op == 'u' && value.before.id == 2", "jsr223.groovy"),
    ("value.get('op') == 'u' && value.get('before').get('id') == 2", "jsr223.js"),
    ("value.op === 'u' && value.before.id === 2", "jsr223.graal.js"),
    ("value.op == 'u' and value.before.id == 2", "python"),
    ("value['op'] == 'u' and value['before']['id'] == 2", "python"),
])
def test_spec_filter_example(condition, language):
    assert kept(filter_props(condition, language)) == [2, "tombstone"]  # kept, dropped, dropped; tombstone kept


def test_null_handling_modes():
    assert kept(filter_props("value.op == 'c'", **{"null.handling.mode": "drop"})) == [4]
    # evaluated on a tombstone, value.op is null: the condition is false
    assert kept(filter_props("value.op == 'c'", **{"null.handling.mode": "evaluate"})) == [4]
    assert kept(filter_props("value == null", **{"null.handling.mode": "evaluate"})) == ["tombstone"]


def test_topic_regex_limits_the_filter():
    assert kept(filter_props("false", **{"topic.regex": "other.*"})) == [2, 3, 4, "tombstone"]
    assert kept(filter_props("false", **{"topic.regex": "dbserver1\\..*"})) == ["tombstone"]


@pytest.mark.parametrize("condition, expected", [
    ("!(value.op == 'u')", [4]),
    ("value.after.id > 2 || value.after.name == null", [3, 4]),
    ("value.after.id >= 3 && value.after.id < 4", [3]),
    ("value.after.name != null && value.after.name.startsWith('b')", [2]),
    ("value.after.name.endsWith('c') || value.after.name.contains('b')", [2, 3]),
    ("value.after.name.matches('[bc]')", [2, 3]),
    ("value.after.name.equals('c')", [3]),
    ("value.after.id % 2 == 0", [2, 4]),
    ("value.after.id * 2 - 1 == 5", [3]),
    ("(value.after.id + 1) / 2 == 2", [3]),
    ("value.after.name + '!' == 'null!'", [4]),
    ("'x' + value.after.id == 'x3'", [3]),
    ("topic == 'dbserver1.inventory.customers' && value.op == 'c'", [4]),
    ("valueSchema.name == 'dbserver1.inventory.customers.Envelope' && value.op == 'c'", [4]),
    ("keySchema.name.endsWith('.Key') && key.id == 3", [3]),
    ("value.op == 'c' ? true : value.after.id == 2", [2, 4]),
    ("value?.after?.id == 4", [4]),
    ("value.after.name.length() == 1 && value.op == 'u'", [2, 3]),
])
def test_groovy_forms(condition, expected):
    assert kept(filter_props(condition, **{"null.handling.mode": "drop"})) == expected


@pytest.mark.parametrize("condition, expected", [
    ("not value.op == 'u'", [4]),
    ("value.after.id in [3, 4]", [3, 4]),
    ("value.after.id not in (3, 4)", [2]),
    ("value.after.name is None", [4]),
    ("2 < value.after.id <= 3", [3]),
    ("value.after.name.startswith('c') if value.after.name is not None else False", [3]),
    ("value.get('after').get('id') == 2", [2]),
])
def test_python_forms(condition, expected):
    assert kept(filter_props(condition, "python", **{"null.handling.mode": "drop"})) == expected


def test_headers_are_variables():
    ev = (Events().add("c", None, {"id": 1, "name": "x"}, row=ROW, headers=[("__debezium.oldkey", {"id": 9})])
          .add("c", None, {"id": 2, "name": "y"}, row=ROW))
    out = as_json(run(ev, filter_props("headers['__debezium.oldkey'].value.id == 9")))
    assert [e["key"]["id"] for e in out] == [1]


def test_spec_router_example():
    out = run(events(), router_props("value.op == 'u' ? 'updates' : null"))
    assert topics(out) == ["updates", "updates", TOPIC, TOPIC]


def test_router_by_a_field_and_null_handling():
    out = run(events(), router_props("'t_' + value.after.id", **{"null.handling.mode": "drop"}))
    assert topics(out) == ["t_2", "t_3", "t_4"]
    out = run(events(), router_props("value == null ? 'dead' : null", **{"null.handling.mode": "evaluate"}))
    assert topics(out) == [TOPIC, TOPIC, TOPIC, "dead"]
    assert topics(run(events(), router_props("'all'", "python"))) == ["all", "all", "all", TOPIC]


def test_a_router_expression_that_is_not_a_topic_fails_with_the_event():
    with pytest.raises(TransformError, match="topic.expression gave a column of int32"):
        run(events(), router_props("value.after.id", **{"null.handling.mode": "drop"}))


def test_a_condition_on_a_missing_field_fails_with_the_event():
    with pytest.raises(TransformError, match=re.escape("condition: no field 'nosuch'")):
        run(events(), filter_props("value.after.nosuch == 1"))


@pytest.mark.parametrize("props, message", [
    (filter_props("value.op == 'u'", "jsr223.jython"), "transforms.filter.language: 'jsr223.jython' is not allowed"),
    (filter_props("value.op = 'u'"), "transforms.filter.condition: unexpected"),
    (filter_props("System.exit(0)"), "transforms.filter.condition: unknown name 'System'"),
    (filter_props("value.op.toUpperCase() == 'U'"), "unsupported method 'toUpperCase'"),
    (filter_props("__import__('os').system('true')", "python"), "transforms.filter.condition: unsupported Python"),
    (filter_props("os.sep == '/'", "python"), "transforms.filter.condition: unknown name 'os'"),
    (filter_props("value.op.upper() == 'U'", "python"), "unsupported Python"),
    (filter_props("[x for x in value]", "python"), "unsupported Python"),
    (filter_props("(lambda: 1)()", "python"), "unsupported Python"),
    ({**filter_props("true"), "transforms.filter.language": ""}, "transforms.filter.language"),
    ({"transforms": "f", "transforms.f.type": "Filter", "transforms.f.language": "python"},
     "transforms.f.condition: is required"),
    (router_props("'x'", **{"null.handling.mode": "skip"}), "transforms.route.null.handling.mode"),
])
def test_bad_expressions_and_options_are_refused(props, message):
    with pytest.raises(ConfigErrors, match=re.escape(message)):
        parse_chain(props)


def test_temporal_and_decimal_fields_compare_as_their_numbers_and_other_types_are_never_equal():
    import base64

    from headwater.events.connect import INT64
    ts = primitive(INT64, optional=True, name="io.debezium.time.MicroTimestamp", version=1)
    price = primitive("bytes", optional=True, name="org.apache.kafka.connect.data.Decimal", version=1,
                      parameters={"scale": "2", "connect.decimal.precision": "10"})
    row = row_schema(TOPIC, id=primitive(INT32), at=ts, price=price)

    def cents(n: int) -> str:
        return base64.b64encode(n.to_bytes(2, "big", signed=True)).decode()

    def ev() -> Events:
        return (Events().add("c", None, {"id": 1, "at": 1_000_000, "price": cents(125)}, row=row)
                .add("c", None, {"id": 2, "at": 5_000_000, "price": cents(300)}, row=row))

    def ids(condition: str, language: str = "jsr223.groovy") -> list[int]:
        return [e["key"]["id"] for e in as_json(run(ev(), filter_props(condition, language)))]

    assert ids("value.after.at > 2000000") == [2]
    assert ids("value.after.price >= 3") == [2]
    assert ids("value.after.price < 1.5", "python") == [1]
    assert ids("value.after.id == '2'") == []
    assert ids("value.after.id != '2'") == [1, 2]
    with pytest.raises(TransformError, match="cannot compare a number with a string"):
        run(ev(), filter_props("value.after.id < 'x'"))
