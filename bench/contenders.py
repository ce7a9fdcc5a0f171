"""The registry: which benchmarks there are, who competes in each, and the targets headwater must meet.

What a benchmark, a contender, a target and the roles are is in `bench.model`. A connector joins
by adding its benchmarks here (`bench.mariadb.benchmarks` shows the shape) and a runner for its kind
of server (`bench/runner.py` for PostgreSQL, `bench/mariadb.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from bench import (
    debezium,
    headwater_contenders,
    incremental,
    jdbc_sink,
    lake,
    mariadb,
    pg_baselines,
    transforms,
)
from bench.measure import Measurement
from bench.model import BASELINE, LIMIT, REFERENCE, SUBJECT, Benchmark, Contender, Options, Target


def _debezium_skip(opts: Options, big: bool = False) -> Callable[[], str | None]:
    def skip() -> str | None:
        if opts.skip_debezium:
            return "--skip-debezium given"
        if big and opts.skip_debezium_10m:
            return f"--skip-debezium-10m given (at ~13k rows/s it needs ~{opts.full_rows / 13000 / 60:.0f} min)"
        return debezium.unavailable()

    return skip


def _checkouts(opts: Options, run: Callable[..., Measurement]) -> list[Contender]:
    """A baseline contender per `--compare-with` checkout: `run` with that checkout's headwater."""
    out = []
    for root in opts.compare_with:
        name = f"{headwater_contenders.NAME}@{Path(root).resolve().name}"
        out.append(Contender(name, BASELINE, partial(run, checkout=headwater_contenders.Checkout.at(root), name=name),
                             f"headwater of the checkout {root} (--compare-with)"))
    return out


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
            *_checkouts(opts, headwater_contenders.postgres_snapshot),
        ],
        [Target("≥ 10× Debezium's rows/s", "rows_per_s", 10.0, REFERENCE),
         Target("≥ ¼ of COPY's rows/s", "rows_per_s", 0.25, LIMIT)],
        {"rows": rows},
    )


def _stream(key: str, title: str, rows: int, one_txn: bool, opts: Options, big: bool = False,
            header_costs: bool = False) -> Benchmark:
    targets = [Target("≥ 0.8× pg_recvlogical's rows/s", "rows_per_s", 0.8, LIMIT),
               Target("≥ 10× Debezium's rows/s", "rows_per_s", 10.0, REFERENCE)]
    if big:
        targets.append(Target("peak memory (PSS) ≤ 1 GB", "peak_pss_bytes", 1e9))
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
            *_checkouts(opts, headwater_contenders.postgres_stream),
            Contender(headwater_contenders.ENGINE_NAME, BASELINE, headwater_contenders.postgres_stream_engine,
                      "headwater's capture layer alone: the in-process engine, no Spark, no sink (information)"),
            *([Contender(headwater_contenders.NAME + headwater_contenders.NO_HEADERS, BASELINE,
                         headwater_contenders.postgres_stream_no_headers,
                         "headwater streaming with extended.headers.enabled=false (what the context headers cost)"),
               Contender(headwater_contenders.ENGINE_NAME + headwater_contenders.NO_HEADERS, BASELINE,
                         headwater_contenders.postgres_stream_engine_no_headers,
                         "the in-process engine with extended.headers.enabled=false (what the context headers cost)")]
              if header_costs else []),
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
                opts.rows, True, opts, header_costs=True),
        _stream("pg_stream_singles", f"PostgreSQL streaming, {opts.singles:,} single-row transactions",
                opts.singles, False, opts),
    ]
    if opts.full:
        out.append(_stream("pg_stream_big_txn", f"PostgreSQL streaming, {opts.full_rows:,} inserts in one "
                           "transaction (bounded memory)", opts.full_rows, True, opts, big=True))
    out.append(_running("pg_stream_running", opts))
    out += incremental.benchmarks(opts, _debezium_skip(opts))
    out += [_latency("pg_latency", opts.latency_rate, opts,
                     [Target("p99 < 2 s", "p99_ms", 2000.0), Target("p99 ≤ Debezium's", "p99_ms", 1.0, REFERENCE)]),
            _latency("pg_latency_high", opts.latency_high_rate, opts, [Target("p99 < 2 s", "p99_ms", 2000.0)])]
    return out


def _running(key: str, opts: Options) -> Benchmark:
    return Benchmark(
        key, f"PostgreSQL streaming, {opts.rows:,} inserts in one transaction into a pipeline already running "
        f"(commit → last event; after {opts.latency_warmup:.0f} s of warm-up at 1,000 changes/s)", "postgresql",
        "running",
        [
            Contender("pg_recvlogical", LIMIT, pg_baselines.recvlogical_running,
                      "pg_recvlogical pgoutput proto 1 into a pipe, started before the load", repeat=opts.limit_repeat),
            Contender("pg_recvlogical v2", BASELINE, pg_baselines.recvlogical_running_v2,
                      "the same with proto_version=2 streaming=on (most of the load sent before its commit; "
                      "information)", repeat=opts.limit_repeat),
            Contender(debezium.NAME, REFERENCE, debezium.running,
                      "Debezium 3.6.3, snapshot.mode=no_data, streaming before the load", skip=_debezium_skip(opts)),
            Contender(headwater_contenders.NAME, SUBJECT, headwater_contenders.postgres_running,
                      "headwater on Spark into the jsonl sink, streaming before the load"),
            *_checkouts(opts, headwater_contenders.postgres_running),
            Contender(headwater_contenders.ENGINE_NAME, BASELINE, headwater_contenders.postgres_running_engine,
                      "headwater's in-process engine, no Spark, no sink, streaming before the load (information)"),
        ],
        [Target("≥ 0.8× pg_recvlogical's rows/s (commit → last event)", "rows_per_s", 0.8, LIMIT),
         Target("≥ 10× Debezium's rows/s (commit → last event)", "rows_per_s", 10.0, REFERENCE)],
        {"rows": opts.rows, "warmup_seconds": opts.latency_warmup, "warmup_rate": 1000.0},
    )


def _latency(key: str, rate: float, opts: Options, targets: list[Target]) -> Benchmark:
    return Benchmark(
        key,
        f"PostgreSQL commit-to-sink latency, steady {rate:,.0f} changes/s for {opts.latency_seconds:.0f} s "
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
            *_checkouts(opts, headwater_contenders.postgres_latency),
        ],
        targets,
        {"rate": rate, "seconds": opts.latency_seconds, "warmup_seconds": opts.latency_warmup},
    )


def all_benchmarks(opts: Options) -> list[Benchmark]:
    out = (postgres_benchmarks(opts) + mariadb.benchmarks(opts) + transforms.benchmarks(opts) + jdbc_sink.benchmarks(opts)
           + lake.benchmarks(opts))
    if opts.only:
        out = [b for b in out if any(b.key.startswith(o) or b.source == o or b.kind == o for o in opts.only)]
    if opts.contenders:
        for b in out:
            for c in b.contenders:
                if c.name not in opts.contenders:
                    c.skip = lambda: "not selected (--contender)"
    return out
