"""catalog.py against a real MariaDB: the snapshot's schema statements and tables read from the server."""

from __future__ import annotations

import json
from pathlib import Path

import pymysql
import pytest

from headwater.connectors.binlog.catalog import information_schema_tables, read_tables, snapshot_statements
from headwater.connectors.binlog.history import SchemaHistory

REFERENCE = Path("/work/shared/reference/mariadb/20_ddl_midstream")


def _connect(server, db=None):
    params = server.connection_params(db)
    return pymysql.connect(host=params["host"], port=params["port"], user=params["user"],
                           password=params["password"], database=db, autocommit=True)


@pytest.mark.skipif(not REFERENCE.exists(), reason="reference scenarios not available")
def test_snapshot_statements_give_debeziums_snapshot_events(mariadb_server):
    mariadb_server.execute(f"SOURCE {REFERENCE / 'setup.sql'}")
    try:
        with _connect(mariadb_server) as conn:
            statements = snapshot_statements(conn, database_filter=lambda db: db == "catalog")
        history = SchemaHistory()
        produced = []
        for s in statements:
            for e in history.apply(s.ddl, s.database or None, {"file": "binlog.000001", "pos": 4}):
                produced.append({**e.to_debezium(), "table": e.source_table})
        recorded = [json.loads(line)["value"] for line in (REFERENCE / "events.jsonl").read_text().splitlines()]
        recorded = [v for v in recorded if v and "ddl" in v and v["source"]["snapshot"] == "true"]
        expected = [{"databaseName": v["databaseName"], "schemaName": None, "ddl": v["ddl"],
                     "tableChanges": v["tableChanges"], "table": v["source"]["table"]} for v in recorded]
        # the first statement names this server's character_set_server (the reference server had latin1)
        assert produced[0]["ddl"].startswith("SET character_set_server=")
        assert produced[1:] == expected[1:]
        assert history.table("catalog", "products") is not None
    finally:
        mariadb_server.execute("DROP DATABASE IF EXISTS catalog")


def test_read_tables_agrees_with_information_schema(mariadb_server, mariadb_db):
    mariadb_server.execute(
        f"CREATE TABLE {mariadb_db}.t (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, code CHAR(3) CHARACTER SET latin1 "
        f"NOT NULL, note TEXT, e ENUM('x','y') DEFAULT 'y', PRIMARY KEY (id), UNIQUE KEY (code)) COMMENT 'c'")
    with _connect(mariadb_server) as conn:
        tables = read_tables(conn, [(mariadb_db, "t")])
        server = information_schema_tables(conn, mariadb_db)["t"]
    table = tables[(mariadb_db, "t")]
    assert [c.name for c in table.columns] == [c.name for c in server.columns] == ["id", "code", "note", "e"]
    assert table.primary_key == server.primary_key == ("id",)
    assert [c.charset for c in table.columns] == [c.charset for c in server.columns]
    assert [c.optional for c in table.columns] == [c.nullable for c in server.columns]
    assert table.comment == server.comment == "c"
    assert table.column("e").enum_values == ("'x'", "'y'")
    assert table.column("id").type_name == "BIGINT UNSIGNED" and table.column("id").auto_incremented
