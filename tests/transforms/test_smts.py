"""ExtractChangedRecordState, HeaderToValue, TimezoneConverter and PartitionRouting: Debezium's events
for one chain of all four on a real PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

from headwater.transforms import timezone as tz_module
from tests.golden_support import assert_events_equal
from tests.transforms.golden_transforms import ROOT, expected_events, run_scenario

#: when the golden file was recorded: ZonedTime conversions use the zone's offset at that moment
RECORDED = datetime(2026, 11, 25, 4, 0, tzinfo=UTC)


def test_smts_equal_debezium(pg_server, monkeypatch):
    monkeypatch.setattr(tz_module, "now", lambda: RECORDED)
    directory = ROOT / "smts"
    expected = expected_events(directory)
    for event in expected:  # Debezium's tombstone shares its delete's header object (see golden_transforms):
        if event["value"] is None:  # of those headers, headwater's tombstone has the context headers only
            event["headers"] = {k: v for k, v in event["headers"].items() if k.startswith("__debezium.context.")}
    assert_events_equal(expected, run_scenario(pg_server, directory), keep_headers=True)
