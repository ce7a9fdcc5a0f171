"""The Delta Lake and Iceberg sinks' apply rate, against each format's own bulk append of the same rows.

    .venv/bin/python -m bench.lake [--rows 200000] [--updates 100000]

A fresh PostgreSQL gets the benchmark table (`bench.data`, with a primary key) of `--rows` rows; the
engine reads its snapshot, then a stream of `--updates` updates (10 transactions), as typed blocks
kept in memory, so that only the sink is timed. For each format, in one run:

- `sink merge`: `DeltaSink`/`IcebergSink` in merge mode applying every batch in order (reduction
  per key, conversion to the format's types, MERGE or copy-on-write commit, exactly-once check);
- `sink changelog`: the same sink appending every change;
- `changelog task files` / `changelog driver commit`: the change log as a Spark query in changelog mode
  writes it (`spark.lakesink`): the tasks' part (`write_files`, parquet files) and the driver's
  (`commit_files`, one commit per batch), timed apart;
- `limit`: `write_deltalake(mode="append")` / pyiceberg `Table.append` of the same rows, already
  typed, in one call: what the format's writer does with no merging.

`convert` is the sinks' shared part alone (`sinks.lake.batch_changes` over every batch). Figures are
rows per second of wall time on whatever the machine is doing: compare the ratios within one run.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from bench import data
from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from headwater.events.typed import TypedBlock
from headwater.sinks.delta import DeltaSink, delta_table
from headwater.sinks.iceberg import IcebergSink, iceberg_type, open_catalog
from headwater.sinks.lake import CHANGE_COLUMNS, DataFile, batch_changes, cast_types
from headwater.sinks.lake_config import DeltaOptions, IcebergOptions

Batches = list[list[TypedBlock]]


def read_batches(engine: Engine) -> Batches:
    return [list(batch) for batch in engine.blocks(once=True)]


def rows_of(batches: Batches) -> pa.Table:
    """Every change's row image, as a table (what the limits write)."""
    tables = [c.rows for b in batches for c in batch_changes(b, reduced=False).values()]
    return pa.concat_tables(tables).drop_columns(CHANGE_COLUMNS)


def timed(fn: Callable[..., object], *args: object) -> float:
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def convert_all(batches: Batches) -> None:
    for blocks in batches:
        batch_changes(blocks, reduced=True)


def apply_all(sink: DeltaSink | IcebergSink, batches: Batches, first_id: int) -> None:
    for i, blocks in enumerate(batches):
        sink.write(blocks, first_id + i)


def files_all(sink: DeltaSink | IcebergSink, batches: Batches, first_id: int) -> list[list[DataFile]]:
    return [sink.write_files(blocks, first_id + i, 0, "bench") for i, blocks in enumerate(batches)]


def commit_all(sink: DeltaSink | IcebergSink, files: list[list[DataFile]], first_id: int) -> None:
    for i, batch in enumerate(files):
        sink.commit_files(batch, first_id + i)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--updates", type=int, default=100_000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="headwater-bench-lake-"))
    server = data.new_server()
    try:
        server.execute(data.CREATE_TABLE + ";" + f"ALTER TABLE {data.TABLE} ADD PRIMARY KEY (id);"
                       f"INSERT INTO {data.TABLE} {data.row_select('1', str(args.rows))}", data.DBNAME)
        props = {"connector.class": "postgres", **server.connector_properties(data.DBNAME), "topic.prefix": "b",
                 "slot.name": "bench_lake", "table.include.list": f"public.{data.TABLE}"}
        engine = Engine(validate_connector(props), output="typed")
        try:
            snapshot = read_batches(engine)
            step = max(1, args.updates // 10)
            for first in range(1, args.updates + 1, step):
                server.execute(f"UPDATE {data.TABLE} SET qty = qty + 1 WHERE id BETWEEN {first} AND "
                               f"{min(first + step - 1, args.updates)}", data.DBNAME)
            updates = read_batches(engine)
        finally:
            engine.close()
        loads = {"snapshot": snapshot, "updates": updates}
        results = []
        for load, batches in loads.items():
            n = sum(len(b) for bs in batches for b in bs)
            results.append((load, "convert", n, timed(convert_all, batches)))
        for fmt in ("delta", "iceberg"):
            for mode in ("merge", "changelog"):
                root = work / f"{fmt}-{mode}"
                sink: DeltaSink | IcebergSink = (
                    DeltaSink(DeltaOptions(str(root), "${source.table}", mode), "bench") if fmt == "delta" else
                    IcebergSink(IcebergOptions(str(root), table_name_format="${source.table}", mode=mode), "bench"))
                first = 0
                for load, batches in loads.items():
                    n = sum(len(b) for bs in batches for b in bs)
                    results.append((load, f"{fmt} sink {mode}", n, timed(apply_all, sink, batches, first)))
                    first += len(batches)
            root = work / f"{fmt}-files"
            files_sink: DeltaSink | IcebergSink = (
                DeltaSink(DeltaOptions(str(root), "${source.table}", "changelog"), "bench") if fmt == "delta" else
                IcebergSink(IcebergOptions(str(root), table_name_format="${source.table}", mode="changelog"), "bench"))
            first = 0
            for load, batches in loads.items():
                n = sum(len(b) for bs in batches for b in bs)
                start = time.perf_counter()
                files = files_all(files_sink, batches, first)
                results.append((load, f"{fmt} changelog task files", n, time.perf_counter() - start))
                results.append((load, f"{fmt} changelog driver commit", n, timed(commit_all, files_sink, files, first)))
                first += len(batches)
            for load, batches in loads.items():
                rows = rows_of(batches)
                if fmt == "delta":
                    from deltalake import write_deltalake

                    typed = delta_table(rows)
                    target = str(work / f"delta-limit-{load}")
                    results.append((load, "delta limit: write_deltalake append", len(typed),
                                    timed(write_deltalake, target, typed)))
                else:
                    typed = cast_types(rows, iceberg_type)
                    catalog = open_catalog(IcebergOptions(str(work / f"iceberg-limit-{load}")))
                    catalog.create_namespace_if_not_exists("default")
                    table = catalog.create_table("default.limit", typed.schema)
                    results.append((load, "iceberg limit: pyiceberg append", len(typed),
                                    timed(table.append, typed)))
        print(f"{'load':<10} {'contender':<40} {'rows':>9} {'seconds':>8} {'rows/s':>10}")
        for load, who, n, seconds in results:
            print(f"{load:<10} {who:<40} {n:>9} {seconds:>8.2f} {n / seconds:>10,.0f}")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
