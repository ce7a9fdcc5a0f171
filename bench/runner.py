"""Runs the PostgreSQL benchmarks: a fresh server per benchmark, the contenders one after the other.

For each benchmark the runner starts a new throwaway PostgreSQL server, prepares the data, then
calls each contender in turn on that same data and records its `Measurement`; afterwards it drops
every replication slot it created and stops the server, whatever happened.

- snapshot: the table is loaded, frozen, checkpointed and read once (warm caches) before the
  first contender; each contender gets a fresh slot name (dropped after it, if it made one).
- stream: one slot per contender is created *before* the load, so every contender consumes the
  very same changes (the load only, nothing else) from its own slot, one after the other.
- latency: each contender gets a slot created just before its own run and its own steady load.
- running: before each contender's run the table is emptied and a slot created; the contender starts
  and warms up, then the load (one large transaction) commits into it; the load's size as COPY text
  is counted afterwards, once the contender has finished.
"""

from __future__ import annotations

import re
import shutil
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import data, incremental, mariadb
from bench.calls import call, call_best, pending
from bench.cases import LatencyCase, RunningCase, SnapshotCase, StreamCase
from bench.measure import stop_all_live
from bench.model import LIMIT, Benchmark, BenchmarkResult, Contender, Options, Progress
from headwater.devservers.postgres import PostgresServer


def slot_name(benchmark: str, contender: str) -> str:
    raw = f"bench_{benchmark}_{contender}_{uuid.uuid4().hex[:6]}"
    return re.sub(r"[^a-z0-9_]", "_", raw.lower())[:63]


def _cleanup(server: PostgresServer | None, dirs: list[Path]) -> None:
    stop_all_live()
    if server is not None:
        try:
            for s in data.slots(server):
                data.drop_slot(server, s)
        except Exception:
            pass
        server.stop()
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


@dataclass
class _Run:
    """One benchmark's run: its result, and what to clean up after it."""

    result: BenchmarkResult
    server: Any = None
    dirs: list[Path] = field(default_factory=list)

    def workdir(self, name: str) -> Path:
        wd = data.workdir(name.replace(" ", "_"))
        self.dirs.append(wd)
        return wd


def _guarded(b: Benchmark, body: Callable[[_Run], None]) -> BenchmarkResult:
    """Run `body`; whatever happens (an error, Ctrl-C), record it and clean up the server and dirs."""
    run = _Run(BenchmarkResult(b))
    try:
        body(run)
    except Exception as exc:
        run.result.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    except KeyboardInterrupt:
        run.result.error, run.result.interrupted = "interrupted", True
    finally:
        _cleanup(run.server, run.dirs)
        run.result.ended = time.time()
    return run.result


def run_snapshot(b: Benchmark, progress: Progress) -> BenchmarkResult:
    def body(run: _Run) -> None:
        server = run.server = data.new_server()
        progress(f"  loading {b.params['rows']:,} rows ...")
        wl = data.load_snapshot_table(server, b.params["rows"])
        run.result.workload = {"rows": wl.rows, "data_bytes": wl.data_bytes, "load_seconds": wl.load_seconds}
        for c in b.contenders:
            m = pending(c)
            if m is None:

                def case(i: int, c: Contender = c) -> SnapshotCase:
                    return SnapshotCase(server, wl.rows, wl.data_bytes, run.workdir(c.name), slot_name(b.key, c.name))

                m = call_best(c, case, progress)
                for s in data.slots(server):  # the slots a contender made for its snapshot
                    data.drop_slot(server, s)
            run.result.measurements.append(m)

    return _guarded(b, body)


def run_stream(b: Benchmark, progress: Progress) -> BenchmarkResult:
    def body(run: _Run) -> None:
        server = run.server = data.new_server()
        data.create_table(server)
        todo = {c.name: pending(c) for c in b.contenders}
        slots = {c.name: [slot_name(b.key, c.name) for _ in range(c.repeat)]
                 for c in b.contenders if todo[c.name] is None}
        for c in b.contenders:
            for slot in slots.get(c.name, []):
                data.create_slot(server, slot, c.slot_plugin)
        start_lsn = data.current_lsn(server)
        rows = b.params["rows"]
        progress(f"  loading {rows:,} rows ({'one transaction' if b.params['one_transaction'] else 'one per row'}) ...")
        if b.params["one_transaction"]:
            wl = data.load_one_transaction(server, rows)
        else:
            wl = data.load_single_row_transactions(server, rows)
        end_lsn = data.current_lsn(server)
        run.result.workload = {"rows": wl.rows, "transactions": wl.transactions, "data_bytes": wl.data_bytes,
                               "load_seconds": wl.load_seconds, "start_lsn": start_lsn, "end_lsn": end_lsn}
        for c in b.contenders:
            m = todo[c.name]
            if m is None:

                def case(i: int, c: Contender = c) -> StreamCase:
                    return StreamCase(server, wl.rows, wl.transactions, wl.data_bytes, run.workdir(c.name),
                                      slots[c.name][i], start_lsn, end_lsn)

                m = call_best(c, case, progress)
                for slot in slots[c.name]:
                    data.drop_slot(server, slot)
            run.result.measurements.append(m)

    return _guarded(b, body)


def run_latency(b: Benchmark, progress: Progress) -> BenchmarkResult:
    def body(run: _Run) -> None:
        server = run.server = data.new_server()
        data.create_table(server)
        run.result.workload = dict(b.params)
        for c in b.contenders:
            m = pending(c)
            if m is None:
                slot = slot_name(b.key, c.name)
                data.create_slot(server, slot, c.slot_plugin)
                m = call(c, LatencyCase(server, b.params["rate"], b.params["seconds"], run.workdir(c.name), slot,
                                        warmup_seconds=b.params["warmup_seconds"]), progress)
                data.drop_slot(server, slot)
            run.result.measurements.append(m)

    return _guarded(b, body)


def run_running(b: Benchmark, progress: Progress) -> BenchmarkResult:
    """One transaction of `rows` inserts committed into each contender after it has started and seen a warm-up
    row (`bench.cases.RunningCase`); each run on an empty table, with a slot made just before it."""
    def body(run: _Run) -> None:
        server = run.server = data.new_server()
        data.create_table(server)
        rows = b.params["rows"]
        run.result.workload = {"rows": rows, "transactions": 1, "warmup_seconds": b.params["warmup_seconds"],
                               "warmup_rate": b.params["warmup_rate"]}
        for c in b.contenders:
            m = pending(c)
            if m is None:
                cases: list[RunningCase] = []

                def case(i: int, c: Contender = c, cases: list[RunningCase] = cases) -> RunningCase:
                    for s in data.slots(server):  # the previous run's
                        data.drop_slot(server, s)
                    data.truncate(server)
                    slot = slot_name(b.key, c.name)
                    data.create_slot(server, slot, c.slot_plugin)
                    cases.append(RunningCase(server, rows, run.workdir(c.name), slot,
                                             warmup_seconds=b.params["warmup_seconds"],
                                             warmup_rate=b.params["warmup_rate"]))
                    return cases[-1]

                m = call_best(c, case, progress)
                commit = cases[-1].commit
                if commit is not None:  # the load's size, counted now that no contender runs
                    m.data_bytes = data.copy_text_bytes(server, f"WHERE id >= {commit.first_id}")[1]
                    run.result.workload.update(data_bytes=m.data_bytes,
                                               load_seconds=commit.committed - commit.started)
                for s in data.slots(server):
                    data.drop_slot(server, s)
            run.result.measurements.append(m)

    return _guarded(b, body)


def run_incremental(b: Benchmark, progress: Progress) -> BenchmarkResult:
    """The table loaded as for the snapshot, plus the signalling and load tables (`bench.incremental`);
    per contender a slot with the signal first in it, and the light load for the contender's whole run."""
    def body(run: _Run) -> None:
        server = run.server = data.new_server()
        progress(f"  loading {b.params['rows']:,} rows ...")
        wl = data.load_snapshot_table(server, b.params["rows"])
        incremental.prepare(server)
        run.result.workload = {"rows": wl.rows, "data_bytes": wl.data_bytes, "load_seconds": wl.load_seconds,
                               "chunk": b.params["chunk"], "light_rate": b.params["light_rate"]}
        for c in b.contenders:
            m = pending(c)
            if m is None:

                def case(i: int, c: Contender = c) -> incremental.IncrementalCase:
                    slot = slot_name(b.key, c.name)
                    if c.role != LIMIT:
                        data.create_slot(server, slot)
                        incremental.signal(server)
                    return incremental.IncrementalCase(server, wl.rows, wl.data_bytes, run.workdir(c.name), slot,
                                                       slot=slot, chunk=b.params["chunk"])

                with incremental.LightLoad(server, b.params["light_rate"]) as load:
                    m = call_best(c, case, progress)
                m.details["light_rows"] = load.rows
                m.details["light_rate_achieved"] = load.rows / max(1e-9, time.time() - load.started)
                for s in data.slots(server):
                    data.drop_slot(server, s)
            run.result.measurements.append(m)

    return _guarded(b, body)


RUNNERS: dict[str, Callable[[Benchmark, Progress], BenchmarkResult]] = {
    "snapshot": run_snapshot,
    "stream": run_stream,
    "latency": run_latency,
    "running": run_running,
    "incremental": run_incremental,
}


def run(benchmarks: list[Benchmark], opts: Options, progress: Progress) -> list[BenchmarkResult]:
    """Run each benchmark with the runner for its source and kind."""
    results = []
    for b in benchmarks:
        progress(f"[{b.key}] {b.title}")
        runner = mariadb.RUNNERS.get(b.kind) if b.source == "mariadb" else RUNNERS.get(b.kind)
        if runner is None:
            raise ValueError(f"no runner for {b.source} {b.kind}")
        try:
            result = runner(b, progress)
        except KeyboardInterrupt:  # between two steps of a runner that did not catch it
            progress("interrupted: reporting what was measured so far")
            break
        results.append(result)
        if result.interrupted:
            # The runner has cleaned up (children ended, slots dropped, server stopped).
            progress("interrupted: reporting what was measured so far")
            break
    return results
