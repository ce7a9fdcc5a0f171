"""The initial snapshot's notifications on a real PostgreSQL, through the engine: the `sink` channel's
records equal the real Debezium's (tests/data/notifications, recorded with
/work/shared/tools/debezium_reference.py for the same tables, properties and connector name) but
for their ids and timestamps; the `log` channel writes each; an interrupted snapshot is ABORTED; a
start with no snapshot SKIPPED; and the properties are validated."""

from __future__ import annotations

import json
import logging
from collections.abc import Generator
from typing import cast

import pytest

from headwater.config import ConfigErrors
from headwater.connectors.registry import validate_connector
from headwater.engine import Engine, OffsetFile
from headwater.events.batch import Event
from headwater.events.formats.json import JsonOptions, to_event_batch
from headwater.observe.notifications import Notifier
from tests.observe.notes_support import TOPIC, comparable, golden

# the tables and rows the golden files were recorded with
SETUP = """
CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a VALUES (1, 'x'), (2, 'y');
CREATE TABLE b (id int PRIMARY KEY); INSERT INTO b VALUES (5);
"""


def _props(pg_server, pg_db, **extra: str) -> dict:
    return {"connector.class": "postgres", **pg_server.connector_properties(pg_db), "topic.prefix": "p",
            "slot.name": f"n_{pg_db}", "notification.enabled.channels": "sink,log",
            "notification.sink.topic.name": TOPIC, **extra}


def _records(events: list[Event]) -> tuple[list[dict], list[Event]]:
    """The notification records (as comparable dicts) and the other events."""
    notes, others = [], []
    for e in events:
        if e.topic == TOPIC:
            notes.append(comparable({"topic": e.topic, "key": json.loads(e.key or "null"), "value": json.loads(e.value or "null")}))
        else:
            others.append(e)
    return notes, others


def test_initial_snapshot_notifications_equal_debeziums(pg_server, pg_db, tmp_path, caplog):
    pg_server.execute(SETUP, pg_db)
    engine = Engine(validate_connector(_props(pg_server, pg_db)), OffsetFile(tmp_path / "offsets.json"),
                    schemas_enable=True)
    try:
        with caplog.at_level(logging.INFO, logger="headwater.notifications"):
            events = list(engine.events(once=True))
    finally:
        engine.close()
    notes, others = _records(events)
    assert notes == golden("initial_snapshot_debezium.jsonl")
    # STARTED first, COMPLETED last, a table's notifications with the batch of its rows, before them
    kinds = [json.loads(e.value or "null")["payload"]["type"] if e.topic == TOPIC else e.topic for e in events]
    assert kinds[0] == "STARTED" and kinds[-1] == "COMPLETED"
    for table in ("a", "b"):
        first_row = kinds.index(f"p.public.{table}")
        announced = [i for i, e in enumerate(events) if e.topic == TOPIC
                     and json.loads(e.value or "null")["payload"]["additional_data"].get("scanned_collection") == f"public.{table}"]
        assert announced and announced[0] < first_row
    assert [json.loads(e.key or "null")["payload"] for e in others] == [{"id": 1}, {"id": 2}, {"id": 5}]
    logged = [r.getMessage() for r in caplog.records if r.name == "headwater.notifications"]
    assert [m.split("type='")[1].split("'")[0] for m in logged] == [
        "STARTED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "COMPLETED"]
    assert all(m.startswith("[Notification Service]  {id='") and "aggregateType='Initial Snapshot'" in m
               for m in logged)
    assert "total_rows_scanned=2" in logged[2] and "scanned_collection=public.a" in logged[2]


def test_typed_output_carries_the_same_records(pg_server, pg_db):
    pg_server.execute(SETUP, pg_db)
    engine = Engine(validate_connector(_props(pg_server, pg_db, **{"notification.enabled.channels": "sink"})),
                    output="typed")
    try:
        blocks = [b for batch in engine.blocks(once=True) for b in batch if b.topic == TOPIC]
    finally:
        engine.close()
    values = [v for b in blocks for v in b.batch.column("value").to_pylist()]
    assert [v["type"] for v in values] == ["STARTED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "IN_PROGRESS",
                                           "TABLE_SCAN_COMPLETED", "COMPLETED"]
    assert dict(values[2]["additional_data"])["total_rows_scanned"] == "2"


def test_no_snapshot_is_skipped(pg_server, pg_db):
    pg_server.execute(SETUP, pg_db)
    engine = Engine(validate_connector(_props(pg_server, pg_db, **{"snapshot.mode": "no_data"})),
                    schemas_enable=True)
    try:
        events = list(engine.events(once=True))
    finally:
        engine.close()
    notes, others = _records(events)
    assert notes == golden("skipped_debezium.jsonl") and others == []


def test_an_interrupted_snapshot_is_aborted(pg_server, pg_db, tmp_path):
    pg_server.execute(SETUP + "INSERT INTO a SELECT g, 'r' FROM generate_series(10, 2000) g;", pg_db)
    props = _props(pg_server, pg_db, **{"notification.enabled.channels": "log",
                                        "headwater.snapshot.chunk.rows": "100"})
    engine = Engine(validate_connector(props), OffsetFile(tmp_path / "offsets.json"))
    try:
        stream = cast(Generator, engine.batches(once=True))
        next(stream)
        stream.close()  # the consumer stops in the middle of the snapshot
        recent = [n.type for n in engine.observer.notifier.recent]
        snapshot = engine.observer.metrics.values()["snapshot"]
    finally:
        engine.close()
    assert recent[0] == "STARTED" and recent[-1] == "ABORTED" and "COMPLETED" not in recent
    assert snapshot["SnapshotAborted"] is True and snapshot["SnapshotRunning"] is False
    assert snapshot["SnapshotCompleted"] is False


@pytest.mark.parametrize(("props", "name", "text"), [
    ({"notification.enabled.channels": "log,jmx"}, "notification.enabled.channels", "jmx not allowed"),
    ({"notification.enabled.channels": "sink"}, "notification.sink.topic.name", "needs a topic"),
    ({"headwater.metrics.port": "70000"}, "headwater.metrics.port", ""),
])
def test_bad_notification_and_metrics_properties_are_refused(props, name, text):
    with pytest.raises(ConfigErrors) as exc:
        validate_connector({"connector.class": "postgres", "topic.prefix": "p", "database.hostname": "h",
                            "database.user": "u", "database.dbname": "d", **props})
    errors = [e for e in exc.value.errors if e.property == name]
    assert errors and text in errors[0].message


def test_notification_properties_are_accepted():
    config = validate_connector({"connector.class": "postgres", "topic.prefix": "p", "database.hostname": "h",
                                 "database.user": "u", "database.dbname": "d",
                                 "notification.enabled.channels": "Log, sink",
                                 "notification.sink.topic.name": "notes", "headwater.metrics.port": "9404"})
    assert config["notification.enabled.channels"] == ["log", "sink"]
    assert config["headwater.metrics.port"] == 9404


def test_the_incremental_snapshot_notification_for_signals():
    config = validate_connector({"connector.class": "postgres", "topic.prefix": "p", "database.hostname": "h",
                                 "database.user": "u", "database.dbname": "d",
                                 "notification.enabled.channels": "sink", "notification.sink.topic.name": TOPIC})
    notifier = Notifier(config)
    data = {"data_collections": "public.a", "current_collection_in_progress": "public.a", "maximum_key": "100",
            "last_processed_key": "50"}
    notifier.incremental_snapshot("signal-1", "IN_PROGRESS", data)
    with pytest.raises(ValueError, match="SKIPPED"):
        notifier.incremental_snapshot("signal-1", "SKIPPED")
    records = notifier.take_records()
    assert records is not None and notifier.take_records() is None
    [row] = list(to_event_batch(records, JsonOptions(True, True)).rows())
    value = json.loads(row.value or "null")
    assert row.topic == TOPIC and json.loads(row.key or "null")["payload"] == {"id": "signal-1"}
    assert value["schema"] == golden("initial_snapshot_debezium.jsonl")[0]["value_schema"]
    assert value["payload"]["aggregate_type"] == "Incremental Snapshot" and value["payload"]["type"] == "IN_PROGRESS"
    assert value["payload"]["additional_data"] == {"connector_name": "p", **data}
