"""Faults on a real MariaDB: a purged binlog, a server restart and a killed binlog connection mid-stream,
a restart of headwater resuming from the GTID stored in its offsets, and a session writing partial row
images (binlog_row_image MINIMAL or NOBLOB)."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pymysql
import pytest

from headwater.connectors.errors import PositionLost, SourceError
from headwater.connectors.registry import validate_connector
from headwater.devservers.mariadb import MariaDBServer
from headwater.engine import Engine, OffsetFile


def properties(server: MariaDBServer, db: str, **extra: str) -> dict[str, Any]:
    return {"connector.class": "mariadb", **server.connector_properties(db), "database.server.id": "5402",
            "topic.prefix": "f", "include.schema.changes": "false", "retriable.restart.connector.wait.ms": "200",
            **{k.replace("__", "."): v for k, v in extra.items()}}


def changes(engine: Engine) -> list[tuple[str, Any, Any]]:
    """(op, key, after) of the data events of one `once` run."""
    out = []
    for e in engine.events(once=True):
        value = e.value_json()
        if value is not None and "op" in value:
            out.append((value["op"], e.key_json(), value["after"]))
    return out


def ids(events: list[tuple[str, Any, Any]], op: str) -> list[int]:
    return [key["id"] for o, key, _ in events if o == op]


@pytest.fixture
def table(mariadb_server, mariadb_db):
    mariadb_server.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))", mariadb_db)
    mariadb_server.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b')", mariadb_db)
    return mariadb_db


def insert(server: MariaDBServer, db: str, *keys: int) -> None:
    server.execute(";".join(f"INSERT INTO t VALUES ({k}, 'x{k}')" for k in keys), db)


def test_a_restart_of_headwater_resumes_from_the_stored_gtid(mariadb_server, table, tmp_path):
    offsets = OffsetFile(tmp_path / "offsets.json")
    first = Engine(validate_connector(properties(mariadb_server, table)), offsets)
    assert ids(changes(first), "r") == [1, 2]
    insert(mariadb_server, table, 3, 4)
    assert ids(changes(first), "c") == [3, 4]
    first.close()
    stored = offsets.load()
    assert stored is not None and stored["gtids"] == mariadb_server.gtid_binlog_pos()
    insert(mariadb_server, table, 5)
    # the GTID state alone places the stream: a wrong byte position in the offset does not matter
    offsets.store({**stored, "pos": 4})
    again = Engine(validate_connector(properties(mariadb_server, table)), offsets)
    try:
        assert ids(changes(again), "c") == [5]
    finally:
        again.close()


def purge(server: MariaDBServer, file: str) -> None:
    """Purge the binlog up to and including `file` (the server keeps a file until its binlog checkpoint
    has moved past it)."""
    deadline = time.monotonic() + 30
    while file in server.binlog_files():
        assert time.monotonic() < deadline, f"the server kept {file}: {server.binlog_files()}"
        server.execute("FLUSH BINARY LOGS")
        time.sleep(0.3)
        server.execute(f"PURGE BINARY LOGS TO '{server.binlog_files()[-1]}'")


def test_a_purged_binlog_fails_naming_the_position_and_the_fix(mariadb_server, table, tmp_path):
    offsets = OffsetFile(tmp_path / "offsets.json")
    engine = Engine(validate_connector(properties(mariadb_server, table)), offsets)
    assert ids(changes(engine), "r") == [1, 2]
    engine.close()
    stored = offsets.load()
    assert stored is not None
    insert(mariadb_server, table, 3)
    purge(mariadb_server, stored["file"])
    engine = Engine(validate_connector(properties(mariadb_server, table)), offsets)
    with pytest.raises(PositionLost) as info:
        changes(engine)
    engine.close()
    text = str(info.value)
    assert stored["file"] in text and "purged" in text and "snapshot.mode=when_needed" in text
    # when_needed takes a new snapshot instead, with the row the lost binlog held
    engine = Engine(validate_connector(properties(mariadb_server, table, snapshot__mode="when_needed")), offsets)
    try:
        assert ids(changes(engine), "r") == [1, 2, 3]
        insert(mariadb_server, table, 4)
        assert ids(changes(engine), "c") == [4]
    finally:
        engine.close()


def stream(engine: Engine, want: int, timeout: float = 60) -> list[int]:
    """Created keys, from `once` runs one after another, until `want` of them arrived."""
    got: list[int] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got += ids(changes(engine), "c")
    return got


def test_a_server_restart_mid_stream_loses_and_doubles_nothing(mariadb_server, table, tmp_path):
    engine = Engine(validate_connector(properties(mariadb_server, table)), OffsetFile(tmp_path / "o.json"))
    try:
        assert ids(changes(engine), "r") == [1, 2]
        insert(mariadb_server, table, 3, 4)
        assert stream(engine, 2) == [3, 4]
        mariadb_server.restart()
        insert(mariadb_server, table, 5, 6, 7)
        assert stream(engine, 3) == [5, 6, 7]
    finally:
        engine.close()


def test_a_killed_binlog_connection_is_resumed(mariadb_server, table, tmp_path):
    engine = Engine(validate_connector(properties(mariadb_server, table)), OffsetFile(tmp_path / "o.json"))
    try:
        assert ids(changes(engine), "r") == [1, 2]
        insert(mariadb_server, table, 3)
        assert stream(engine, 1) == [3]
        dumps = mariadb_server.query("SELECT id FROM information_schema.processlist WHERE command LIKE 'Binlog Dump%'")
        assert dumps
        for (pid,) in dumps:
            mariadb_server.execute(f"KILL {pid}")
        insert(mariadb_server, table, 4, 5)
        assert stream(engine, 2) == [4, 5]
    finally:
        engine.close()


def test_offsets_name_the_binlog_position_as_debezium_does(mariadb_server, table, tmp_path):
    offsets = OffsetFile(tmp_path / "offsets.json")
    engine = Engine(validate_connector(properties(mariadb_server, table)), offsets)
    try:
        changes(engine)
        insert(mariadb_server, table, 9)
        changes(engine)
    finally:
        engine.close()
    stored = json.loads(Path(tmp_path / "offsets.json").read_text())["offset"]
    assert {"file", "pos", "gtids", "snapshot", "epoch"} <= set(stored)
    assert stored["file"] == mariadb_server.binlog_files()[-1]


def session_write(server: MariaDBServer, db: str, row_image: str, *statements: str) -> None:
    """Statements of a session that sets its own binlog_row_image (the server's global one stays FULL)."""
    conn = pymysql.connect(**server.connection_params(db), autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SET SESSION binlog_row_image = {row_image}")
            for sql in statements:
                cur.execute(sql)
    finally:
        conn.close()


def test_a_minimal_row_image_of_a_session_is_refused_naming_the_setting(mariadb_server, table, tmp_path):
    """A session's MINIMAL image passes the check at the start (the global setting is FULL): the stream
    refuses it when it meets it (the columns it lacks cannot be told from NULLs), and stores no offset past it."""
    offsets = OffsetFile(tmp_path / "offsets.json")
    engine = Engine(validate_connector(properties(mariadb_server, table)), offsets)
    try:
        assert ids(changes(engine), "r") == [1, 2]
        before = offsets.load()
        session_write(mariadb_server, table, "MINIMAL", "UPDATE t SET v = 'm' WHERE id = 1")
        with pytest.raises(SourceError) as err:
            changes(engine)
    finally:
        engine.close()
    text = str(err.value)
    assert f"{table}.t" in text and "without id, v" in text and "binlog_row_image=FULL" in text
    assert offsets.load() == before


PLACEHOLDER = "__debezium_unavailable_value"
PLACEHOLDER_B64 = base64.b64encode(PLACEHOLDER.encode()).decode()


def test_noblob_images_write_the_placeholder_for_the_blob_and_text_columns_they_leave_out(mariadb_server, table,
                                                                                           tmp_path):
    """binlog_row_image=NOBLOB (a session's): a BLOB/TEXT column the image leaves out is Debezium's
    unavailable-value placeholder in `before` and `after` (its text in TEXT, its bytes in BLOB), a key change
    is a delete, a tombstone and a create; columns the image carries are as in FULL."""
    mariadb_server.execute("ALTER TABLE t ADD COLUMN note TEXT, ADD COLUMN b BLOB, ADD COLUMN j JSON; "
                           "UPDATE t SET note = 'kept', b = 'bb', j = '{\"a\": 1}'", table)
    engine = Engine(validate_connector(properties(mariadb_server, table)), OffsetFile(tmp_path / "offsets.json"))
    try:
        assert ids(changes(engine), "r") == [1, 2]
        session_write(mariadb_server, table, "NOBLOB",
                      "INSERT INTO t (id, v) VALUES (3, 'c')",
                      "INSERT INTO t VALUES (4, 'd', 'n4', 'b4', '[4]')",
                      "UPDATE t SET v = 'e' WHERE id = 1",
                      "UPDATE t SET note = 'new' WHERE id = 2",
                      "UPDATE t SET id = 5 WHERE id = 4",
                      "DELETE FROM t WHERE id = 3")
        got = []
        for e in engine.events(once=True):
            value = e.value_json()
            got.append((e.key_json(), value and (value["op"], value["before"], value["after"])))
    finally:
        engine.close()
    p, pb = PLACEHOLDER, PLACEHOLDER_B64

    def row(k: int, v: str, note: str | None, b: str | None, j: str | None) -> dict[str, Any]:
        return {"id": k, "v": v, "note": note, "b": b, "j": j}

    assert got == [
        ({"id": 3}, ("c", None, row(3, "c", p, pb, p))),  # (an insert leaves out what it did not set)
        ({"id": 4}, ("c", None, row(4, "d", "n4", base64.b64encode(b"b4").decode(), "[4]"))),
        ({"id": 1}, ("u", row(1, "a", p, pb, p), row(1, "e", p, pb, p))),
        ({"id": 2}, ("u", row(2, "b", p, pb, p), row(2, "b", "new", pb, p))),
        ({"id": 4}, ("d", row(4, "d", p, pb, p), None)),
        ({"id": 4}, None),
        ({"id": 5}, ("c", None, row(5, "d", p, pb, p))),
        ({"id": 3}, ("d", row(3, "c", p, pb, p), None)),
        ({"id": 3}, None),
    ]


def test_a_global_noblob_setting_is_accepted_and_its_placeholder_configurable(mariadb_server, table, tmp_path):
    mariadb_server.execute("ALTER TABLE t ADD COLUMN note TEXT", table)
    old = mariadb_server.scalar("SELECT @@global.binlog_row_image")
    mariadb_server.execute("SET GLOBAL binlog_row_image = 'NOBLOB'")
    try:
        props = properties(mariadb_server, table, unavailable__value__placeholder="(not sent)")
        engine = Engine(validate_connector(props), OffsetFile(tmp_path / "offsets.json"))
        try:
            assert ids(changes(engine), "r") == [1, 2]
            session_write(mariadb_server, table, "NOBLOB", "UPDATE t SET v = 'n' WHERE id = 2")
            assert changes(engine) == [("u", {"id": 2}, {"id": 2, "v": "n", "note": "(not sent)"})]
        finally:
            engine.close()
    finally:
        mariadb_server.execute(f"SET GLOBAL binlog_row_image = '{old}'")


def test_noblob_images_of_a_table_without_blobs_are_full(mariadb_server, table, tmp_path):
    engine = Engine(validate_connector(properties(mariadb_server, table)), OffsetFile(tmp_path / "offsets.json"))
    try:
        assert ids(changes(engine), "r") == [1, 2]
        session_write(mariadb_server, table, "NOBLOB", "UPDATE t SET v = 'n' WHERE id = 2", "INSERT INTO t VALUES (3, 'c')")
        assert [(op, after) for op, _, after in changes(engine)] == [("u", {"id": 2, "v": "n"}),
                                                                    ("c", {"id": 3, "v": "c"})]
    finally:
        engine.close()
