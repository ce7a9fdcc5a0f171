"""The outbox pattern end to end: `headwater run` on a real PostgreSQL outbox table into the jsonl sink,
event by event equal to what Debezium 3.6.3 emitted with the same connector properties."""

from __future__ import annotations

from tests.golden_support import assert_events_equal, load_scenario, run_psql_script
from tests.spark_support import cli, read_sink, write_config
from tests.transforms.golden_transforms import ROOT, expected_events


def test_outbox_through_headwater_run(tmp_path, pg_server):
    directory = ROOT / "outbox"
    scenario = load_scenario(directory)
    pg_server.execute('DROP DATABASE IF EXISTS "golden" WITH (FORCE)')
    pg_server.create_database("golden")
    try:
        run_psql_script(pg_server, "golden", scenario.setup)
        config = write_config(tmp_path, pg_server, "golden", source=dict(scenario.properties),
                              sink={"schemas.enable": True}, name="outbox")
        cli("run", str(config), "--once")  # the snapshot of the setup rows
        run_psql_script(pg_server, "golden", scenario.during or "")
        cli("run", str(config), "--once")  # the changes streamed
        actual = read_sink(tmp_path / "out")
    finally:
        pg_server.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                          "WHERE slot_name = 'outbox_slot'")
        pg_server.execute('DROP DATABASE IF EXISTS "golden" WITH (FORCE)')
    assert_events_equal(expected_events(directory), actual, keep_headers=True)
