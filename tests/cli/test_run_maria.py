"""`headwater run` (Spark, jsonl sink) on MariaDB: the snapshot, then streamed changes (inserts, updates,
deletes, a key change, DDL between inserts) and DDL run while headwater was stopped, event for event equal
to the engine's output for the same changes. The schema history lives in the checkpoint without being
configured (`<checkpointLocation>/schema_history.jsonl`); streamed batches reach Spark's Python workers
pickled (a slice holding the source would not pickle). `headwater status` shows the binlog lag."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from headwater.config.errors import ConfigErrors
from headwater.connectors.registry import validate_connector
from headwater.engine import Engine, OffsetFile
from headwater.spark.source import HeadwaterStreamReader
from tests.golden_support import events_diff, normalize_binlog
from tests.spark_support import cli, committed_batches, start_cli


def properties(server, db: str, server_id: str) -> dict[str, Any]:
    return {"connector.class": "mariadb", **server.connector_properties(db), "database.server.id": server_id,
            "topic.prefix": "h"}


def run_spark(config: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "headwater.cli.main", "run", str(config), "--once"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr


def run_engine(engine: Engine) -> list[dict[str, Any]]:
    return [{"topic": e.topic, "key": e.key_json(), "value": e.value_json()} for e in engine.events(once=True)]


def spark_output(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for f in sorted(out.rglob("*.json*")) for line in f.read_text().splitlines() if line]


def test_snapshot_streaming_and_ddl_while_stopped_equal_the_engines(mariadb_server, mariadb_db, tmp_path):
    server, db = mariadb_server, mariadb_db
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10)); INSERT INTO t VALUES (1, 'x'), (2, 'y')", db)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "name": "maria", "source": properties(server, db, "5411"), "sink": {"type": "jsonl", "path": str(out)},
        "spark": {"master": "local[2]", "checkpoint": str(ckpt)}}))
    engine_offsets = OffsetFile(tmp_path / "engine" / "offsets.json")
    expected: list[dict[str, Any]] = []

    def both() -> None:
        run_spark(config)
        engine = Engine(validate_connector(properties(server, db, "5412")), engine_offsets)
        try:
            expected.extend(run_engine(engine))
        finally:
            engine.close()

    both()  # the snapshot
    assert (ckpt / "schema_history.jsonl").exists()
    assert (tmp_path / "engine" / "offsets.json.schema_history.jsonl").exists()
    server.execute("INSERT INTO t VALUES (3, 'z');"
                   "UPDATE t SET a = 'w' WHERE id = 1;"
                   "DELETE FROM t WHERE id = 2;"
                   "UPDATE t SET id = 10 WHERE id = 3;"
                   "ALTER TABLE t ADD COLUMN b INT;"
                   "INSERT INTO t VALUES (4, 'v', 40)", db)
    both()  # streamed: the slices went to Spark's workers
    # while stopped: a row in the old layout, then the column retyped and renamed, a row in the new one
    server.execute("INSERT INTO t VALUES (5, 'u', 50);"
                   "ALTER TABLE t MODIFY b VARCHAR(8), RENAME COLUMN a TO c;"
                   "INSERT INTO t VALUES (6, 's', 'sixty')", db)
    both()
    actual = spark_output(out)
    rows = [(v["op"], v["before"], v["after"]) for v in (e["value"] for e in actual) if v and "op" in v]
    assert rows[-2:] == [("c", None, {"id": 5, "a": "u", "b": 50}), ("c", None, {"id": 6, "c": "s", "b": "sixty"})]
    assert ("u", {"id": 1, "a": "x"}, {"id": 1, "a": "w"}) in rows
    assert [v["ddl"] for v in (e["value"] for e in actual) if v and "ddl" in v][-2:] == [
        "ALTER TABLE t ADD COLUMN b INT", "ALTER TABLE t MODIFY b VARCHAR(8), RENAME COLUMN a TO c"]
    message = events_diff(normalize_binlog(expected), normalize_binlog(actual))
    assert message is None, message

    # `headwater status`: the stored binlog position, nothing behind it; then a change the run has not read
    assert status(config)["lag_bytes"] == "0"
    server.execute("INSERT INTO t VALUES (7, 'r', 'seventy')", db)
    after = status(config)
    assert int(after["lag_bytes"]) > 0 and after["lag_files"] == "0" and after["phase"] == "streaming"
    assert after["stored_file"] == after["server_file"] and int(after["stored_pos"]) < int(after["server_pos"])


def test_a_text_keyed_table_chunked_without_a_lock_equals_the_engines(mariadb_server, mariadb_db, tmp_path):
    """The lock-free snapshot of a table keyed by case-insensitive text, in many chunks read on Spark's side
    (their key order, with the server's weights, pickled to the workers), then streamed changes: event for
    event the engine's output, the snapshot's rows in the collation's order."""
    server, db = mariadb_server, mariadb_db
    server.execute("CREATE TABLE tk (k VARCHAR(12) COLLATE utf8mb4_general_ci PRIMARY KEY, v INT);"
                   "INSERT INTO tk SELECT CONCAT(IF(seq % 2, 'K', 'k'), seq), seq FROM seq_1_to_300", db)
    out = tmp_path / "out"
    config = tmp_path / "run.yaml"
    chunks = {"headwater.snapshot.chunk.rows": "40", "include.schema.changes": "false"}
    config.write_text(yaml.safe_dump({
        "name": "mariatext", "source": {**properties(server, db, "5413"), **chunks},
        "sink": {"type": "jsonl", "path": str(out)}, "spark": {"master": "local[2]", "checkpoint": str(tmp_path / "c")}}))
    engine = Engine(validate_connector({**properties(server, db, "5414"), **chunks}),
                    OffsetFile(tmp_path / "engine" / "offsets.json"))
    try:
        run_spark(config)
        expected = run_engine(engine)
        server.execute("UPDATE tk SET v = -v WHERE k IN ('K1', 'k2', 'K299'); UPDATE tk SET k = 'K2' WHERE k = 'k2';"
                       "INSERT INTO tk VALUES ('a0', 0); DELETE FROM tk WHERE k = 'k300'", db)
        run_spark(config)
        expected += run_engine(engine)
    finally:
        engine.close()
    actual = spark_output(out)
    keys = [e["value"]["after"]["k"] for e in actual if e["value"] and e["value"]["op"] == "r"]
    assert len(keys) == 300 and keys == sorted(keys, key=str.lower) != sorted(keys)
    assert [e["value"]["op"] for e in actual if e["value"] and e["value"]["op"] != "r"] == ["u", "u", "u", "d", "c", "c", "d"]
    message = events_diff(normalize_binlog(expected), normalize_binlog(actual))
    assert message is None, message


def status(config: Path) -> dict[str, str]:
    lines = cli("status", str(config)).stdout.splitlines()
    return dict(line.strip().split(": ", 1) for line in lines if line.startswith("  ") and ": " in line)


def test_changes_while_running_equal_the_engines(mariadb_server, mariadb_db, tmp_path):
    """`headwater run` left running (1 s triggers) while the changes happen, in several batches."""
    server, db = mariadb_server, mariadb_db
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10)); INSERT INTO t VALUES (1, 'x'), (2, 'y')", db)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump({
        "name": "mariarun", "source": properties(server, db, "5414"), "sink": {"type": "jsonl", "path": str(out)},
        "spark": {"master": "local[2]", "checkpoint": str(ckpt), "trigger.interval": "1 second"}}))
    engine = Engine(validate_connector(properties(server, db, "5415")), OffsetFile(tmp_path / "engine.json"))
    try:
        expected = run_engine(engine)  # the snapshot, before any change
        proc = start_cli("run", str(config), log=tmp_path / "run.log")
        try:
            _wait(lambda: committed_batches(ckpt) >= 1, 300)
            for sql in ["INSERT INTO t VALUES (3, 'z'); UPDATE t SET a = 'w' WHERE id = 1",
                        "DELETE FROM t WHERE id = 2; UPDATE t SET id = 10 WHERE id = 3",
                        "INSERT INTO t VALUES (4, 'v'); ALTER TABLE t ADD COLUMN b INT; INSERT INTO t VALUES (5, 'u', 50)"]:
                server.execute(sql, db)
                done = committed_batches(ckpt)
                _wait(lambda done=done: committed_batches(ckpt) > done, 120)
            expected += run_engine(engine)
            _wait(lambda: len(spark_output(out)) >= len(expected), 120)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(180)
    finally:
        engine.close()
    actual = spark_output(out)
    assert len({f.name.split("-part")[0] for f in out.glob("*.jsonl")}) > 2  # the changes came in several batches
    message = events_diff(normalize_binlog(expected), normalize_binlog(actual))
    assert message is None, message


def _wait(cond: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.2)


def test_the_bare_spark_source_refuses_a_binlog_connector_without_a_history_file(mariadb_server):
    props = properties(mariadb_server, "any", "5413")
    reader = HeadwaterStreamReader({"headwater.properties": json.dumps(props)})
    with pytest.raises(ConfigErrors, match="headwater.schema.history.file.*checkpointLocation"):
        _ = reader.connector
    props["headwater.schema.history.file"] = "/tmp/never-written.jsonl"
    reader = HeadwaterStreamReader({"headwater.properties": json.dumps(props)})
    assert reader.connector is not None  # no server is reached before the offsets are asked for
    reader._close()
