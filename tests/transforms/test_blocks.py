"""The block helpers the transformations share: headers of any Connect type, fields, rows, topics."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from headwater.events.typed import TypedEvents
from headwater.transforms.blocks import (
    add_header,
    header_values,
    remove_header,
    split_by_topic,
    struct_array,
    take,
    value_field,
)
from tests.transforms.support import TOPIC, Events, as_json

INT64 = {"type": "int64", "optional": True}
LIST = {"type": "array", "items": {"type": "string", "optional": True}, "optional": True}


def block():
    return (Events().add("c", None, {"id": 1, "name": "a"})
            .add("u", None, {"id": 2, "name": "b"}, headers=[("__debezium.oldkey", {"id": 9})])
            .add("d", {"id": 3, "name": "c"}, None)).take().blocks[0]


def test_headers_of_several_types_keep_their_order_and_schemas():
    b = add_header(block(), "n", INT64, pa.array([10, None, 30], pa.int64()))
    b = add_header(b, "l", LIST, pa.array([["x"], ["y", None], None], pa.list_(pa.string())), np.array([1, 0, 1], bool))
    assert b.header_schemas == {"__debezium.oldkey": b.key_schema, "n": INT64, "l": LIST}
    assert [e.get("headers") for e in as_json(TypedEvents([b]))] == [
        {"n": 10, "l": ["x"]}, {"__debezium.oldkey": {"id": 9}, "n": None}, {"n": 30, "l": None}]
    got = header_values(b, "l")
    assert got is not None
    values, schema, present = got
    assert values.to_pylist() == [["x"], None, None] and schema == LIST and present.tolist() == [True, False, True]
    b = remove_header(b, "__debezium.oldkey")
    assert "__debezium.oldkey" not in b.header_schemas
    assert [e.get("headers") for e in as_json(TypedEvents([b]))] == [
        {"n": 10, "l": ["x"]}, {"n": None}, {"n": 30, "l": None}]
    assert header_values(b, "nope") is None


def test_the_last_header_of_a_name_wins():
    b = add_header(add_header(block(), "n", INT64, pa.array([1, 2, 3], pa.int64())), "n", INT64,
                   pa.array([4, 5, 6], pa.int64()), np.array([False, True, False]))
    got = header_values(b, "n")
    assert got is not None and got[0].to_pylist() == [1, 5, 3]


def test_fields_rows_and_topics():
    b = block()
    field = value_field(b, "op")
    assert field is not None
    op, schema = field
    assert op.to_pylist() == ["c", "u", "d"] and schema == {"type": "string", "optional": False}
    name = value_field(b, "after.name")
    assert name is not None and name[0].to_pylist() == ["a", "b", None]
    assert value_field(b, "nope") is None
    parts = split_by_topic(b, pa.array(["x", None, "x"]))
    assert [(p.topic, len(p)) for p in parts] == [("x", 2), (TOPIC, 1)]
    assert len(take(b, np.array([True, False, True]))) == 2


def test_struct_array_without_fields():
    s = struct_array([], np.array([True, False]))
    assert s.type == pa.struct([]) and s.to_pylist() == [{}, None]
