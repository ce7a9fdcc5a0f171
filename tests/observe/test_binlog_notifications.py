"""The initial snapshot's notifications of the binlog connectors per `snapshot.mode`, on a real MariaDB through
the engine, at a first start and at a restart from the stored offset.

They are Debezium 3.6.3's (read from its bytecode; its MariaDB connector shares MySQL's
`debezium-connector-binlog`): `AbstractSnapshotChangeEventSource.execute` sends SKIPPED when the snapshotting
task takes neither the schema nor the data (`SnapshottingTask.shouldSkipSnapshot`), else STARTED and then
COMPLETED; `RelationalSnapshotChangeEventSource.getSnapshottingTask` asks the mode's Snapshotter
(`shouldSnapshotSchema`, `shouldSnapshotData`), and the tables' IN_PROGRESS and TABLE_SCAN_COMPLETED come only
from its data scans (`doCreateDataEventsForTable`), so a schema-only snapshot has none. The binlog's schema is
historized, so a schema snapshot is taken where there is no offset (`no_data`, the data modes), at every start
under `recovery` (`RecoverySnapshotter.shouldSnapshotSchema`: true) and under `configuration_based` as its
properties say (every start). `never` is headwater's (Debezium 3.6's binlog connectors have no such mode): no
snapshot at all, SKIPPED. The expected records are Debezium's recordings (tests/data/notifications, made on
PostgreSQL with the same tables and connector name), with MariaDB's table names. A schema-only snapshot's
metrics count every captured table done with no rows (Debezium's `dataCollectionSnapshotCompleted(table, 0)`
where it skips the data).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from headwater.connectors.registry import validate_connector
from headwater.engine import Engine, OffsetFile
from headwater.observe.metrics import read_file
from tests.observe.notes_support import TOPIC, comparable, golden, renamed

SETUP = ("CREATE TABLE a (id INT PRIMARY KEY, v TEXT); INSERT INTO a VALUES (1, 'x'), (2, 'y');"
         "CREATE TABLE b (id INT PRIMARY KEY); INSERT INTO b VALUES (5)")

BASED = "snapshot.mode.configuration.based."

# snapshot.mode's properties, what the first start sends, what a restart sends
MODES: dict[str, tuple[dict[str, str], str, str]] = {
    "initial": ({"snapshot.mode": "initial"}, "data", "skipped"),
    "initial_only": ({"snapshot.mode": "initial_only"}, "data", "skipped"),
    "when_needed": ({"snapshot.mode": "when_needed"}, "data", "skipped"),
    "always": ({"snapshot.mode": "always"}, "data", "data"),
    "no_data": ({"snapshot.mode": "no_data"}, "schema", "skipped"),
    "recovery": ({"snapshot.mode": "recovery"}, "schema", "schema"),
    "never": ({"snapshot.mode": "never"}, "skipped", "skipped"),
    "configuration_based_schema": ({"snapshot.mode": "configuration_based", BASED + "snapshot.schema": "true",
                                    BASED + "start.stream": "true"}, "schema", "schema"),
    "configuration_based_data": ({"snapshot.mode": "configuration_based", BASED + "snapshot.data": "true",
                                  BASED + "start.stream": "true"}, "data", "data"),
    "configuration_based_neither": ({"snapshot.mode": "configuration_based", BASED + "start.stream": "true"},
                                    "skipped", "skipped"),
}


def expected(kind: str, db: str) -> list[dict[str, Any]]:
    """Debezium's records of a snapshot of the tables' data, of their schema only, or of none."""
    data = renamed(golden("initial_snapshot_debezium.jsonl"), {"public.a": f"{db}.a", "public.b": f"{db}.b"})
    return {"data": data, "schema": [data[0], data[-1]],  # STARTED, COMPLETED: no table was scanned
            "skipped": golden("skipped_debezium.jsonl")}[kind]


def start(props: dict[str, Any], offsets) -> list[dict[str, Any]]:
    """The comparable notification records of one `once` run of a new engine (a start of headwater)."""
    engine = Engine(validate_connector(props), OffsetFile(offsets), schemas_enable=True)
    try:
        events = list(engine.events(once=True))
    finally:
        engine.close()
    return [comparable({"topic": e.topic, "key": json.loads(e.key or "null"), "value": json.loads(e.value or "null")})
            for e in events if e.topic == TOPIC]


@pytest.mark.parametrize("mode", list(MODES))
def test_each_snapshot_mode_sends_debeziums_notifications(mariadb_server, mariadb_db, tmp_path, mode):
    mariadb_server.execute(SETUP, mariadb_db)
    extra, first, restart = MODES[mode]
    props = {"connector.class": "mariadb", **mariadb_server.connector_properties(mariadb_db),
             "database.server.id": "5491", "topic.prefix": "p", "include.schema.changes": "false",
             "headwater.schema.history.file": str(tmp_path / "history.jsonl"),
             "notification.enabled.channels": "sink", "notification.sink.topic.name": TOPIC, **extra}
    offsets = tmp_path / "o.json"
    assert start(props, offsets) == expected(first, mariadb_db)
    snapshot = read_file(Path(f"{offsets}.metrics.json"))["snapshot"]  # type: ignore[index]
    assert snapshot["SnapshotCompleted"] is (first != "skipped")
    if first != "skipped":  # a schema-only snapshot counts every table done, with no rows (as Debezium's metrics)
        assert snapshot["TotalTableCount"] == 2 and snapshot["RemainingTableCount"] == 0
        assert snapshot["RowsScanned"] == {f"{mariadb_db}.a": 2 if first == "data" else 0,
                                           f"{mariadb_db}.b": 1 if first == "data" else 0}
    assert start(props, offsets) == expected(restart, mariadb_db)
