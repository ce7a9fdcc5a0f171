"""The schema at every binlog position across restarts: DDL that happened while headwater was stopped is
read from the binlog in order, with the history kept in `headwater.schema.history.file` beside the offsets."""

from __future__ import annotations

from typing import Any

from headwater.connectors.registry import validate_connector
from headwater.engine import Engine, OffsetFile


def run(engine: Engine) -> list[dict[str, Any]]:
    return [e.value_json() for e in engine.events(once=True) if e.value is not None]


def test_ddl_while_stopped_is_applied_at_its_position(mariadb_server, mariadb_db, tmp_path):
    db = mariadb_db
    mariadb_server.execute("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10)); INSERT INTO t VALUES (1, '7')", db)
    props = {"connector.class": "mariadb", **mariadb_server.connector_properties(db), "database.server.id": "5403",
             "topic.prefix": "h", "headwater.schema.history.file": str(tmp_path / "history.jsonl")}
    offsets = OffsetFile(tmp_path / "offsets.json")
    engine = Engine(validate_connector(props), offsets)
    first = run(engine)
    engine.close()
    assert [v["after"] for v in first if v.get("op") == "r"] == [{"id": 1, "a": "7"}]
    # while stopped: a row in the old layout, the column retyped, renamed and one added, rows in the new layout
    mariadb_server.execute("INSERT INTO t VALUES (2, '8');"
                           "ALTER TABLE t MODIFY a BIGINT, ADD COLUMN b VARCHAR(5) AFTER id;"
                           "INSERT INTO t VALUES (3, 'q', 30);"
                           "ALTER TABLE t RENAME COLUMN a TO c;"
                           "UPDATE t SET c = 31 WHERE id = 3;"
                           "RENAME TABLE t TO u;"
                           "INSERT INTO u VALUES (4, 'w', 40)", db)
    engine = Engine(validate_connector(props), offsets)
    try:
        events = run(engine)
    finally:
        engine.close()
    data = [(v["op"], v["source"]["table"], v["before"], v["after"]) for v in events if "op" in v]
    assert data == [
        ("c", "t", None, {"id": 2, "a": "8"}),
        ("c", "t", None, {"id": 3, "b": "q", "a": 30}),
        ("u", "t", {"id": 3, "b": "q", "c": 31 - 1}, {"id": 3, "b": "q", "c": 31}),
        ("c", "u", None, {"id": 4, "b": "w", "c": 40}),
    ]
    ddl = [v["ddl"] for v in events if "ddl" in v]
    assert len(ddl) == 3 and ddl[0].startswith("ALTER TABLE t MODIFY") and ddl[2].startswith("RENAME TABLE")
