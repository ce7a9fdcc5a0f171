"""The chain on MariaDB's events through the engine: unwrap (rewrite) and a Filter in Python, with the
binlog connector's schema change records passing the unwrap unchanged."""

from __future__ import annotations

import json

from headwater.connectors.registry import validate_connector
from headwater.engine import Engine


def test_unwrap_and_filter_on_mariadb(mariadb_server, mariadb_db, tmp_path):
    db = mariadb_db
    mariadb_server.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10)); INSERT INTO t VALUES (1, 'a'), (2, 'b')", db)
    props = {"connector.class": "mariadb", **mariadb_server.connector_properties(db), "database.server.id": "5411",
             "topic.prefix": "m", "headwater.schema.history.file": str(tmp_path / "history.jsonl"),
             "include.schema.changes": "true",
             "transforms": "unwrap,keep", "transforms.unwrap.type": "ExtractNewRecordState",
             "transforms.unwrap.delete.tombstone.handling.mode": "rewrite",
             "transforms.unwrap.add.fields": "op,table",
             "transforms.keep.type": "io.debezium.transforms.Filter", "transforms.keep.language": "python",
             "transforms.keep.condition": "value.id != 2", "transforms.keep.topic.regex": "m\\..*\\.t"}
    engine = Engine(validate_connector(props))
    try:
        first = list(engine.events(once=True))
        mariadb_server.execute("UPDATE t SET v = 'x' WHERE id = 1; DELETE FROM t WHERE id = 1; "
                               "INSERT INTO t VALUES (3, 'c')", db)
        second = list(engine.events(once=True))
    finally:
        engine.close()
    rows = [json.loads(e.value or "null") for e in first + second if e.topic == f"m.{db}.t"]
    assert rows == [{"id": 1, "v": "a", "__deleted": "false", "__op": "r", "__table": "t"},
                    {"id": 1, "v": "x", "__deleted": "false", "__op": "u", "__table": "t"},
                    {"id": 1, "v": "x", "__deleted": "true", "__op": "d", "__table": "t"},
                    {"id": 3, "v": "c", "__deleted": "false", "__op": "c", "__table": "t"}]
    changes = [json.loads(e.value or "null") for e in first if e.topic == "m"]
    assert changes and all("ddl" in c for c in changes)  # schema change records are not envelopes: unchanged
