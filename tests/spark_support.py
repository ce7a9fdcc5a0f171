"""Helpers for pipeline tests: write a configuration, run the real `headwater` CLI or a configuration's
query in the tests' shared Spark session, read the jsonl sink."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml


def write_config(tmp: Path, pg_server, dbname: str, source: dict[str, Any] | None = None,
                 sink: dict[str, Any] | None = None, spark: dict[str, Any] | None = None,
                 name: str = "test") -> Path:
    cfg = {
        "name": name,
        "source": {"connector.class": "postgres", **pg_server.connector_properties(dbname),
                   "topic.prefix": "golden", "slot.name": f"{name}_slot", **(source or {})},
        "sink": {"type": "jsonl", "path": str(tmp / "out"), **(sink or {})},
        "spark": {"master": "local[2]", "checkpoint": str(tmp / "state" / "checkpoint"), **(spark or {})},
    }
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def cli(*args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "headwater.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    if check and proc.returncode != 0:
        raise AssertionError(f"headwater {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}")
    return proc


def run_once(spark, config: Path, timeout: float = 600) -> list[dict[str, Any]]:
    """What `headwater run CONFIG --once` does once Spark is up, in this process's Spark session (the
    `spark` fixture): the configuration's query, with the source, sink and checkpoint the file names,
    until it has processed what the source holds now; its error raised, else its batches' progress. For
    tests of a pipeline, not of the command line (which starts a JVM of its own each time, ~8 s)."""
    from headwater.pipeline_config import load_config
    from headwater.spark.pipeline import query_observer, start_query

    cfg = load_config(str(config))
    # the shared session cannot take a master or Spark options of the file's own
    assert cfg.spark.master == "local[2]" and not cfg.spark.conf, "run such a configuration with `cli`"
    query = start_query(spark, cfg, once=True)
    observed = query_observer(query)
    try:
        finished = query.awaitTermination(timeout)
        if finished and observed is not None:  # the metrics file counts the last batch, as `headwater run`'s
            observed.wait_counted()
    finally:
        query.stop()
        if observed is not None:  # its listener leaves the shared session, as it leaves `headwater run`'s
            observed.close()
    assert finished, f"the query of {config} did not finish in {timeout} s"
    _wait_for_the_slot_to_be_released(cfg)
    error = query.exception()
    if error is not None:
        raise error
    return query.recentProgress


def _wait_for_the_slot_to_be_released(cfg) -> None:
    """A stopped query's source process lets go of its PostgreSQL replication connection a moment
    later (a `headwater` process has let go when it exits): wait for that, as a test goes on to drop
    the slot or the database."""
    if cfg.source.connector != "postgres":
        return
    import psycopg2

    conn = psycopg2.connect(host=cfg.source["database.hostname"], port=cfg.source["database.port"],
                            user=cfg.source["database.user"], password=cfg.source["database.password"],
                            dbname=cfg.source["database.dbname"])
    conn.autocommit = True
    try:
        deadline = time.monotonic() + 60
        while True:
            with conn.cursor() as cur:
                cur.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (cfg.source["slot.name"],))
                row = cur.fetchone()
            if row is None or not row[0]:
                return
            assert time.monotonic() < deadline, f"the replication slot {cfg.source['slot.name']} is still in use"
            time.sleep(0.05)
    finally:
        conn.close()


def start_cli(*args: str, log: Path) -> subprocess.Popen:
    """`headwater ...` in its own process group (so a test can kill the whole group)."""
    out = open(log, "ab")  # noqa: SIM115 - the child writes to it for its whole life
    return subprocess.Popen([sys.executable, "-m", "headwater.cli.main", *args], stdout=out, stderr=out,
                            start_new_session=True, env={**os.environ, "PYSPARK_PYTHON": sys.executable})


def kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


def read_sink(path: Path) -> list[dict[str, Any]]:
    """Every event in a jsonl sink directory, in order (file names sort in event order)."""
    events: list[dict[str, Any]] = []
    for f in sorted(path.glob("*.jsonl")):
        with open(f) as fh:
            events.extend(json.loads(line) for line in fh)
    return events


def committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.exists() else 0


def batch_ids(checkpoint: Path, log: str) -> list[int]:
    """The batch ids in one of a checkpoint's logs: `offsets` (planned) or `commits` (committed)."""
    directory = checkpoint / log
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit()) if directory.exists() else []


def wait_until(cond: Callable[[], bool], timeout: float, every: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(every)


def kill_in_flight(proc: subprocess.Popen, checkpoint: Path, timeout: float = 300) -> int:
    """SIGKILL `proc`'s process group as soon as Spark has planned a new batch (its offsets written)
    and not yet committed it: the kill falls inside a batch, before or while the sink writes it, so the
    next run plays that batch again. The batch's id."""
    before = max(batch_ids(checkpoint, "offsets"), default=-1)

    def in_flight() -> bool:
        planned = max(batch_ids(checkpoint, "offsets"), default=-1)
        return planned > before and planned > max(batch_ids(checkpoint, "commits"), default=-1)

    wait_until(in_flight, timeout)
    kill_group(proc)
    return max(batch_ids(checkpoint, "offsets"))
