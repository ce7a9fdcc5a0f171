"""`headwater run` at the edges a new user hits first: the real CLI against a real PostgreSQL.

A database that cannot be reached, or a user it refuses, fails at start within a bounded time with
headwater's one-line message (no Java stack trace, no Spark or Java start-up lines, never the
password); a signal stops it with status 0, quietly, also while it starts; and when it is killed, no Python worker
Spark started for it lives on.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import time
import uuid
from pathlib import Path

import pytest

from tests.spark_support import cli, start_cli, write_config

CHATTER = ("Using incubator modules", "Setting default log level", "sc.setLogLevel")
MARK = "HEADWATER_TEST_RUN"


def assert_alone(stderr: str, *expected: str) -> None:
    """stderr is headwater's one-line error naming `expected`, and nothing else but headwater's
    progress lines."""
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("headwater: ")]
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    for text in expected:
        assert text in lines[0], stderr


@pytest.mark.parametrize("wrong", [{"database.port": "1"}, {"database.dbname": "no_such_database"}],
                         ids=["port", "database"])
def test_a_database_that_cannot_be_reached_fails_at_start(tmp_path, pg_server, wrong):
    config = write_config(tmp_path, pg_server, "postgres", source=wrong)
    started = time.monotonic()
    proc = cli("run", str(config), "--once", timeout=240, check=False)
    assert proc.returncode == 1, proc.stderr
    assert time.monotonic() - started < 240
    props = {**pg_server.connector_properties("postgres"), **wrong}
    assert_alone(proc.stderr, "cannot connect to PostgreSQL", f"host {props['database.hostname']}",
                 f"port {props['database.port']}", f"database {props['database.dbname']}")
    assert pg_server.password not in proc.stderr + proc.stdout
    assert not any(line in proc.stderr for line in CHATTER)


def test_a_user_without_replication_gets_one_line(tmp_path, pg_server, pg_db):
    role, password = f"norepl_{uuid.uuid4().hex[:8]}", "norepl-secret"
    pg_server.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
    try:
        config = write_config(tmp_path, pg_server, pg_db,
                              source={"database.user": role, "database.password": password})
        proc = cli("run", str(config), timeout=240, check=False)
    finally:
        pg_server.execute(f"DROP ROLE {role}")
    assert proc.returncode == 1, proc.stderr
    assert_alone(proc.stderr, f"user '{role}' lacks the REPLICATION attribute", f'ALTER ROLE "{role}" REPLICATION')
    assert password not in proc.stderr + proc.stdout


@pytest.mark.parametrize(("signum", "target", "when"), [
    (signal.SIGTERM, "process", "starting"),
    (signal.SIGINT, "group", "starting"),  # Ctrl-C on a terminal
    (signal.SIGINT, "group", "started"),  # after PySpark's SparkContext set a SIGINT handler of its own
], ids=["sigterm-starting", "ctrl-c-starting", "ctrl-c-started"])
def test_a_signal_stops_quietly(tmp_path, pg_server, pg_db, signum, target, when):
    config = write_config(tmp_path, pg_server, pg_db)
    log = tmp_path / "run.log"
    proc = start_cli("run", str(config), log=log)
    if when == "starting":
        time.sleep(2)  # the JVM is starting
    else:
        deadline = time.monotonic() + 180
        while "started" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
    if target == "process":
        os.kill(proc.pid, signum)
    else:
        os.killpg(proc.pid, signum)
    assert proc.wait(timeout=120) == 0, log.read_text()
    text = log.read_text()
    assert "Traceback" not in text and "\tat " not in text and "py4j" not in text, text
    last = text.strip().splitlines()[-1]
    assert last == "stopped" or re.fullmatch(r"headwater: done, \d+ events in \d+ batches", last), text


def workers_marked(mark: str) -> list[int]:
    """The processes whose environment holds `MARK=mark`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if f"{MARK}={mark}".encode() in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
    return found


def test_no_worker_outlives_a_killed_run(tmp_path, pg_server, monkeypatch):
    # a source that retries an unreachable database without end, in Spark's streaming source runner
    config = write_config(tmp_path, pg_server, "postgres", source={
        "database.port": "1", "errors.max.retries": "-1", "retriable.restart.connector.wait.ms": "500"})
    mark = uuid.uuid4().hex
    monkeypatch.setenv(MARK, mark)
    log = tmp_path / "run.log"
    proc = start_cli("run", str(config), log=log)
    try:
        deadline = time.monotonic() + 180
        while "trying again" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.5)
        assert len(workers_marked(mark)) > 2  # the driver, its JVM, the source runner, ...
        os.kill(proc.pid, signal.SIGKILL)  # the driver only, not its process group
        proc.wait(timeout=10)
        deadline = time.monotonic() + 30
        while workers_marked(mark) and time.monotonic() < deadline:
            time.sleep(0.5)
        survivors = workers_marked(mark)
        assert not survivors, f"alive 30 s after the driver was killed: {survivors}"
    finally:
        for pid in workers_marked(mark):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
