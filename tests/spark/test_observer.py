"""Debezium's metrics and the initial snapshot's notifications of a `headwater` stream on local Spark,
in process, against a real PostgreSQL: the counts equal the events the jsonl sink holds, a batch
Spark runs again is not counted twice, the notifications (sink and log) equal the real Debezium's but
for ids and times and come once, the observed metrics are in StreamingQueryProgress; a
`--once` run (availableNow) finishes an incremental snapshot signalled before it; and a blocking
snapshot's notifications equal the real Debezium's (tests/observe/test_blocking_notifications.py)."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import pytest

from headwater.connectors.common.signals import append_signal
from headwater.observe.metrics import metrics_path, read_file
from headwater.pipeline_config import load_config
from headwater.spark.observer import batch_counts, observed_stream
from headwater.spark.pipeline import query_observer, start_query
from tests.connectors.common.incremental_support import insert_signal
from tests.observe import test_binlog_notifications as binlog
from tests.observe import test_blocking_notifications as blocking
from tests.observe.notes_support import TOPIC, comparable, golden
from tests.observe.test_notifications import SETUP
from tests.spark_support import read_sink, write_config

pytestmark = pytest.mark.spark

CHANGES = """
BEGIN; INSERT INTO a VALUES (11, 'n'), (12, 'n'); UPDATE b SET id = 7 WHERE id = 5; COMMIT;
BEGIN; UPDATE a SET v = 'u' WHERE id <= 2; DELETE FROM a WHERE id = 11; COMMIT;
INSERT INTO b VALUES (8);
"""


def _run(spark, props: dict[str, str], out: Path, checkpoint: Path) -> list[Any]:
    """Everything available now into the jsonl sink, observed; the batches' progress."""
    observed = observed_stream(spark, {"headwater.properties": json.dumps(props), "schemas.enable": "true"},
                               checkpoint)
    try:
        query = (observed.df.writeStream.format("headwater-jsonl").option("path", str(out))
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        observed.attach(query)
        query.awaitTermination()
        assert observed.wait_counted()
        return query.recentProgress
    finally:
        observed.close()


def _split(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The notification records (comparable) and the ops of the change events."""
    notes = [comparable(e) for e in events if e["topic"] == TOPIC]
    ops = [e["value"]["payload"]["op"] for e in events if e["topic"] != TOPIC and e["value"] is not None]
    return notes, ops


def test_counts_and_notifications_once_per_committed_batch(spark, pg_server, pg_db, tmp_path, caplog):
    pg_server.execute(SETUP, pg_db)
    props = {"connector.class": "postgres", **pg_server.connector_properties(pg_db), "topic.prefix": "p",
             "slot.name": f"o_{pg_db}", "notification.enabled.channels": "sink,log",
             "notification.sink.topic.name": TOPIC, "headwater.snapshot.chunk.rows": "1"}
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with caplog.at_level(logging.INFO, logger="headwater.notifications"):
        _run(spark, props, out, checkpoint)
    notes, ops = _split(read_sink(out))
    assert notes == golden("initial_snapshot_debezium.jsonl")  # in the batch after the snapshot's
    logged = [r.getMessage().split("type='")[1].split("'")[0] for r in caplog.records
              if r.name == "headwater.notifications"]
    assert logged == ["STARTED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED",
                      "COMPLETED"]
    doc = read_file(metrics_path(checkpoint))
    assert doc is not None
    snap = doc["snapshot"]
    assert ops == ["r"] * 3 and snap["TotalNumberOfEventsSeen"] == 3
    assert snap["RowsScanned"] == {"public.a": 2, "public.b": 1} and snap["CapturedTables"] == ["public.a", "public.b"]
    assert snap["SnapshotCompleted"] is True and snap["SnapshotRunning"] is False
    assert snap["TotalTableCount"] == 2 and snap["RemainingTableCount"] == 0
    assert doc["streaming"]["Connected"] is False and doc["spark"]["outbox"] == []

    pg_server.execute(CHANGES, pg_db)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="headwater.notifications"):
        progress = _run(spark, props, out, checkpoint)
    notes, ops = _split(read_sink(out))
    streamed = ops[3:]
    # two inserts, a key change (delete + create), two updates, a delete, an insert
    assert sorted(streamed) == sorted(["c", "c", "d", "c", "u", "u", "d", "c"])
    assert [n["payload"]["type"] for n in notes] == [
        "STARTED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "COMPLETED", "SKIPPED"]
    assert [r.getMessage().split("type='")[1].split("'")[0] for r in caplog.records
            if r.name == "headwater.notifications"] == ["SKIPPED"]
    doc = read_file(metrics_path(checkpoint))
    assert doc is not None
    st = doc["streaming"]
    assert st["TotalNumberOfEventsSeen"] == len(streamed)
    assert (st["TotalNumberOfCreateEventsSeen"], st["TotalNumberOfUpdateEventsSeen"],
            st["TotalNumberOfDeleteEventsSeen"]) == (streamed.count("c"), streamed.count("u"), streamed.count("d"))
    assert st["NumberOfCommittedTransactions"] == 3
    assert st["LastTransactionId"] == pg_server.query("SELECT xmin::text FROM b WHERE id = 8", pg_db)[0][0]
    assert "lsn" in st["SourceEventPosition"] and 0 <= st["MilliSecondsBehindSource"] < 600_000
    assert doc["snapshot"]["TotalNumberOfEventsSeen"] == 3  # kept from the first run
    observed = [c for c in map(batch_counts, progress) if c is not None]  # StreamingQueryProgress.observedMetrics
    assert sum(o["TotalNumberOfEventsSeen"] for o in observed) == len(streamed)
    assert sum(o["TotalNumberOfCreateEventsSeen"] for o in observed) == streamed.count("c")
    assert all(o["RowsScanned"] == 0 for o in observed)

    # Spark runs the last batch again (its commit is gone, as after a crash before it): not counted twice
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    replayed = [batch_counts(p) for p in progress if p["batchId"] == last]
    assert replayed and replayed[0] and replayed[0]["TotalNumberOfEventsSeen"] > 0  # it has events to count
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    _run(spark, props, out, checkpoint)
    again = read_file(metrics_path(checkpoint))
    assert again is not None and again["spark"]["batch"] >= last
    assert again["streaming"]["TotalNumberOfEventsSeen"] == st["TotalNumberOfEventsSeen"]
    assert again["streaming"]["NumberOfCommittedTransactions"] == 3
    assert _split(read_sink(out))[1][3:] == streamed  # the sink replaced the batch's output


def test_once_finishes_an_incremental_snapshot(spark, pg_server, pg_db, tmp_path):
    rows = 2000
    pg_server.execute("CREATE TABLE dbz_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
                      "data varchar(2048)); CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL);"
                      f"INSERT INTO items SELECT g, g FROM generate_series(1, {rows}) g", pg_db)
    config = write_config(tmp_path, pg_server, pg_db, name="once",
                          source={"snapshot.mode": "no_data", "signal.data.collection": "public.dbz_signal",
                                  "incremental.snapshot.chunk.size": 300, "signal.poll.interval.ms": 0,
                                  "slot.name": f"once_{pg_db}"})
    cfg = load_config(str(config))
    checkpoint = Path(cfg.spark.checkpoint)

    def run_once() -> list[Any]:
        query = start_query(spark, cfg, once=True)  # the files layout: the source's tasks write the jsonl sink
        observed = query_observer(query)
        assert observed is not None
        try:
            query.awaitTermination()
            assert observed.wait_counted()
            return query.recentProgress
        finally:
            observed.close()

    run_once()  # the slot, and streaming begins
    append_signal(checkpoint / "signals.jsonl", "execute-snapshot", {"data-collections": ["public.items"]}, "s1")
    pg_server.execute("UPDATE items SET v = -1 WHERE id = 1500", pg_db)
    progress = run_once()
    events = read_sink(tmp_path / "out")
    reads = [e["value"]["after"]["id"] for e in events
             if e["value"] and e["value"]["source"].get("snapshot") == "incremental"]
    assert sorted(reads) == list(range(1, rows + 1))
    doc = read_file(metrics_path(checkpoint))
    assert doc is not None
    snap = doc["snapshot"]
    assert snap["ChunkId"] and snap["ChunkTo"] == f"[{rows}]" and snap["TableTo"] == f"[{rows}]"
    assert snap["SnapshotCompleted"] is True and snap["SnapshotRunning"] is False
    assert snap["RowsScanned"] == {"public.items": rows} and snap["RemainingTableCount"] == 0
    changes = [e for e in events if e["value"] and e["value"].get("op")]
    assert doc["streaming"]["TotalNumberOfEventsSeen"] == len(changes)
    assert doc["streaming"]["TotalNumberOfUpdateEventsSeen"] == 1
    observed = [c for c in map(batch_counts, progress) if c is not None]  # the facts column's observed metrics
    assert sum(o["TotalNumberOfEventsSeen"] for o in observed) == len(changes)
    assert sum(o["TotalNumberOfUpdateEventsSeen"] for o in observed) == 1


def _parquet_ops(path: Path) -> dict[str, list[str]]:
    """The `_op`s of the change events per topic directory of a parquet sink."""
    import pyarrow.parquet as pq

    out: dict[str, list[str]] = {}
    for d in sorted(p for p in path.iterdir() if p.is_dir()):
        files = sorted(d.glob("*.parquet"), key=lambda f: [int(n) for n in re.findall(r"\d+", f.name)])
        if files:
            table = pq.ParquetDataset([str(f) for f in files]).read()
            if "aggregate_type" in table.column_names:  # notifications: their types
                out[d.name] = [str(t) for t in table.column("type").to_pylist()]
            else:
                out[d.name] = [o for o in table.column("_op").to_pylist() if o is not None]
    return out


LOCKING = {"snapshot.locking.mode": "minimal", "headwater.max.batch.events": "80"}


@pytest.mark.parametrize("locking", [{}, LOCKING, {**LOCKING, "snapshot.select.statement.overrides": "{db}.a",
                                                   "snapshot.select.statement.overrides.{db}.a": "SELECT * FROM {db}.a"}],
                         ids=["lock-free", "locking", "locking-streamed"])
def test_mariadb_typed_blocks_snapshot_in_batches(spark, mariadb_server, mariadb_db, tmp_path, locking):
    """The blocks layout (parquet sink) and a snapshot over several batches (MariaDB's lock-free chunks, or the
    locking snapshot's batches of two chunks: key ranges, or, for a table read through a select override,
    chunks cut from one SELECT streamed across the batches)."""
    locking = {k.format(db=mariadb_db): v.format(db=mariadb_db) for k, v in locking.items()}
    mariadb_server.execute("CREATE TABLE a (id INT PRIMARY KEY, v VARCHAR(20)); INSERT INTO a SELECT seq, 'r' "
                           "FROM seq_1_to_250; CREATE TABLE b (id INT PRIMARY KEY); INSERT INTO b VALUES (5)",
                           mariadb_db)
    props = {"connector.class": "mariadb", **mariadb_server.connector_properties(mariadb_db),
             "database.server.id": "5412", "topic.prefix": "m", "include.schema.changes": "false",
             "notification.enabled.channels": "sink", "notification.sink.topic.name": "notes",
             "headwater.snapshot.chunk.rows": "40", **locking,
             "headwater.schema.history.file": str(tmp_path / "checkpoint" / "schema_history.jsonl")}
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    def run() -> None:
        observed = observed_stream(spark, {"headwater.properties": json.dumps(props), "headwater.output": "blocks"},
                                   checkpoint)
        try:
            query = (observed.df.writeStream.format("headwater-parquet").option("path", str(out))
                     .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
            observed.attach(query)
            query.awaitTermination()
            assert observed.wait_counted()
        finally:
            observed.close()

    run()
    mariadb_server.execute("START TRANSACTION; INSERT INTO a VALUES (400, 'n'); UPDATE b SET id = 6; COMMIT;"
                           "DELETE FROM a WHERE id = 1", mariadb_db)
    run()
    ops = _parquet_ops(out)
    a, b = f"m.{mariadb_db}.a", f"m.{mariadb_db}.b"
    assert ops["notes"] == ["STARTED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED",
                            "COMPLETED", "SKIPPED"]
    doc = read_file(metrics_path(checkpoint))
    assert doc is not None
    snap, st = doc["snapshot"], doc["streaming"]
    assert snap["RowsScanned"] == {f"{mariadb_db}.a": 250, f"{mariadb_db}.b": 1} and snap["SnapshotCompleted"] is True
    assert snap["TotalNumberOfEventsSeen"] == ops[a].count("r") + ops[b].count("r") == 251
    assert doc["spark"]["batch"] >= 3  # the snapshot took several batches
    streamed = [o for o in ops[a] + ops[b] if o != "r"]
    assert st["TotalNumberOfEventsSeen"] == len(streamed) == 4  # insert, key change (delete + create), delete
    assert (st["TotalNumberOfCreateEventsSeen"], st["TotalNumberOfDeleteEventsSeen"]) == (2, 2)
    assert st["NumberOfCommittedTransactions"] == 2


@pytest.mark.parametrize(("signal", "recording"), [("SIGNAL", "blocking_snapshot_debezium.jsonl"),
                                                  ("BAD", "blocking_aborted_debezium.jsonl"),
                                                  ("FAILS", "blocking_aborted_second_table_debezium.jsonl")])
def test_a_blocking_snapshots_notifications_equal_debeziums(spark, pg_server, pg_db, tmp_path, signal, recording):
    """As `blocking._run` through the engine (without its change after the snapshot), completed or abandoned
    (planning it, or in a unit on an executor: FAILS);
    each comes in the batch after the one that made it (the observer counts a batch once Spark committed it),
    so COMPLETED after the streamed changes of the batch that follows the snapshot's; and each start with no
    snapshot due is SKIPPED, as Debezium's."""
    pg_server.execute(blocking.SETUP, pg_db)
    props = {**blocking._props(pg_server, pg_db), "slot.name": f"ob_{pg_db}"}
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    _run(spark, props, out, checkpoint)
    pg_server.execute("INSERT INTO a VALUES (3, 'before')", pg_db)
    insert_signal(pg_server.connect(pg_db), "execute-snapshot", getattr(blocking, signal), "sig-1")
    pg_server.execute("INSERT INTO b VALUES (6)", pg_db)
    _run(spark, props, out, checkpoint)
    notes, ops = _split(read_sink(out))
    skipped = [n for n in notes if n["payload"]["type"] == "SKIPPED"]
    assert skipped == golden(recording)[:1] * 2  # a start each
    assert [n for n in notes if n not in skipped] == golden(recording)[1:]
    doc = read_file(metrics_path(checkpoint))
    assert doc is not None
    if signal != "SIGNAL":
        assert ops.count("r") == (0 if signal == "BAD" else 3) and doc["snapshot"]["SnapshotAborted"] is True
    else:
        assert ops.count("r") == 5 and doc["snapshot"]["SnapshotCompleted"] is True
        assert doc["snapshot"]["RowsScanned"] == {"public.a": 3, "public.b": 2}


def test_mariadb_schema_only_snapshots_notifications(spark, mariadb_server, mariadb_db, tmp_path):
    """`recovery` on MariaDB takes its schema-only snapshot at the first start (a snapshot batch with no rows)
    and at a restart (the schema history rebuilt as the connector opens): STARTED and COMPLETED each time, no
    table's scan, as Debezium's (tests/observe/test_binlog_notifications.py)."""
    mariadb_server.execute(binlog.SETUP, mariadb_db)
    props = {"connector.class": "mariadb", **mariadb_server.connector_properties(mariadb_db),
             "database.server.id": "5492", "topic.prefix": "p", "include.schema.changes": "false",
             "snapshot.mode": "recovery", "notification.enabled.channels": "sink",
             "notification.sink.topic.name": TOPIC, "headwater.schema.history.file": str(tmp_path / "history.jsonl")}
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    _run(spark, props, out, checkpoint)
    notes, ops = _split(read_sink(out))
    assert notes == binlog.expected("schema", mariadb_db) and ops == []
    mariadb_server.execute("INSERT INTO b VALUES (6)", mariadb_db)
    _run(spark, props, out, checkpoint)
    notes, ops = _split(read_sink(out))
    assert notes == binlog.expected("schema", mariadb_db) * 2 and ops == ["c"]
    doc = read_file(metrics_path(checkpoint))
    assert doc is not None and doc["snapshot"]["SnapshotCompleted"] is True
    assert doc["snapshot"]["RowsScanned"] == {f"{mariadb_db}.a": 0, f"{mariadb_db}.b": 0}
    assert doc["snapshot"]["TotalTableCount"] == 2 and doc["snapshot"]["RemainingTableCount"] == 0
