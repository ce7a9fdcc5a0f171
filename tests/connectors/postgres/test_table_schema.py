"""PostgresSource.table_schema: a table's topic and row schema, equal to those of Debezium's events.

For recorded scenarios, the scenario's tables are created on a real PostgreSQL 15 and the connector
is asked for each captured table's schema; it must be the `after` schema and the topic of the
table's first change event in Debezium's own output (debezium.jsonl), with the scenario's
properties (column filters, masks, propagated source types, name adjustment, type modes).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.connectors.registry import create_source, validate_connector
from tests.golden_support import load_scenario, run_psql_script

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "postgres"
SCENARIOS = ["column_options", "name_adjustment", "types_numeric_precise", "types_temporal_connect",
             "types_binary_hex", "types_arrays", "types_hstore_map"]


def first_row_events(events: list[dict]) -> dict[str, dict]:
    """The first event with a row image of each topic, by table ('schema.table')."""
    out: dict[str, dict] = {}
    for e in events:
        payload = (e["value"] or {}).get("payload") or {}
        if payload.get("op") in ("r", "c") and "after" in payload:
            source_block = payload["source"]
            out.setdefault(f"{source_block['schema']}.{source_block['table']}", e)
    return out


@pytest.mark.parametrize("name", SCENARIOS)
def test_table_schema_is_the_schema_of_debeziums_events(pg_server, pg_db, name):
    scenario = load_scenario(GOLDEN / name)
    run_psql_script(pg_server, pg_db, scenario.setup)
    props = {**pg_server.connector_properties(pg_db), "connector.class": "postgres", "topic.prefix": "golden",
             **scenario.properties}
    expected = first_row_events(scenario.events)
    assert expected
    connector = create_source(validate_connector(props))
    try:
        for table, event in expected.items():
            after = next(f for f in event["value"]["schema"]["fields"] if f["field"] == "after")
            row = {k: v for k, v in after.items() if k != "field"}  # the schema, without its place in the envelope
            assert connector.table_schema(table) == (event["topic"], row), table
    finally:
        connector.close()


def test_a_table_that_does_not_exist(pg_server, pg_db):
    props = {**pg_server.connector_properties(pg_db), "connector.class": "postgres", "topic.prefix": "x"}
    connector = create_source(validate_connector(props))
    try:
        with pytest.raises(KeyError, match="public.missing"):
            connector.table_schema("public.missing")
    finally:
        connector.close()
