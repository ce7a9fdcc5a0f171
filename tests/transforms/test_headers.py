"""HeaderToValue: the documentation's test vector, copy and refusals."""

from __future__ import annotations

import pytest

from headwater.config.errors import ConfigErrors
from headwater.transforms import parse_chain
from headwater.transforms.base import TransformError
from tests.transforms.envelopes import block, field, run, with_header

ROW = [field("id", "int32", False)]


def props(**options: str) -> dict[str, str]:
    return {"transforms": "h", "transforms.h.type": "io.debezium.transforms.HeaderToValue",
            **{f"transforms.h.{k}": v for k, v in options.items()}}


def test_spec_vector_move():
    b = block("t.t", ROW, [("c", None, {"id": 1}), ("c", None, {"id": 2})])
    b = with_header(b, "header_x", {"type": "int32", "optional": False}, [0, 0])
    b = with_header(b, "event_timestamp", {"type": "int64", "optional": False}, [1626102708861, 1626102708862])
    b = with_header(b, "key", {"type": "int32", "optional": False}, [100, 101])
    got = run(props(headers="event_timestamp,key", fields="timestamp,source.id", operation="move"), b)
    assert got[0]["headers"] == {"header_x": 0}
    assert got[0]["value"]["timestamp"] == 1626102708861
    assert got[0]["value"]["source"] == {"schema": "public", "table": "t", "id": 100}
    assert got[1]["value"]["source"]["id"] == 101


def test_copy_keeps_headers_and_tombstones_fail():
    b = with_header(block("t.t", ROW, [("c", None, {"id": 1})]), "k", {"type": "string", "optional": True}, ["v"])
    [event] = run(props(headers="k", fields="k_field", operation="copy"), b)
    assert event["headers"] == {"k": "v"} and event["value"]["k_field"] == "v"
    with pytest.raises(TransformError, match="Struct"):
        run(props(headers="k", fields="f", operation="copy"), block("t.t", ROW, [(None, {"id": 1}, None)]))


@pytest.mark.parametrize(("options", "bad"), [
    ({"headers": "a,b", "fields": "x", "operation": "move"}, "transforms.h.fields"),
    ({"headers": "a", "fields": "x", "operation": "swap"}, "transforms.h.operation"),
    ({"headers": "a b", "fields": "x", "operation": "copy"}, "transforms.h.headers"),
])
def test_bad_options_are_refused(options, bad):
    with pytest.raises(ConfigErrors) as exc:
        parse_chain(props(**options))
    assert bad in str(exc.value)
