"""TimezoneConverter: the documentation's test vector, rules, DST edges and refusals (Debezium's own
conversions of every timestamp type are compared in test_smts)."""

from __future__ import annotations

import pytest

from headwater.config.errors import ConfigErrors
from headwater.events.connect import INT32, INT64, STRING, primitive
from headwater.events.typed import TypedEvents
from headwater.transforms import parse_chain
from tests.transforms.support import Events, as_json, row_schema, run

COLUMNS = {"id": primitive(INT32), "created_at": primitive(STRING, True, "io.debezium.time.ZonedTimestamp", 1),
           "updated_at": primitive(INT64, True, "io.debezium.time.MicroTimestamp", 1)}


def insert(after: dict, table: str = "t") -> TypedEvents:
    topic = f"t.{table}"
    return Events().add("c", None, after, topic=topic, row=row_schema(topic, **COLUMNS)).take()


def converted(props: dict[str, str], events: TypedEvents) -> list[dict]:
    return as_json(run(events, props))


def props(zone: str, **options: str) -> dict[str, str]:
    return {"transforms": "tz", "transforms.tz.type": "io.debezium.transforms.TimezoneConverter",
            "transforms.tz.converted.timezone": zone, **{f"transforms.tz.{k.replace('_', '.')}": v for k, v in options.items()}}


def test_spec_vector():
    after = {"id": 1, "created_at": "2011-01-11T16:40:30.123456789+00:00", "updated_at": 1294764030123456}
    [event] = converted(props("Pacific/Easter"), insert(after, "customers"))
    assert event["value"]["after"]["created_at"] == "2011-01-11T11:40:30.123456789-05:00"
    assert event["value"]["after"]["updated_at"] == 1294764030123456 + 5 * 3600 * 1_000_000  # read at -05:00


def test_rules_pick_fields():
    after = {"id": 1, "created_at": "2024-01-01T00:00:00Z", "updated_at": 0}
    b = insert(after, "customers")
    [only_updated] = converted(props("+05:30", include_list="source:customers:updated_at"), b)
    assert only_updated["value"]["after"] == {"id": 1, "created_at": "2024-01-01T00:00:00Z", "updated_at": -19800000000}
    [all_but_updated] = converted(props("+05:30", exclude_list="customers:updated_at"), b)
    assert all_but_updated["value"]["after"]["created_at"] == "2024-01-01T05:30:00+05:30"
    assert all_but_updated["value"]["after"]["updated_at"] == 0
    [other_table] = converted(props("+05:30", include_list="source:orders"), b)
    assert other_table["value"]["after"] == after


def test_dst_gap_takes_the_offset_before():
    # 2024-03-10 02:30 does not exist in New York: Java takes the offset before the gap (-05:00)
    micros = 1710037800 * 1_000_000  # 2024-03-10T02:30:00 read as UTC
    after = {"id": 1, "created_at": None, "updated_at": micros}
    [event] = converted(props("America/New_York"), insert(after))
    assert event["value"]["after"]["updated_at"] == micros + 5 * 3600 * 1_000_000


def test_bad_options_are_refused():
    with pytest.raises(ConfigErrors, match="did you mean America/New_York"):
        parse_chain(props("America/New_Yrok"))
    with pytest.raises(ConfigErrors, match="exclude.list"):
        parse_chain(props("UTC", include_list="a:b", exclude_list="c:d"))


def test_a_block_of_two_tables_converts_each_by_its_rules():
    import pyarrow as pa

    from headwater.events.typed import TypedBlock

    [a] = insert({"id": 1, "created_at": None, "updated_at": 0}, "a").blocks
    [b] = insert({"id": 2, "created_at": None, "updated_at": 0}, "b").blocks
    both = TypedEvents([TypedBlock(pa.concat_batches([a.batch, b.batch]))])  # one topic, two tables
    got = converted(props("+01:00", include_list="source:a"), both)
    assert [e["value"]["after"]["updated_at"] for e in got] == [-3600 * 1_000_000, 0]


def test_rules_and_dst_edges_equal_debezium(pg_server):
    from tests.golden_support import assert_events_equal
    from tests.transforms.golden_transforms import ROOT, expected_events, run_scenario

    directory = ROOT / "timezone_rules"
    assert_events_equal(expected_events(directory), run_scenario(pg_server, directory), keep_headers=True)
