"""Fixtures of the benchmarks' tests: the benchmark's database on the session's PostgreSQL server."""

from __future__ import annotations

import pytest

from bench import data


@pytest.fixture
def bench_db(pg_server):
    """The benchmark's database (`bench.data.DBNAME`) and table on the session server; dropped afterwards."""
    pg_server.create_database(data.DBNAME)
    data.create_table(pg_server)
    yield pg_server
    for slot in data.slots(pg_server):
        data.drop_slot(pg_server, slot)
    pg_server.execute(f'DROP DATABASE "{data.DBNAME}" WITH (FORCE)')
