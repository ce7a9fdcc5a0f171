"""Shared fixtures: throwaway PostgreSQL and MariaDB servers, fresh databases, one Spark session."""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from pathlib import Path

import pytest

from headwater.devservers.mariadb import MariaDBServer
from headwater.devservers.postgres import PostgresServer

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

_db_counter = itertools.count(1)


@pytest.fixture(scope="session")
def pg_server():
    """One PostgreSQL 15 server (wal_level=logical) for the whole session."""
    server = PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture
def pg_db(pg_server):
    """A fresh, empty database on the session server; dropped (with its slots) afterwards."""
    name = f"t{os.getpid()}_{next(_db_counter)}"
    pg_server.create_database(name)
    yield name
    slots = pg_server.query(f"SELECT slot_name, active_pid FROM pg_replication_slots WHERE database = '{name}'")
    for _, pid in slots:
        if pid:
            pg_server.execute(f"SELECT pg_terminate_backend({pid})")
    for slot, _ in slots:
        with contextlib.suppress(Exception):
            pg_server.execute(f"SELECT pg_drop_replication_slot('{slot}')")
    pg_server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def mariadb_server():
    """One MariaDB server (row-based binlog, GTIDs) for the whole session."""
    server = MariaDBServer().start()
    yield server
    server.stop()


@pytest.fixture
def mariadb_db(mariadb_server):
    """A fresh, empty database on the session MariaDB server; dropped afterwards."""
    name = f"t{os.getpid()}_{next(_db_counter)}"
    mariadb_server.create_database(name)
    yield name
    # Sessions left in the database would hold metadata locks that make DROP DATABASE wait.
    for (pid,) in mariadb_server.query(
        f"SELECT id FROM information_schema.processlist WHERE db = '{name}' AND id <> CONNECTION_ID()"
    ):
        with contextlib.suppress(RuntimeError):  # it may have ended meanwhile
            mariadb_server.execute(f"KILL {pid}")
    mariadb_server.drop_database(name)


REPOSITORY = str(Path(__file__).resolve().parents[1])


@pytest.fixture(scope="session")
def spark():
    """One local Spark session (`local[2]`) for every in-process Spark test, made by headwater's own
    `spark_session` (the options `headwater run` starts Spark with): a JVM start is ~8 s of a test
    otherwise. Spark's Python workers find the repository on their PYTHONPATH (a test's own
    connector, under tests/, is imported there). Tests that change a runtime option set it back."""
    from headwater.pipeline_config import parse_config
    from headwater.spark.pipeline import spark_session
    from headwater.spark.workerlife import REUSED_PLANNERS

    cfg = parse_config({"name": "tests", "source": {"connector.class": "postgres", "topic.prefix": "t",
                                                    "database.hostname": "127.0.0.1", "database.user": "u",
                                                    "database.dbname": "d"},
                        "sink": {"type": "jsonl", "path": "unused"},
                        "spark": {"master": "local[2]", "checkpoint": "unused"}})
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([REPOSITORY, *filter(None, (before or "").split(os.pathsep))])
    # this session starts hundreds of queries: its planners' workers are reused, as Spark has it (a
    # `headwater run` starts one query, and its planners' workers end after their one job)
    os.environ[REUSED_PLANNERS] = "1"
    try:
        session = spark_session(cfg)  # the JVM and the workers it starts keep this PYTHONPATH
    finally:  # the `headwater` processes tests start set their own
        os.environ.pop(REUSED_PLANNERS, None)
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before
    yield session
    session.stop()
