"""What a benchmark is and what it yields: `Benchmark`, its `Contender`s and `Target`s, the
command line's `Options`, and a run's `BenchmarkResult`.

A `Benchmark` is one workload on one source database (`kind` is snapshot, stream or latency); its
`Contender`s run one after the other on the same prepared data in one invocation, and every
comparison is a ratio between them. Roles:

- `limit`: the physical limit on this machine (COPY into /dev/null, pg_recvlogical into
  /dev/null, mariadb-binlog into /dev/null). With several, the fastest is the limit.
- `reference`: Debezium 3.x, the system to beat.
- `subject`: headwater (`bench/headwater_contenders.py`, the hook).
- `baseline`: shown for information, not used in ratios (e.g. two COPYs in parallel).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench import headwater_contenders
from bench.measure import Measurement

LIMIT, REFERENCE, SUBJECT, BASELINE = "limit", "reference", "subject", "baseline"


@dataclass
class Options:
    """What to run (from the command line)."""

    rows: int = 1_000_000
    singles: int = 100_000
    full: bool = False
    full_rows: int = 10_000_000
    skip_debezium: bool = False
    skip_debezium_10m: bool = False
    latency_rate: float = 2000.0
    latency_high_rate: float = 10000.0
    latency_seconds: float = 25.0
    latency_warmup: float = 10.0
    limit_repeat: int = 3
    only: list[str] = field(default_factory=list)
    contenders: list[str] = field(default_factory=list)
    compare_with: list[str] = field(default_factory=list)  # other headwater checkouts, run as baselines


@dataclass
class Contender:
    """One way of doing a benchmark's work. `run(case) -> Measurement`.

    `skip` returns why the contender cannot or should not run (None when it runs); the harness
    then records a "skipped" row with that reason. `slot_plugin` is the logical decoding plugin
    of the slot the harness creates for it in stream and latency benchmarks. `repeat` > 1 runs it
    that many times (each on a fresh case: its own slot, made before the load) and keeps the
    fastest run: used for the limits, which take seconds, so that a noisy neighbour does not
    lower the bar; the others' runs are in `details["runs_seconds"]`.
    """

    name: str
    role: str
    run: Callable[[Any], Measurement]
    description: str
    skip: Callable[[], str | None] = lambda: None
    slot_plugin: str = "pgoutput"
    repeat: int = 1

    @property
    def placeholder(self) -> bool:
        return headwater_contenders.is_placeholder(self.run)


@dataclass
class Target:
    """A goal for the subject: `metric` at least `value` × the `against` role's, or at most `value`
    (a p99 latency: below `value` ms, or with `against`, at most `value` × the other's p99)."""

    text: str
    metric: str  # rows_per_s | p99_ms | peak_pss_bytes
    value: float
    against: str | None = None  # LIMIT | REFERENCE | None (an absolute bound)

    def check(self, subject: Measurement, others: dict[str, float | None]) -> str:
        """'met', 'missed' or 'not measured yet' for the subject's measurement."""
        if not subject.ok:
            return "not measured yet" if subject.status == "not measured yet" else subject.status
        if self.metric == "rows_per_s":
            mine, base = subject.rows_per_s, others.get(self.against or "")
            if mine is None or not base:
                return "no baseline"
            return "met" if mine / base >= self.value else "missed"
        if self.metric == "p99_ms":
            p99 = (subject.latency_ms or {}).get("p99")
            if p99 is None:
                return "no data"
            if self.against is not None:  # at most `value` times the other's p99
                theirs = others.get(f"p99 {self.against}")
                return "no baseline" if not theirs else ("met" if p99 <= self.value * theirs else "missed")
            return "met" if p99 < self.value else "missed"
        if self.metric == "peak_pss_bytes":  # the process tree's sampled PSS (a forking tree's RSS counts shared pages twice)
            pss = subject.details.get("sampled_tree_pss_peak_bytes")
            return "no data" if not pss else ("met" if pss <= self.value else "missed")
        raise ValueError(self.metric)


@dataclass
class Benchmark:
    key: str
    title: str
    source: str  # postgresql | mariadb
    kind: str  # snapshot | stream | latency
    contenders: list[Contender]
    targets: list[Target]
    params: dict[str, Any] = field(default_factory=dict)


@dataclass
class BenchmarkResult:
    benchmark: Benchmark
    measurements: list[Measurement] = field(default_factory=list)
    workload: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.time)
    ended: float | None = None
    error: str | None = None
    interrupted: bool = False


Progress = Callable[[str], None]  # where a run reports what it is doing
