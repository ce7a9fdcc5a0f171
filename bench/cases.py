"""What a contender is handed: the prepared server, table and workload of one benchmark.

A contender is a function `case -> Measurement`. The harness prepares everything before it calls
the contender (a fresh server, the loaded table, a publication, for streaming a replication slot
created before the load) and cleans everything up after (slots dropped, servers stopped,
`workdir` removed), so a contender only consumes and measures.

- `SnapshotCase`: read every row of `table` as an initial snapshot would. A contender that needs
  a replication slot (as Debezium does for `snapshot.mode=initial`) uses `slot_name`; the harness
  drops it afterwards.
- `StreamCase`: the slot `slot` was created before the load, so it holds exactly the load's
  changes (`rows` changes in `transactions` transactions), ending at `end_lsn`. Consume from it
  until all `rows` have been delivered.
- `LatencyCase`: the slot `slot` was created just before the contender was called. Start the
  consumer, then call `run_load(ready)` — it inserts WARMUP rows until `ready()` returns True
  (your consumer has seen one), then WARMUP rows at the steady rate for `warmup_seconds`, then
  the steady load (`qty = LOAD` rows, each carrying its
  commit time in `ts`), then one SENTINEL row, and returns the `SteadyLoad`. Stop when the
  sentinel arrives, and report arrival − `ts` over the LOAD rows with `latency_measurement`.
- `RunningCase`: the slot `slot` was created just before the contender was called (on an empty
  table). Start the consumer, then call `run_load(ready)` — it inserts WARMUP rows (one
  transaction each) until `ready()` returns True and then at `warmup_rate` for `warmup_seconds`
  (as `LatencyCase` does), writes `expect_file` (`{"skip": the WARMUP rows inserted, "expect":
  rows}`: the consumer counts that many events first, then the load's), then commits `rows`
  inserts in one transaction and returns the commit time. Stop once `skip + rows`
  events have arrived, and report the load's first and last arrival with `measurement`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench import data
from bench.measure import Measurement, ProcessResult, from_event_times, percentiles
from headwater.devservers.postgres import PostgresServer


@dataclass
class SnapshotCase:
    server: PostgresServer
    rows: int
    data_bytes: int
    workdir: Path
    slot_name: str
    dbname: str = data.DBNAME
    table: str = data.TABLE
    schema: str = "public"
    publication: str = data.PUBLICATION


@dataclass
class StreamCase:
    server: PostgresServer
    rows: int
    transactions: int
    data_bytes: int
    workdir: Path
    slot: str
    start_lsn: str
    end_lsn: str
    dbname: str = data.DBNAME
    table: str = data.TABLE
    schema: str = "public"
    publication: str = data.PUBLICATION


def wait_until_streaming(ready: Callable[[], bool], insert_marker: Callable[[], None], timeout: float) -> int:
    """Insert a WARMUP row (`insert_marker()`) every 0.25 s until `ready()` (the consumer has seen one);
    returns how many were inserted. A consumer not streaming after `timeout` seconds is a TimeoutError."""
    deadline = time.monotonic() + timeout
    inserted = 0
    while not ready():
        if time.monotonic() > deadline:
            raise TimeoutError(f"consumer not streaming after {timeout:.0f}s")
        insert_marker()
        inserted += 1
        time.sleep(0.25)
    return inserted


def warm_up(server: PostgresServer, ready: Callable[[], bool], timeout: float, rate: float, seconds: float,
            workdir: Path) -> int:
    """WARMUP rows until `ready()`, then WARMUP rows at `rate` for `seconds`; returns how many were inserted."""
    rows = wait_until_streaming(ready, lambda: data.insert_marker(server, data.WARMUP), timeout)
    if seconds > 0:
        rows += data.steady_load(server, rate, seconds, workdir, kind=data.WARMUP).rows
    return rows


@dataclass
class LatencyCase:
    server: PostgresServer
    rate: float
    seconds: float
    workdir: Path
    slot: str
    dbname: str = data.DBNAME
    table: str = data.TABLE
    schema: str = "public"
    publication: str = data.PUBLICATION
    warmup_seconds: float = 10.0
    ready_timeout: float = 180.0
    load: data.SteadyLoad | None = field(default=None)

    def run_load(self, ready: Callable[[], bool]) -> data.SteadyLoad:
        """Warm up until `ready()` and for `warmup_seconds` at the steady rate, run the load, add the sentinel.

        The warm-up at full rate (WARMUP rows, not counted) lets a consumer reach its steady
        state first — a JVM's JIT, connection pools, first-batch effects — so that the
        percentiles describe latency *under* a steady load, not the recovery from start-up.
        """
        warm_up(self.server, ready, self.ready_timeout, self.rate, self.warmup_seconds, self.workdir)
        self.load = data.steady_load(self.server, self.rate, self.seconds, self.workdir)
        data.insert_marker(self.server, data.SENTINEL)
        return self.load

    def latency_measurement(self, contender: str, latencies_ms: list[float], peak_rss_bytes: int | None,
                            **details: object) -> Measurement:
        return latency_measurement(contender, latencies_ms, peak_rss_bytes, self.rate, self.load, **details)


def latency_measurement(contender: str, latencies_ms: list[float], peak_rss_bytes: int | None, rate: float,
                        load: data.SteadyLoad | None, **details: object) -> Measurement:
    """The Measurement for LOAD-row latencies (arrival − commit time, in milliseconds) under `load` at `rate`."""
    stats = percentiles(latencies_ms)
    # p99 of each tenth of the load rows in arrival order: flat when the consumer keeps up,
    # rising when it falls behind, spiky when it stalls now and then.
    tenth = max(1, len(latencies_ms) // 10)
    windows = [round(percentiles(latencies_ms[i:i + tenth]).get("p99", 0.0), 1)
               for i in range(0, len(latencies_ms), tenth)][:10]
    note = ""
    if load is not None and stats["count"] != load.rows:
        note = f"received {stats['count']} of {load.rows} load rows"
    return Measurement(
        contender, rows=int(stats["count"]), latency_ms=stats, peak_rss_bytes=peak_rss_bytes, note=note,
        details={"rate_asked": rate, "rate_achieved": load.rate_achieved if load else None,
                 "load_rows": load.rows if load else None, "load_seconds": load.seconds if load else None,
                 "p99_ms_by_tenth": windows, **details},
    )


@dataclass
class RunningCase:
    """One large transaction into a consumer already streaming: commit → the load's events delivered.

    `run_load` fills in `warmup_rows` (the WARMUP rows the consumer counts before the load's),
    `commit` (the load's first id; the epoch times its INSERT and COMMIT were sent and its COMMIT
    acknowledged: `committed`, the time measured from) and `end_lsn` (the WAL position after it).
    """

    server: PostgresServer
    rows: int
    workdir: Path
    slot: str
    dbname: str = data.DBNAME
    table: str = data.TABLE
    schema: str = "public"
    publication: str = data.PUBLICATION
    ready_timeout: float = 180.0
    warmup_seconds: float = 10.0
    warmup_rate: float = 1000.0
    warmup_rows: int | None = None
    commit: data.Commit | None = None
    end_lsn: str | None = None

    @property
    def expect_file(self) -> Path:
        return self.workdir / "expect.json"

    @property
    def max_wait(self) -> float:
        """How long a consumer may take from launch to the load's last event."""
        return self.ready_timeout + max(600.0, self.rows / 2000)

    def run_load(self, ready: Callable[[], bool]) -> float:
        """WARMUP rows until `ready()` and for `warmup_seconds` at `warmup_rate` (as `LatencyCase`: the consumer
        is past its first batches), the expect file, then the load in one transaction; returns its commit time."""
        self.warmup_rows = warm_up(self.server, ready, self.ready_timeout, self.warmup_rate, self.warmup_seconds,
                                   self.workdir)
        part = self.expect_file.with_suffix(".part")  # renamed into place: a reader never sees half of it
        part.write_text(json.dumps({"skip": self.warmup_rows, "expect": self.rows}))
        part.rename(self.expect_file)
        self.commit = data.insert_one_transaction(self.server, self.rows)
        self.end_lsn = data.current_lsn(self.server)
        return self.commit.committed

    @property
    def committed(self) -> float | None:
        return None if self.commit is None else self.commit.committed

    def measurement(self, contender: str, res: ProcessResult, got: dict, **details: object) -> Measurement:
        """The Measurement of a consumer that reported `first` (its first event, a WARMUP row), `load_first`
        (its first event past the WARMUP rows), `last` and `count` (all events): `seconds` = commit → last,
        `startup_seconds` = commit → the load's first event, `first_to_last_seconds` = the load's first → last."""
        if self.committed is None:
            return Measurement.failed(contender, got.get("error") or f"the load never ran (exit {res.returncode})")
        skip = self.warmup_rows or 0
        times = {**got, "first": got.get("load_first"), "count": int(got.get("count") or 0) - skip}
        return from_event_times(
            contender, res, times, self.rows, None, since=self.committed, warmup_events=skip,
            launch_to_first_event_s=got["first"] - res.launched if got.get("first") else None,
            launch_to_commit_s=self.committed - res.launched,
            load_cpu_s=res.cpu_seconds_between(self.committed, got["last"]) if got.get("last") else None, **details)
