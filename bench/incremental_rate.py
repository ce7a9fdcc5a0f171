"""An incremental snapshot's rate against the initial snapshot's, on the same table, in one Spark session.

    python -m bench.incremental_rate [--rows 1000000] [--rows 10000000] [--rounds 2] [--changes-per-second 0]
                                [--batch-rows N] [--chunk-size 1024] [--master local[2]]

For each `--rows`, a fresh PostgreSQL server gets the benchmark table (`bench.data`: ~97 bytes a row as
COPY text, vacuumed and cached); then, `--rounds` times, one after the other in one Spark session
(the real pipeline: the `headwater` source into the `jsonl` sink, as `headwater run` starts it):

- the initial snapshot (`snapshot.mode: initial_only`, a new slot): from the query's start to the last
  row committed in the sink;
- an incremental snapshot (`snapshot.mode: no_data`, a new slot, `execute-snapshot` inserted into the
  signalling table once the query runs): from the signal's insert to its COMPLETED notification
  committed in the sink (the batch after its last rows'), optionally while `--changes-per-second`
  single-row updates of random rows of the table stream (a row such an update superseded in its window
  comes as the update, not as a read: `read` counts the reads).

An event has arrived when the file holding it is committed in the sink (polled every 50 ms). Printed and
written to `bench/results/incremental_rate-<UTC time>.json`: each run's rows/s and the ratio of the best
incremental rate to the best initial rate (the machine is shared and noisy: compare ratios of one run).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench import data

RESULTS = Path(__file__).with_name("results")


def _count(sink: Path, seen: dict[str, int], needle: bytes) -> int:
    """Occurrences of `needle` in the sink's committed files (each file counted once)."""
    for f in sink.glob("*.jsonl"):
        if f.name not in seen:
            seen[f.name] = f.read_bytes().count(needle)
    return sum(seen.values())


def _until(sink: Path, needle: bytes, rows: int, query: Any, timeout: float) -> float:
    """The time the sink first holds `rows` events with `needle` (polled every 50 ms)."""
    seen: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    while True:
        now = time.time()  # the files counted next were all in place by now
        if _count(sink, seen, needle) >= rows:
            return now
        if not query.isActive:
            if _count(sink, seen, needle) >= rows:  # (it ended after its last files were counted)
                return time.time()
            raise RuntimeError(f"the query ended with {_count(sink, seen, needle)} of {rows} rows: "
                               f"{query.exception()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out: {_count(sink, seen, needle)} of {rows} rows")
        time.sleep(0.05)


class Changes:
    """Single-row updates of random rows of the table at a steady rate, on a thread, until stopped."""

    def __init__(self, server: Any, rows: int, per_second: float):
        self.server, self.rows, self.per_second = server, rows, per_second
        self.stop = threading.Event()
        self.done = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        conn = self.server.connect(data.DBNAME)
        rnd = random.Random(1)
        started = time.monotonic()
        try:
            with conn.cursor() as cur:
                while not self.stop.is_set():
                    cur.execute(f"UPDATE {data.TABLE} SET qty = qty + 1 WHERE id = %s", (rnd.randint(1, self.rows),))
                    self.done += 1
                    wait = started + self.done / self.per_second - time.monotonic()
                    if wait > 0:
                        time.sleep(wait)
        finally:
            conn.close()

    def __enter__(self) -> Changes:
        if self.per_second > 0:
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(30)


class Progress:
    """The durations (ms) Spark reports of each batch of the queries running, by query id."""

    def __init__(self) -> None:
        self.batches: dict[str, list[dict[str, int]]] = {}

    def listener(self) -> Any:
        from headwater.spark.listener import json_listener

        progress = self

        class Listener:
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                p = event.progress
                if p.numInputRows:
                    progress.batches.setdefault(str(p.id), []).append(
                        {"rows": p.numInputRows, **{k: int(v) for k, v in p.durationMs.items()}})

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                pass

        return json_listener(Listener)()

    def summary(self, query: Any) -> dict[str, Any]:
        """The query's batches with rows: how many, and the total of each duration (s)."""
        deadline = time.monotonic() + 10  # (the listener hears of a batch a moment after it is committed)
        while str(query.id) not in self.batches and time.monotonic() < deadline:
            time.sleep(0.1)
        batches = self.batches.get(str(query.id), [])
        keys = sorted({k for b in batches for k in b if k != "rows"})
        return {"batches": len(batches), **{f"{k}_s": sum(b.get(k, 0) for b in batches) / 1000 for k in keys}}


def run_one(spark: Any, source: dict[str, Any], work: Path, name: str, once: bool) -> tuple[Any, Path]:
    from headwater.pipeline_config import parse_config
    from headwater.spark.pipeline import start_query

    sink = work / name / "sink"
    cfg = parse_config({"name": name, "source": source, "sink": {"type": "jsonl", "path": str(sink)},
                        "spark": {"master": "local[2]", "checkpoint": str(work / name / "checkpoint"),
                                  "trigger.interval": "0 seconds"}})
    return start_query(spark, cfg, once=once), sink


def measure(rows_list: list[int], rounds: int, changes: float, batch_rows: int | None, chunk_size: int,
            master: str) -> dict[str, Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from headwater.pipeline_config import parse_config
    from headwater.spark.pipeline import spark_session

    spark = spark_session(parse_config({"name": "bench", "source": {"connector.class": "postgres",
                                                                     "database.hostname": "h", "database.user": "u",
                                                                     "database.dbname": "d", "topic.prefix": "p"},
                                        "sink": {"type": "jsonl", "path": "/tmp/x"},
                                        "spark": {"master": master}}))
    progress = Progress()
    spark.streams.addListener(progress.listener())
    report: dict[str, Any] = {"master": master, "chunk_size": chunk_size, "batch_rows": batch_rows,
                              "changes_per_second": changes, "tables": []}
    try:
        for rows in rows_list:
            server = data.new_server()
            work = data.workdir("incremental")
            try:
                loaded = data.load_snapshot_table(server, rows)
                server.execute("CREATE TABLE dbz_signal (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
                               "data varchar(2048))", data.DBNAME)
                base = {"connector.class": "postgres", **server.connector_properties(data.DBNAME),
                        "topic.prefix": "bench", "table.include.list": f"public.{data.TABLE}",
                        "signal.data.collection": "public.dbz_signal", "signal.poll.interval.ms": 200,
                        "incremental.snapshot.chunk.size": chunk_size, "notification.enabled.channels": "sink",
                        "notification.sink.topic.name": "bench.notifications"}
                if batch_rows:
                    base["headwater.incremental.snapshot.batch.rows"] = batch_rows
                runs: list[dict[str, Any]] = []
                for r in range(rounds):
                    load = os.getloadavg()[0]
                    started = time.time()
                    query, sink = run_one(spark, {**base, "snapshot.mode": "initial_only", "slot.name": f"i{r}"},
                                          work, f"initial{r}", once=True)
                    last = _until(sink, b'"op":"r"', rows, query, 3600)
                    query.awaitTermination()
                    runs.append({"kind": "initial", "rows": rows, "seconds": last - started,
                                 "rows_per_s": rows / (last - started), "load_before": load,
                                 **progress.summary(query)})
                    shutil.rmtree(work / f"initial{r}", ignore_errors=True)
                    server.execute(f"SELECT pg_drop_replication_slot('i{r}')", data.DBNAME)

                    load = os.getloadavg()[0]
                    query, sink = run_one(spark, {**base, "snapshot.mode": "no_data", "slot.name": f"n{r}"},
                                          work, f"incremental{r}", once=False)
                    while query.lastProgress is None:
                        time.sleep(0.1)
                    with Changes(server, rows, changes) as streaming:
                        started = time.time()
                        signal = json.dumps({"data-collections": [f"public.{data.TABLE}"]})
                        server.execute(f"INSERT INTO dbz_signal VALUES ('s{r}', 'execute-snapshot', '{signal}')",
                                       data.DBNAME)
                        # (rows whose keys a streamed change superseded come as those changes, not as reads:
                        # the snapshot is over when its COMPLETED notification is)
                        last = _until(sink, b'"type":"COMPLETED"', 1, query, 3600)
                    read = _count(sink, {}, b'"snapshot":"incremental"')
                    time.sleep(1.0)  # (the last batch's progress)
                    query.stop()
                    runs.append({"kind": "incremental", "rows": rows, "read": read, "seconds": last - started,
                                 "rows_per_s": rows / (last - started), "load_before": load,
                                 "changes_streamed": streaming.done, **progress.summary(query)})
                    shutil.rmtree(work / f"incremental{r}", ignore_errors=True)
                    server.execute(f"SELECT pg_drop_replication_slot('n{r}')", data.DBNAME)
                    for run in runs[-2:]:
                        print(f"{rows:>11,} rows  {run['kind']:<12} {run['seconds']:7.1f} s  "
                              f"{run['rows_per_s']:>10,.0f} rows/s  (load {run['load_before']:.1f}; "
                              f"{run['batches']} batches: latestOffset {run.get('latestOffset_s', 0):.1f} s, "
                              f"planning {run.get('queryPlanning_s', 0):.1f} s, "
                              f"addBatch {run.get('addBatch_s', 0):.1f} s)", flush=True)
                best = {k: max(x["rows_per_s"] for x in runs if x["kind"] == k) for k in ("initial", "incremental")}
                ratio = best["incremental"] / best["initial"]
                print(f"{rows:>11,} rows  incremental / initial (best of {rounds}): {ratio:.2f}", flush=True)
                report["tables"].append({"rows": rows, "data_bytes": loaded.data_bytes, "runs": runs,
                                         "best_rows_per_s": best, "ratio": ratio})
            finally:
                server.stop()
                shutil.rmtree(work, ignore_errors=True)
    finally:
        spark.stop()
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, action="append", help="rows of the table (repeatable; default 1,000,000)")
    ap.add_argument("--rounds", type=int, default=2, help="initial + incremental runs per table (default 2)")
    ap.add_argument("--changes-per-second", type=float, default=0.0,
                    help="single-row updates streamed during each incremental snapshot (default 0)")
    ap.add_argument("--batch-rows", type=int, help="headwater.incremental.snapshot.batch.rows (default: its default)")
    ap.add_argument("--chunk-size", type=int, default=1024, help="incremental.snapshot.chunk.size (default 1024)")
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    report = measure(args.rows or [1_000_000], args.rounds, args.changes_per_second, args.batch_rows,
                     args.chunk_size, args.master)
    RESULTS.mkdir(exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    (RESULTS / f"incremental_rate-{stamp}.json").write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
