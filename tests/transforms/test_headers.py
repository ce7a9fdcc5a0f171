"""HeaderToValue: the documentation's test vector, copy and refusals."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from headwater.config.errors import ConfigErrors
from headwater.events.typed import TypedEvents, connect_type
from headwater.transforms import parse_chain
from headwater.transforms.base import TransformError
from headwater.transforms.blocks import add_header
from tests.transforms.support import Events, as_json, run, source

INT32, INT64, STRING = ({"type": t, "optional": False} for t in ("int32", "int64", "string"))


def inserts(*ids: int, headers: dict[str, tuple[dict, list[Any]]] | None = None) -> TypedEvents:
    """Inserts of rows `ids` (op None for a negative id: a tombstone), with headers of any Connect type:
    name -> (schema, a value per event)."""
    changes = Events()
    for i in ids:
        changes.add(None, {"id": -i, "name": None}) if i < 0 else changes.add("c", None, {"id": i, "name": None})
    [block] = changes.take().blocks
    for name, (schema, values) in (headers or {}).items():
        typ, fn = connect_type(schema)
        block = add_header(block, name, schema, pa.array([fn(v) for v in values], typ))
    return TypedEvents([block])


def props(**options: str) -> dict[str, str]:
    return {"transforms": "h", "transforms.h.type": "io.debezium.transforms.HeaderToValue",
            **{f"transforms.h.{k}": v for k, v in options.items()}}


def test_spec_vector_move():
    events = inserts(1, 2, headers={"header_x": (INT32, [0, 0]), "event_timestamp": (INT64, [1626102708861, 1626102708862]),
                                    "key": (INT32, [100, 101])})
    got = as_json(run(events, props(headers="event_timestamp,key", fields="timestamp,source.id", operation="move")))
    assert got[0]["headers"] == {"header_x": 0}
    assert got[0]["value"]["timestamp"] == 1626102708861
    assert got[0]["value"]["source"] == {**source(), "id": 100}
    assert got[1]["value"]["source"]["id"] == 101


def test_copy_keeps_headers_and_tombstones_fail():
    [event] = as_json(run(inserts(1, headers={"k": (STRING, ["v"])}), props(headers="k", fields="k_field", operation="copy")))
    assert event["headers"] == {"k": "v"} and event["value"]["k_field"] == "v"
    with pytest.raises(TransformError, match="Struct"):
        run(inserts(-1), props(headers="k", fields="f", operation="copy"))


@pytest.mark.parametrize(("options", "bad"), [
    ({"headers": "a,b", "fields": "x", "operation": "move"}, "transforms.h.fields"),
    ({"headers": "a", "fields": "x", "operation": "swap"}, "transforms.h.operation"),
    ({"headers": "a b", "fields": "x", "operation": "copy"}, "transforms.h.headers"),
])
def test_bad_options_are_refused(options, bad):
    with pytest.raises(ConfigErrors) as exc:
        parse_chain(props(**options))
    assert bad in str(exc.value)
