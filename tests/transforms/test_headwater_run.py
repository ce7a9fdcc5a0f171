"""`headwater run` on a real PostgreSQL into the jsonl sink, event by event equal to what Debezium 3.6.3
emitted with the same connector properties: the outbox pattern from an outbox table, and the reselect
post processor (its queries made from Spark's Python workers)."""

from __future__ import annotations

import pytest

from tests.golden_support import (
    UUID7,
    assert_events_equal,
    load_scenario,
    run_ids,
    run_psql_script,
    with_run_id,
)
from tests.spark_support import cli, read_sink, write_config
from tests.transforms.golden_transforms import ROOT, expected_events


@pytest.mark.parametrize("name", ["outbox", "reselect"])
def test_through_headwater_run(tmp_path, pg_server, name):
    directory = ROOT / name
    scenario = load_scenario(directory)
    pg_server.execute('DROP DATABASE IF EXISTS "golden" WITH (FORCE)')
    pg_server.create_database("golden")
    try:
        run_psql_script(pg_server, "golden", scenario.setup)
        config = write_config(tmp_path, pg_server, "golden", source=dict(scenario.properties),
                              sink={"schemas.enable": True}, name=name)
        cli("run", str(config), "--once")  # the snapshot of the setup rows
        snapshot = len(read_sink(tmp_path / "out"))
        run_psql_script(pg_server, "golden", scenario.during or "")
        cli("run", str(config), "--once")  # the changes streamed
        actual = read_sink(tmp_path / "out")
    finally:
        pg_server.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                          f"WHERE slot_name = '{name}_slot'")
        pg_server.execute('DROP DATABASE IF EXISTS "golden" WITH (FORCE)')
    # each start of `headwater run` is a run of its own (Debezium records one run): one run id for the
    # snapshot's events, another for the streamed ones
    first, second = run_ids(actual[:snapshot]), run_ids(actual[snapshot:])
    assert len(first) == len(second) == 1 and first != second and all(UUID7.fullmatch(r) for r in first | second)
    assert_events_equal(expected_events(directory), with_run_id(actual, first.pop()), keep_headers=True)
