"""A blocking ad-hoc snapshot on Spark on MariaDB, read in batches of chunks (their rows shipped with the
chunks, read on the driver two batches at most): its records in key order with Debezium's markers, spread
over several Spark batches, then streaming where it paused."""

from __future__ import annotations

import json

import pymysql
import pytest
import yaml

from tests.spark.test_incremental import _last_offset
from tests.spark_support import batch_ids, read_sink, run_once

pytestmark = pytest.mark.spark

ROWS = 300


def test_a_blocking_snapshot_spans_spark_batches(spark, mariadb_server, mariadb_db, tmp_path):
    server, db = mariadb_server, mariadb_db
    server.execute("CREATE TABLE dbz_signal (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                   "data VARCHAR(2048)); CREATE TABLE items (id INT PRIMARY KEY, v INT NOT NULL);"
                   f"INSERT INTO items SELECT seq, seq FROM seq_1_to_{ROWS}", db)
    config = tmp_path / "config.yaml"
    checkpoint = tmp_path / "state" / "checkpoint"
    config.write_text(yaml.safe_dump({
        "name": "blocking",
        "source": {"connector.class": "mariadb", **server.connector_properties(db), "database.server.id": "5491",
                   "topic.prefix": "m", "include.schema.changes": "false", "snapshot.mode": "no_data",
                   "signal.data.collection": f"{db}.dbz_signal", "headwater.snapshot.chunk.rows": "25",
                   "headwater.max.batch.events": "100"},  # batches of four chunks: three of them
        "sink": {"type": "jsonl", "path": str(tmp_path / "out")},
        "spark": {"master": "local[2]", "checkpoint": str(checkpoint)}}))
    run_once(spark, config)  # the schema snapshot: streaming starts here
    conn = pymysql.connect(**server.connection_params(db), autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO dbz_signal VALUES ('b1', 'execute-snapshot', %s)",
                        (json.dumps({"data-collections": [f"{db}.items"], "type": "blocking"}),))
    finally:
        conn.close()
    before = batch_ids(checkpoint, "commits")
    run_once(spark, config)
    server.execute("INSERT INTO items VALUES (1000, 1); DELETE FROM items WHERE id = 7", db)
    run_once(spark, config)
    events = [e for e in read_sink(tmp_path / "out") if e["value"] and e["topic"] == f"m.{db}.items"]
    reads = [e["value"] for e in events if e["value"]["op"] == "r"]
    assert [r["after"]["id"] for r in reads] == list(range(1, ROWS + 1))
    assert [r["source"]["snapshot"] for r in reads] == ["first"] + ["true"] * (ROWS - 2) + ["last"]
    assert [(e["value"]["op"], (e["value"]["after"] or e["value"]["before"])["id"]) for e in events
            if e["value"]["op"] != "r"] == [("c", 1000), ("d", 7)]  # streamed after the snapshot, once
    committed = [n for n in batch_ids(checkpoint, "commits") if n not in before]
    ranges = []
    for n in committed:
        offset = json.loads((checkpoint / "offsets" / str(n)).read_text().splitlines()[-1])
        offset = json.loads(offset) if isinstance(offset, str) else offset
        if offset.get("blocking_snapshot"):
            ranges.append(offset["blocking_snapshot"]["chunk_range"])
    assert ranges == [[0, 4], [4, 8], [8, 12]]
    assert "blocking_snapshot" not in _last_offset(checkpoint)
