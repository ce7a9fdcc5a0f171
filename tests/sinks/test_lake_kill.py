"""The `delta` and `iceberg` sinks through `headwater run` killed with SIGKILL twice while
writes go on (local Spark, real PostgreSQL): afterwards a Delta change log holds every change exactly
once, and an Iceberg mirror equals the source table row for row (read with Polars and pyiceberg)."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import polars as pl
import psycopg2
import pytest
import yaml

from headwater.sinks.iceberg import open_catalog
from headwater.sinks.lake_config import IcebergOptions
from tests.spark_support import (
    batch_ids,
    committed_batches,
    kill_group,
    kill_in_flight,
    run_once,
    start_cli,
    write_config,
)

pytestmark = [pytest.mark.spark, pytest.mark.slow]


class Writer(threading.Thread):
    """Inserts, updates, deletes and re-keys rows of public.w in small transactions until stopped."""

    def __init__(self, dsn: str):
        super().__init__(daemon=True)
        self.dsn = dsn
        self.stop = threading.Event()
        self.ops = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            conn = psycopg2.connect(self.dsn)
            rnd = random.Random(11)
            live, next_id = list(range(1, 2001)), 2001
            while not self.stop.is_set():
                with conn, conn.cursor() as cur:
                    for _ in range(rnd.randint(1, 5)):
                        op = rnd.random()
                        if op < 0.4 or len(live) < 10:
                            cur.execute("INSERT INTO w VALUES (%s, 0, md5(%s::text))", (next_id, next_id))
                            live.append(next_id)
                            next_id += 1
                        elif op < 0.8:
                            cur.execute("UPDATE w SET v = v + 1 WHERE id = %s", (rnd.choice(live),))
                        elif op < 0.9:
                            old = live.pop(rnd.randrange(len(live)))
                            cur.execute("UPDATE w SET id = %s WHERE id = %s", (next_id, old))
                            live.append(next_id)
                            next_id += 1
                        else:
                            cur.execute("DELETE FROM w WHERE id = %s", (live.pop(rnd.randrange(len(live))),))
                        self.ops += 1
                time.sleep(0.02)
            conn.close()
        except BaseException as exc:  # reported by the test
            self.error = exc


def _wait(cond, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.2)


def _run_and_kill(spark, pg_server, pg_db: str, tmp_path: Path, sink: dict) -> Writer:
    """`headwater run` over public.w, killed twice while a writer runs (inside a batch, then at a random
    moment after the next run has committed that batch), then drained by `run --once`'s query in the
    tests' shared Spark session (from the checkpoint the last kill left)."""
    pg_server.execute("CREATE TABLE w (id int PRIMARY KEY, v int NOT NULL, note text); "
                      "INSERT INTO w SELECT g, 0, md5(g::text) FROM generate_series(1, 2000) g", pg_db)
    config = write_config(tmp_path, pg_server, pg_db, source={"table.include.list": "public.w"}, name="kill",
                          spark={"trigger.interval": "1 second", "maxEventsPerTrigger": 300})
    cfg = yaml.safe_load(config.read_text())
    cfg["sink"] = sink
    config.write_text(yaml.safe_dump(cfg))
    checkpoint = tmp_path / "state" / "checkpoint"
    log = tmp_path / "headwater.log"
    proc = start_cli("run", str(config), log=log)
    writer = Writer(pg_server.dsn(pg_db))
    try:
        _wait(lambda: committed_batches(checkpoint) >= 1, 300)  # the snapshot
        writer.start()
        # a streamed batch killed in flight (planned, not committed: the next run plays it again), then,
        # once the next run has committed it, a kill at a random moment, usually inside a later batch
        replayed = kill_in_flight(proc, checkpoint)
        proc = start_cli("run", str(config), log=log)
        _wait(lambda: max(batch_ids(checkpoint, "commits")) >= replayed, 300)
        time.sleep(random.uniform(0, 2))
    finally:
        kill_group(proc)
        writer.stop.set()
        writer.join(60)
    assert writer.error is None, writer.error
    assert writer.ops > 100
    run_once(spark, config)
    return writer


def _source(pg_server, pg_db: str) -> list[dict]:
    return [{"id": i, "v": v, "note": n} for i, v, n in pg_server.query("SELECT id, v, note FROM w ORDER BY id", pg_db)]


def test_delta_changelog_holds_every_change_once(spark, pg_server, pg_db, tmp_path):
    root = tmp_path / "lake"
    _run_and_kill(spark, pg_server, pg_db, tmp_path, {"type": "delta", "path": str(root), "mode": "changelog",
                                               "table.name.format": "${source.table}"})
    log = pl.read_delta(str(root / "w")).sort("_batch_id", "_batch_order")
    changes = Counter(zip(log["_commit_version"], log["_op"], log["id"], log["v"], strict=True))
    repeated = [c for c, n in changes.items() if n > 1]
    assert not repeated, f"{len(repeated)} changes written more than once, e.g. {repeated[:3]}"
    # replaying the log gives the table
    state: dict[int, dict] = {}
    for row in log.iter_rows(named=True):
        if row["_op"] == "d":
            state.pop(row["id"], None)
        else:
            state[row["id"]] = {"id": row["id"], "v": row["v"], "note": row["note"]}
    assert sorted(state.values(), key=lambda r: r["id"]) == _source(pg_server, pg_db)


def test_iceberg_mirror_equals_the_source(spark, pg_server, pg_db, tmp_path):
    warehouse = str(tmp_path / "warehouse")
    _run_and_kill(spark, pg_server, pg_db, tmp_path, {"type": "iceberg", "catalog.warehouse": warehouse, "mirror": True})
    table = open_catalog(IcebergOptions(warehouse)).load_table("golden_public.w")
    assert sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == _source(pg_server, pg_db)
