"""Replaying a transformation scenario of tests/data/transforms/ through headwater and comparing it
with what the real Debezium emitted for it.

A scenario directory (under tests/data/transforms/with_headers/, apart from the scenarios recorded
without headers) has the layout of tests/golden/ (`scenario.yaml`, `debezium.jsonl`), recorded by
`scripts/record_debezium.py` with `HEADWATER_DEBEZIUM_REFERENCE=scripts/debezium_reference_headers.py`
so that each event also holds its headers and Kafka partition. headwater's engine runs the
scenario's connector properties (post processors and transformations included) on a fresh
database, and the events are written as JSON with schemas.

Debezium 3.x's `__debezium.context.*` headers (logical name, task id, connector name, run id) are
compared too, the run id by its form (a UUIDv7, one per run: `golden_support.normalize`). A record's
Kafka partition is the `__partition` header in headwater (`transforms.partitions`), so the recorded
`partition` becomes that header.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from headwater.events.formats.json import JsonOptions, to_event_batch
from headwater.events.typed import TypedEvents
from headwater.transforms.partitions import PARTITION_HEADER, PARTITION_SCHEMA
from tests.golden_support import load_scenario, run_psql_script

ROOT = Path(__file__).resolve().parent.parent / "data" / "transforms" / "with_headers"


def expected_events(directory: Path) -> list[dict[str, Any]]:
    """Debezium's events of the scenario, in headwater's terms (see the module's docstring)."""
    out = []
    for event in load_scenario(directory).events:
        event = dict(event)
        headers = dict(event.pop("headers", None) or {})
        partition = event.pop("partition", None)
        if partition is not None:
            headers[PARTITION_HEADER] = {"schema": PARTITION_SCHEMA, "payload": partition}
        if headers:
            event["headers"] = headers
        out.append(event)
    return out


def run_scenario(pg_server: Any, directory: Path, blocks: list[TypedEvents] | None = None) -> list[dict[str, Any]]:
    """headwater's events for the scenario (its post processors and transformations run by the engine):
    snapshot after `setup`, then the changes of `during`; the engine's typed batches appended to `blocks`."""
    scenario = load_scenario(directory)
    dbname = "golden"
    pg_server.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
    pg_server.create_database(dbname)
    try:
        run_psql_script(pg_server, dbname, scenario.setup)
        props = {**pg_server.connector_properties(dbname), "connector.class": "postgres",
                 "topic.prefix": "golden", "slot.name": "golden_slot", "plugin.name": "pgoutput",
                 **scenario.properties}
        engine = Engine(validate_connector(props), schemas_enable=True, output="typed")
        options = JsonOptions(schemas_enable=True)
        events: list[dict[str, Any]] = []

        def collect() -> None:
            for typed in engine.blocks(once=True):
                if blocks is not None:
                    blocks.append(typed)
                for ev in to_event_batch(typed, options).rows():
                    row: dict[str, Any] = {"topic": ev.topic, "key": None if ev.key is None else json.loads(ev.key),
                                           "value": None if ev.value is None else json.loads(ev.value)}
                    if ev.headers:
                        row["headers"] = {k: json.loads(v) for k, v in ev.headers}
                    events.append(row)

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
