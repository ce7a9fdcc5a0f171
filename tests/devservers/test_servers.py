"""The throwaway servers: PostgreSQL with logical decoding, MariaDB with a row-based GTID binlog."""

from __future__ import annotations

import os
import pwd
import subprocess

import pytest

from headwater.devservers.common import SERVICE_USER
from headwater.devservers.mariadb import MariaDBServer, mariadb_binary


def _process_uid(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Uid:"):
                return int(line.split()[1])
    raise AssertionError(f"no Uid line for process {pid}")


def _gtid_seq(pos: str, domain: int = 0) -> int:
    """The sequence number of `domain` in a GTID position like '0-1-42,1-1-7' (0 when absent)."""
    for gtid in filter(None, pos.split(",")):
        d, _server, seq = gtid.split("-")
        if int(d) == domain:
            return int(seq)
    return 0


# -- PostgreSQL --------------------------------------------------------------------------------


def test_postgres_has_logical_decoding(pg_server, pg_db):
    assert pg_server.query("SHOW wal_level") == [("logical",)]
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text)", pg_db)
    pg_server.execute("CREATE PUBLICATION p FOR TABLE t", pg_db)
    slot = f"s_{pg_db}"
    ((name, lsn),) = pg_server.query(f"SELECT * FROM pg_create_logical_replication_slot('{slot}', 'pgoutput')", pg_db)
    assert name == slot and lsn
    pg_server.execute("INSERT INTO t VALUES (1, 'one')", pg_db)
    changes = pg_server.query(
        f"SELECT count(*) FROM pg_logical_slot_peek_binary_changes('{slot}', NULL, NULL, "
        "'proto_version', '1', 'publication_names', 'p')",
        pg_db,
    )
    assert changes[0][0] >= 3  # begin, relation, insert, commit


# -- MariaDB -----------------------------------------------------------------------------------


def test_mariadb_binlog_is_row_based_with_gtids(mariadb_server):
    v = mariadb_server.variables()
    assert v["log_bin"] == "ON"
    assert v["binlog_format"] == "ROW"
    assert v["binlog_row_image"] == "FULL"
    assert v["binlog_row_metadata"] == "FULL"
    assert v["gtid_strict_mode"] == "ON"
    assert v["server_id"] == str(mariadb_server.server_id)
    assert v["character_set_server"] == "utf8mb4"
    # grants are enforced: a wrong password is refused
    proc = subprocess.run(
        [mariadb_binary("mariadb"), "--no-defaults", "--host=127.0.0.1", f"--port={mariadb_server.port}",
         f"--user={mariadb_server.superuser}", "--password=wrong", "-e", "SELECT 1"],
        capture_output=True, text=True,
    )
    assert proc.returncode != 0 and "Access denied" in proc.stderr


def test_mariadb_runs_unprivileged(mariadb_server):
    uid = _process_uid(mariadb_server.pid)
    assert uid != 0
    if os.geteuid() == 0:
        assert uid == pwd.getpwnam(SERVICE_USER).pw_uid
    else:
        assert uid == os.geteuid()


def test_mariadb_query_values(mariadb_server):
    rows = mariadb_server.query("SELECT NULL, 'a\\tb\\nc <&> é', 3, ''")
    assert rows == [(None, "a\tb\nc <&> é", "3", "")]
    assert mariadb_server.query("SELECT 1 FROM DUAL WHERE 0") == []
    with pytest.raises(RuntimeError, match="syntax"):
        mariadb_server.execute("SELEKT 1")


def test_mariadb_gtid_advances_and_binlog_has_row_events(mariadb_server, mariadb_db):
    srv = mariadb_server
    srv.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20)) ENGINE=InnoDB", mariadb_db)
    before = srv.gtid_binlog_pos()
    binlog_file = srv.query("SHOW MASTER STATUS")[0][0]  # the first file on a server not yet restarted
    srv.execute("INSERT INTO t VALUES (1, 'hello'), (2, NULL)", mariadb_db)
    after = srv.gtid_binlog_pos()
    assert _gtid_seq(after) == _gtid_seq(before) + 1
    assert after.startswith(f"0-{srv.server_id}-")

    proc = subprocess.run(
        [mariadb_binary("mariadb-binlog"), "--no-defaults", "--read-from-remote-server",
         "--host=127.0.0.1", f"--port={srv.port}", f"--user={srv.superuser}", f"--password={srv.password}",
         "--verbose", "--base64-output=decode-rows", "--print-table-metadata", binlog_file],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"GTID {after}" in out
    assert "Write_rows" in out
    assert f"### INSERT INTO `{mariadb_db}`.`t`" in out
    assert "###   @2='hello'" in out
    assert "###   @2=NULL" in out
    # binlog_row_metadata=FULL: the table map carries column names
    assert "# Columns(`id` INT NOT NULL" in out and "`v` VARCHAR(20)" in out
    assert "# Primary Key(id)" in out


def test_mariadb_connector_properties(mariadb_server, mariadb_db):
    props = mariadb_server.connector_properties(mariadb_db)
    assert props == {
        "database.hostname": "127.0.0.1",
        "database.port": str(mariadb_server.port),
        "database.user": mariadb_server.superuser,
        "database.password": mariadb_server.password,
        "database.include.list": mariadb_db,
    }
    assert mariadb_server.connection_params(mariadb_db)["database"] == mariadb_db


def test_mariadb_restart_keeps_data_and_stop_removes_everything():
    server = MariaDBServer(server_id=7).start()
    try:
        root, port = server.root, server.port
        assert root is not None
        db = server.create_database("keep")
        server.execute("CREATE TABLE t (id INT PRIMARY KEY); INSERT INTO t VALUES (1), (2)", db)
        pos = server.gtid_binlog_pos()
        assert pos.startswith("0-7-")

        server.restart()
        assert server.port == port
        assert server.query("SELECT id FROM t ORDER BY id", db) == [("1",), ("2",)]
        assert server.gtid_binlog_pos() == pos
        assert len(server.binlog_files()) == 2  # a clean restart opens a new binlog file

        server.execute("INSERT INTO t VALUES (3)", db)
        server.restart("immediate")  # a crash: committed rows survive recovery
        assert server.query("SELECT count(*) FROM t", db) == [("3",)]
        assert _gtid_seq(server.gtid_binlog_pos()) == _gtid_seq(pos) + 1
        pid = server.pid
    finally:
        server.stop()
    assert server.root is None
    assert not root.exists()
    assert not os.path.exists(f"/proc/{pid}")
    server.stop()  # idempotent


def test_mariadb_start_failure_reports_the_log():
    with pytest.raises(RuntimeError, match="binlog_format"):
        MariaDBServer(settings={"binlog-format": "BOGUS"}).start()
