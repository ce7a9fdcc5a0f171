"""Kafka's HeaderFrom$Value / $Key: copy and move of fields into headers, tombstones and refusals."""

from __future__ import annotations

import pytest

from headwater.config.errors import ConfigErrors
from headwater.transforms import parse_chain
from headwater.transforms.base import TransformError
from tests.transforms.support import Events, as_json, run, source


def props(kind: str = "Value", **options: str) -> dict[str, str]:
    return {"transforms": "h", "transforms.h.type": f"org.apache.kafka.connect.transforms.HeaderFrom${kind}",
            **{f"transforms.h.{k}": v for k, v in options.items()}}


def inserts(*ids: int) -> Events:
    changes = Events()
    for i in ids:
        changes.add(None, {"id": -i, "name": None}) if i < 0 else changes.add("c", None, {"id": i, "name": "n"})
    return changes


def test_copy_crosscutting_vector():
    [event] = as_json(run(inserts(1), props(fields="source,op", headers="source,op", operation="copy")))
    assert event["headers"] == {"source": source(), "op": "c"}
    assert event["value"]["op"] == "c" and event["value"]["source"] == source()


def test_move_removes_fields_and_key_variant():
    [event] = as_json(run(inserts(1), props(fields="op,after", headers="o,a", operation="move")))
    assert event["headers"] == {"o": "c", "a": {"id": 1, "name": "n"}}
    assert "op" not in event["value"] and "after" not in event["value"] and "source" in event["value"]
    [event] = as_json(run(inserts(2), props("Key", fields="id", headers="kid", operation="copy")))
    assert event["headers"] == {"kid": 2} and event["key"] == {"id": 2}


def test_tombstone_and_missing_field_fail():
    with pytest.raises(TransformError, match="Struct"):
        run(inserts(-1), props(fields="op", headers="op", operation="copy"))
    with pytest.raises(TransformError, match="nope"):
        run(inserts(1), props(fields="nope", headers="x", operation="copy"))


@pytest.mark.parametrize(("options", "bad"), [
    ({"fields": "a,b", "headers": "x", "operation": "move"}, "transforms.h.headers"),
    ({"fields": "a", "headers": "x", "operation": "swap"}, "transforms.h.operation"),
])
def test_bad_options_are_refused(options, bad):
    with pytest.raises(ConfigErrors, match=bad):
        parse_chain(props(**options))


def test_headers_survive_extract_new_record_state():
    chain = {**props(fields="source,op", headers="source,op", operation="copy"), "transforms": "h,unwrap",
             "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"}
    [event] = as_json(run(inserts(1), chain))
    assert event["value"] == {"id": 1, "name": "n"}
    assert event["headers"] == {"source": source(), "op": "c"}
