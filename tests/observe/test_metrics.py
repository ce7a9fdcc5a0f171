"""Debezium's metrics on a real PostgreSQL, through the engine: the counts equal the events delivered
(JSON rows and typed blocks), the snapshot metrics through a snapshot, `headwater status` shows them
from the metrics file, and the Prometheus endpoint answers with them."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest
import yaml

from headwater.cli.status import metrics_lines
from headwater.connectors.registry import validate_connector
from headwater.devservers.common import free_port
from headwater.engine import Engine, OffsetFile
from headwater.observe.metrics import ConnectorMetrics, metrics_path, read_file
from tests.spark_support import cli

SETUP = """
CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a SELECT g, 'r' FROM generate_series(1, 250) g;
CREATE TABLE b (id int PRIMARY KEY); INSERT INTO b VALUES (5), (6);
CREATE TABLE empty (id int PRIMARY KEY);
"""
CHANGES = """
BEGIN; INSERT INTO a VALUES (1001, 'n'), (1002, 'n'); UPDATE b SET id = 7 WHERE id = 6; COMMIT;
BEGIN; UPDATE a SET v = 'u' WHERE id <= 3; DELETE FROM a WHERE id = 4; COMMIT;
INSERT INTO b VALUES (8);
"""


def _props(pg_server, pg_db, **extra: str) -> dict:
    return {"connector.class": "postgres", **pg_server.connector_properties(pg_db), "topic.prefix": "p",
            "slot.name": f"m_{pg_db}", "headwater.snapshot.chunk.rows": "100", **extra}


def _ops(batches) -> list[str]:
    """The ops of the change events delivered (not tombstones), from JSON rows or typed blocks."""
    ops: list[str] = []
    for batch in batches:
        if hasattr(batch, "blocks"):
            ops += [o for b in batch for o in b.batch.column("op").to_pylist() if o is not None]
        else:
            ops += [e.op for e in batch.rows() if e.op is not None]
    return ops


@pytest.mark.parametrize("output", ["json", "typed"])
def test_counts_equal_the_events_delivered(pg_server, pg_db, tmp_path, output):
    pg_server.execute(SETUP, pg_db)
    port = free_port()
    engine = Engine(validate_connector(_props(pg_server, pg_db, **{"headwater.metrics.port": str(port)})),
                    OffsetFile(tmp_path / "offsets.json"), output=output)
    try:
        snapshot_ops = _ops(engine.batches(once=True))
        m = engine.observer.metrics.values()
        snap = m["snapshot"]
        assert snapshot_ops == ["r"] * 252
        assert snap["TotalNumberOfEventsSeen"] == 252
        assert snap["RowsScanned"] == {"public.a": 250, "public.b": 2, "public.empty": 0}
        assert snap["CapturedTables"] == ["public.a", "public.b", "public.empty"]
        assert snap["TotalTableCount"] == 3 and snap["RemainingTableCount"] == 0
        assert snap["SnapshotCompleted"] is True and snap["SnapshotRunning"] is False
        assert snap["SnapshotAborted"] is False and snap["SnapshotDurationInSeconds"] >= 0
        assert snap["LastEvent"].startswith("p.public.b op=r")
        assert m["streaming"]["TotalNumberOfEventsSeen"] == 0 and m["streaming"]["Connected"] is True

        pg_server.execute(CHANGES, pg_db)
        stream_ops = _ops(engine.batches(once=True))
        st = engine.observer.metrics.values()["streaming"]
        # two inserts, a key change (delete + create), three updates, a delete, an insert
        assert sorted(stream_ops) == sorted(["c", "c", "d", "c", "u", "u", "u", "d", "c"])
        assert st["TotalNumberOfEventsSeen"] == len(stream_ops)
        assert st["TotalNumberOfCreateEventsSeen"] == stream_ops.count("c") == 4
        assert st["TotalNumberOfUpdateEventsSeen"] == stream_ops.count("u") == 3
        assert st["TotalNumberOfDeleteEventsSeen"] == stream_ops.count("d") == 2
        assert st["NumberOfCommittedTransactions"] == 3
        last_tx = pg_server.query("SELECT xmin::text FROM b WHERE id = 8", pg_db)[0][0]
        assert st["LastTransactionId"] == last_tx
        assert 0 <= st["MilliSecondsBehindSource"] < 600_000
        assert 0 <= st["MilliSecondsSinceLastEvent"] < 600_000
        assert "lsn" in st["SourceEventPosition"]
        assert st["LastEvent"] == "p.public.b op=c"

        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    finally:
        engine.close()
    labels = 'context="{}",name="p",plugin="postgres"'
    assert f"debezium_metrics_TotalNumberOfEventsSeen{{{labels.format('streaming')}}} 9.0" in body
    assert f"debezium_metrics_TotalNumberOfCreateEventsSeen{{{labels.format('streaming')}}} 4.0" in body
    assert f"debezium_metrics_SnapshotCompleted{{{labels.format('snapshot')}}} 1.0" in body
    assert f'debezium_metrics_RowsScanned{{{labels.format("snapshot")},table="public.a"}} 250.0' in body
    assert f"debezium_metrics_Connected{{{labels.format('streaming')}}} 1.0" in body
    with pytest.raises(OSError):  # closed with the engine
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5)
    stored = read_file(tmp_path / "offsets.json.metrics.json")
    assert stored is not None and stored["streaming"]["TotalNumberOfEventsSeen"] == 9
    assert stored["streaming"]["Connected"] is False  # written again at close


def test_status_shows_the_metrics_and_notifications(pg_server, pg_db, tmp_path):
    pg_server.execute(SETUP, pg_db)
    props = _props(pg_server, pg_db)
    checkpoint = tmp_path / "checkpoint"
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"name": "m", "source": props,
                                      "sink": {"type": "jsonl", "path": str(tmp_path / "out")},
                                      "spark": {"master": "local[1]", "checkpoint": str(checkpoint)}}))
    assert "no metrics written yet" in cli("status", str(config)).stdout
    engine = Engine(validate_connector({**props, "notification.enabled.channels": "log"}),
                    OffsetFile(tmp_path / "offsets.json"), metrics_file=metrics_path(checkpoint))
    try:
        list(engine.batches(once=True))
        pg_server.execute(CHANGES, pg_db)
        list(engine.batches(once=True))
    finally:
        engine.close()
    out = cli("status", str(config)).stdout
    assert re.search(r"metrics \(written \d+ s ago\):", out)
    for line in ("SnapshotCompleted: True", "TotalTableCount: 3", "RemainingTableCount: 0",
                 "RowsScanned public.a: 250", "RowsScanned public.empty: 0", "TotalNumberOfEventsSeen: 9",
                 "TotalNumberOfCreateEventsSeen: 4", "NumberOfCommittedTransactions: 3", "Connected: False"):
        assert line in out, out
    shown = [line for line in out.splitlines() if " UTC Initial Snapshot " in line]
    assert shown[-1].endswith("Initial Snapshot COMPLETED") and len(shown) == 5
    assert any("TABLE_SCAN_COMPLETED (data_collections=public.a,public.b,public.empty, scanned_collection=public.b"
               in line for line in shown)
    assert json.loads(Path(metrics_path(checkpoint)).read_text())["server"] == "p"


def test_mariadb_counts_through_the_shared_layer(mariadb_server, mariadb_db, tmp_path):
    mariadb_server.execute("CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(20));"
                           "INSERT INTO a SELECT seq, 'r' FROM seq_1_to_250;"
                           "CREATE TABLE b (id INT PRIMARY KEY); INSERT INTO b VALUES (5)", mariadb_db)
    props = {"connector.class": "mariadb", **mariadb_server.connector_properties(mariadb_db),
             "database.server.id": "5411", "topic.prefix": "m", "include.schema.changes": "false",
             "notification.enabled.channels": "sink", "notification.sink.topic.name": "notes",
             "headwater.snapshot.chunk.rows": "40"}  # the lock-free snapshot: chunks over several batches
    engine = Engine(validate_connector(props), OffsetFile(tmp_path / "offsets.json"), output="typed")
    try:
        snapshot = list(engine.blocks(once=True))
        mariadb_server.execute("START TRANSACTION; INSERT INTO a VALUES (400, 'n'); UPDATE b SET id = 6; COMMIT;"
                               "DELETE FROM a WHERE id = 1", mariadb_db)
        streamed = list(engine.blocks(once=True))
        m = engine.observer.metrics.values()
    finally:
        engine.close()
    notes = [v for batch in snapshot for b in batch if b.topic == "notes" for v in b.batch.column("value").to_pylist()]
    assert [n["type"] for n in notes] == ["STARTED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "IN_PROGRESS",
                                          "TABLE_SCAN_COMPLETED", "COMPLETED"]
    a, b = f"{mariadb_db}.a", f"{mariadb_db}.b"
    assert dict(notes[2]["additional_data"])["scanned_collection"] == a
    assert dict(notes[2]["additional_data"])["total_rows_scanned"] == "250"
    assert m["snapshot"]["RowsScanned"] == {a: 250, b: 1} and m["snapshot"]["SnapshotCompleted"] is True
    assert m["snapshot"]["TotalNumberOfEventsSeen"] == 251 and len(snapshot) > 2
    ops = _ops(streamed)
    st = m["streaming"]
    assert st["TotalNumberOfEventsSeen"] == len(ops) == 4  # insert, key change (delete + create), delete
    assert (st["TotalNumberOfCreateEventsSeen"], st["TotalNumberOfUpdateEventsSeen"],
            st["TotalNumberOfDeleteEventsSeen"]) == (ops.count("c"), ops.count("u"), ops.count("d")) == (2, 0, 2)
    assert st["NumberOfCommittedTransactions"] == 2
    assert st["LastTransactionId"].count("-") == 2  # the last transaction's GTID, domain-server-sequence


def test_the_fields_an_incremental_snapshot_and_filters_fill():
    m = ConnectorMetrics("postgres", "p")
    m.snapshot_started(["public.a"])
    m.incremental_chunk("c-1", "[1]", "[100]", "[1]", "[1000]")
    m.snapshot_paused(True)
    m.filtered("streaming", 3)
    values = m.values()
    snap = values["snapshot"]
    assert (snap["ChunkId"], snap["ChunkFrom"], snap["ChunkTo"], snap["TableFrom"], snap["TableTo"]) == (
        "c-1", "[1]", "[100]", "[1]", "[1000]")
    assert snap["SnapshotPaused"] is True and snap["SnapshotRunning"] is True
    assert values["streaming"]["NumberOfEventsFiltered"] == 3 and snap["NumberOfEventsFiltered"] == 0
    m.snapshot_ended(completed=True)
    assert m.values()["snapshot"]["SnapshotPaused"] is False
    lines = metrics_lines({"written_ms": 0, **m.values(), "notifications": []})
    assert "    ChunkId: c-1" in lines and "    NumberOfEventsFiltered: 3" in lines
