"""headwater as a benchmark contender, in its own process: the Spark pipeline or the in-process engine.

    python bench/headwater_driver.py PROPS RESULT --runner spark|engine|floor --mode count|incremental|latency
        [--expect N | --expect-file F] [--ready-file F] [--max-wait S] [--master local[2]] [--workdir DIR]
        [--conf K=V ...]

`spark` runs the real pipeline, `headwater`'s streaming source into the jsonl sink on local Spark
(what `headwater run` does). An event has arrived when the sink file holding it appears: the sink
moves a batch's files into place when it commits the batch, and the driver polls it every 50 ms.
`engine` runs the connector in this process with no sink (the capture and decoding alone).
`floor` is the fixed cost of any pipeline on the same Spark (count mode only): the session headwater's
pipeline gets, then a streaming query on a trivial Python data source (no database, no connector) whose
one micro-batch has two tasks that yield one row each, into a `foreachBatch` that collects them; when
that batch has committed, all `--expect` events count as delivered. No pipeline on this Spark can deliver
them sooner, so the limit's rate over the floor's is the highest ratio a Spark pipeline can reach here.
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
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.sink_counter import SinkCounter  # noqa: E402 (the checkout's root is on the path from here)

WARMUP, LOAD, SENTINEL = 0, 1, 2


def parse_ts(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("props")
    ap.add_argument("result")
    ap.add_argument("--runner", choices=("spark", "engine", "floor"), default="spark")
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
        elif args.runner == "floor":
            run_floor(props, args, out)
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


def spark_session(props: dict, args, out: dict) -> tuple[Any, Any, Path]:
    """The Spark session and configuration `headwater run` would have for `props` into a jsonl sink in
    `--workdir` (the JVM started while the configuration is validated, as `headwater run` does); and the sink."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from headwater.spark.session import EarlySession

    work = Path(args.workdir)
    sink = work / "sink"
    document = {"name": "bench", "source": props, "sink": {"type": "jsonl", "path": str(sink)},
                "spark": {"master": args.master, "checkpoint": str(work / "checkpoint"),
                          "trigger.interval": "0 seconds", "conf": dict(c.split("=", 1) for c in args.conf)}}
    early = EarlySession(document)
    try:
        from headwater.pipeline_config import parse_config

        cfg = parse_config(document)
    except BaseException:
        early.stop()
        raise
    spark = early.get(cfg)
    out["spark_started"] = time.time()
    return spark, cfg, sink


def run_floor(props: dict, args, out: dict) -> None:
    """Spark's fixed cost (see the module's docstring): one micro-batch of two one-row tasks, committed."""
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    class FloorReader(DataSourceStreamReader):
        def initialOffset(self) -> dict:
            return {"batch": 0}

        def latestOffset(self, start: dict, limit: Any) -> dict:
            return {"batch": 1}

        def partitions(self, start: dict, end: dict) -> list:
            return [InputPartition(i) for i in range(2)] if start["batch"] < end["batch"] else []

        def read(self, partition):
            yield (partition.value,)

    class FloorSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "headwater_bench_floor"

        def schema(self) -> str:
            return "n INT"

        def streamReader(self, schema):
            return FloorReader()

    spark, cfg, _ = spark_session(props, args, out)
    spark.dataSource.register(FloorSource)
    rows: list[int] = []

    def collect(df, batch_id: int) -> None:
        rows.extend(r[0] for r in df.collect())

    query = (spark.readStream.format(FloorSource.name()).load().writeStream.foreachBatch(collect)
             .option("checkpointLocation", str(Path(cfg.spark.checkpoint).expanduser()))
             .trigger(processingTime="0 seconds").start())
    deadline = time.time() + args.max_wait
    while query.isActive and time.time() < deadline and (query.lastProgress or {}).get("batchId") is None:
        time.sleep(0.02)  # the first progress comes once the batch has committed
    now = time.time()
    failure = None if query.isActive else query.exception()
    query.stop()
    spark.stop()
    if failure is not None or sorted(rows) != [0, 1]:
        out["error"] = f"floor query: {failure or rows}"
        return
    out.update(first=now, last=now, count=args.expect)


def run_spark(props: dict, args, out: dict) -> None:
    spark, cfg, sink = spark_session(props, args, out)
    from headwater.spark.listener import json_listener
    from headwater.spark.pipeline import start_query

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
    counter = SinkCounter(args.mode == "incremental") if args.mode in ("count", "incremental") else None
    seen_at: dict[str, float] = {}  # each sink file: when the driver first listed it

    def book(counts: list[tuple[str, int]]) -> bool:
        """Add the counter's counts, each at the time its file was first listed; whether the goal is reached."""
        reached = False
        for name, events in counts:
            if events:
                at = seen_at[name]
                out["count"] += events
                out["first"] = at if out["first"] is None else min(out["first"], at)
                out["last"] = at if out["last"] is None else max(out["last"], at)
                reached = goal.reached(out, at) or reached
        return reached

    done = False
    try:
        while not done and time.time() < deadline and query.isActive:
            time.sleep(0.05)
            if args.mode == "latency" and out["first"] is None and any(counts.values()):
                out["first"] = time.time()
            if counter is not None:
                # an event has arrived when its batch's files are committed in the sink (listed every 50 ms;
                # their lines are counted by `counter`, see bench.sink_counter)
                files = sorted(sink.glob("*.jsonl"))
                now = time.time()  # these files were all in place by now
                for f in files:
                    if f.name not in seen_at:
                        seen_at[f.name] = now
                        counter.count(f)
                done = book(counter.counted()) or goal.reached(out, now)
            else:
                if args.ready_file and out["first"] is not None:
                    Path(args.ready_file).touch()
                done = _latencies(sink, seen_files, latencies, out)
    finally:
        if counter is not None:
            done = book(counter.finish()) or done
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
