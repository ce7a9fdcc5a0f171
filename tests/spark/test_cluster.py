"""The same pipelines, unchanged, on a Spark standalone cluster: a master and two workers, one cluster
for both sources.

Each test runs `headwater run` until stopped: the snapshot's chunks, and then the stream's slices for
changes made while it runs, run as tasks on the workers' executors (pickled there); the replication
connection (PostgreSQL) or the binlog client and the schema history (MariaDB) stay in the driver.
The events must be the same as on local Spark. The MariaDB executors import the code the test runs
(this process's PYTHONPATH), so a worktree's code is what the workers run.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from headwater.devservers.spark_cluster import SparkCluster
from headwater.spark.workerpath import with_site_dir
from tests.spark_support import committed_batches, kill_group, read_sink, start_cli, wait_until, write_config

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

ROWS = 10000  # read as 5 chunks
CHUNK = "2000"
EXECUTORS = {"spark.executor.memory": "512m", "spark.cores.max": "2"}


@pytest.fixture(scope="module")
def cluster():
    with SparkCluster(workers=2) as started:
        yield started


def run_until(config: Path, out: Path, snapshot_done: Callable[[list[dict]], bool], changes: Callable[[], None],
              changed: int) -> tuple[list[dict], list[dict]]:
    """`headwater run CONFIG` on the cluster: once the snapshot is in the jsonl sink at `out`,
    `changes()`, and once `changed` more events are in, SIGTERM (it stops after the batch in flight,
    with exit status 0). The events before the changes, and after."""
    checkpoint = Path(yaml.safe_load(config.read_text())["spark"]["checkpoint"])
    log = config.with_name("run.log")
    proc = start_cli("run", str(config), log=log)
    try:
        wait_until(lambda: committed_batches(checkpoint) >= 1 and snapshot_done(read_sink(out)), 900, every=0.5)
        first = len(read_sink(out))
        changes()
        wait_until(lambda: len(read_sink(out)) >= first + changed, 300, every=0.5)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=180) == 0, log.read_text()
    finally:
        kill_group(proc)
    events = read_sink(out)
    return events[:first], events[first:]


def executor_logs(cluster: SparkCluster) -> set[Path]:
    """The standard error files of the executors the workers have run, of every application."""
    assert cluster.root is not None
    return set((cluster.root / "work").rglob("stderr"))


def test_snapshot_and_stream_on_a_standalone_cluster(cluster, pg_server, pg_db, tmp_path):
    pg_server.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, price numeric(8,2)); "
                      f"INSERT INTO items SELECT g, 'item ' || g, g / 10.0 FROM generate_series(1, {ROWS}) g", pg_db)
    config = write_config(tmp_path, pg_server, pg_db, name="cluster", source={"headwater.snapshot.chunk.rows": CHUNK},
                          spark={"master": cluster.url, "conf": EXECUTORS})
    earlier = executor_logs(cluster)
    out = tmp_path / "out"
    snapshot, streamed = run_until(
        config, out, lambda events: len(events) >= ROWS,
        lambda: pg_server.execute(
            f"UPDATE items SET price = price + 1 WHERE id <= 100; DELETE FROM items WHERE id > {ROWS - 10}; "
            f"INSERT INTO items SELECT g, 'new ' || g, 1 FROM generate_series({ROWS + 1}, {ROWS + 50}) g", pg_db),
        170)
    assert sorted(e["key"]["id"] for e in snapshot) == list(range(1, ROWS + 1))
    assert len(list(out.glob("batch-000000000000-*.jsonl"))) > 1  # the snapshot was read as several partitions
    markers = [e["value"]["source"]["snapshot"] for e in snapshot]
    assert markers[0] == "first" and markers[-1] == "last" and set(markers[1:-1]) == {"true"}
    ops = [e["value"]["op"] if e["value"] else "tombstone" for e in streamed]
    assert ops.count("u") == 100 and ops.count("d") == 10 and ops.count("tombstone") == 10
    assert ops.count("c") == 50 and len(ops) == 170
    assert executor_logs(cluster) - earlier  # the workers really ran tasks, for this run


def test_snapshot_and_stream_mariadb_on_a_standalone_cluster(cluster, mariadb_server, mariadb_db, tmp_path):
    server, db = mariadb_server, mariadb_db
    server.execute("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, price DECIMAL(8,2));"
                   f"INSERT INTO items SELECT seq, CONCAT('item ', seq), seq / 10 FROM seq_1_to_{ROWS}", db)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "name": "cluster",
        "source": {"connector.class": "mariadb", **server.connector_properties(db), "database.server.id": "5431",
                   "topic.prefix": "h", "headwater.snapshot.chunk.rows": CHUNK},
        "sink": {"type": "jsonl", "path": str(tmp_path / "out")},
        "spark": {"master": cluster.url, "checkpoint": str(tmp_path / "ckpt"),
                  "conf": {**EXECUTORS, "spark.executorEnv.PYTHONPATH": with_site_dir(os.environ.get("PYTHONPATH"))}}}))
    earlier = executor_logs(cluster)
    out = tmp_path / "out"

    def rows_read(events: list[dict]) -> list[dict]:
        return [e for e in events if e["value"] is not None and e["value"].get("op") == "r"]

    before, streamed = run_until(
        config, out, lambda events: len(rows_read(events)) >= ROWS,
        lambda: server.execute(
            f"UPDATE items SET price = price + 1 WHERE id <= 100; DELETE FROM items WHERE id > {ROWS - 10};"
            "ALTER TABLE items ADD COLUMN stock INT NOT NULL DEFAULT 0;"
            f"INSERT INTO items SELECT seq, CONCAT('new ', seq), 1, 7 FROM seq_{ROWS + 1}_to_{ROWS + 50}", db),
        171)
    snapshot = rows_read(before)
    assert sorted(e["key"]["id"] for e in snapshot) == list(range(1, ROWS + 1))
    assert len(list(out.glob("batch-000000000000-*.jsonl"))) > 1  # several partitions
    markers = [e["value"]["source"]["snapshot"] for e in snapshot]
    assert markers[0] == "first" and markers[-1] in ("last", "last_in_data_collection")
    values = [e["value"] for e in streamed]
    ops = [v["op"] if v and "op" in v else "ddl" if v and "ddl" in v else "tombstone" for v in values]
    assert ops.count("u") == 100 and ops.count("d") == 10 and ops.count("tombstone") == 10
    assert ops.count("c") == 50 and ops.count("ddl") == 1 and len(ops) == 171
    assert all(v["after"]["stock"] == 7 for v in values if v and v.get("op") == "c")
    assert executor_logs(cluster) - earlier  # the workers really ran tasks, for this run
