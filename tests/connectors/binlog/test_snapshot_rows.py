"""A snapshot chunk's rows written column-wise (`binlog.snapshot_rows`) give the row-wise path's events exactly.

Debezium's locking snapshot (`snapshot.locking.mode` minimal, which reads chunks through
`snapshot_rows`) of a table of edge values of every type family, on a real MariaDB, column-wise and
row by row, under the type-mapping settings and with masked, truncated and hashed columns, as JSON
and typed; and the 26 recorded Debezium scenarios through the locking snapshot.
"""

from __future__ import annotations

from typing import Any

import pytest

from headwater.connectors.binlog import snapshot_rows
from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from tests.connectors.binlog.test_insert_runs import SETTINGS, golden_server  # noqa: F401 - a fixture
from tests.connectors.binlog.test_rows import DECODED, OTHER, ROWS
from tests.connectors.mariadb import test_golden
from tests.connectors.mariadb.test_golden import SCENARIOS, fresh, scenario_properties
from tests.golden_support import events_diff, normalize_binlog, read_jsonl


def _comparable(event: Any) -> tuple[Any, ...]:
    """An event but for the clock: the envelope's and the snapshot's times (two snapshots are compared)."""
    value = event.value_json()
    clock = ("ts_ms", "ts_us", "ts_ns")
    value = {k: v for k, v in value.items() if k not in clock}
    value["source"] = {k: v for k, v in value["source"].items() if k not in clock}
    return event.topic, event.key_json(), value


def _snapshot(server: Any, db: str, extra: dict[str, str], output: str) -> list[tuple[Any, ...]]:
    props = {"connector.class": "mariadb", **server.connector_properties(db), "database.server.id": "6301",
             "topic.prefix": "snap", "snapshot.mode": "initial_only", "snapshot.locking.mode": "minimal",
             "include.schema.changes": "false", **{k: v.format(db=db) for k, v in extra.items()}}
    engine = Engine(validate_connector(props), output=output)
    try:
        return [_comparable(e) for e in engine.events(once=True)]
    finally:
        engine.close()


@pytest.mark.parametrize("output", ["json", "typed"])
@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_column_wise_snapshot_equals_row_by_row(mariadb_server, mariadb_db, monkeypatch, setting, output):
    db = mariadb_db
    rows = [r.replace("(1,", "({id},", 1).replace("(2,", "({id},", 1).replace("(3,", "({id},", 1) for r in ROWS]
    mariadb_server.execute("SET SESSION sql_mode = ''; SET time_zone = '+00:00'; " + DECODED.format(db=db) + "; "
                           + OTHER.format(db=db) + f"; INSERT INTO {db}.fast VALUES "
                           + ", ".join(rows[i % 3].format(id=i) for i in range(50))
                           + f"; INSERT INTO {db}.other VALUES (1, 'a', 'x,y', '-12:00:00.5', b'101', '[1]')"
                           + f"; UPDATE {db}.fast SET ts = '0000-00-00 00:00:00', ts6 = '2020-01-01 00:00:00.100000', "
                           "ts2 = '2020-01-01 00:00:00' WHERE id = 4")
    got = {}
    for column_wise in (False, True):
        monkeypatch.setattr(snapshot_rows, "COLUMN_WISE", column_wise)
        got[column_wise] = _snapshot(mariadb_server, db, SETTINGS[setting], output)
    assert len(got[False]) == 51
    assert got[True] == got[False]


@pytest.mark.parametrize("name", SCENARIOS)
def test_recorded_scenarios_through_the_locking_snapshot(golden_server, name, tmp_path):  # noqa: F811
    fresh(golden_server)
    golden_server.execute((test_golden.REFERENCE / name / "setup.sql").read_text())
    props = scenario_properties(golden_server, name)
    if "snapshot.locking.mode" in props:
        pytest.skip("the scenario sets its own locking mode")
    engine = Engine(validate_connector({**props, "snapshot.locking.mode": "minimal"}))
    try:
        actual = [{"topic": e.topic, "key": e.key_json(), "value": e.value_json()} for e in engine.events(once=True)]
        golden_server.execute((test_golden.REFERENCE / name / "changes.sql").read_text())
        actual += [{"topic": e.topic, "key": e.key_json(), "value": e.value_json()} for e in engine.events(once=True)]
    finally:
        engine.close()
    expected = read_jsonl(test_golden.REFERENCE / name / "events.jsonl")
    message = events_diff(normalize_binlog(expected), normalize_binlog(actual))
    assert message is None, message

