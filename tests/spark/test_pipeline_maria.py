"""`headwater run` on MariaDB killed with SIGKILL again and again while writes go on loses no change and
repeats none: the jsonl sink in the end holds every committed change exactly once and replays to the table."""

from __future__ import annotations

import json
import random
import threading
import time
from typing import Any

import pymysql
import pytest
import yaml

from tests.spark_support import (
    batch_ids,
    committed_batches,
    kill_group,
    kill_in_flight,
    read_sink,
    run_once,
    start_cli,
)

Change = tuple[str, int, Any]  # (op, id, v after the change; None for a delete)


class Writer(threading.Thread):
    """Inserts, updates and deletes rows of t in small transactions until stopped; `changes` holds those
    of committed transactions (each unique: ids are never reused and every update raises v)."""

    def __init__(self, params: dict[str, Any], first_id: int):
        super().__init__(daemon=True)
        self.params = params
        self.next_id = first_id
        self.stop = threading.Event()
        self.changes: list[Change] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            conn = pymysql.connect(**self.params, autocommit=False)
            rnd = random.Random(7)
            values = {i: 0 for i in range(1, self.next_id)}
            while not self.stop.is_set():
                pending: list[Change] = []
                with conn.cursor() as cur:
                    for _ in range(rnd.randint(1, 5)):
                        op = rnd.random()
                        if op < 0.5 or len(values) < 10:
                            cur.execute("INSERT INTO t (id, v, note) VALUES (%s, 0, md5(%s))", (self.next_id, self.next_id))
                            values[self.next_id] = 0
                            pending.append(("c", self.next_id, 0))
                            self.next_id += 1
                        elif op < 0.85:
                            row = rnd.choice(list(values))
                            cur.execute("UPDATE t SET v = v + 1 WHERE id = %s", (row,))
                            values[row] += 1
                            pending.append(("u", row, values[row]))
                        else:
                            row = rnd.choice(list(values))
                            del values[row]
                            cur.execute("DELETE FROM t WHERE id = %s", (row,))
                            pending.append(("d", row, None))
                conn.commit()
                self.changes += pending
                time.sleep(0.05)  # ~50 changes a second: writes in every batch, a drain of seconds
            conn.close()
        except BaseException as e:  # reported by the test
            self.error = e


@pytest.mark.slow
@pytest.mark.parametrize("locking", ["lock-free", "minimal"])
def test_sigkill_again_and_again_loses_nothing_and_repeats_nothing(spark, mariadb_server, mariadb_db, tmp_path,
                                                                  locking):
    """The snapshot (the lock-free default in chunk batches, or Debezium's locking one) is killed before its
    first batch is committed and again after it, then the stream is killed twice while a writer runs (from
    the snapshot's end: the lock-free snapshot folds changes made during it into its records): inside a
    batch, and at a random moment after the next run has committed that batch."""
    server, db = mariadb_server, mariadb_db
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(40));"
                   "INSERT INTO t SELECT seq, 0, md5(seq) FROM seq_1_to_3000", db)
    checkpoint = tmp_path / "state" / "checkpoint"
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({
        "name": "kill",
        "source": {"connector.class": "mariadb", **server.connector_properties(db), "database.server.id": "5421",
                   "topic.prefix": "h", "headwater.snapshot.chunk.rows": "400",
                   **({} if locking == "lock-free" else {"snapshot.locking.mode": locking})},
        "sink": {"type": "jsonl", "path": str(tmp_path / "out")},
        "spark": {"master": "local[2]", "checkpoint": str(checkpoint), "trigger.interval": "1 second",
                  "maxEventsPerTrigger": 1000}}))
    log = tmp_path / "headwater.log"

    # the snapshot, killed once before its first batch is committed and once after, then allowed to finish
    proc = start_cli("run", str(config), log=log)
    _wait(lambda: (checkpoint / "offsets").exists() and any((checkpoint / "offsets").iterdir()), 300)
    time.sleep(random.uniform(0.5, 3))
    kill_group(proc)
    proc = start_cli("run", str(config), log=log)
    _wait(lambda: committed_batches(checkpoint) >= 1, 300)
    time.sleep(random.uniform(0, 1.5))
    kill_group(proc)
    proc = start_cli("run", str(config), log=log)
    _wait(lambda: _snapshot_done(checkpoint), 300)

    writer = Writer(server.connection_params(db), first_id=3001)
    writer.start()
    try:
        # a streamed batch killed in flight (planned, not committed: the next run plays it again), then,
        # once the next run has committed it, a kill at a random moment, usually inside a later batch
        replayed = kill_in_flight(proc, checkpoint)
        proc = start_cli("run", str(config), log=log)
        _wait(lambda: max(batch_ids(checkpoint, "commits")) >= replayed, 300)
        time.sleep(random.uniform(0, 3))
    finally:
        kill_group(proc)
        writer.stop.set()
        writer.join(60)
    assert writer.error is None, writer.error
    assert len(writer.changes) > 100

    run_once(spark, config)  # drain what the kills left behind: `run --once`'s query, in the shared session

    events = [e["value"] for e in read_sink(tmp_path / "out") if e["value"] is not None and "op" in e["value"]]
    batches = sorted({f.name.split("-part")[0] for f in (tmp_path / "out").glob("*.jsonl")})
    assert len(batches) > 3
    # 1. replaying the events gives exactly the table
    state: dict[int, dict] = {}
    for v in events:
        if v["op"] in ("r", "c", "u"):
            state[v["after"]["id"]] = v["after"]
        elif v["op"] == "d":
            state.pop(v["before"]["id"], None)
    rows = server.query("SELECT id, v, note FROM t ORDER BY id", db)
    assert len(state) == len(rows)
    assert all(state[int(i)] == {"id": int(i), "v": int(v), "note": note} for i, v, note in rows)
    # 2. every committed change is in the sink exactly once, and nothing else was streamed
    streamed = [(v["op"], (v["after"] or v["before"])["id"], v["after"]["v"] if v["after"] else None)
                for v in events if v["op"] in ("c", "u", "d")]
    seen: dict[Change, int] = {}
    for s in streamed:
        seen[s] = seen.get(s, 0) + 1
    duplicates = [s for s, n in seen.items() if n > 1]
    assert not duplicates, f"{len(duplicates)} changes written more than once, e.g. {duplicates[:3]}"
    assert sorted(seen, key=repr) == sorted(writer.changes, key=repr)


def _snapshot_done(checkpoint) -> bool:
    """Whether the last committed batch's offset is past the snapshot."""
    done = committed_batches(checkpoint)
    if not done:
        return False
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    offset = json.loads((checkpoint / "offsets" / str(last)).read_text().splitlines()[-1])
    return offset.get("snapshot") not in ("pending", "chunks")


def _wait(cond, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.2)
