"""Incremental snapshots on local Spark, in process: each batch's window is read in parts, side by side, by
Spark's tasks, while a workload inserts, updates, deletes and changes the primary keys of the rows being read.

The events come out of `foreachBatch` in the stream's order (a batch's partitions in order: its streamed
changes, then the window's parts); replaying them gives the table exactly, no row is read twice, and the
windows' rows arrive from several partitions of one batch. On PostgreSQL with each watermarking strategy
and the read-only mode; on MariaDB with the read-only mode (each part reads in its own view and reads the
binlog after it, in the task).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from headwater.spark.source import register
from tests.connectors.common.incremental_support import insert_signal
from tests.connectors.mariadb import test_incremental as maria
from tests.connectors.postgres import test_incremental as pg

pytestmark = pytest.mark.spark

ROWS = 20_000
WINDOW = {"incremental.snapshot.chunk.size": "1000", "headwater.incremental.snapshot.batch.rows": "4000",
          "notification.enabled.channels": "sink", "notification.sink.topic.name": "s.notifications"}


@pytest.fixture(scope="module")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("headwater-incremental-test")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


class Batches:
    """The events of every batch a query delivers, in order, with the Spark partition each came from."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.partitions: list[tuple[int, int, dict[str, Any]]] = []  # (batch, partition, value) of each read
        self.lock = threading.Lock()

    def __call__(self, df: Any, batch_id: int) -> None:
        from pyspark.sql.functions import spark_partition_id

        rows = df.select("topic", "value", spark_partition_id().alias("part")).collect()
        with self.lock:
            for r in rows:
                value = json.loads(r["value"]) if r["value"] else None
                self.events.append({"topic": r["topic"], "value": value})
                if value and value.get("op") == "r":
                    self.partitions.append((batch_id, r["part"], value))

    def completed(self) -> bool:
        with self.lock:
            return any(e["topic"] == "s.notifications" and e["value"]["type"] == "COMPLETED" for e in self.events)

    def saw_done(self) -> bool:
        with self.lock:
            return any(e["value"] and e["value"]["source"].get("table") == "done" for e in self.events
                       if e["topic"] != "s.notifications")


def _wait(what: Callable[[], bool], query: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        if not query.isActive:
            raise AssertionError(f"the query ended: {query.exception()}")
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def run_snapshot(spark: Any, props: dict[str, str], checkpoint: str, signal: Callable[[], None],
                 workload: Callable[[], tuple[threading.Thread, threading.Event]], mark: Callable[[], None]) -> Batches:
    """A query from `props` into `Batches` while `workload` runs: `signal()` starts the incremental snapshot;
    once its COMPLETED notification is delivered the workload stops and `mark()` writes the marker row."""
    batches = Batches()
    df = spark.readStream.format("headwater").option("headwater.properties", json.dumps(props)).load()
    query = (df.writeStream.foreachBatch(batches).option("checkpointLocation", checkpoint)
             .trigger(processingTime="500 milliseconds").start())
    worker, stop = workload()
    try:
        _wait(lambda: query.lastProgress is not None, query, 300)
        signal()
        _wait(batches.completed, query, 600)
        stop.set()
        worker.join(30)
        mark()
        _wait(batches.saw_done, query, 300)
    finally:
        stop.set()
        query.stop()
    return batches


def check(batches: Batches, table: dict[int, dict[str, Any]]) -> None:
    reads = [v["after"]["id"] for _, _, v in batches.partitions if v["source"]["table"] == "items"]
    assert len(reads) > ROWS * 0.8 and len(reads) == len(set(reads)), "a row read twice, or too few read"
    by_batch: dict[int, set[int]] = {}
    for batch, part, _ in batches.partitions:
        by_batch.setdefault(batch, set()).add(part)
    assert len(by_batch) >= ROWS // 4000 and max(len(p) for p in by_batch.values()) >= 4  # windows in parts
    state: dict[int, Any] = {}
    for e in batches.events:
        v = e["value"]
        if not v or e["topic"] == "s.notifications" or v["source"].get("table") != "items":
            continue
        if v["op"] == "d":
            state.pop(v["before"]["id"], None)
        else:
            state[v["after"]["id"]] = v["after"]
    assert state == table


@pytest.mark.parametrize("extra", [
    pytest.param({"incremental.snapshot.watermarking.strategy": "insert_insert"}, id="insert_insert"),
    pytest.param({"incremental.snapshot.watermarking.strategy": "insert_delete"}, id="insert_delete",
                 marks=pytest.mark.slow),
    pytest.param({"headwater.incremental.snapshot.read.only": "true"}, id="read_only", marks=pytest.mark.slow),
])
def test_postgres_windows_read_by_tasks_replay_to_the_table(spark, pg_server, pg_db, tmp_path, extra):
    pg.setup(pg_server, pg_db, ROWS)
    props = {**pg.props(pg_server, pg_db, **WINDOW, **extra), "slot.name": "incspark"}
    batches = run_snapshot(
        spark, props, str(tmp_path / "ckpt"),
        lambda: pg.signal(pg_server, pg_db, "execute-snapshot", {"data-collections": ["public.items"]}, "s1"),
        lambda: pg.start_workload(pg_server, pg_db, ROWS),
        lambda: pg_server.execute("INSERT INTO done VALUES (1)", pg_db))
    check(batches, pg.table_state(pg_server, pg_db))


def test_mariadb_windows_read_by_tasks_replay_to_the_table(spark, mariadb_server, mariadb_db, tmp_path):
    server, db = mariadb_server, mariadb_db
    maria.setup(server, db, ROWS)
    props = maria.props(server, db, **WINDOW, **{"read.only": "true", "database.server.id": "5472",
                                                  "headwater.schema.history.file": str(tmp_path / "history.jsonl")})
    batches = run_snapshot(
        spark, props, str(tmp_path / "ckpt"),
        lambda: insert_signal(maria.connect(server, db), "execute-snapshot", {"data-collections": [f"{db}.items"]},
                              "s1"),
        lambda: maria.start_workload(server, db, ROWS),
        lambda: server.execute("INSERT INTO done VALUES (1)", db))
    check(batches, maria.table_state(server, db))
