"""Opening a source at start: an unreachable database fails at once unless retries were asked for."""

from __future__ import annotations

import threading

import pytest

from headwater.connectors.base import Offset, SourceConnector, WorkUnit
from headwater.connectors.errors import ConnectError, SourceError
from headwater.connectors.registry import validate_connector
from headwater.engine.startup import open_connector, start_retries

BASE = {"connector.class": "postgres", "database.hostname": "127.0.0.1", "database.user": "u",
        "database.dbname": "d", "topic.prefix": "t", "retriable.restart.connector.wait.ms": "10"}


class Unreachable(SourceConnector):
    """A source whose database answers only after `failures` attempts (-1: never)."""

    def __init__(self, props: dict[str, str], failures: int):
        super().__init__(validate_connector({**BASE, **props}))
        self.failures = failures
        self.attempts = 0

    def open(self, start: Offset) -> None:
        self.attempts += 1
        if self.failures < 0 or self.attempts <= self.failures:
            raise ConnectError("cannot connect to PostgreSQL (host 127.0.0.1, port 1, database d, user u): refused")

    def initial_offset(self) -> Offset:
        return {}

    def latest_offset(self, start: Offset, max_events: int | None = None) -> Offset:
        return start

    def plan(self, start: Offset, end: Offset) -> list[WorkUnit]:
        return []

    def commit(self, end: Offset) -> None:
        pass

    def table_schema(self, table: str) -> tuple[str, dict]:
        raise NotImplementedError

    def close(self) -> None:
        pass


def test_by_default_the_first_failure_is_final_as_in_debezium():
    source = Unreachable({}, failures=-1)
    assert start_retries(source.config) == 0  # errors.max.retries defaults to -1, but only after the start
    with pytest.raises(ConnectError, match="port 1, database d"):
        open_connector(source, {})
    assert source.attempts == 1


def test_an_explicit_errors_max_retries_applies_at_start():
    source = Unreachable({"errors.max.retries": "2"}, failures=-1)
    with pytest.raises(SourceError, match=r"tried 3 times, errors.max.retries=2"):
        open_connector(source, {})
    assert source.attempts == 3
    patient = Unreachable({"errors.max.retries": "-1"}, failures=4)
    open_connector(patient, {})
    assert patient.attempts == 5


def test_unlimited_retries_end_when_stopped():
    source = Unreachable({"errors.max.retries": "-1"}, failures=-1)
    stopping = threading.Event()
    threading.Timer(0.2, stopping.set).start()
    with pytest.raises(ConnectError):
        open_connector(source, {}, stopping)
    assert source.attempts > 1
