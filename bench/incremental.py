"""The incremental-snapshot benchmark: re-read the 1M-row table through signals while streaming goes on.

`pg_incremental`: the table `t` of `bench.data` (1M rows, keyed, frozen, cached), a signalling
table `dbz_signal` and a table `light` that a light streaming load writes to, all three in the
publication. For each contender the harness creates a slot, inserts an `execute-snapshot` signal
for `public.t` into `dbz_signal` (so the signal is the first thing in the contender's stream),
starts the light load (`light_rate` single-row INSERTs a second into `light`, in a thread of the
harness, for the contender's whole run), and calls the contender; the contender starts the
connector with `snapshot.mode=no_data` on the slot, with the source signal channel and the same
`incremental.snapshot.chunk.size` (`chunk` rows, the default watermarking `insert_insert`), and
counts the events whose `source.snapshot` is `incremental` until it has all `rows`. The load's
rows go to another table, so no streamed change supersedes a snapshot row and both contenders
deliver exactly `rows` reads.

Reported as the other snapshots are: launch -> last incremental row (start-up and the wait for the
signal included), first -> last incremental row (steady), peak memory. The limit is a plain
`COPY` of the table (best of `--limit-repeat`), run while the load goes on too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass

from bench import data, debezium, headwater_contenders, pg_baselines
from bench.cases import SnapshotCase
from bench.measure import MeasuredProcess, Measurement, from_event_times
from bench.model import (
    LIMIT,
    REFERENCE,
    SUBJECT,
    Benchmark,
    Contender,
    Options,
    Target,
)
from headwater.devservers.postgres import PostgresServer

SIGNAL_TABLE = "dbz_signal"
LIGHT_TABLE = "light"
CHUNK = 50_000
LIGHT_RATE = 100.0


@dataclass
class IncrementalCase(SnapshotCase):
    """A `SnapshotCase` (so the COPY limits run on it) plus the slot holding the signal and the chunk size."""

    slot: str = ""
    chunk: int = CHUNK
    signal_table: str = f"public.{SIGNAL_TABLE}"


class LightLoad:
    """Single-row INSERTs into `light` at `rate` a second, in a thread, until stopped."""

    def __init__(self, server: PostgresServer, rate: float):
        self.server, self.rate = server, rate
        self.rows = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="light-load")
        self.started = time.time()

    def _run(self) -> None:
        conn = self.server.connect(data.DBNAME)
        conn.autocommit = True
        try:
            with conn.cursor() as cur:
                while not self._stop.wait(max(0.0, self.started + self.rows / self.rate - time.time())):
                    cur.execute(f"INSERT INTO {LIGHT_TABLE} (v) VALUES (%s)", (self.rows,))
                    self.rows += 1
        finally:
            conn.close()

    def __enter__(self) -> LightLoad:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def prepare(server: PostgresServer) -> None:
    """The signalling and load tables, in the publication beside `t`."""
    server.execute(f"CREATE TABLE {SIGNAL_TABLE} (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
                   f"data varchar(2048)); CREATE TABLE {LIGHT_TABLE} (id bigserial PRIMARY KEY, v int NOT NULL, "
                   f"at timestamptz NOT NULL DEFAULT clock_timestamp())", data.DBNAME)
    server.execute(f"ALTER PUBLICATION {data.PUBLICATION} ADD TABLE {SIGNAL_TABLE}, {LIGHT_TABLE}", data.DBNAME)


def signal(server: PostgresServer) -> None:
    """Insert the `execute-snapshot` signal of `public.t` into the signalling table."""
    server.execute(f"INSERT INTO {SIGNAL_TABLE} VALUES ('{uuid.uuid4()}', 'execute-snapshot', "
                   f"'{{\"data-collections\": [\"public.{data.TABLE}\"], \"type\": \"incremental\"}}')", data.DBNAME)


# ---------------------------------------------------------------------- the contenders


def _debezium(case: IncrementalCase) -> Measurement:
    """Debezium's PostgreSQL connector: `snapshot.mode=no_data`, the signal read from the stream."""
    props = {**debezium.postgres_properties(case, case.slot, "no_data", case.workdir),
             "table.include.list": f"public.{data.TABLE},{case.signal_table},public.{LIGHT_TABLE}",
             "signal.data.collection": case.signal_table, "incremental.snapshot.chunk.size": str(case.chunk)}
    timeout = max(900.0, case.rows / 1000)
    proc, result_file, log = debezium.start_driver(props, case.workdir, "--mode", "incremental", "--expect",
                                                   str(case.rows), "--max-wait", str(timeout))
    try:
        res = proc.wait(timeout=timeout + 60)
    finally:
        log.close()
    try:
        got = json.loads(result_file.read_text())
    except (OSError, ValueError):
        tail = (case.workdir / "debezium.log").read_text(errors="replace")[-600:]
        return Measurement.failed(debezium.NAME, f"no result (exit {res.returncode}): {tail}")
    return from_event_times(debezium.NAME, res, got, case.rows, case.data_bytes, chunk=case.chunk,
                            jvm_start_s=got["jvm_started"] - got["imported"])


def _headwater(case: IncrementalCase) -> Measurement:
    """headwater's pipeline on local Spark into the jsonl sink, the signal read from the stream."""
    props = {**headwater_contenders.properties(case, case.slot, "no_data"),
             "table.include.list": f"public.{data.TABLE},{case.signal_table},public.{LIGHT_TABLE}",
             "signal.data.collection": case.signal_table, "incremental.snapshot.chunk.size": str(case.chunk)}
    props_file = case.workdir / "headwater-incremental.json"
    props_file.write_text(json.dumps(props))
    result = case.workdir / "headwater-incremental-result.json"
    timeout = max(900.0, case.rows / 1000)
    with open(case.workdir / "headwater-incremental.log", "w") as log:
        proc = MeasuredProcess([sys.executable, str(headwater_contenders.DRIVER), str(props_file), str(result),
                                "--runner", "spark", "--mode", "incremental", "--expect", str(case.rows),
                                "--workdir", str(case.workdir / "spark"), "--max-wait", str(timeout)],
                               cwd=case.workdir, stdout=log, stderr=subprocess.STDOUT,
                               env={**os.environ, "PYSPARK_PYTHON": sys.executable})
        res = proc.wait(timeout=timeout + 120)
    try:
        got = json.loads(result.read_text())
    except (OSError, ValueError):
        got = {}
    m = headwater_contenders._measure(headwater_contenders.NAME, res, got, case.rows, case.data_bytes, case.workdir,
                                      "incremental")
    m.details["chunk"] = case.chunk
    return m


def benchmarks(opts: Options, debezium_skip: object) -> list[Benchmark]:
    return [Benchmark(
        "pg_incremental",
        f"PostgreSQL incremental snapshot (signal), {opts.rows:,} rows in chunks of {CHUNK:,}, while "
        f"{LIGHT_RATE:.0f} single-row transactions/s stream into another table",
        "postgresql", "incremental",
        [
            Contender("copy-psql", LIMIT, pg_baselines.copy_psql, "psql \\copy (SELECT * FROM t) TO '/dev/null'",
                      repeat=opts.limit_repeat),
            Contender(debezium.NAME, REFERENCE, _debezium,
                      "Debezium 3.6.3 PostgresConnector, execute-snapshot through the signalling table",
                      skip=debezium_skip),  # type: ignore[arg-type]
            Contender(headwater_contenders.NAME, SUBJECT, _headwater, "headwater incremental snapshot on Spark"),
        ],
        [Target("≥ 1× Debezium's rows/s", "rows_per_s", 1.0, REFERENCE)],
        {"rows": opts.rows, "chunk": CHUNK, "light_rate": LIGHT_RATE},
    )]
