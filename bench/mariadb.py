"""The MariaDB benchmarks: snapshot, binlog streaming and latency, against MariaDB's own tools as the limits.

Same table shape as PostgreSQL's (`bench.mariadb_data`), on a fresh throwaway MariaDB server
(`headwater.devservers.mariadb`) per benchmark, loaded with the Sequence engine.

- Snapshot limits (the faster is the limit): `mariadb --quick -e 'SELECT * FROM t' > /dev/null`
  (rows streamed to a client, in C) and `SELECT * FROM t INTO OUTFILE` (the server writing the
  table as text into a file in its own tmpdir, removed after).
- Streaming: the binlog coordinates are read before and after the load, so the tools read exactly
  the load's events. `mariadb-binlog` (limit): `mariadb-binlog --read-from-remote-server
  --start-position=P --stop-position=Q FILE...` into /dev/null; it prints the row events as base64
  `BINLOG` statements without decoding them: the transfer limit. `mariadb-binlog -v` (baseline,
  not used in ratios): the same with `--verbose --base64-output=DECODE-ROWS`, which decodes every
  row to pseudo-SQL in C: what decoding costs a fast client.
- Latency: a stored procedure inserts single-row transactions at the steady rate, each row carrying
  `sysdate(6)` (`bench.mariadb_data.steady_load`); p99 < 2 s is an absolute target (no floor
  contender yet).
- Debezium: pydbzengine 3.6.3 bundles no `debezium-connector-mariadb`, and its MySQL connector
  fails against MariaDB 10.11 at connection validation ("should support SHOW BINARY LOG STATUS
  but it failed"; checked), so it is reported as skipped with that reason.
- headwater: the `mariadb_*` hooks of `bench.headwater_contenders`.

`python -m bench --only mariadb` runs just this section.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from bench import data, headwater_contenders
from bench import mariadb_data as md
from bench.calls import call, call_best, pending
from bench.measure import Measurement, run_measured, stop_all_live
from bench.model import (
    BASELINE,
    LIMIT,
    REFERENCE,
    SUBJECT,
    Benchmark,
    BenchmarkResult,
    Contender,
    Options,
    Progress,
    Target,
)

# The snapshot table and its indexes stay in memory: no contender pays for a cold cache.
SNAPSHOT_SETTINGS = {"innodb-buffer-pool-size": "2G"}


def devserver_missing() -> str | None:
    try:
        import headwater.devservers.mariadb  # noqa: F401
    except ImportError as exc:
        return f"MariaDB: not measured yet (no MariaDB dev server: {exc})"
    if shutil.which("mariadb-binlog") is None:
        return "MariaDB: mariadb-binlog not installed"
    return None


def _tool(name: str) -> str:
    from headwater.devservers.mariadb import mariadb_binary

    return mariadb_binary(name)


# -- the limits --------------------------------------------------------------------------------

def dump_quick(case: md.SnapshotCase) -> Measurement:
    """`mariadb --quick --batch -e 'SELECT * FROM t' > /dev/null`: the rows streamed to a C client."""
    log = case.workdir / "mariadb-quick.log"
    with open(log, "w") as f:
        res = run_measured([_tool("mariadb"), *case.server.client_args(), "--quick", "--batch", "--skip-column-names",
                            f"--database={case.dbname}", "-e", f"SELECT * FROM {case.table}"],
                           stdout=subprocess.DEVNULL, stderr=f, timeout=3600)
    if res.returncode != 0:
        return Measurement.failed("mariadb --quick", f"exit {res.returncode}: {log.read_text()[-300:]}")
    return Measurement("mariadb --quick", rows=case.rows, seconds=res.seconds, data_bytes=case.data_bytes,
                       peak_rss_bytes=res.peak_rss_bytes,
                       details={"tool": "mariadb --quick --batch -e 'SELECT * FROM t' > /dev/null", **res.memory()})


def dump_outfile(case: md.SnapshotCase) -> Measurement:
    """`SELECT * FROM t INTO OUTFILE`: the server writes the rows as text into a file of its tmpdir."""
    assert case.server.root is not None
    target = case.server.root / "tmp" / f"outfile-{time.time_ns()}.txt"
    log = case.workdir / "outfile.log"
    try:
        with open(log, "w") as f:
            res = run_measured([_tool("mariadb"), *case.server.client_args(), "--batch", f"--database={case.dbname}",
                                "-e", f"SELECT * FROM {case.table} INTO OUTFILE '{target}'"],
                               stdout=f, stderr=subprocess.STDOUT, timeout=3600)
        size = target.stat().st_size if target.exists() else 0
    finally:
        with contextlib.suppress(OSError):
            os.remove(target)
    if res.returncode != 0:
        return Measurement.failed("INTO OUTFILE", f"exit {res.returncode}: {log.read_text()[-300:]}")
    return Measurement("INTO OUTFILE", rows=case.rows, seconds=res.seconds, data_bytes=case.data_bytes,
                       peak_rss_bytes=res.peak_rss_bytes,
                       details={"tool": "SELECT * FROM t INTO OUTFILE (server tmpdir)", "file_bytes": size,
                                **res.memory()})


def _binlog_cmd(case: md.StreamCase, *extra: str) -> list[str]:
    s = case.server
    # Explicit options rather than the dev server's client.cnf: mariadb-binlog refuses its
    # default-character-set line.
    return [_tool("mariadb-binlog"), "--no-defaults", "--host=127.0.0.1", f"--port={s.port}",
            f"--user={s.superuser}", f"--password={s.password}", "--read-from-remote-server",
            f"--start-position={case.start_pos}", f"--stop-position={case.end_pos}", *extra, *case.files]


def _binlog(case: md.StreamCase, name: str, *extra: str) -> Measurement:
    log = case.workdir / f"{name.replace(' ', '_')}.log"
    with open(log, "w") as f:
        res = run_measured(_binlog_cmd(case, *extra), stdout=subprocess.DEVNULL, stderr=f, timeout=3600)
    if res.returncode != 0:
        return Measurement.failed(name, f"exit {res.returncode}: {log.read_text()[-300:]}")
    return Measurement(name, rows=case.rows, seconds=res.seconds, data_bytes=case.data_bytes,
                       peak_rss_bytes=res.peak_rss_bytes,
                       details={"tool": " ".join(["mariadb-binlog --read-from-remote-server", *extra, "> /dev/null"]), **res.memory()})


def binlog_limit(case: md.StreamCase) -> Measurement:
    return _binlog(case, "mariadb-binlog")


def binlog_decoded(case: md.StreamCase) -> Measurement:
    return _binlog(case, "mariadb-binlog -v", "--verbose", "--base64-output=DECODE-ROWS")


def debezium_skip() -> str:
    return ("pydbzengine 3.6.3 bundles no debezium-connector-mariadb, and its MySQL connector refuses "
            "MariaDB 10.11 (it fails on SHOW BINARY LOG STATUS)")


def debezium(case: Any) -> Measurement:
    """Never called while `debezium_skip` gives a reason; kept so the row has a contender to run."""
    return Measurement.skipped("debezium", debezium_skip())


# -- the benchmarks ----------------------------------------------------------------------------

def benchmarks(opts: Options) -> list[Benchmark]:
    missing = devserver_missing()

    def skip() -> str | None:
        return missing

    def checkouts(run: Callable[..., Measurement]) -> list[Contender]:
        """A baseline contender per `--compare-with` checkout: `run` with that checkout's headwater."""
        out = []
        for root in opts.compare_with:
            name = f"{headwater_contenders.NAME}@{Path(root).resolve().name}"
            out.append(Contender(name, BASELINE, partial(run, checkout=headwater_contenders.Checkout.at(root),
                                                         name=name),
                                 f"headwater of the checkout {root} (--compare-with)", skip=skip))
        return out

    def floor() -> Contender:
        return Contender(headwater_contenders.FLOOR_NAME, BASELINE, headwater_contenders.mariadb_spark_floor,
                         "Spark's fixed cost: launch -> one committed micro-batch of a trivial Python source "
                         "(no database, no events): the best ratio a Spark pipeline can reach here (information)",
                         skip=skip)

    def dbz() -> Contender:
        return Contender("debezium", REFERENCE, debezium, "Debezium MariaDB connector", skip=debezium_skip)

    def snapshot(key: str, rows: int, big: bool = False) -> Benchmark:
        repeat = 1 if big else opts.limit_repeat
        return Benchmark(
            key, f"MariaDB initial snapshot, {rows:,} rows (6 mixed columns)", "mariadb", "snapshot",
            [
                Contender("mariadb --quick", LIMIT, dump_quick, "mariadb --quick -e 'SELECT * FROM t' > /dev/null",
                          skip=skip, repeat=repeat),
                Contender("INTO OUTFILE", LIMIT, dump_outfile, "SELECT * FROM t INTO OUTFILE (the server's tmpdir)",
                          skip=skip, repeat=repeat),
                dbz(),
                Contender(headwater_contenders.NAME, SUBJECT, headwater_contenders.mariadb_snapshot,
                          "headwater snapshot, the default (lock-free, chunks between binlog watermarks)", skip=skip),
                *checkouts(headwater_contenders.mariadb_snapshot),
                Contender(headwater_contenders.LOCKING_NAME, SUBJECT, headwater_contenders.mariadb_snapshot_locking,
                          "headwater snapshot, Debezium's locking one (snapshot.locking.mode=minimal)", skip=skip),
                Contender(headwater_contenders.ENGINE_NAME, BASELINE, headwater_contenders.mariadb_snapshot_engine,
                          "the default snapshot through the in-process engine: no Spark, no sink (information)",
                          skip=skip),
                floor(),
            ],
            [Target("≥ ¼ of the dump rate", "rows_per_s", 0.25, LIMIT)],
            {"rows": rows},
        )

    def stream(key: str, title: str, rows: int, one_txn: bool) -> Benchmark:
        return Benchmark(
            key, title, "mariadb", "stream",
            [
                Contender("mariadb-binlog", LIMIT, binlog_limit,
                          "mariadb-binlog --read-from-remote-server into /dev/null", skip=skip,
                          repeat=opts.limit_repeat),
                Contender("mariadb-binlog -v", BASELINE, binlog_decoded,
                          "the same, rows decoded to pseudo-SQL (--verbose --base64-output=DECODE-ROWS)",
                          skip=skip, repeat=opts.limit_repeat),
                dbz(),
                Contender(headwater_contenders.NAME, SUBJECT, headwater_contenders.mariadb_stream,
                          "headwater streaming the binlog", skip=skip),
                *checkouts(headwater_contenders.mariadb_stream),
                Contender(headwater_contenders.ENGINE_NAME, BASELINE, headwater_contenders.mariadb_stream_engine,
                          "headwater's capture layer alone: the in-process engine, no Spark, no sink (information)",
                          skip=skip),
                floor(),
            ],
            [Target("≥ 0.8× mariadb-binlog's rows/s", "rows_per_s", 0.8, LIMIT)],
            {"rows": rows, "one_transaction": one_txn},
        )

    out = [snapshot("mariadb_snapshot", opts.rows)]
    if opts.full:
        out.append(snapshot("mariadb_snapshot_full", opts.full_rows, big=True))
    out += [
        stream("mariadb_stream_one_txn", f"MariaDB streaming, {opts.rows:,} inserts in one transaction", opts.rows,
               True),
        stream("mariadb_stream_singles", f"MariaDB streaming, {opts.singles:,} single-row transactions",
               opts.singles, False),
        Benchmark(
            "mariadb_latency",
            f"MariaDB commit-to-sink latency, steady {opts.latency_rate:,.0f} changes/s for {opts.latency_seconds:.0f} s "
            f"(after {opts.latency_warmup:.0f} s of warm-up at that rate)",
            "mariadb", "latency",
            [dbz(), Contender(headwater_contenders.NAME, SUBJECT, headwater_contenders.mariadb_latency,
                              "headwater, arrival at the sink", skip=skip),
             *checkouts(headwater_contenders.mariadb_latency)],
            [Target("p99 < 2 s", "p99_ms", 2000.0)],
            {"rate": opts.latency_rate, "seconds": opts.latency_seconds, "warmup_seconds": opts.latency_warmup},
        ),
    ]
    return out


# -- the runners -------------------------------------------------------------------------------

def _guarded(b: Benchmark, settings: dict[str, str], body: Callable[[Any, BenchmarkResult, list[Path]], None]
             ) -> BenchmarkResult:
    """A fresh server for `body(server, result, dirs)`; whatever happens, the server is stopped, dirs removed."""
    result = BenchmarkResult(b)
    todo = [pending(c) for c in b.contenders]
    if all(m is not None for m in todo):
        result.measurements = [m for m in todo if m is not None]
        result.ended = time.time()
        return result
    server, dirs = None, []  # type: ignore[var-annotated]
    try:
        server = md.new_server(**settings)
        body(server, result, dirs)
    except Exception as exc:
        result.error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    except KeyboardInterrupt:
        result.error, result.interrupted = "interrupted", True
    finally:
        stop_all_live()
        if server is not None:
            server.stop()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
        result.ended = time.time()
    return result


def _workdir(c: Contender, dirs: list[Path]) -> Path:
    wd = data.workdir(c.name.replace(" ", "_"))
    dirs.append(wd)
    return wd


def run_snapshot(b: Benchmark, progress: Progress) -> BenchmarkResult:
    def body(server: Any, result: BenchmarkResult, dirs: list[Path]) -> None:
        rows = b.params["rows"]
        progress(f"  loading {rows:,} rows ...")
        started = time.time()
        md.load_rows(server, rows)
        server.execute(f"ANALYZE TABLE {md.TABLE}", md.DBNAME)
        load_seconds = time.time() - started
        nbytes = md.text_bytes(server)  # reads every row: the caches are warm for the first contender
        result.workload = {"rows": rows, "data_bytes": nbytes, "load_seconds": load_seconds}
        for c in b.contenders:
            m = pending(c)
            if m is None:

                def case(i: int, c: Contender = c) -> md.SnapshotCase:
                    return md.SnapshotCase(server, rows, nbytes, _workdir(c, dirs))

                m = call_best(c, case, progress)
            result.measurements.append(m)

    return _guarded(b, SNAPSHOT_SETTINGS, body)


def run_stream(b: Benchmark, progress: Progress) -> BenchmarkResult:
    def body(server: Any, result: BenchmarkResult, dirs: list[Path]) -> None:
        rows = b.params["rows"]
        one_txn = b.params["one_transaction"]
        start_file, start_pos = md.master_position(server)
        progress(f"  loading {rows:,} rows ({'one transaction' if one_txn else 'one per row'}) ...")
        started = time.time()
        (md.load_rows if one_txn else md.load_singles)(server, rows)
        load_seconds = time.time() - started
        end_file, end_pos = md.master_position(server)
        files = [f for f in server.binlog_files() if start_file <= f <= end_file]
        nbytes = md.text_bytes(server)
        transactions = 1 if one_txn else rows
        result.workload = {"rows": rows, "transactions": transactions, "data_bytes": nbytes,
                           "load_seconds": load_seconds, "start": [start_file, start_pos], "end": [end_file, end_pos],
                           "binlog_files": files}
        for c in b.contenders:
            m = pending(c)
            if m is None:

                def case(i: int, c: Contender = c) -> md.StreamCase:
                    return md.StreamCase(server, rows, transactions, nbytes, _workdir(c, dirs), files,
                                         start_file, start_pos, end_file, end_pos)

                m = call_best(c, case, progress)
            result.measurements.append(m)

    return _guarded(b, {}, body)


def run_latency(b: Benchmark, progress: Progress) -> BenchmarkResult:
    def body(server: Any, result: BenchmarkResult, dirs: list[Path]) -> None:
        result.workload = dict(b.params)
        for c in b.contenders:
            m = pending(c)
            if m is None:
                m = call(c, md.LatencyCase(server, b.params["rate"], b.params["seconds"], _workdir(c, dirs),
                                           warmup_seconds=b.params["warmup_seconds"]), progress)
            result.measurements.append(m)

    return _guarded(b, {}, body)


RUNNERS = {"snapshot": run_snapshot, "stream": run_stream, "latency": run_latency}
