"""Connections and the checks made before capture, on a real MariaDB: each refusal names what to change."""

from __future__ import annotations

import contextlib

import pytest

from headwater.connectors.binlog.connection import ConnectionParams, check_server, connect
from headwater.connectors.errors import ConnectError, SourceError
from headwater.devservers.common import free_port
from headwater.devservers.mariadb import MariaDBServer


def params(server: MariaDBServer, user: str | None = None, password: str | None = None) -> ConnectionParams:
    return ConnectionParams("127.0.0.1", server.port, user or server.superuser, password or server.password, 5.0)


def check(server: MariaDBServer, user: str | None = None, password: str | None = None, locking: str = "minimal",
          snapshot: bool = True) -> None:
    conn = connect(params(server, user, password))
    try:
        check_server(conn, "MariaDB", "BINLOG MONITOR", locking, snapshot)
    finally:
        conn.close()


def test_the_test_server_passes(mariadb_server):
    check(mariadb_server)


@contextlib.contextmanager
def global_setting(server: MariaDBServer, name: str, value: str):
    old = server.scalar(f"SELECT @@global.{name}")
    server.execute(f"SET GLOBAL {name} = '{value}'")
    try:
        yield
    finally:
        server.execute(f"SET GLOBAL {name} = '{old}'")


@pytest.mark.parametrize(("name", "value"), [("binlog_format", "STATEMENT"), ("binlog_format", "MIXED"),
                                             ("binlog_row_image", "MINIMAL")])
def test_a_binlog_setting_debezium_cannot_read_is_refused(mariadb_server, name, value):
    with global_setting(mariadb_server, name, value), pytest.raises(SourceError) as info:
        check(mariadb_server)
    text = str(info.value)
    assert f"{name} is {value}" in text and f"{name}=" in text


@pytest.fixture
def user(mariadb_server):
    created: list[str] = []

    def make(*grants: str) -> tuple[str, str]:
        name = f"cdc{len(created)}"
        mariadb_server.execute(f"CREATE USER '{name}'@'%' IDENTIFIED BY 'pw-{name}'")
        for g in grants:
            mariadb_server.execute(f"GRANT {g} ON *.* TO '{name}'@'%'")
        created.append(name)
        return name, f"pw-{name}"
    yield make
    for name in created:
        mariadb_server.execute(f"DROP USER '{name}'@'%'")


def test_missing_privileges_are_named_with_the_grant_to_run(mariadb_server, user):
    name, pw = user("SELECT")
    with pytest.raises(SourceError) as info:
        check(mariadb_server, name, pw)
    text = str(info.value)
    for p in ("REPLICATION SLAVE", "BINLOG MONITOR", "RELOAD"):
        assert p in text
    assert "GRANT REPLICATION SLAVE, BINLOG MONITOR, RELOAD ON *.*" in text
    assert pw not in text


def test_privileges_debezium_asks_for_are_enough(mariadb_server, user):
    name, pw = user("SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, BINLOG MONITOR, LOCK TABLES")
    check(mariadb_server, name, pw)


def test_reload_is_not_needed_without_a_lock_nor_select_without_a_snapshot(mariadb_server, user):
    name, pw = user("SELECT, REPLICATION SLAVE, BINLOG MONITOR")
    check(mariadb_server, name, pw, locking="none")
    name, pw = user("REPLICATION SLAVE, REPLICATION CLIENT")  # MariaDB shows REPLICATION CLIENT as BINLOG MONITOR
    check(mariadb_server, name, pw, snapshot=False)


def test_refused_credentials_are_not_retried_and_never_show_the_password(mariadb_server):
    with pytest.raises(SourceError) as info:
        connect(params(mariadb_server, password="wrong-secret"))
    assert not isinstance(info.value, ConnectError)
    assert "wrong-secret" not in str(info.value) and f"port {mariadb_server.port}" in str(info.value)


def test_a_server_that_cannot_be_reached_is_retriable():
    with pytest.raises(ConnectError) as info:
        connect(ConnectionParams("127.0.0.1", free_port(), "u", "pw", 2.0))
    assert "cannot connect" in str(info.value)


def test_a_server_without_binlog_is_refused():
    with MariaDBServer(settings={"skip-log-bin": "1"}) as server, pytest.raises(SourceError) as info:
        check(server)
    assert "log_bin is OFF" in str(info.value) and "log-bin" in str(info.value)
