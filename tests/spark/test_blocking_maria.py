"""A blocking ad-hoc snapshot on Spark on MariaDB, read in batches of chunks (their rows shipped with the
chunks, read on the driver two batches at most): its records in key order with Debezium's markers, spread
over several Spark batches, then streaming where it paused; and `headwater run` killed with SIGKILL in the
middle of one, losing and doubling nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pymysql
import pytest
import yaml

from tests.spark.test_incremental import _last_offset
from tests.spark_support import batch_ids, kill_group, read_sink, run_once, start_cli, wait_until

pytestmark = pytest.mark.spark

ROWS = 300


def _setup(server: Any, db: str, tmp_path: Path, rows: int, name: str, server_id: str, source: dict[str, Any],
           spark: dict[str, Any]) -> tuple[Path, Path]:
    """A signalling table and `items` of `rows` rows in `db`, and the config of a `no_data` pipeline reading
    them in chunks of 25 rows (with `source` and `spark` added): the config's path and the checkpoint's."""
    server.execute("CREATE TABLE dbz_signal (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                   "data VARCHAR(2048)); CREATE TABLE items (id INT PRIMARY KEY, v INT NOT NULL);"
                   f"INSERT INTO items SELECT seq, seq FROM seq_1_to_{rows}", db)
    config = tmp_path / "config.yaml"
    checkpoint = tmp_path / "state" / "checkpoint"
    config.write_text(yaml.safe_dump({
        "name": name,
        "source": {"connector.class": "mariadb", **server.connector_properties(db), "database.server.id": server_id,
                   "topic.prefix": "m", "include.schema.changes": "false", "snapshot.mode": "no_data",
                   "signal.data.collection": f"{db}.dbz_signal", "headwater.snapshot.chunk.rows": "25", **source},
        "sink": {"type": "jsonl", "path": str(tmp_path / "out")},
        "spark": {"master": "local[2]", "checkpoint": str(checkpoint), **spark}}))
    return config, checkpoint


def test_a_blocking_snapshot_spans_spark_batches(spark, mariadb_server, mariadb_db, tmp_path):
    server, db = mariadb_server, mariadb_db
    config, checkpoint = _setup(server, db, tmp_path, ROWS, "blocking", "5491",
                                {"headwater.max.batch.events": "100"}, {})  # batches of four chunks: three
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


def _offset(checkpoint: Path, n: int) -> dict[str, Any]:
    offset = json.loads((checkpoint / "offsets" / str(n)).read_text().splitlines()[-1])
    return json.loads(offset) if isinstance(offset, str) else offset


def _blocking_in_flight(checkpoint: Path) -> bool:
    """A batch of the blocking snapshot after its first is planned (its offset written) and not committed."""
    planned, committed = batch_ids(checkpoint, "offsets"), batch_ids(checkpoint, "commits")
    if not planned or planned[-1] <= max(committed, default=-1):
        return False
    try:
        blocking = _offset(checkpoint, planned[-1]).get("blocking_snapshot")
    except (OSError, ValueError, IndexError):  # (being written)
        return False
    if not blocking and planned[-1] - 1 in committed and _offset(checkpoint, planned[-1] - 1).get(
            "blocking_snapshot"):
        raise AssertionError("the blocking snapshot ended before a batch of it could be killed in flight")
    return blocking is not None and blocking["chunk_range"][0] >= 2


def test_sigkill_inside_a_blocking_snapshot_loses_nothing_and_doubles_nothing(spark, mariadb_server, mariadb_db,
                                                                              tmp_path):
    """`headwater run` killed with SIGKILL while a batch of a blocking snapshot after its first is in flight;
    the next run plays that batch again (its key ranges read in a new transaction) and goes on after it: the
    sink holds every row of the snapshot once, in key order, with Debezium's markers, and the changes
    streamed before the signal and made after the kill once each (those after the kill, after the
    snapshot)."""
    server, db, rows = mariadb_server, mariadb_db, 400
    config, checkpoint = _setup(server, db, tmp_path, rows, "blocking-kill", "5492", {},
                                {"maxEventsPerTrigger": 50})  # 2 chunks a batch
    run_once(spark, config)  # the schema snapshot: streaming starts here
    server.execute("INSERT INTO items VALUES (1001, 1)", db)
    conn = pymysql.connect(**server.connection_params(db), autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO dbz_signal VALUES ('b1', 'execute-snapshot', %s)",
                        (json.dumps({"data-collections": [f"{db}.items"], "type": "blocking"}),))
    finally:
        conn.close()
    proc = start_cli("run", str(config), log=tmp_path / "headwater.log")
    try:
        wait_until(lambda: _blocking_in_flight(checkpoint), 120, every=0.01)
    finally:
        kill_group(proc)
    killed = _offset(checkpoint, batch_ids(checkpoint, "offsets")[-1])["blocking_snapshot"]
    server.execute("INSERT INTO items VALUES (0, 0); UPDATE items SET v = -5 WHERE id = 5; "
                   "DELETE FROM items WHERE id = 7", db)
    run_once(spark, config)

    events = [e["value"] for e in read_sink(tmp_path / "out") if e["value"] and e["topic"] == f"m.{db}.items"]
    reads = [v for v in events if v["op"] == "r"]
    assert [r["after"]["id"] for r in reads] == [*range(1, rows + 1), 1001]  # once each
    assert [r["source"]["snapshot"] for r in reads] == ["first"] + ["true"] * (rows - 1) + ["last"]
    changes = [(i, v["op"], (v["after"] or v["before"])["id"]) for i, v in enumerate(events) if v["op"] != "r"]
    first, last = events.index(reads[0]), events.index(reads[-1])
    assert [(op, k) for _, op, k in changes] == [("c", 1001), ("c", 0), ("u", 5), ("d", 7)]
    assert changes[0][0] < first and all(i > last for i, _, _ in changes[1:])
    assert killed["chunk_range"][0] >= 2 and "blocking_snapshot" not in _last_offset(checkpoint)
