"""The snapshot's task work without Spark: CPU per event of what a task worker does.

    .venv/bin/python -m bench.snapshot_tasks [--rows 1000000] [--rounds 3] [--mariadb]

A `headwater run` snapshot's Spark tasks each read a chunk (`COPY`), encode its events column-wise
and write them to the `jsonl` sink's temporary files themselves (the source's `files` layout). This
runs exactly that code in this process, one partition after the other: the source's reader is made
with the options `headwater run` gives it (`spark.pipeline.source_options`, `local[2]`'s
parallelism), plans the snapshot on a fresh slot, and each partition goes through the reader's
`read()` (pickled first, as Spark sends it) into a throwaway sink directory. It prints this process's
CPU time per event for each round (the COPY thread included; PostgreSQL's own CPU not), so that
changes to the task path can be compared by CPU rather than by a noisy wall time. It starts a server
and loads `--rows` rows.
Run it under `py-spy record --native` for a profile of the task path alone.

With `--mariadb` it does the same for MariaDB's default (lock-free) snapshot of `bench.mariadb_data`'s
table on a fresh server: the reader's offsets are planned until the snapshot's every chunk is planned (on
the driver's side, not timed), then each partition (pickled, as Spark sends it) goes through `read()` as
above, timed: as on Spark, that is where a lock-free chunk is read (its SELECT, the text rows' packet
walk, the binlog window merged into it) and encoded.
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from pyspark.sql.streaming.datasource import ReadAllAvailable

from bench import data
from bench import mariadb_data as md
from headwater.devservers.postgres import PostgresServer


def cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def snapshot_properties(server: PostgresServer) -> dict[str, str]:
    """The connector's properties for a snapshot of `bench.data`'s table on `server` (no slot name yet)."""
    return {"connector.class": "postgres", **server.connector_properties(data.DBNAME), "topic.prefix": "bench",
            "table.include.list": f"public.{data.TABLE}", "publication.name": data.PUBLICATION,
            "publication.autocreate.mode": "disabled", "snapshot.mode": "initial"}


def one_round(props: dict[str, str], work: Path, slot: str) -> tuple[int, float, float]:
    """(events, CPU seconds, wall seconds) of reading every partition of one snapshot."""
    from headwater.pipeline_config import parse_config
    from headwater.spark.pipeline import source_options
    from headwater.spark.source import HeadwaterStreamReader

    cfg = parse_config({"name": "bench", "source": {**props, "slot.name": slot},
                        "sink": {"type": "jsonl", "path": str(work / "sink")},
                        "spark": {"master": "local[2]", "checkpoint": str(work / "checkpoint")}})
    reader = HeadwaterStreamReader(source_options(cfg, 2, str(work / "checkpoint")))
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        partitions = reader.partitions(start, end)
        task = pickle.loads(pickle.dumps(reader))  # what an executor gets
        events = 0
        cpu0, wall0 = cpu_seconds(), time.perf_counter()
        for p in pickle.loads(pickle.dumps(partitions)):
            for batch in task.read(p):
                written = batch.column(0)
                if written.null_count < len(written):  # the task's last row: its FileCommit
                    events += json.loads(written.drop_null()[0].as_py())["rows"]
        return events, cpu_seconds() - cpu0, time.perf_counter() - wall0
    finally:
        reader.stop()


def mariadb_properties(server: Any) -> dict[str, str]:
    """The connector's properties for the default snapshot of `bench.mariadb_data`'s table."""
    from bench.headwater_contenders import MARIADB_SERVER_ID

    return {"connector.class": "mariadb", **server.connector_properties(md.DBNAME),
            "database.server.id": MARIADB_SERVER_ID, "topic.prefix": "bench",
            "table.include.list": f"{md.DBNAME}.{md.TABLE}", "include.schema.changes": "false",
            "snapshot.mode": "initial"}


def mariadb_round(props: dict[str, str], work: Path, rows: int) -> tuple[int, float, float, float]:
    """(events, CPU seconds, of which the kernel's, wall seconds) of reading every partition of one MariaDB
    snapshot."""
    from headwater.pipeline_config import parse_config
    from headwater.spark.pipeline import source_options
    from headwater.spark.source import HeadwaterStreamReader

    cfg = parse_config({"name": "bench", "source": props,
                        "sink": {"type": "jsonl", "path": str(work / "sink")},
                        "spark": {"master": "local[2]", "checkpoint": str(work / "checkpoint")}})
    reader = HeadwaterStreamReader(source_options(cfg, 2, str(work / "checkpoint")))
    try:
        start = reader.initialOffset()
        plans: list[Any] = []
        deadline = time.monotonic() + 600
        quiet = 0
        while quiet < 3:  # plan batches until the snapshot is read and nothing more comes
            end = reader.latestOffset(start, ReadAllAvailable())
            if end != start:
                plans.extend(reader.partitions(start, end))
                start, quiet = end, 0
                continue
            quiet += 1
            if time.monotonic() > deadline:
                raise TimeoutError("the snapshot was not planned in time")
            time.sleep(0.3)
        task = pickle.loads(pickle.dumps(reader))  # what an executor gets
        pickled = pickle.dumps(plans)
        reader.stop()  # its threads (the binlog reader's, past the snapshot) are the driver's: not timed
        events = 0
        kernel0, cpu0, wall0 = resource.getrusage(resource.RUSAGE_SELF).ru_stime, cpu_seconds(), time.perf_counter()
        for p in pickle.loads(pickled):
            for batch in task.read(p):
                written = batch.column(0)
                if written.null_count < len(written):  # the task's last row: its FileCommit
                    events += json.loads(written.drop_null()[0].as_py())["rows"]
        cpu, wall = cpu_seconds() - cpu0, time.perf_counter() - wall0
        kernel = resource.getrusage(resource.RUSAGE_SELF).ru_stime - kernel0
        if events != rows:
            raise RuntimeError(f"{events} events written, {rows} rows loaded")
        return events, cpu, kernel, wall
    finally:
        reader.stop()  # (again, after a failure: stopping twice is harmless)


def main_mariadb(args: argparse.Namespace) -> int:
    server = md.new_server(**{"innodb-buffer-pool-size": "2G"})
    try:
        md.load_rows(server, args.rows)
        server.execute(f"ANALYZE TABLE {md.TABLE}", md.DBNAME)
        props = mariadb_properties(server)
        for i in range(args.rounds):
            work = Path(tempfile.mkdtemp(prefix="snapshot-tasks-"))
            try:
                events, cpu, kernel, wall = mariadb_round(props, work, args.rows)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            print(json.dumps({"round": i, "events": events, "cpu_s": round(cpu, 2), "user_s": round(cpu - kernel, 2),
                              "kernel_s": round(kernel, 2), "wall_s": round(wall, 2),
                              "cpu_us_per_event": round(cpu / max(events, 1) * 1e6, 3),
                              "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}), flush=True)
    finally:
        server.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--mariadb", action="store_true", help="MariaDB's lock-free snapshot instead of PostgreSQL's")
    args = ap.parse_args(argv)
    if args.mariadb:
        return main_mariadb(args)
    server = data.new_server()
    data.load_snapshot_table(server, args.rows)
    props = snapshot_properties(server)
    try:
        for i in range(args.rounds):
            work = Path(tempfile.mkdtemp(prefix="snapshot-tasks-"))
            try:
                events, cpu, wall = one_round(props, work, f"tasks_{i}_{int(time.time())}")
            finally:
                shutil.rmtree(work, ignore_errors=True)
            print(json.dumps({"round": i, "events": events, "cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
                              "cpu_us_per_event": round(cpu / max(events, 1) * 1e6, 3)}), flush=True)
    finally:
        for s in data.slots(server):
            data.drop_slot(server, s)
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
