"""The jdbc sink's apply rate into PostgreSQL and into MariaDB, against the target's own bulk load of
the same rows (COPY, `LOAD DATA LOCAL INFILE`): four `make bench` rows, also runnable alone.

    .venv/bin/python -m bench --only jdbc                     # the four rows, in the harness
    .venv/bin/python -m bench.jdbc_sink [--rows 200000] [--updates 100000]   # alone, printed

The harness's PostgreSQL snapshot runner loads the benchmark table (`bench.t`, 6 mixed columns) and
hands each contender the case. The subject reads the snapshot with the embedded engine as typed
blocks (not timed) and applies it with `JdbcWriter` (`mirror`: upsert by key, the table created by
the first batch) into a fresh database of the target: the snapshot rows time that apply; the stream
rows apply the snapshot untimed, update `UPDATES` rows in one transaction, read them, and time the
apply of those changes. The limit is the target's bulk load of the same rows (the snapshot's, or the
updated ones') into an empty table of the same shape: `COPY ... FROM STDIN` into PostgreSQL,
`LOAD DATA LOCAL INFILE` of a CSV file into MariaDB.
"""

from __future__ import annotations

import argparse
import io
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from bench import data
from bench.cases import SnapshotCase
from bench.headwater_contenders import properties
from bench.measure import Measurement
from bench.model import LIMIT, SUBJECT, Benchmark, Contender, Options, Target
from headwater.connectors.registry import validate_connector
from headwater.devservers.mariadb import MariaDBServer
from headwater.engine import Engine
from headwater.events.typed import TypedEvents
from headwater.sinks.jdbc.config import parse_jdbc_sink
from headwater.sinks.jdbc.writer import JdbcWriter

UPDATES = 100_000
TARGET_DB = "target"
SUBJECT_NAME = "headwater jdbc sink"
MARIADB_TABLE = ("CREATE TABLE t_load (id bigint PRIMARY KEY, name longtext NOT NULL, qty int NOT NULL, "
                 "price decimal(12,2) NOT NULL, ts datetime(6) NOT NULL, flag boolean NOT NULL)")
# the benchmark table's rows as MariaDB's LOAD DATA reads them (UTC times, booleans as 0/1)
MARIADB_SELECT = f"SELECT id, name, qty, price, ts AT TIME ZONE 'UTC', flag::int FROM {data.TABLE}"


class BulkTarget:
    """One target database: a sink configuration for it, and its bulk load of the source's rows."""

    def __init__(self, kind: str, source: Any):
        self.kind, self.source = kind, source
        self.server: Any = None

    def __enter__(self) -> BulkTarget:
        if self.kind == "mariadb":
            self.server = MariaDBServer().start()
        else:
            self.server = self.source
        self.server.create_database(TARGET_DB)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.kind == "mariadb":
            self.server.stop()
        else:
            self.server.execute(f"DROP DATABASE IF EXISTS {TARGET_DB}")

    def sink(self) -> dict[str, Any]:
        scheme = "mariadb" if self.kind == "mariadb" else "postgresql"
        return {"type": "jdbc", "connection.url": f"jdbc:{scheme}://127.0.0.1:{self.server.port}/{TARGET_DB}",
                "connection.username": self.server.superuser, "connection.password": self.server.password,
                "mirror": True, "batch.size": 5000}

    def bulk_load_seconds(self, where: str) -> float:
        """Seconds of the target's bulk load of the source's rows `where` into an empty table."""
        text = io.BytesIO()
        src = self.source.connect(data.DBNAME)
        with src.cursor() as cur:
            select = MARIADB_SELECT if self.kind == "mariadb" else f"SELECT * FROM {data.TABLE}"
            cur.copy_expert(f"COPY ({select} {where}) TO STDOUT WITH (FORMAT csv)", text)
        src.close()
        if self.kind == "mariadb":
            return self._load_data(text.getvalue())
        dst = self.server.connect(TARGET_DB, autocommit=False)
        with dst.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS t_copy")
            cur.execute(data.CREATE_TABLE.replace(f"TABLE {data.TABLE} ", "TABLE t_copy "))
            cur.execute("ALTER TABLE t_copy ADD PRIMARY KEY (id)")
            dst.commit()
            text.seek(0)
            started = time.perf_counter()
            cur.copy_expert("COPY t_copy FROM STDIN WITH (FORMAT csv)", text, size=1 << 16)
            dst.commit()
            seconds = time.perf_counter() - started
        dst.close()
        return seconds

    def _load_data(self, csv: bytes) -> float:
        import pymysql

        conn = pymysql.connect(**self.server.connection_params(TARGET_DB), local_infile=True, autocommit=False)
        try:
            with conn.cursor() as cur, tempfile.NamedTemporaryFile(suffix=".csv") as f:
                f.write(csv)
                f.flush()
                cur.execute("DROP TABLE IF EXISTS t_load")
                cur.execute(MARIADB_TABLE)
                started = time.perf_counter()
                cur.execute(f"LOAD DATA LOCAL INFILE {conn.escape(f.name)} INTO TABLE t_load FIELDS TERMINATED BY "
                            "',' OPTIONALLY ENCLOSED BY '\"' LINES TERMINATED BY '\\n'")
                conn.commit()
                return time.perf_counter() - started
        finally:
            conn.close()


def read(engine: Engine) -> list[TypedEvents]:
    return list(engine.blocks(once=True))


def apply_seconds(writer: JdbcWriter, batches: list[TypedEvents], first_id: int) -> float:
    started = time.perf_counter()
    for i, blocks in enumerate(batches):
        writer.apply(first_id + i, list(blocks))
    return time.perf_counter() - started


@contextmanager
def _engine(props: dict[str, str]) -> Iterator[Engine]:
    engine = Engine(validate_connector(props), output="typed")
    try:
        yield engine
    finally:
        engine.close()


def sink_rates(server: Any, props: dict[str, str], kind: str, rows: int, updates: int) -> dict[str, float]:
    """Seconds of the sink's apply and of the bulk load, for the snapshot (`rows`) and, with
    `updates`, for that many updated rows: keys snapshot, snapshot_limit, stream, stream_limit."""
    out: dict[str, float] = {}
    with BulkTarget(kind, server) as target, _engine(props) as engine:
        writer = JdbcWriter(parse_jdbc_sink(target.sink()), "bench")
        try:
            snapshot = read(engine)
            if sum(len(b) for b in snapshot) != rows:
                raise RuntimeError(f"read {sum(len(b) for b in snapshot)} snapshot events, expected {rows}")
            out["snapshot"] = apply_seconds(writer, snapshot, 0)
            out["snapshot_limit"] = target.bulk_load_seconds("")
            if updates:
                server.execute(f"UPDATE {data.TABLE} SET qty = qty + 1, flag = NOT flag WHERE id <= {updates}",
                               data.DBNAME)
                stream = read(engine)
                if sum(len(b) for b in stream) != updates:
                    raise RuntimeError(f"read {sum(len(b) for b in stream)} updates, expected {updates}")
                out["stream"] = apply_seconds(writer, stream, len(snapshot))
                out["stream_limit"] = target.bulk_load_seconds(f"WHERE id <= {updates}")
        finally:
            writer.close()
    return out


def _contender(kind: str, stream: bool, limit: bool) -> Callable[[SnapshotCase], Measurement]:
    name = ("LOAD DATA" if kind == "mariadb" else "COPY") if limit else SUBJECT_NAME

    def run(case: SnapshotCase) -> Measurement:
        rows = min(UPDATES, case.rows) if stream else case.rows
        if limit:
            with BulkTarget(kind, case.server) as target:
                seconds = target.bulk_load_seconds(f"WHERE id <= {rows}" if stream else "")
        else:
            got = sink_rates(case.server, properties(case, case.slot_name, "initial"), kind, case.rows,
                             rows if stream else 0)
            seconds = got["stream" if stream else "snapshot"]
        return Measurement(name, rows=rows, seconds=seconds, first_to_last_seconds=seconds, data_bytes=case.data_bytes)

    return run


def benchmarks(opts: Options) -> list[Benchmark]:
    out = []
    for kind, title, load in (("postgresql", "PostgreSQL", "COPY ... FROM STDIN"),
                              ("mariadb", "MariaDB", "LOAD DATA LOCAL INFILE")):
        for stream in (False, True):
            what = (f"{min(UPDATES, opts.rows):,} updated rows after a {opts.rows:,}-row snapshot" if stream
                    else f"the {opts.rows:,}-row snapshot")
            out.append(Benchmark(
                f"jdbc_{'mariadb' if kind == 'mariadb' else 'pg'}_{'stream' if stream else 'snapshot'}",
                f"jdbc sink into {title}: {what} applied (mirror, upsert by key), against {load}",
                "postgresql", "snapshot",
                [Contender("LOAD DATA" if kind == "mariadb" else "COPY", LIMIT, _contender(kind, stream, True),
                           f"{load} of the same rows into an empty table of the same shape"),
                 Contender(SUBJECT_NAME, SUBJECT, _contender(kind, stream, False),
                           "JdbcWriter.apply of the engine's typed blocks (the reading not timed)")],
                [Target("≥ ¼ of the bulk load's rows/s", "rows_per_s", 0.25, LIMIT)],
                {"rows": opts.rows, "updates": min(UPDATES, opts.rows) if stream else 0},
            ))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--updates", type=int, default=UPDATES)
    parser.add_argument("--target", choices=("postgresql", "mariadb"), action="append")
    args = parser.parse_args()
    for kind in args.target or ("postgresql", "mariadb"):
        server = data.new_server()
        try:
            data.load_snapshot_table(server, args.rows)
            props = {"connector.class": "postgres", **server.connector_properties(data.DBNAME), "topic.prefix": "b",
                     "slot.name": "jdbc_bench", "table.include.list": f"public.{data.TABLE}"}
            s = sink_rates(server, props, kind, args.rows, args.updates)
        finally:
            server.stop()
        limit = "LOAD DATA" if kind == "mariadb" else "COPY"
        for what, n in (("snapshot", args.rows), ("stream", args.updates)):
            if what in s:
                print(f"{kind} {what} {n:,} rows: jdbc sink {n / s[what]:,.0f} rows/s, {limit} "
                      f"{n / s[what + '_limit']:,.0f} rows/s ({s[what + '_limit'] / s[what]:.2f}x of {limit})")


if __name__ == "__main__":
    main()
