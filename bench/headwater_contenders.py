"""headwater's own contenders — the hook where headwater joins the benchmarks.

Each function here is a contender: it receives the prepared case (see `bench.cases`) and returns
a `bench.measure.Measurement`. While a function carries `@placeholder`, the harness does not call
it, creates no slot for it, and reports "not measured yet" — never a number.

To add headwater to a benchmark, remove `@placeholder` from the function and implement it:

1. Run headwater in a child process with `bench.measure.MeasuredProcess` (or `run_measured`), so
   its peak memory (the Python driver, Spark's JVM and its Python workers: the whole process tree
   is sampled) is its own. Pass `sys.executable` as the interpreter, point the connector at
   `case.server.connector_properties(case.dbname)` and `table.include.list` at
   `f"{case.schema}.{case.table}"`, and write the events to a sink that costs little (a noop or
   a jsonl file in `case.workdir`), the same for every run.
2. Snapshot (`SnapshotCase`): `snapshot.mode: initial`, `slot.name: case.slot_name`,
   `publication.name: case.publication`, `publication.autocreate.mode: disabled`; stop after
   `case.rows` snapshot rows. Stream (`StreamCase`): `snapshot.mode: no_data` on the
   pre-created `slot.name: case.slot` (it holds exactly the load); stop after `case.rows`
   changes (or at `case.end_lsn`). Latency (`LatencyCase`): `snapshot.mode: no_data` on
   `case.slot`; start the run, call `case.run_load(ready)` with `ready()` true once the sink has
   seen its first row, stop when the SENTINEL row (`qty = 2`) lands, and compute arrival at the
   sink − `after.ts` for the LOAD rows (`qty = 1`); return `case.latency_measurement(...)`.
3. Have the child write its event times — `{"first": epoch, "last": epoch, "count": n}` (first
   and last row delivered to the sink, rows delivered; optionally `"error"`) — to a JSON file in
   `case.workdir`, and return `bench.measure.from_event_times("headwater", result, times,
   case.rows, case.data_bytes, **details)`: it measures from `MeasuredProcess.launched`, sets
   rows, seconds (launch → last row), first_to_last_seconds, startup_seconds and
   peak_rss_bytes, and makes a run that delivered fewer than `case.rows` rows a failed one.
   (Or build the `Measurement` yourself with the same meanings.)

`bench/debezium.py` is a worked example of exactly this shape (a driver child process that
writes its event times to a JSON file, read back by the contender).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from bench import mariadb_data as md
from bench.cases import LatencyCase, RunningCase, SnapshotCase, StreamCase
from bench.measure import MeasuredProcess, Measurement, ProcessResult, from_event_times

NAME = "headwater"
ENGINE_NAME = "headwater engine"
FLOOR_NAME = "Spark floor"
#: the same contenders without Debezium 3's context headers (`extended.headers.enabled: false`): their cost
NO_HEADERS = ", no context headers"
NO_HEADERS_PROPS = {"extended.headers.enabled": "false"}
F = TypeVar("F", bound=Callable[..., Any])


def placeholder(func: F) -> F:
    """Mark a contender as not implemented yet: the harness reports it as "not measured yet"."""
    func.__bench_placeholder__ = True  # type: ignore[attr-defined]
    return func


def is_placeholder(func: Callable[..., Any]) -> bool:
    return bool(getattr(func, "__bench_placeholder__", False))


DRIVER = Path(__file__).with_name("headwater_driver.py")


def properties(case: SnapshotCase | StreamCase | LatencyCase | RunningCase, slot: str, snapshot_mode: str) -> dict[str, str]:
    return {
        "connector.class": "postgres",
        **case.server.connector_properties(case.dbname),
        "topic.prefix": "bench",
        "table.include.list": f"{case.schema}.{case.table}",
        "slot.name": slot,
        "publication.name": case.publication,
        "publication.autocreate.mode": "disabled",
        "snapshot.mode": snapshot_mode,
    }


@dataclass(frozen=True)
class Checkout:
    """A headwater checkout to run: its interpreter (with its headwater installed) and its driver script."""

    python: str
    driver: Path

    @classmethod
    def at(cls, root: str | Path) -> Checkout:
        """The checkout at `root`, run by its own `.venv` (`--compare-with`)."""
        root = Path(root).resolve()
        return cls(str(root / ".venv" / "bin" / "python"), root / "bench" / "headwater_driver.py")


THIS = Checkout(sys.executable, DRIVER)


def _run(props: dict, workdir: Path, runner: str, *extra: str, timeout: float, checkout: Checkout = THIS,
         while_running: Callable[[], object] = lambda: None) -> tuple[ProcessResult, dict]:
    """Run the driver with `runner` to its end (calling `while_running()` once it has started); its result."""
    props_file = workdir / f"headwater-{runner}.json"
    props_file.write_text(json.dumps(props))
    result = workdir / f"headwater-{runner}-result.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with open(workdir / f"headwater-{runner}.log", "w") as log:
        proc = MeasuredProcess([checkout.python, str(checkout.driver), str(props_file), str(result), "--runner",
                                runner, "--workdir", str(workdir / runner), "--max-wait", str(timeout), *extra],
                               cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
                               env={**env, "PYSPARK_PYTHON": checkout.python})
        try:
            while_running()
        except BaseException:
            proc.wait(timeout=30)  # ended (killed after 30 s): the run it was to measure did not happen
            raise
        res = proc.wait(timeout=timeout + 120)
    try:
        got = json.loads(result.read_text())
    except (OSError, ValueError):
        got = {}
    return res, got


def _measure(name: str, res: ProcessResult, got: dict, rows: int, data_bytes: int, workdir: Path,
             runner: str) -> Measurement:
    if not got or got.get("error"):
        tail = (workdir / f"headwater-{runner}.log").read_text(errors="replace")[-600:]
        return Measurement.failed(name, got.get("error") or f"no result (exit {res.returncode}): {tail}")
    details = {}
    if got.get("spark_started"):
        details["spark_start_s"] = got["spark_started"] - res.launched
    if got.get("cycle_ms"):  # the median micro-batch with rows: its rows and Spark's durationMs of its phases
        details["cycle_ms"] = got["cycle_ms"]
    return from_event_times(name, res, got, rows, data_bytes, **details)


def postgres_snapshot(case: SnapshotCase, checkout: Checkout = THIS, name: str = NAME) -> Measurement:
    """headwater's PostgreSQL initial snapshot of `case.table` on local Spark (CTID-range chunks read in
    parallel by the executors) into the jsonl sink: launch -> snapshot batch committed."""
    props = properties(case, case.slot_name, "initial")
    res, got = _run(props, case.workdir, "spark", "--expect", str(case.rows), timeout=max(600.0, case.rows / 2000),
                    checkout=checkout)
    return _measure(name, res, got, case.rows, case.data_bytes, case.workdir, "spark")


def postgres_stream(case: StreamCase, checkout: Checkout = THIS, name: str = NAME) -> Measurement:
    """headwater streaming the pre-created slot `case.slot` on local Spark into the jsonl sink."""
    props = properties(case, case.slot, "no_data")
    res, got = _run(props, case.workdir, "spark", "--expect", str(case.rows), timeout=max(600.0, case.rows / 2000),
                    checkout=checkout)
    return _measure(name, res, got, case.rows, case.data_bytes, case.workdir, "spark")


def postgres_stream_engine(case: StreamCase) -> Measurement:
    """headwater's capture layer alone on `case.slot`: the connector in-process (no Spark, no sink), for
    what the decoding costs and how much memory it needs without Spark's fixed footprint."""
    props = properties(case, case.slot, "no_data")
    res, got = _run(props, case.workdir, "engine", "--expect", str(case.rows), timeout=max(600.0, case.rows / 2000))
    return _measure(ENGINE_NAME, res, got, case.rows, case.data_bytes, case.workdir, "engine")


def postgres_stream_no_headers(case: StreamCase) -> Measurement:
    """`postgres_stream` without the context headers (what adding them costs)."""
    props = {**properties(case, case.slot, "no_data"), **NO_HEADERS_PROPS}
    res, got = _run(props, case.workdir, "spark", "--expect", str(case.rows), timeout=max(600.0, case.rows / 2000))
    return _measure(NAME + NO_HEADERS, res, got, case.rows, case.data_bytes, case.workdir, "spark")


def postgres_stream_engine_no_headers(case: StreamCase) -> Measurement:
    """`postgres_stream_engine` without the context headers (what adding them costs)."""
    props = {**properties(case, case.slot, "no_data"), **NO_HEADERS_PROPS}
    res, got = _run(props, case.workdir, "engine", "--expect", str(case.rows), timeout=max(600.0, case.rows / 2000))
    return _measure(ENGINE_NAME + NO_HEADERS, res, got, case.rows, case.data_bytes, case.workdir, "engine")


def postgres_running(case: RunningCase, checkout: Checkout = THIS, name: str = NAME) -> Measurement:
    """headwater on local Spark into the jsonl sink, already streaming `case.slot` (its first warm-up row committed
    in the sink) when the load commits: commit → the load's last event committed in the sink."""
    return _running(case, "spark", name, checkout)


def postgres_running_engine(case: RunningCase) -> Measurement:
    """The in-process engine (no Spark, no sink) already streaming when the load commits (information)."""
    return _running(case, "engine", ENGINE_NAME)


def _running(case: RunningCase, runner: str, name: str, checkout: Checkout = THIS) -> Measurement:
    ready = case.workdir / "headwater-ready"
    res, got = _run(properties(case, case.slot, "no_data"), case.workdir, runner, "--ready-file", str(ready),
                    "--expect-file", str(case.expect_file), timeout=case.max_wait, checkout=checkout,
                    while_running=lambda: case.run_load(ready.exists))
    if not got or got.get("error"):
        tail = (case.workdir / f"headwater-{runner}.log").read_text(errors="replace")[-600:]
        return Measurement.failed(name, got.get("error") or f"no result (exit {res.returncode}): {tail}")
    details = {"spark_start_s": got["spark_started"] - res.launched} if got.get("spark_started") else {}
    return case.measurement(name, res, got, **details)


def postgres_latency(case: LatencyCase, checkout: Checkout = THIS, name: str = NAME) -> Measurement:
    """headwater under the steady load: the batch holding a row committed in the sink - the row's commit time."""
    return _latency(case, properties(case, case.slot, "no_data"), checkout, name)


def _latency(case: LatencyCase | md.LatencyCase, props: dict[str, str], checkout: Checkout = THIS,
             name: str = NAME) -> Measurement:
    ready = case.workdir / "headwater-ready"
    props_file = case.workdir / "headwater-latency.json"
    props_file.write_text(json.dumps(props))
    result = case.workdir / "headwater-latency-result.json"
    max_wait = case.warmup_seconds + case.seconds + case.ready_timeout + 300
    with open(case.workdir / "headwater-latency.log", "w") as log:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = MeasuredProcess([checkout.python, str(checkout.driver), str(props_file), str(result), "--runner",
                                "spark", "--mode", "latency", "--ready-file", str(ready), "--workdir",
                                str(case.workdir / "latency"), "--max-wait", str(max_wait)],
                               cwd=case.workdir, stdout=log, stderr=subprocess.STDOUT,
                               env={**env, "PYSPARK_PYTHON": checkout.python})
        try:
            case.run_load(ready.exists)
        finally:
            res = proc.wait(timeout=case.ready_timeout + 300)
    try:
        got = json.loads(result.read_text())
    except (OSError, ValueError):
        return Measurement.failed(name, f"no result (exit {res.returncode})")
    m = case.latency_measurement(name, got.get("latencies_ms", []), res.peak_rss_bytes, **res.memory(),
                                 cycle_ms=got.get("cycle_ms"))
    if got.get("error") or got.get("timed_out"):
        m.note = got.get("error") or "timed out before the sentinel"
    return m


# The replication client id headwater's MariaDB connector registers with (unique on the bench's server).
MARIADB_SERVER_ID = "5401"


def mariadb_properties(case: md.SnapshotCase | md.StreamCase | md.LatencyCase, snapshot_mode: str) -> dict[str, str]:
    """The MariaDB connector on `case.table`; schema change records off, so every event counted is a row's."""
    return {
        "connector.class": "mariadb",
        **case.server.connector_properties(case.dbname),
        "database.server.id": MARIADB_SERVER_ID,
        "topic.prefix": "bench",
        "table.include.list": f"{case.dbname}.{case.table}",
        "include.schema.changes": "false",
        "snapshot.mode": snapshot_mode,
    }


LOCKING_NAME = "headwater locking"


def mariadb_snapshot(case: md.SnapshotCase, checkout: Checkout = THIS, name: str = NAME) -> Measurement:
    """headwater's MariaDB initial snapshot as it runs by default (the lock-free parallel snapshot: key-range
    chunks read between binlog watermarks) on local Spark into the jsonl sink: launch -> snapshot rows committed."""
    res, got = _run(mariadb_properties(case, "initial"), case.workdir, "spark", "--expect", str(case.rows),
                    timeout=max(600.0, case.rows / 2000), checkout=checkout)
    return _measure(name, res, got, case.rows, case.data_bytes, case.workdir, "spark")


def mariadb_snapshot_locking(case: md.SnapshotCase) -> Measurement:
    """Debezium's locking snapshot (`snapshot.locking.mode: minimal`: key-range chunks read in the driver's
    consistent transaction) on local Spark into the jsonl sink."""
    props = {**mariadb_properties(case, "initial"), "snapshot.locking.mode": "minimal"}
    res, got = _run(props, case.workdir, "spark", "--expect", str(case.rows), timeout=max(600.0, case.rows / 2000))
    return _measure(LOCKING_NAME, res, got, case.rows, case.data_bytes, case.workdir, "spark")


def mariadb_snapshot_engine(case: md.SnapshotCase) -> Measurement:
    """The default (lock-free) snapshot through the in-process engine: no Spark, no sink."""
    res, got = _run(mariadb_properties(case, "initial_only"), case.workdir, "engine", "--expect", str(case.rows),
                    timeout=max(600.0, case.rows / 2000))
    return _measure(ENGINE_NAME, res, got, case.rows, case.data_bytes, case.workdir, "engine")


def mariadb_stream(case: md.StreamCase, checkout: Checkout = THIS, name: str = NAME) -> Measurement:
    """headwater streaming MariaDB's binlog on local Spark into the jsonl sink: `snapshot.mode: never` reads
    from the oldest binlog file, which holds the schema's set-up and then the load."""
    res, got = _run(mariadb_properties(case, "never"), case.workdir, "spark", "--expect", str(case.rows),
                    timeout=max(600.0, case.rows / 2000), checkout=checkout)
    return _measure(name, res, got, case.rows, case.data_bytes, case.workdir, "spark")


def mariadb_stream_engine(case: md.StreamCase) -> Measurement:
    """headwater's MariaDB capture alone: the connector in-process (no Spark, no sink), from the oldest binlog."""
    res, got = _run(mariadb_properties(case, "never"), case.workdir, "engine", "--expect", str(case.rows),
                    timeout=max(600.0, case.rows / 2000))
    return _measure(ENGINE_NAME, res, got, case.rows, case.data_bytes, case.workdir, "engine")


def mariadb_spark_floor(case: md.SnapshotCase | md.StreamCase) -> Measurement:
    """Spark's fixed cost on this machine (`headwater_driver.py --runner floor`): launch -> the session
    headwater's pipeline gets -> one committed micro-batch of a trivial Python data source, with
    `case.rows` counted as delivered then. The limit's time over this one is the best ratio any
    pipeline hosted on this Spark could reach (information: no database read, no event made)."""
    res, got = _run(mariadb_properties(case, "initial"), case.workdir, "floor", "--expect", str(case.rows),
                    timeout=600.0)
    return _measure(FLOOR_NAME, res, got, case.rows, case.data_bytes, case.workdir, "floor")


def mariadb_latency(case: md.LatencyCase, checkout: Checkout = THIS, name: str = NAME) -> Measurement:
    """headwater on MariaDB under the steady load: the batch holding a row committed in the sink - `ts`.
    `snapshot.mode: no_data` (the tables' schema, then the binlog from its end): a second contender on the
    same server (`--compare-with`) does not start with the first one's rows as a backlog."""
    return _latency(case, mariadb_properties(case, "no_data"), checkout, name)
