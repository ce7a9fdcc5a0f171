"""Debezium's schema and table include/exclude lists, and a connector's system tables."""

from __future__ import annotations

from headwater.connectors.common.filters import SystemTables, TableFilters, matches_any, patterns

SYSTEM = SystemTables(("information_schema",), ("pg_temp",), ("spatial_ref_sys",))


def test_lists_are_whole_name_case_insensitive_regexes():
    f = TableFilters.from_config({"schema.include.list": "sales, hr", "table.exclude.list": ["sales\\.internal.*"]})
    assert f.includes("SALES", "orders")
    assert f.includes("hr", "staff")
    assert not f.includes("sales", "internal_notes")
    assert not f.includes("salesx", "orders")  # anchored
    assert not f.includes("public", "t")


def test_include_and_exclude_of_tables():
    f = TableFilters.from_config({"table.include.list": "public\\.a.*", "schema.exclude.list": "x"})
    assert f.includes("public", "abc") and not f.includes("public", "b")
    assert not f.includes("x", "a")


def test_system_tables_are_never_captured():
    everything = TableFilters.from_config({}, SYSTEM)
    assert everything.includes("public", "t")
    assert not everything.includes("information_schema", "tables")
    assert not everything.includes("pg_temp_3", "t")
    assert not everything.includes("public", "SPATIAL_REF_SYS")
    assert TableFilters().includes("information_schema", "tables")  # no system tables given


def test_patterns_and_matches_any():
    assert patterns(None) is None and patterns(" , ") is None
    assert matches_any("a.*,b", "B") and not matches_any(["a"], "ab")
