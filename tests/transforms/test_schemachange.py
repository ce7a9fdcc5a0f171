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


def test_on_mariadb_schema_changes(mariadb_server, mariadb_db, tmp_path):
    """The binlog connector's own schema change records: ALTER and DROP excluded, CREATE kept (and
    with DATABASE excluded, all three kept)."""

    from headwater.connectors.registry import validate_connector
    from headwater.engine import Engine

    db = mariadb_db
    mariadb_server.execute("CREATE TABLE t (id INT PRIMARY KEY)", db)
    engines = {}
    for n, excluded in enumerate(("ALTER,DROP", "DATABASE")):
        props = {"connector.class": "mariadb", **mariadb_server.connector_properties(db),
                 "database.server.id": str(5412 + n), "topic.prefix": "m",
                 "headwater.schema.history.file": str(tmp_path / f"history{n}.jsonl"), "include.schema.changes": "true",
                 **PROPS, "transforms.f.schema.change.event.exclude.list": excluded}
        engines[excluded] = Engine(validate_connector(props))
    try:
        for engine in engines.values():
            list(engine.events(once=True))
        mariadb_server.execute("CREATE TABLE u (id INT PRIMARY KEY); ALTER TABLE t ADD COLUMN v INT; DROP TABLE u", db)
        types = {k: [e.value_json()["tableChanges"][0]["type"] for e in engine.events(once=True) if e.topic == "m"]
                 for k, engine in engines.items()}
    finally:
        for engine in engines.values():
            engine.close()
    assert types == {"ALTER,DROP": ["CREATE"], "DATABASE": ["CREATE", "ALTER", "DROP"]}
