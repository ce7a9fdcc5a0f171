"""SchemaChangeEventFilter on schema change events made by hand (PostgreSQL emits none)."""

from __future__ import annotations

import pytest

from headwater.config.errors import ConfigErrors
from headwater.transforms import parse_chain
from tests.transforms.support import Events, as_json, run

CHANGE = {"type": "struct", "optional": False, "name": "io.debezium.connector.mysql.TableChange", "fields": [
    {"type": "string", "optional": False, "field": "type"}, {"type": "string", "optional": False, "field": "id"}]}
VALUE = {"type": "struct", "optional": False, "name": "io.debezium.connector.mysql.SchemaChangeValue", "fields": [
    {"type": "string", "optional": True, "field": "ddl"},
    {"type": "array", "items": CHANGE, "optional": True, "field": "tableChanges"}]}
PROPS = {"transforms": "f", "transforms.f.type": "io.debezium.transforms.SchemaChangeEventFilter"}


def test_excluded_types_are_dropped():
    events = Events()
    for ddl, changes in (("CREATE TABLE a", [{"type": "CREATE", "id": "a"}]), ("ALTER TABLE a", [{"type": "ALTER", "id": "a"}]),
                         ("CREATE DATABASE d", []), ("odd", None)):
        events.record("srv", None, None, VALUE, {"ddl": ddl, "tableChanges": changes})
    got = as_json(run(events, {**PROPS, "transforms.f.schema.change.event.exclude.list": "ALTER,DATABASE"}))
    assert [e["value"]["ddl"] for e in got] == ["CREATE TABLE a"]  # no tableChanges: dropped too


def test_unknown_type_is_refused():
    with pytest.raises(ConfigErrors, match="schema.change.event.exclude.list"):
        parse_chain({**PROPS, "transforms.f.schema.change.event.exclude.list": "CREATE,alter"})
