"""headwater as a benchmark contender, in its own process: the Spark pipeline or the in-process engine.

    python bench/headwater_driver.py PROPS RESULT --runner spark|engine --mode count|incremental|latency
        [--expect N | --expect-file F] [--ready-file F] [--max-wait S] [--master local[2]] [--workdir DIR]
        [--conf K=V ...]

`spark` runs the real pipeline, `headwater`'s streaming source into the jsonl sink on local Spark
(what `headwater run` does). An event has arrived when the sink file holding it appears: the sink
moves a batch's files into place when it commits the batch, and the driver polls it every 50 ms.
`engine` runs the connector in this process with no sink (the capture and decoding alone).
The result file gets `{"first", "last", "count"}` (epoch seconds of the first and last event
delivered, events delivered: in incremental mode those of an incremental snapshot only), and in
latency mode `latencies_ms` of the LOAD rows; on Spark, in every mode, `cycle_ms` (the median
micro-batch with rows) and `cycles` (each micro-batch: its rows, its start (epoch seconds, `at`) and
Spark's `durationMs` of its phases).

Into a pipeline already running (`--expect-file`, count mode): the driver touches `--ready-file` at
its first event, and the harness, once it has stopped inserting warm-up rows, writes the file
`{"skip": N, "expect": M}`: the first N events are the warm-up's, then M events of the load follow.
The result then also holds `skip` and `load_first`, the time the count first passed N.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WARMUP, LOAD, SENTINEL = 0, 1, 2


def parse_ts(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("props")
    ap.add_argument("result")
    ap.add_argument("--runner", choices=("spark", "engine"), default="spark")
    ap.add_argument("--mode", choices=("count", "incremental", "latency"), default="count")
    ap.add_argument("--expect", type=int, default=0)
    ap.add_argument("--expect-file", help="count mode: N warm-up events, then --expect from this JSON file")
    ap.add_argument("--ready-file")
    ap.add_argument("--max-wait", type=float, default=3600)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--workdir", default=".")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (spark.conf)")
    args = ap.parse_args()
    started = time.time()
    props = json.loads(Path(args.props).read_text())
    out: dict = {"script_start": started, "first": None, "last": None, "count": 0}
    try:
        if args.runner == "engine":
            run_engine(props, args, out)
        else:
            run_spark(props, args, out)
    except BaseException as exc:  # reported in the result file
        out["error"] = f"{type(exc).__name__}: {exc}"
    Path(args.result).write_text(json.dumps(out))
    return 0


def run_engine(props: dict, args, out: dict) -> None:
    from headwater.connectors.registry import validate_connector
    from headwater.engine import Engine
    from headwater.events.typed import TypedEvents

    engine = Engine(validate_connector(props))
    goal = Goal(args.expect, args.expect_file, args.ready_file)
    deadline = time.time() + args.max_wait

    def take(batch) -> bool:
        """Count `batch`'s events; whether the goal is reached."""
        now = time.time()
        assert not isinstance(batch, TypedEvents)  # the engine's default output is JSON rows
        values = batch.to_arrow().column("value")
        rows = len(values) - values.null_count
        if rows and out["first"] is None:
            out["first"] = now
        out["count"] += rows
        if rows or args.expect_file is None:
            out["last"] = now
        return goal.reached(out, now)

    try:
        if args.expect_file:  # already running when the load commits: stream (waiting for events) until the goal
            for batch in engine.batches():
                if take(batch) or time.time() > deadline:
                    break
        else:  # the slot holds the load already: read what it holds, again until every event has come
            while out["count"] < args.expect and time.time() < deadline:
                for batch in engine.batches(once=True):
                    take(batch)
    finally:
        engine.close()


class Goal:
    """When a count-mode run is done: at `expect` events, or with an `expect_file` (a pipeline already
    running) at the file's `skip` + `expect` once the harness has written it. Also touches `ready_file`
    at the first event, and sets `out["load_first"]` when the count first passes `skip`."""

    def __init__(self, expect: int, expect_file: str | None = None, ready_file: str | None = None) -> None:
        self.expect, self.skip = expect, 0
        self.expect_file = Path(expect_file) if expect_file else None
        self.ready_file = Path(ready_file) if ready_file else None
        self.known = expect_file is None

    def reached(self, out: dict, now: float) -> bool:
        count = out.get("count", 0)
        if count and self.ready_file is not None:
            self.ready_file.touch()
            self.ready_file = None
        if not self.known and self.expect_file is not None and self.expect_file.exists():
            told = json.loads(self.expect_file.read_text())
            self.skip, self.expect, self.known = int(told["skip"]), int(told["expect"]), True
            out["skip"] = self.skip
        if not self.known:
            return False
        if count > self.skip and out.get("load_first") is None:
            out["load_first"] = now
        return count >= self.skip + self.expect


def run_spark(props: dict, args, out: dict) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from headwater.spark.session import EarlySession

    work = Path(args.workdir)
    sink = work / "sink"
    document = {"name": "bench", "source": props, "sink": {"type": "jsonl", "path": str(sink)},
                "spark": {"master": args.master, "checkpoint": str(work / "checkpoint"),
                          "trigger.interval": "0 seconds", "conf": dict(c.split("=", 1) for c in args.conf)}}
    early = EarlySession(document)  # the JVM starts while the configuration is validated, as `headwater run`'s
    try:
        from headwater.pipeline_config import parse_config

        cfg = parse_config(document)
    except BaseException:
        early.stop()
        raise
    from headwater.spark.listener import json_listener
    from headwater.spark.pipeline import start_query

    spark = early.get(cfg)
    out["spark_started"] = time.time()
    counts: dict[int, int] = {}
    cycles: list[dict] = []  # each micro-batch's rows and Spark's durationMs of its phases

    class Counter:  # its progress read as JSON, as headwater's observer reads it (`spark.listener`)
        def onQueryStarted(self, event) -> None:
            pass

        def onQueryProgress(self, event) -> None:
            counts[event.progress.batchId] = event.progress.numInputRows
            cycles.append({"rows": event.progress.numInputRows, "at": parse_ts(event.progress.timestamp),
                           **dict(event.progress.durationMs)})

        def onQueryIdle(self, event) -> None:
            pass

        def onQueryTerminated(self, event) -> None:
            pass

    spark.streams.addListener(json_listener(Counter)())
    query = start_query(spark, cfg)
    goal = Goal(args.expect, args.expect_file, args.ready_file)
    deadline = time.time() + args.max_wait
    seen_files: set[str] = set()
    latencies: list[float] = []
    done = False
    while not done and time.time() < deadline and query.isActive:
        time.sleep(0.05)
        if args.mode == "latency" and out["first"] is None and any(counts.values()):
            out["first"] = time.time()
        if args.mode in ("count", "incremental"):
            # an event has arrived when its batch's files are committed in the sink (polled every 50 ms)
            files = sorted(sink.glob("*.jsonl"))
            now = time.time()  # these files were all in place by now (counting them takes a while)
            total = _data_events(files, seen_files, out, args.mode == "incremental")
            if total and out["first"] is None:
                out["first"] = now
            if total > out["count"]:
                out["last"] = now
            out["count"] = total
            done = goal.reached(out, now)
        else:
            if args.ready_file and out["first"] is not None:
                Path(args.ready_file).touch()
            done = _latencies(sink, seen_files, latencies, out)
    failure = None if query.isActive else query.exception()
    query.stop()
    spark.stop()
    if failure is not None:  # the query ended by itself: its error is the run's
        out["error"] = f"query failed: {str(failure)[:2000]}"
    out["cycles"] = cycles  # every micro-batch's rows and Spark's durationMs of its phases
    out["cycle_ms"] = cycle_medians(cycles)
    if args.mode == "latency":
        out["latencies_ms"] = latencies
    if not done:
        out["timed_out"] = True


def cycle_medians(cycles: list[dict]) -> dict[str, float]:
    """The median rows and phases (Spark's `durationMs`) of the micro-batches that had rows, and their number."""
    busy = [c for c in cycles if c.get("rows")]
    if not busy:
        return {}
    out = {k: float(statistics.median(c.get(k, 0) for c in busy)) for k in busy[0] if k != "at"}
    out["batches"] = len(busy)
    return out


def _data_events(files: list[Path], seen: set[str], out: dict, incremental: bool = False) -> int:
    """Events (tombstones aside; with `incremental`, the incremental snapshot's only) in sink files not
    counted yet, added to the count so far."""
    total = out.get("count", 0)
    for f in files:
        if f.name in seen:
            continue
        seen.add(f.name)
        total += _count_events(f, incremental=incremental)
    return total


TOMBSTONE = b'"value":null}\n'
INCREMENTAL = b'"snapshot":"incremental"'


def _count_events(path: Path, chunk_bytes: int = 1 << 22, incremental: bool = False) -> int:
    """The lines of a sink file that are not tombstones (with `incremental`, the events of an incremental
    snapshot), read a chunk at a time: the harness's own memory stays small (it is sampled with
    headwater's), however large a batch's file."""
    needles = (INCREMENTAL,) if incremental else (b"\n", TOMBSTONE)
    counts = [0] * len(needles)
    tails = [b""] * len(needles)  # a needle's end may be in the next chunk: its first bytes carried over
    with open(path, "rb") as f:
        while chunk := f.read(chunk_bytes):
            for i, needle in enumerate(needles):
                data = tails[i] + chunk
                counts[i] += data.count(needle)
                tails[i] = data[max(0, len(data) - len(needle) + 1):]
    return counts[0] if incremental else counts[0] - counts[1]


def _latencies(sink: Path, seen: set[str], latencies: list[float], out: dict) -> bool:
    """Latencies of the LOAD rows in sink files not seen yet: the time the file is seen - the row's `ts`."""
    finished = False
    files = sorted(sink.glob("*.jsonl"))
    arrived = time.time()  # every file listed was there by now
    for f in files:
        if f.name in seen:
            continue
        seen.add(f.name)
        for line in f.read_text().splitlines():
            value = json.loads(line)["value"]
            if not value or value.get("op") != "c":
                continue
            after = value["after"]
            out["count"] = out.get("count", 0) + 1
            out["last"] = arrived
            if after["qty"] == LOAD:
                latencies.append((arrived - parse_ts(after["ts"])) * 1000)
            elif after["qty"] == SENTINEL:
                finished = True
    return finished


if __name__ == "__main__":
    sys.exit(main())
