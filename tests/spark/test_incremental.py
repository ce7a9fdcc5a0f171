"""An incremental snapshot on Spark, through the real `headwater` CLI, killed with SIGKILL in the middle.

`headwater signal` queues the execute-snapshot signal beside the checkpoint while a workload
changes the rows the snapshot reads; the run is killed (the whole process group) while chunks are
being delivered and started again. The jsonl sink then holds every row's snapshot read at most once
(a chunk replayed after the kill replaces its batch's output) and replaying every event gives the
table exactly.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from tests.connectors.postgres.test_incremental import start_workload
from tests.spark_support import cli, committed_batches, kill_group, read_sink, start_cli, write_config

pytestmark = pytest.mark.spark

ROWS = 8000


def _wait(cond, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.3)


def _reads(events: list[dict[str, Any]]) -> list[int]:
    return [e["value"]["after"]["id"] for e in events
            if e["value"] and e["value"].get("op") == "r" and e["value"]["source"]["snapshot"] == "incremental"]


def _last_offset(checkpoint: Path) -> dict[str, Any]:
    offsets = checkpoint / "offsets"
    last = max((p for p in offsets.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    text = last.read_text().splitlines()[-1]
    value = json.loads(text)
    return json.loads(value) if isinstance(value, str) else value


def assert_once_and_replays_to(events: list[dict[str, Any]], table: dict[int, Any]) -> None:
    """No row of `items` read twice by the incremental snapshot, and every event of `items` replayed in order
    gives `table` (its rows by id)."""
    reads = _reads(events)
    assert len(reads) == len(set(reads)), "a row read twice"
    state: dict[int, Any] = {}
    for e in events:
        v = e["value"]
        if not v or not e["topic"].endswith(".items"):
            continue
        if v["op"] == "d":
            state.pop(v["before"]["id"], None)
        else:
            state[v["after"]["id"]] = v["after"]
    assert state == table


def test_sigkill_mid_snapshot_resumes_exactly_once(pg_server, tmp_path):
    db = "inctest"
    pg_server.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    pg_server.create_database(db)
    try:
        pg_server.execute("CREATE TABLE dbz_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
                          "data varchar(2048)); CREATE TABLE done (id int PRIMARY KEY); "
                          "CREATE TABLE items (id int PRIMARY KEY, v int NOT NULL, color text); "
                          f"INSERT INTO items SELECT g, g, 'red' FROM generate_series(1, {ROWS}) g", db)
        config = write_config(tmp_path, pg_server, db, name="inc",
                              source={"snapshot.mode": "no_data", "signal.data.collection": "public.dbz_signal",
                                      "incremental.snapshot.chunk.size": 500, "signal.poll.interval.ms": 200,
                                      # windows of 1,000 rows: several batches, each read in parts
                                      "headwater.incremental.snapshot.batch.rows": 1000},
                              spark={"trigger.interval": "1 second"})
        checkpoint = tmp_path / "state" / "checkpoint"
        log = tmp_path / "headwater.log"
        proc = start_cli("run", str(config), log=log)
        _wait(lambda: committed_batches(checkpoint) >= 1, 300)
        worker, stop = start_workload(pg_server, db, ROWS)
        cli("signal", str(config), "execute-snapshot", "--data", '{"data-collections": ["public.items"]}')
        _wait(lambda: len(_reads(read_sink(tmp_path / "out"))) >= 2000, 300)
        kill_group(proc)
        assert len(_reads(read_sink(tmp_path / "out"))) < ROWS
        status = cli("status", str(config)).stdout
        assert "incremental_snapshot: running" in status and "incremental_snapshot_tables_left: public.items" in status
        proc = start_cli("run", str(config), log=log)
        _wait(lambda: "incremental_snapshot_collections" not in _last_offset(checkpoint), 600)
        stop.set()
        worker.join(60)
        pg_server.execute("INSERT INTO done VALUES (1)", db)
        _wait(lambda: any(e["topic"].endswith(".done") for e in read_sink(tmp_path / "out")), 300)
        kill_group(proc)
        assert_once_and_replays_to(read_sink(tmp_path / "out"), {r[0]: {"id": r[0], "v": r[1], "color": r[2]}
                                                                for r in pg_server.query("SELECT id, v, color FROM items", db)})
    finally:
        pg_server.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                          f"WHERE database = '{db}'")
        pg_server.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
