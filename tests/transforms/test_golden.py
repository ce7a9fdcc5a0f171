"""Transformation chains against the real Debezium: each scenario of tests/data/transforms is replayed
on a real PostgreSQL with the same connector properties (transforms included) and headwater's events
must equal the ones Debezium 3.6.3 recorded (`scripts/record_debezium.py tests/data/transforms/<dir>`),
after the golden normalization. Fields that `add.fields` copies from wall-clock or WAL positions
(`VOLATILE`) are compared by type only. Debezium's recorder does not capture headers."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.transforms.registry import known_transforms
from tests.connectors.postgres.test_golden import run_headwater
from tests.golden_support import Scenario, assert_events_equal, load_scenario

ROOT = Path(__file__).resolve().parent.parent / "data" / "transforms"
SCENARIOS = sorted(p.parent for p in ROOT.glob("*/scenario.yaml") if (p.parent / "debezium.jsonl").exists())

# fields of the flattened row holding a time, an LSN or a transaction id: they differ between runs
VOLATILE = {"__lsn", "__source_ts_ms", "__EVENT_TS", "__id"}


def mask(events: list[dict]) -> list[dict]:
    for e in events:
        value = e.get("value")
        payload = value.get("payload", value) if isinstance(value, dict) else None
        if isinstance(payload, dict):
            for name in VOLATILE & set(payload):
                payload[name] = type(payload[name]).__name__
    return events


def unknown_transforms(scenario: Scenario) -> list[str]:
    """The transformation classes of the scenario's chain that this checkout does not have."""
    aliases = [a.strip() for a in scenario.properties.get("transforms", "").split(",") if a.strip()]
    return [t for a in aliases if (t := scenario.properties[f"transforms.{a}.type"]) not in known_transforms()]


def test_every_scenario_is_recorded():
    assert len(SCENARIOS) == len(list(ROOT.glob("*/scenario.yaml")))


@pytest.mark.parametrize("output", ["json", "typed"])
@pytest.mark.parametrize("directory", SCENARIOS, ids=[d.name for d in SCENARIOS])
def test_events_equal_debezium(pg_server, directory, output):
    scenario = load_scenario(directory)
    missing = unknown_transforms(scenario)
    if missing:  # ExtractChangedRecordState comes with the other SMTs (transforms/changed.py)
        pytest.skip(f"needs {', '.join(missing)}")
    actual = run_headwater(pg_server, scenario, output)
    assert_events_equal(mask(scenario.events), mask(actual))
