"""DecodeLogicalDecodingMessageContent on messages made by hand (Debezium's own output, followed by the
outbox router, is compared in test_outbox)."""

from __future__ import annotations

import base64

import pytest

from headwater.transforms.base import TransformError
from tests.transforms.support import Events, as_json, run

VALUE = {"type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.MessageValue", "fields": [
    {"type": "string", "optional": False, "field": "op"},
    {"type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.Message", "field": "message", "fields": [
        {"type": "string", "optional": False, "field": "prefix"}, {"type": "bytes", "optional": True, "field": "content"}]}]}
KEY = {"type": "struct", "optional": False, "name": "io.debezium.connector.postgresql.MessageKey",
       "fields": [{"type": "string", "optional": True, "field": "prefix"}]}
PROPS = {"transforms": "d", "transforms.d.type": "DecodeLogicalDecodingMessageContent"}


def messages(*contents: bytes) -> Events:
    out = Events()
    for c in contents:
        out.record("x.message", KEY, {"prefix": "p"}, VALUE,
                   {"op": "m", "message": {"prefix": "p", "content": base64.b64encode(c).decode()}}, "m")
    return out


def decoded(props: dict[str, str], events: Events) -> list[dict]:
    return as_json(run(events, props))


def test_content_becomes_after_of_a_create():
    got = decoded({**PROPS, "transforms.d.fields.null.include": "true"}, messages(b'{"a": 1, "b": null}', b'{"c": "x"}'))
    assert [(e["key"], e["value"]) for e in got] == [(None, {"op": "c", "after": {"a": 1, "b": None}}),
                                                     (None, {"op": "c", "after": {"c": "x"}})]


def test_null_fields_left_out_by_default_and_non_json_fails():
    [event] = decoded(PROPS, messages(b'{"a": 1, "b": null}'))
    assert event["value"]["after"] == {"a": 1}
    with pytest.raises(TransformError, match="Unable to parse"):
        decoded(PROPS, messages(b"plain text"))
