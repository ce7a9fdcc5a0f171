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
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bench import data
from bench.measure import Measurement, percentiles
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
        deadline = time.monotonic() + self.ready_timeout
        while not ready():
            if time.monotonic() > deadline:
                raise TimeoutError(f"consumer not streaming after {self.ready_timeout:.0f}s")
            data.insert_marker(self.server, data.WARMUP)
            time.sleep(0.25)
        if self.warmup_seconds > 0:
            data.steady_load(self.server, self.rate, self.warmup_seconds, self.workdir, kind=data.WARMUP)
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
