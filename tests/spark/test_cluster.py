"""The same pipeline, unchanged, on a Spark standalone cluster: a master and two workers.

The snapshot's chunks and the stream's slices run as tasks on the workers' executors; the
replication connection stays in the driver. The events must be the same as on local Spark.
"""

from __future__ import annotations

import pytest

from headwater.devservers.spark_cluster import SparkCluster
from tests.spark_support import cli, read_sink, write_config

pytestmark = [pytest.mark.spark, pytest.mark.cluster]


def test_snapshot_and_stream_on_a_standalone_cluster(pg_server, pg_db, tmp_path):
    pg_server.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, price numeric(8,2)); "
                      "INSERT INTO items SELECT g, 'item ' || g, g / 10.0 FROM generate_series(1, 30000) g", pg_db)
    with SparkCluster(workers=2) as cluster:
        config = write_config(tmp_path, pg_server, pg_db, name="cluster",
                              source={"headwater.snapshot.chunk.rows": "5000"},
                              spark={"master": cluster.url, "conf": {"spark.executor.memory": "512m",
                                                                     "spark.cores.max": "2"}})
        cli("run", str(config), "--once", timeout=900)
        snapshot = read_sink(tmp_path / "out")
        assert len(snapshot) == 30000
        assert sorted(e["key"]["id"] for e in snapshot) == list(range(1, 30001))
        files = list((tmp_path / "out").glob("batch-000000000000-*.jsonl"))
        assert len(files) > 1  # the snapshot was read as several partitions
        markers = [e["value"]["source"]["snapshot"] for e in snapshot]
        assert markers[0] == "first" and markers[-1] == "last" and set(markers[1:-1]) == {"true"}

        pg_server.execute("UPDATE items SET price = price + 1 WHERE id <= 100; DELETE FROM items WHERE id > 29990; "
                          "INSERT INTO items SELECT g, 'new ' || g, 1 FROM generate_series(30001, 30050) g", pg_db)
        cli("run", str(config), "--once", timeout=900)
        events = read_sink(tmp_path / "out")[30000:]
        ops = [e["value"]["op"] if e["value"] else "tombstone" for e in events]
        assert ops.count("u") == 100 and ops.count("d") == 10 and ops.count("tombstone") == 10
        assert ops.count("c") == 50
        # the workers really ran tasks
        assert cluster.root is not None
        assert any((cluster.root / "work").rglob("stderr"))
