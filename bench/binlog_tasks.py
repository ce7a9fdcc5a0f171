"""MariaDB streaming's task work without Spark: CPU per event of what a task worker does with binlog slices.

    .venv/bin/python -m bench.binlog_tasks [--rows 1000000] [--singles 0] [--rounds 3]

`headwater run` streams the binlog into Spark tasks that each decode a slice of raw events, encode its
events and write them to the `jsonl` sink's temporary files themselves (the source's `files` layout).
This runs that code in this process: a fresh MariaDB server (`bench.mariadb_data`'s table) gets
`--rows` rows in one transaction (or with `--singles` that many single-row transactions); the source's
reader is made with the options `headwater run` gives it (`snapshot.mode: never`, `local[2]`), its
offsets are planned until every row is covered and its binlog reader is idle, and then each partition
goes through the reader's `read()` (pickled first, as Spark sends it) into a throwaway sink directory.
It prints this process's CPU time per event for each round (the reader thread idle by then), so that
changes to the task path can be compared by CPU rather than by a noisy wall time. Run it under
`py-spy record --native` for a profile of the task path alone.
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

from bench import mariadb_data as md
from bench.headwater_contenders import MARIADB_SERVER_ID
from bench.snapshot_tasks import cpu_seconds


def stream_properties(server: Any) -> dict[str, str]:
    """The connector's properties for streaming `bench.mariadb_data`'s table from the oldest binlog."""
    return {"connector.class": "mariadb", **server.connector_properties(md.DBNAME),
            "database.server.id": MARIADB_SERVER_ID, "topic.prefix": "bench",
            "table.include.list": f"{md.DBNAME}.{md.TABLE}", "include.schema.changes": "false",
            "snapshot.mode": "never"}


def one_round(props: dict[str, str], work: Path, rows: int) -> tuple[int, float, float, int, float]:
    """(events, CPU seconds, of which the kernel's, page faults, wall seconds) of reading every partition
    that holds the `rows` rows."""
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
        while True:  # plan batches until the reader has read the whole load and stays idle
            end = reader.latestOffset(start, ReadAllAvailable())
            if end != start:
                plans.extend(reader.partitions(start, end))
                start = end
                continue
            if plans:
                time.sleep(1.0)
                if reader.latestOffset(start, ReadAllAvailable()) == start:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError("the binlog reader did not catch up")
            time.sleep(0.2)
        task = pickle.loads(pickle.dumps(reader))  # what an executor gets
        events = 0
        usage0, cpu0, wall0 = resource.getrusage(resource.RUSAGE_SELF), cpu_seconds(), time.perf_counter()
        for p in pickle.loads(pickle.dumps(plans)):
            for batch in task.read(p):
                written = batch.column(0)
                if written.null_count < len(written):  # the task's last row: its FileCommit
                    events += json.loads(written.drop_null()[0].as_py())["rows"]
        cpu, wall = cpu_seconds() - cpu0, time.perf_counter() - wall0
        usage = resource.getrusage(resource.RUSAGE_SELF)
        kernel, faults = usage.ru_stime - usage0.ru_stime, usage.ru_minflt - usage0.ru_minflt
        if events != rows:
            raise RuntimeError(f"{events} events written, {rows} rows loaded")
        return events, cpu, kernel, faults, wall
    finally:
        reader.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--singles", type=int, default=0, help="that many single-row transactions instead")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    server = md.new_server()
    try:
        if args.singles:
            md.load_singles(server, args.singles)
        else:
            md.load_rows(server, args.rows)
        rows = args.singles or args.rows
        props = stream_properties(server)
        for i in range(args.rounds):
            work = Path(tempfile.mkdtemp(prefix="binlog-tasks-"))
            try:
                events, cpu, kernel, faults, wall = one_round(props, work, rows)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            print(json.dumps({"round": i, "events": events, "cpu_s": round(cpu, 2), "user_s": round(cpu - kernel, 2), "kernel_s": round(kernel, 2), "page_faults": faults,
                              "wall_s": round(wall, 2), "cpu_us_per_event": round(cpu / max(events, 1) * 1e6, 3),
                              "max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}), flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
