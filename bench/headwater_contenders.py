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

from collections.abc import Callable
from typing import Any, TypeVar

from bench.cases import LatencyCase, SnapshotCase, StreamCase
from bench.measure import Measurement

NAME = "headwater"
F = TypeVar("F", bound=Callable[..., Any])


def placeholder(func: F) -> F:
    """Mark a contender as not implemented yet: the harness reports it as "not measured yet"."""
    func.__bench_placeholder__ = True  # type: ignore[attr-defined]
    return func


def is_placeholder(func: Callable[..., Any]) -> bool:
    return bool(getattr(func, "__bench_placeholder__", False))


@placeholder
def postgres_snapshot(case: SnapshotCase) -> Measurement:
    """headwater's PostgreSQL initial snapshot of `case.table` (CTID-range chunks read in parallel)."""
    return Measurement.not_measured(NAME)


@placeholder
def postgres_stream(case: StreamCase) -> Measurement:
    """headwater streaming the pre-created slot `case.slot` until all `case.rows` changes are delivered."""
    return Measurement.not_measured(NAME)


@placeholder
def postgres_latency(case: LatencyCase) -> Measurement:
    """headwater under the steady load: arrival at the sink − commit time, p50/p99."""
    return Measurement.not_measured(NAME)


@placeholder
def mariadb_stream(case: Any) -> Measurement:
    """headwater streaming MariaDB's binlog (`bench.mariadb.MariaDBStreamCase`) until all rows are delivered."""
    return Measurement.not_measured(NAME)
