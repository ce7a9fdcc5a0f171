"""MariaDB streaming's driver-side work without Spark: the CPU of the binlog reader thread, of planning and of
pickling the work units, for many single-row transactions.

    .venv/bin/python -m bench.stream_driver [--singles 100000] [--rounds 3]

On Spark the source runner (a Python process on the driver) runs the binlog reader thread and the shared
streaming planner, and pickles the work units it plans (the task workers unpickle them). This runs the same
code in this process: a fresh MariaDB server (`bench.mariadb_data`'s table) gets `--singles` single-row
transactions; the source's reader is made with the options `headwater run` gives it (`snapshot.mode: never`),
its binlog reader thread reads them all into the buffer (its CPU from `/proc/self/task`), then the buffer is
planned into work units (this thread's CPU), which are pickled and unpickled one by one. It also prints the
full garbage collections (generation 2) run in the process and their time (`gc.callbacks`), all threads
together. A checkout's code runs it with `PYTHONPATH=<checkout>`.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pyspark.sql.streaming.datasource import ReadAllAvailable

from bench import mariadb_data as md
from bench.binlog_tasks import stream_properties

TICKS = os.sysconf("SC_CLK_TCK")


def thread_cpu(tid: int) -> float:
    with open(f"/proc/self/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


class FullCollections:
    """Generation-2 collections and their wall time, from `gc.callbacks`."""

    def __init__(self) -> None:
        self.count, self.seconds, self._start = 0, 0.0, 0.0
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.count += 1
            self.seconds += time.perf_counter() - self._start


def one_round(props: dict[str, str], work: Path, rows: int, full: FullCollections) -> dict[str, Any]:
    from headwater.pipeline_config import parse_config
    from headwater.spark.pipeline import source_options
    from headwater.spark.source import HeadwaterStreamReader

    cfg = parse_config({"name": "bench", "source": props, "sink": {"type": "jsonl", "path": str(work / "sink")},
                        "spark": {"master": "local[2]", "checkpoint": str(work / "checkpoint")}})
    reader = HeadwaterStreamReader(source_options(cfg, 2, str(work / "checkpoint")))
    try:
        start = reader.initialOffset()
        count0, seconds0 = full.count, full.seconds
        reader.latestOffset(start, ReadAllAvailable())  # opens the source: the reader thread starts
        thread = next(t for t in threading.enumerate() if t.name == "binlog-reader")
        buf = reader.connector.planner.reader.buffer  # type: ignore[attr-defined]
        deadline = time.monotonic() + 600
        while True:
            with buf.cond:
                got = sum(t.n_data for t in buf.txns if t.complete)
            if got >= rows:
                break
            if time.monotonic() > deadline:
                raise TimeoutError("the binlog reader did not catch up")
            time.sleep(0.05)
        time.sleep(0.3)  # (the reader idle)
        assert thread.native_id is not None
        reader_cpu = thread_cpu(thread.native_id)
        cpu0 = time.thread_time()
        units: list[Any] = []
        while True:
            end = reader.latestOffset(start, ReadAllAvailable())
            if end == start:
                break
            units.extend(reader.partitions(start, end))
            start = end
            with buf.cond:
                if not buf.txns:
                    break
        plan_cpu = time.thread_time() - cpu0
        cpu0 = time.thread_time()
        blobs = [pickle.dumps(u) for u in units]
        dump_cpu = time.thread_time() - cpu0
        cpu0 = time.thread_time()
        for b in blobs:
            pickle.loads(b)
        load_cpu = time.thread_time() - cpu0
        return {"reader_cpu_s": round(reader_cpu, 3), "plan_cpu_s": round(plan_cpu, 3), "units": len(units),
                "pickle_cpu_s": round(dump_cpu, 3), "unpickle_cpu_s": round(load_cpu, 3),
                "pickled_mb": round(sum(map(len, blobs)) / 1e6, 1), "full_collections": full.count - count0,
                "full_collections_s": round(full.seconds - seconds0, 3)}
    finally:
        reader.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--singles", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    full = FullCollections()
    server = md.new_server()
    try:
        md.load_singles(server, args.singles)
        props = stream_properties(server)
        for i in range(args.rounds):
            work = Path(tempfile.mkdtemp(prefix="stream-driver-"))
            try:
                print(json.dumps({"round": i, **one_round(props, work, args.singles, full)}), flush=True)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
