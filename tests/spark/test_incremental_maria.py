"""An incremental snapshot on Spark on MariaDB, through the real `headwater` CLI, killed with SIGKILL mid-way.

As `test_incremental.py` does on PostgreSQL: after the initial (lock-free) snapshot, `headwater signal`
queues the execute-snapshot beside the checkpoint while a workload changes the rows the snapshot reads;
the run is killed (the whole process group) while chunks are being delivered and started again. The
jsonl sink then holds every row's incremental read at most once (a chunk replayed after the kill
replaces its batch's output) and replaying every event gives the table exactly.
"""

from __future__ import annotations

import pytest
import yaml

from tests.connectors.mariadb.test_incremental import start_workload, table_state
from tests.spark.test_incremental import _last_offset, _reads, _wait, assert_once_and_replays_to
from tests.spark_support import cli, committed_batches, kill_group, read_sink, start_cli

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROWS = 6000


def test_sigkill_mid_snapshot_resumes_exactly_once(mariadb_server, mariadb_db, tmp_path):
    server, db = mariadb_server, mariadb_db
    server.execute("CREATE TABLE dbz_signal (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
                   "data VARCHAR(2048)); CREATE TABLE done (id INT PRIMARY KEY); "
                   "CREATE TABLE items (id INT PRIMARY KEY, v INT NOT NULL, color VARCHAR(16)); "
                   f"INSERT INTO items SELECT seq, seq, 'red' FROM seq_1_to_{ROWS}", db)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "name": "inc",
        "source": {"connector.class": "mariadb", **server.connector_properties(db), "database.server.id": "5431",
                   "topic.prefix": "m", "include.schema.changes": "false",
                   "signal.data.collection": f"{db}.dbz_signal", "incremental.snapshot.chunk.size": 500,
                   "headwater.incremental.snapshot.batch.rows": 1000, "signal.poll.interval.ms": 200},
        "sink": {"type": "jsonl", "path": str(tmp_path / "out")},
        "spark": {"master": "local[2]", "checkpoint": str(tmp_path / "state" / "checkpoint"),
                  "trigger.interval": "1 second"}}))
    checkpoint = tmp_path / "state" / "checkpoint"
    log = tmp_path / "headwater.log"
    proc = start_cli("run", str(config), log=log)
    _wait(lambda: committed_batches(checkpoint) >= 2, 300)
    worker, stop = start_workload(server, db, ROWS)
    try:
        cli("signal", str(config), "execute-snapshot", "--data", f'{{"data-collections": ["{db}.items"]}}')
        _wait(lambda: len(_reads(read_sink(tmp_path / "out"))) >= 2000, 300)
        kill_group(proc)
        assert len(_reads(read_sink(tmp_path / "out"))) < ROWS
        status = cli("status", str(config)).stdout
        assert "incremental_snapshot: running" in status and f"incremental_snapshot_tables_left: {db}.items" in status
        proc = start_cli("run", str(config), log=log)
        _wait(lambda: "incremental_snapshot_collections" not in _last_offset(checkpoint), 600)
    finally:
        stop.set()
        worker.join(60)
    server.execute("INSERT INTO done VALUES (1)", db)
    _wait(lambda: any(e["topic"].endswith(".done") for e in read_sink(tmp_path / "out")), 300)
    kill_group(proc)
    assert_once_and_replays_to(read_sink(tmp_path / "out"), table_state(server, db))
