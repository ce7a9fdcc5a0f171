"""Unit tests of the golden-file helpers (normalize, compare, load) on the recorded files."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest

from tests.golden_support import (
    Scenario,
    assert_events_equal,
    collapse_heartbeats,
    events_diff,
    is_heartbeat,
    load_scenario,
    normalize,
    payload_only,
    scenario_dirs,
)

SCENARIOS = scenario_dirs("postgres")
RECORDED = [d for d in SCENARIOS if (d / "debezium.jsonl").exists()]
GOLDEN = Path(__file__).resolve().parent / "golden" / "postgres"


def scenario(name: str) -> Scenario:
    path = GOLDEN / name
    if not (path / "debezium.jsonl").exists():
        pytest.skip(f"{name} is not recorded")
    return load_scenario(path)


def first_change(events: list[dict], op: str) -> int:
    """Index of the first event whose value payload has `op`."""
    for i, e in enumerate(payload_only(events)):
        if e["value"] and e["value"].get("op") == op:
            return i
    raise AssertionError(f"no op={op} event")


def test_scenarios_are_recorded() -> None:
    assert SCENARIOS, "no scenarios under tests/golden/postgres"
    missing = [d.name for d in SCENARIOS if d not in RECORDED]
    assert not missing, f"scenarios without debezium.jsonl: {missing}"


@pytest.mark.parametrize("directory", SCENARIOS, ids=lambda d: d.name)
def test_scenario_loads(directory: Path) -> None:
    s = load_scenario(directory)
    assert s.description
    assert s.setup.strip() or s.during
    assert all(isinstance(v, str) for v in s.properties.values())
    for e in s.events:
        assert set(e) == {"topic", "key", "value"}


@pytest.mark.parametrize("directory", RECORDED, ids=lambda d: d.name)
def test_file_equals_itself(directory: Path) -> None:
    events = load_scenario(directory).events
    assert events
    assert_events_equal(events, copy.deepcopy(events))
    assert_events_equal(payload_only(events), payload_only(events))


@pytest.mark.parametrize("directory", RECORDED, ids=lambda d: d.name)
def test_normalize_drops_wall_clock_and_positions(directory: Path) -> None:
    events = load_scenario(directory).events
    before = json.dumps(events)
    normalized = normalize(events)
    assert json.dumps(events) == before, "normalize must not modify its input"
    for e in payload_only(normalized):
        value = e["value"]
        if not isinstance(value, dict):
            continue
        assert not {"ts_ms", "ts_us", "ts_ns"} & set(value)
        source = value.get("source")
        if isinstance(source, dict):
            assert not {"ts_ms", "ts_us", "ts_ns", "version"} & set(source)
            assert source.get("lsn") is None or str(source["lsn"]).startswith("L")
            assert source.get("txId") is None or str(source["txId"]).startswith("X")
            if source.get("sequence") is not None:
                assert re.fullmatch(r'\[(null|"C\d+"),(null|"L\d+")\]', source["sequence"]), source["sequence"]


def test_schemas_and_payload_only_normalize_alike() -> None:
    events = scenario("crud").events
    with_schemas = payload_only(normalize(events))
    without = normalize(payload_only(events))
    assert with_schemas == without


def test_tokens_are_assigned_in_order_of_first_appearance() -> None:
    events = payload_only(normalize(scenario("crud").events))
    values = [e["value"] for e in events if e["value"]]
    assert values[0]["source"]["lsn"] == "L1"
    assert values[0]["source"]["txId"] == "X1"
    assert values[0]["source"]["sequence"] == '[null,"L1"]'
    seen_lsn: list[str] = []
    seen_tx: list[str] = []
    for v in values:
        for token, seen in ((v["source"]["lsn"], seen_lsn), (v["source"]["txId"], seen_tx)):
            if token not in seen:
                seen.append(token)
    assert seen_tx == [f"X{i}" for i in range(1, len(seen_tx) + 1)]
    # lsn tokens may skip numbers taken by sequence[0], but they only ever grow
    numbers = [int(t[1:]) for t in seen_lsn]
    assert numbers == sorted(numbers)


def test_tokens_preserve_equality_relations() -> None:
    raw = payload_only(scenario("crud").events)
    norm = payload_only(normalize(scenario("crud").events))
    pairs = [(r["value"]["source"], n["value"]["source"]) for r, n in zip(raw, norm, strict=True) if r["value"]]
    for field in ("lsn", "txId"):
        for a_raw, a_norm in pairs:
            for b_raw, b_norm in pairs:
                assert (a_raw[field] == b_raw[field]) == (a_norm[field] == b_norm[field])


def test_shifted_positions_compare_equal() -> None:
    """Another server gives other LSNs and txIds; the normalized events are the same."""
    events = scenario("transaction_metadata").events
    shifted = copy.deepcopy(events)

    def shift(text: str) -> str:
        tx, _, lsn = text.partition(":")
        return f"{int(tx) + 1000}:{int(lsn) + 4096}"

    for e in payload_only(shifted):
        v = e["value"]
        if v is None:
            continue
        if "status" in v:
            v["id"] = shift(v["id"])
            e["key"]["id"] = shift(e["key"]["id"])
            v["ts_ms"] += 5
            continue
        s = v["source"]
        s["lsn"] += 4096
        s["txId"] = s["txId"] + 1000 if s["txId"] is not None else None
        s["ts_ms"] += 17
        s["version"] = "9.9.9.Final"
        seq = json.loads(s["sequence"])
        s["sequence"] = json.dumps([str(int(x) + 4096) if x else None for x in seq], separators=(",", ":"))
        if v.get("transaction"):
            v["transaction"]["id"] = shift(v["transaction"]["id"])
    assert_events_equal(payload_only(events), payload_only(shifted))


def test_changed_value_is_reported_with_path() -> None:
    events = scenario("crud").events
    changed = copy.deepcopy(events)
    i = first_change(changed, "c")
    changed[i]["value"]["payload"]["after"]["name"] = "not banana"
    with pytest.raises(AssertionError) as err:
        assert_events_equal(events, changed)
    message = str(err.value)
    assert f"first difference at event #{i}" in message
    assert "value.payload.after.name" in message
    assert '"banana"' in message and '"not banana"' in message
    assert "golden.public.items op=c" in message


def test_broken_equality_relation_is_caught() -> None:
    """Two events of one transaction must keep sharing a txId."""
    events = scenario("crud").events
    changed = copy.deepcopy(events)
    tx: dict[int, list[int]] = {}
    for i, e in enumerate(payload_only(changed)):
        if e["value"]:
            tx.setdefault(e["value"]["source"]["txId"], []).append(i)
    multi = next(ix for ix in tx.values() if len(ix) > 2)
    changed[multi[-1]]["value"]["payload"]["source"]["txId"] += 1_000_000
    message = events_diff(normalize(events), normalize(changed))
    assert message and "value.payload.source.txId" in message


def test_missing_and_extra_events() -> None:
    events = scenario("crud").events
    message = events_diff(normalize(events), normalize(events[:-1]))
    assert message and "<none>" in message and f"(of {len(events)} expected, {len(events) - 1} actual)" in message
    message = events_diff(normalize(events[:-1]), normalize(events))
    assert message and f"event #{len(events) - 1}" in message


def test_schema_difference_is_reported() -> None:
    events = scenario("crud").events
    changed = copy.deepcopy(events)
    changed[0]["value"]["schema"]["fields"][0]["optional"] = False
    message = events_diff(normalize(events), normalize(changed))
    assert message and "value.schema.fields[0].optional" in message


def test_sequence_formatting_is_compared() -> None:
    events = scenario("crud").events
    changed = copy.deepcopy(events)
    i = first_change(changed, "u")
    source = changed[i]["value"]["payload"]["source"]
    source["sequence"] = source["sequence"].replace(",", ", ")
    message = events_diff(normalize(events), normalize(changed))
    assert message and "source.sequence" in message


def test_headers_are_dropped_unless_kept() -> None:
    events = scenario("crud").events
    with_headers = copy.deepcopy(events)
    with_headers[0]["headers"] = {"__debezium.oldkey": None}
    assert_events_equal(events, with_headers)
    with pytest.raises(AssertionError):
        assert_events_equal(events, with_headers, keep_headers=True)


def test_commit_lsns_are_numbered_apart() -> None:
    """Another WAL record between two transactions moves every "last commit LSN" away from the
    next transaction's first LSN: equal by default, caught with separate_commit_lsns=False."""
    events = scenario("crud").events
    moved = copy.deepcopy(events)
    for e in payload_only(moved):
        if e["value"] is None:
            continue
        source = e["value"]["source"]
        first, second = json.loads(source["sequence"])
        if first is not None:
            source["sequence"] = json.dumps([str(int(first) - 8), second], separators=(",", ":"))
    assert_events_equal(events, moved)
    with pytest.raises(AssertionError, match="source.sequence"):
        assert_events_equal(events, moved, separate_commit_lsns=False)


def test_transaction_end_lsn_is_next_last_commit_lsn() -> None:
    """Recorded fact: the LSN of an END id is the sequence[0] of the next transaction's events."""
    events = payload_only(normalize(scenario("transaction_metadata").events))
    end_token = None
    checked = 0
    for e in events:
        v = e["value"]
        if v is None:
            continue
        if v.get("status") == "END":
            end_token = v["id"].split(":")[1]
            assert end_token.startswith("C")
        elif "source" in v and v["op"] != "r" and end_token is not None:
            assert json.loads(v["source"]["sequence"])[0] == end_token
            checked += 1
    assert checked >= 2


def test_collapse_heartbeats() -> None:
    events = scenario("heartbeat").events
    collapsed = collapse_heartbeats(events)
    assert len(collapsed) < len(events)
    assert not any(is_heartbeat(a) and is_heartbeat(b) for a, b in zip(collapsed, collapsed[1:], strict=False))
    fewer = [e for i, e in enumerate(events) if not (is_heartbeat(e) and i % 2)]
    assert_events_equal(collapse_heartbeats(events), collapse_heartbeats(fewer))
