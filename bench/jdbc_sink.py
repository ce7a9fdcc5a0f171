"""The jdbc sink's apply rate into PostgreSQL against COPY of the same rows (the target's own bulk load).

    .venv/bin/python -m bench.jdbc_sink [--rows 200000] [--updates 100000]

On one fresh PostgreSQL server: the benchmark table (`bench.data`, 6 mixed columns) with `--rows`
rows is read by the embedded engine as typed blocks (the snapshot), then `--updates` of its rows are
updated in one transaction and read (the stream). Each is then applied by `JdbcWriter` (`mirror`:
upsert by key, the table created by the first batch) into a second database, timed apart from the
reading; the limit is `COPY ... FROM STDIN` of the same rows (as COPY text, taken from the source
beforehand) into a table of the same shape. Prints rows/s of each and their ratio.
"""

from __future__ import annotations

import argparse
import io
import time

from bench import data
from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from headwater.events.typed import TypedBlock
from headwater.sinks.jdbc.config import parse_jdbc_sink
from headwater.sinks.jdbc.writer import JdbcWriter

TARGET = "target"


def read_batches(engine: Engine) -> list[list[TypedBlock]]:
    return [list(b) for b in engine.blocks(once=True)]


def copy_rate(server, where: str, rows: int) -> float:
    """Rows/s of COPY FROM STDIN of the source's rows `where` into an empty table of the same shape."""
    text = io.BytesIO()
    src = server.connect(data.DBNAME)
    with src.cursor() as cur:
        cur.copy_expert(f"COPY (SELECT * FROM {data.TABLE} {where}) TO STDOUT", text)
    src.close()
    dst = server.connect(TARGET, autocommit=False)
    with dst.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS t_copy")
        cur.execute(data.CREATE_TABLE.replace(f"TABLE {data.TABLE} ", "TABLE t_copy ") + "")
        cur.execute("ALTER TABLE t_copy ADD PRIMARY KEY (id)")
        dst.commit()
        text.seek(0)
        started = time.perf_counter()
        cur.copy_expert("COPY t_copy FROM STDIN", text, size=1 << 16)
        dst.commit()
        seconds = time.perf_counter() - started
    dst.close()
    return rows / seconds


def apply_rate(writer: JdbcWriter, batches: list[list[TypedBlock]], first_id: int, rows: int) -> float:
    started = time.perf_counter()
    for i, blocks in enumerate(batches):
        writer.apply(first_id + i, blocks)
    return rows / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--updates", type=int, default=100_000)
    args = parser.parse_args()
    server = data.new_server()
    try:
        data.load_snapshot_table(server, args.rows)
        server.create_database(TARGET)
        props = {"connector.class": "postgres", **server.connector_properties(data.DBNAME), "topic.prefix": "b",
                 "slot.name": "jdbc_bench", "table.include.list": f"public.{data.TABLE}"}
        engine = Engine(validate_connector(props), output="typed")
        started = time.perf_counter()
        snapshot = read_batches(engine)
        read_s = time.perf_counter() - started
        sink = parse_jdbc_sink({"type": "jdbc", "connection.url": f"jdbc:postgresql://127.0.0.1:{server.port}/{TARGET}",
                                "connection.username": server.superuser, "connection.password": server.password,
                                "mirror": True, "batch.size": 5000})
        writer = JdbcWriter(sink, "bench")
        snap_rate = apply_rate(writer, snapshot, 0, args.rows)
        snap_copy = copy_rate(server, "", args.rows)
        server.execute(f"UPDATE {data.TABLE} SET qty = qty + 1, flag = NOT flag WHERE id <= {args.updates}", data.DBNAME)
        stream = read_batches(engine)
        stream_rate = apply_rate(writer, stream, len(snapshot), args.updates)
        stream_copy = copy_rate(server, f"WHERE id <= {args.updates}", args.updates)
        writer.close()
        engine.close()
        print(f"snapshot read by the engine: {args.rows / read_s:,.0f} rows/s")
        print(f"snapshot {args.rows:,} rows: jdbc sink {snap_rate:,.0f} rows/s, COPY {snap_copy:,.0f} rows/s "
              f"({snap_rate / snap_copy:.2f}x of COPY)")
        print(f"stream {args.updates:,} updates: jdbc sink {stream_rate:,.0f} rows/s, COPY {stream_copy:,.0f} rows/s "
              f"({stream_rate / stream_copy:.2f}x of COPY)")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
