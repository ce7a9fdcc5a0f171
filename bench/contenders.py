"""The registry: which benchmarks there are, who competes in each, and the targets headwater must meet.

A `Benchmark` is one workload on one source database (`kind` is snapshot, stream or latency); its
`Contender`s run one after the other on the same prepared data in one invocation, and every
comparison is a ratio between them. Roles:

- `limit`: the physical limit on this machine (COPY into /dev/null, pg_recvlogical into
  /dev/null, mariadb-binlog into /dev/null). With several, the fastest is the limit.
- `reference`: Debezium 3.x, the system to beat.
- `subject`: headwater (`bench/headwater_contenders.py`, the hook).
- `baseline`: shown for information, not used in ratios (e.g. two COPYs in parallel).

A connector joins by adding its benchmarks here (`mariadb_benchmarks` shows the shape) and a
runner for its kind of server (`bench/runner.py` for PostgreSQL, `bench/mariadb.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench import debezium, headwater_contenders, pg_baselines
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
    latency_seconds: float = 25.0
    latency_warmup: float = 10.0
    limit_repeat: int = 3
    only: list[str] = field(default_factory=list)
    contenders: list[str] = field(default_factory=list)


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
    """A goal for the subject: `metric` at least `value` × the `against` role's, or at most `value`."""

    text: str
    metric: str  # rows_per_s | p99_ms | peak_rss_bytes
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
            return "no data" if p99 is None else ("met" if p99 < self.value else "missed")
        if self.metric == "peak_rss_bytes":
            rss = subject.peak_rss_bytes
            return "no data" if rss is None else ("met" if rss <= self.value else "missed")
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


def _debezium_skip(opts: Options, big: bool = False) -> Callable[[], str | None]:
    def skip() -> str | None:
        if opts.skip_debezium:
            return "--skip-debezium given"
        if big and opts.skip_debezium_10m:
            return f"--skip-debezium-10m given (at ~13k rows/s it needs ~{opts.full_rows / 13000 / 60:.0f} min)"
        return debezium.unavailable()

    return skip


def _snapshot(key: str, rows: int, opts: Options, big: bool = False) -> Benchmark:
    limit_repeat = 1 if big else opts.limit_repeat
    return Benchmark(
        key, f"PostgreSQL initial snapshot, {rows:,} rows (6 mixed columns)", "postgresql", "snapshot",
        [
            Contender("copy-psql", LIMIT, pg_baselines.copy_psql, "psql \\copy (SELECT * FROM t) TO '/dev/null'",
                      repeat=limit_repeat),
            Contender("copy-psycopg2", LIMIT, pg_baselines.copy_psycopg2,
                      "COPY (SELECT * FROM t) TO STDOUT via psycopg2 into a counting writer", repeat=limit_repeat),
            Contender("copy-psql x2", BASELINE, pg_baselines.copy_psql_parallel,
                      "two psql \\copy at once, each over half the CTID range (information, not the limit)",
                      repeat=limit_repeat),
            Contender(debezium.NAME, REFERENCE, debezium.snapshot, "Debezium 3.6.3 PostgresConnector, snapshot.mode=initial",
                      skip=_debezium_skip(opts, big)),
            Contender(headwater_contenders.NAME, SUBJECT, headwater_contenders.postgres_snapshot, "headwater snapshot"),
        ],
        [Target("≥ 10× Debezium's rows/s", "rows_per_s", 10.0, REFERENCE),
         Target("≥ ¼ of COPY's rows/s", "rows_per_s", 0.25, LIMIT)],
        {"rows": rows},
    )


def _stream(key: str, title: str, rows: int, one_txn: bool, opts: Options, big: bool = False) -> Benchmark:
    targets = [Target("≥ 0.8× pg_recvlogical's rows/s", "rows_per_s", 0.8, LIMIT),
               Target("≥ 10× Debezium's rows/s", "rows_per_s", 10.0, REFERENCE)]
    if big:
        targets.append(Target("peak memory ≤ 1 GB", "peak_rss_bytes", 1e9))
    return Benchmark(
        key, title, "postgresql", "stream",
        [
            Contender("pg_recvlogical", LIMIT, pg_baselines.recvlogical_stream,
                      "pg_recvlogical pgoutput proto 1 into /dev/null until --endpos",
                      repeat=1 if big else opts.limit_repeat),
            Contender("pg_recvlogical v2", BASELINE, pg_baselines.recvlogical_stream_v2,
                      "the same with proto_version=2 streaming=on (in-progress transactions; information)",
                      repeat=1 if big else opts.limit_repeat),
            Contender(debezium.NAME, REFERENCE, debezium.stream,
                      "Debezium 3.6.3 PostgresConnector, snapshot.mode=no_data, slot made before the load",
                      skip=_debezium_skip(opts, big)),
            Contender(headwater_contenders.NAME, SUBJECT, headwater_contenders.postgres_stream, "headwater streaming"),
            Contender(headwater_contenders.ENGINE_NAME, BASELINE, headwater_contenders.postgres_stream_engine,
                      "headwater's capture layer alone: the in-process engine, no Spark, no sink (information)"),
        ],
        targets,
        {"rows": rows, "one_transaction": one_txn},
    )


def postgres_benchmarks(opts: Options) -> list[Benchmark]:
    out = [_snapshot("pg_snapshot", opts.rows, opts)]
    if opts.full:
        out.append(_snapshot("pg_snapshot_full", opts.full_rows, opts, big=True))
    out += [
        _stream("pg_stream_one_txn", f"PostgreSQL streaming, {opts.rows:,} inserts in one transaction",
                opts.rows, True, opts),
        _stream("pg_stream_singles", f"PostgreSQL streaming, {opts.singles:,} single-row transactions",
                opts.singles, False, opts),
    ]
    if opts.full:
        out.append(_stream("pg_stream_big_txn", f"PostgreSQL streaming, {opts.full_rows:,} inserts in one "
                           "transaction (bounded memory)", opts.full_rows, True, opts, big=True))
    out.append(Benchmark(
        "pg_latency",
        f"PostgreSQL commit-to-sink latency, steady {opts.latency_rate:,.0f} changes/s for {opts.latency_seconds:.0f} s "
        f"(after {opts.latency_warmup:.0f} s of warm-up at that rate)",
        "postgresql", "latency",
        [
            Contender("pg_recvlogical", LIMIT, pg_baselines.recvlogical_latency,
                      "pg_recvlogical test_decoding, each line timestamped on arrival (the floor)",
                      slot_plugin="test_decoding"),
            Contender(debezium.NAME, REFERENCE, debezium.latency,
                      "Debezium 3.6.3, arrival in the Python handler", skip=_debezium_skip(opts)),
            Contender(headwater_contenders.NAME, SUBJECT, headwater_contenders.postgres_latency,
                      "headwater, arrival at the sink"),
        ],
        [Target("p99 < 2 s", "p99_ms", 2000.0)],
        {"rate": opts.latency_rate, "seconds": opts.latency_seconds, "warmup_seconds": opts.latency_warmup},
    ))
    return out


def mariadb_benchmarks(opts: Options) -> list[Benchmark]:
    from bench import mariadb

    return mariadb.benchmarks(opts)


def all_benchmarks(opts: Options) -> list[Benchmark]:
    out = postgres_benchmarks(opts) + mariadb_benchmarks(opts)
    if opts.only:
        out = [b for b in out if any(b.key.startswith(o) or b.source == o or b.kind == o for o in opts.only)]
    if opts.contenders:
        for b in out:
            for c in b.contenders:
                if c.name not in opts.contenders:
                    c.skip = lambda: "not selected (--contender)"
    return out
