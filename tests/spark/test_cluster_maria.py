"""The MariaDB pipeline, unchanged, on a Spark standalone cluster: a master and two workers.

The snapshot's chunks and the binlog slices run as tasks on the workers' executors (pickled there);
the binlog client and the schema history stay in the driver. The executors import the code the test
runs (this process's PYTHONPATH), so a worktree's code is what the workers run.
"""

from __future__ import annotations

import os

import pytest
import yaml

from headwater.devservers.spark_cluster import SparkCluster
from headwater.spark.workerpath import with_site_dir
from tests.spark_support import cli, read_sink

pytestmark = [pytest.mark.spark, pytest.mark.cluster]


def test_snapshot_and_stream_mariadb_on_a_standalone_cluster(mariadb_server, mariadb_db, tmp_path):
    server, db = mariadb_server, mariadb_db
    server.execute("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, price DECIMAL(8,2));"
                   "INSERT INTO items SELECT seq, CONCAT('item ', seq), seq / 10 FROM seq_1_to_30000", db)
    with SparkCluster(workers=2) as cluster:
        config = tmp_path / "config.yaml"
        config.write_text(yaml.safe_dump({
            "name": "cluster",
            "source": {"connector.class": "mariadb", **server.connector_properties(db), "database.server.id": "5431",
                       "topic.prefix": "h", "headwater.snapshot.chunk.rows": "5000"},
            "sink": {"type": "jsonl", "path": str(tmp_path / "out")},
            "spark": {"master": cluster.url, "checkpoint": str(tmp_path / "ckpt"),
                      "conf": {"spark.executor.memory": "512m", "spark.cores.max": "2",
                               "spark.executorEnv.PYTHONPATH": with_site_dir(os.environ.get("PYTHONPATH"))}}}))
        cli("run", str(config), "--once", timeout=900)
        first = len(read_sink(tmp_path / "out"))
        snapshot = [e for e in read_sink(tmp_path / "out") if e["value"] is not None and "op" in e["value"]]
        assert sorted(e["key"]["id"] for e in snapshot) == list(range(1, 30001))
        assert len(list((tmp_path / "out").glob("batch-000000000000-*.jsonl"))) > 1  # several partitions
        markers = [e["value"]["source"]["snapshot"] for e in snapshot]
        assert markers[0] == "first" and markers[-1] in ("last", "last_in_data_collection")

        server.execute("UPDATE items SET price = price + 1 WHERE id <= 100; DELETE FROM items WHERE id > 29990;"
                       "ALTER TABLE items ADD COLUMN stock INT NOT NULL DEFAULT 0;"
                       "INSERT INTO items SELECT seq, CONCAT('new ', seq), 1, 7 FROM seq_30001_to_30050", db)
        cli("run", str(config), "--once", timeout=900)
        events = read_sink(tmp_path / "out")[first:]
        values = [e["value"] for e in events]
        ops = [v["op"] if v and "op" in v else "ddl" if v and "ddl" in v else "tombstone" for v in values]
        assert ops.count("u") == 100 and ops.count("d") == 10 and ops.count("tombstone") == 10
        assert ops.count("c") == 50 and ops.count("ddl") == 1
        assert all(v["after"]["stock"] == 7 for v in values if v and v.get("op") == "c")
        assert cluster.root is not None
        assert any((cluster.root / "work").rglob("stderr"))  # the workers really ran tasks
