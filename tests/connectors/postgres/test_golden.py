"""Differential tests: headwater's events equal Debezium 3.6.3's for every recorded scenario.

Each scenario is replayed against a fresh database on a real PostgreSQL 15: its `setup` SQL,
an initial snapshot, its `during` SQL, then streaming. The events (key and value with schemas)
must equal `debezium.jsonl` after normalization (wall-clock fields dropped, LSNs and transaction
ids replaced by tokens that keep their equality relations). Deliberate differences are listed
in the README and in KNOWN_DIFFERENCES below.
"""

from __future__ import annotations

import json

import pytest

from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from tests.golden_support import (
    assert_events_equal,
    collapse_heartbeats,
    load_scenario,
    run_psql_script,
    scenario_dirs,
)

SCENARIOS = scenario_dirs("postgres")

# scenario name -> why it is skipped or compared differently (each is listed in the README)
KNOWN_DIFFERENCES: dict[str, str] = {}

# columns whose values come from now(), random() and such: they differ between any two runs
VOLATILE = {
    # text[][] elements are Java's "[Ljava.lang.String;@<identity hash>", different in every JVM run
    "types_unknown_include_false": {"atx2d"},
    "types_unknown_include_true": {"atx2d"},
    "types_defaults": {"b_fn", "n102_fn", "u_fn", "d_fn", "d_now", "t_fn", "t_fn6", "ts_fn", "ts_local", "tz_ct", "tz_ct6",
                       "tz_nn", "tz_now"},
    "types_defaults_modes": {"d_fn", "t_fn", "tz_fn"},
}


def mask_volatile(events: list[dict], columns: set[str]) -> list[dict]:
    for e in events:
        value = e.get("value")
        payload = value.get("payload", value) if isinstance(value, dict) else None
        for image in ("before", "after"):
            row = payload.get(image) if isinstance(payload, dict) else None
            if isinstance(row, dict):
                for c in columns & set(row):
                    row[c] = "<volatile>"
    return events


def run_headwater(pg_server, scenario, output: str = "json") -> list[dict]:
    dbname = "golden"
    pg_server.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    pg_server.create_database(dbname)
    try:
        if scenario.setup:
            run_psql_script(pg_server, dbname, scenario.setup)
        props = {
            **pg_server.connector_properties(dbname),
            "connector.class": "postgres", "topic.prefix": "golden", "slot.name": "golden_slot",
            "plugin.name": "pgoutput",
            **{k: v for k, v in scenario.properties.items()},
        }
        if props.get("heartbeat.interval.ms"):
            props["heartbeat.interval.ms"] = "200"
        engine = Engine(validate_connector(props), schemas_enable=True, output=output)
        events = []

        def collect() -> None:
            for ev in engine.events(once=True):
                events.append({"topic": ev.topic,
                               "key": json.loads(ev.key) if ev.key is not None else None,
                               "value": json.loads(ev.value) if ev.value is not None else None,
                               **({"headers": ev.headers} if ev.headers else {})})

        try:
            collect()
            if scenario.during:
                run_psql_script(pg_server, dbname, scenario.during)
                collect()
        finally:
            engine.close()
        return events
    finally:
        pg_server.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                          "WHERE slot_name = 'golden_slot'")
        pg_server.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


@pytest.mark.parametrize("output", ["json", "typed"])
@pytest.mark.parametrize("directory", SCENARIOS, ids=[d.name for d in SCENARIOS])
def test_events_equal_debezium(pg_server, directory, output):
    """The events equal Debezium's, written directly as JSON, or built as typed blocks and then
    written as JSON by `events.formats.json`."""
    scenario = load_scenario(directory)
    if directory.name in KNOWN_DIFFERENCES:
        pytest.skip(KNOWN_DIFFERENCES[directory.name])
    actual = run_headwater(pg_server, scenario, output)
    expected = scenario.events
    if directory.name in VOLATILE:
        expected = mask_volatile(expected, VOLATILE[directory.name])
        actual = mask_volatile(actual, VOLATILE[directory.name])
    if any("heartbeat" in e["topic"] for e in expected):
        expected, actual = collapse_heartbeats(expected), collapse_heartbeats(actual)
    assert_events_equal(expected, actual)
