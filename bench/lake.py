"""The Delta Lake and Iceberg sinks' apply rate, against each format's own bulk append of the same rows:
eight `make bench` rows, and a standalone run with more detail.

    .venv/bin/python -m bench --only lake                  # the eight rows, in the harness
    .venv/bin/python -m bench.lake [--rows 200000] [--updates 100000]   # alone, printed

In the harness (`benchmarks`), per format (delta, iceberg), mode (merge, changelog) and load: the
PostgreSQL snapshot runner loads the benchmark table; the engine reads its snapshot as typed blocks
(not timed, read once per benchmark and shared by its two contenders). The snapshot rows time the
sink applying the snapshot into a fresh table; the stream rows apply the snapshot untimed, update
`UPDATES` rows in one transaction, read them, and time the apply of those changes. The limit is the
format's bulk append of the same row images (the snapshot's, or the updated ones'), already typed, in
one call into a new table: `write_deltalake(mode="append")`, pyiceberg `Table.append`.

Alone (`main`), a fresh PostgreSQL gets the benchmark table (`bench.data`, with a primary key) of `--rows` rows; the
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
from typing import Any

import pyarrow as pa

from bench import data
from bench.cases import SnapshotCase
from bench.headwater_contenders import properties
from bench.measure import Measurement
from bench.model import LIMIT, SUBJECT, Benchmark, Contender, Options, Target
from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from headwater.events.typed import TypedBlock
from headwater.sinks.delta import DeltaSink, delta_table
from headwater.sinks.iceberg import IcebergSink, iceberg_type, open_catalog
from headwater.sinks.lake import CHANGE_COLUMNS, DataFile, batch_changes, cast_types
from headwater.sinks.lake_config import DeltaOptions, IcebergOptions

Batches = list[list[TypedBlock]]
UPDATES = 100_000
LIMIT_NAMES = {"delta": "write_deltalake", "iceberg": "pyiceberg append"}


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


def new_sink(fmt: str, mode: str, root: Path) -> DeltaSink | IcebergSink:
    if fmt == "delta":
        return DeltaSink(DeltaOptions(str(root), "${source.table}", mode), "bench")
    return IcebergSink(IcebergOptions(str(root), table_name_format="${source.table}", mode=mode), "bench")


def bulk_append_seconds(fmt: str, rows: pa.Table, root: Path) -> float:
    """Seconds of the format's own append of `rows` (typed first, not timed) into a new table."""
    if fmt == "delta":
        from deltalake import write_deltalake

        return timed(write_deltalake, str(root), delta_table(rows))
    typed = cast_types(rows, iceberg_type)
    catalog = open_catalog(IcebergOptions(str(root)))
    catalog.create_namespace_if_not_exists("default")
    return timed(catalog.create_table("default.limit", typed.schema).append, typed)


# the batches last read, shared by one benchmark's contenders: [server, stream, snapshot, updates]
_read: list[Any] = []


def case_batches(case: SnapshotCase, stream: bool) -> tuple[Batches, Batches]:
    """The case's snapshot and, for `stream`, its updates, read once by the engine (not timed)."""
    if not _read or _read[0] is not case.server or _read[1] != stream:
        engine = Engine(validate_connector(properties(case, case.slot_name, "initial")), output="typed")
        try:
            snapshot = read_batches(engine)
            updates: Batches = []
            if stream:
                case.server.execute(f"UPDATE {data.TABLE} SET qty = qty + 1, flag = NOT flag WHERE id <= "
                                    f"{min(UPDATES, case.rows)}", data.DBNAME)
                updates = read_batches(engine)
        finally:
            engine.close()
        _read[:] = [case.server, stream, snapshot, updates]
    return _read[2], _read[3]


def _contender(fmt: str, mode: str, stream: bool, limit: bool) -> Callable[[SnapshotCase], Measurement]:
    name = LIMIT_NAMES[fmt] if limit else f"headwater {fmt} {mode}"

    def run(case: SnapshotCase) -> Measurement:
        snapshot, updates = case_batches(case, stream)
        timed_batches = updates if stream else snapshot
        rows = sum(len(b) for bs in timed_batches for b in bs)
        if rows != (min(UPDATES, case.rows) if stream else case.rows):
            raise RuntimeError(f"read {rows} {'updates' if stream else 'snapshot events'}")
        if limit:
            seconds = bulk_append_seconds(fmt, rows_of(timed_batches), Path(tempfile.mkdtemp(dir=case.workdir)))
        else:
            sink = new_sink(fmt, mode, Path(tempfile.mkdtemp(dir=case.workdir)))
            if stream:
                apply_all(sink, snapshot, 0)
            seconds = timed(apply_all, sink, timed_batches, len(snapshot) if stream else 0)
        return Measurement(name, rows=rows, seconds=seconds, first_to_last_seconds=seconds, data_bytes=case.data_bytes)

    return run


def benchmarks(opts: Options) -> list[Benchmark]:
    out = []
    for fmt, title, load in (("delta", "Delta Lake", 'write_deltalake(mode="append")'),
                             ("iceberg", "Iceberg", "pyiceberg Table.append")):
        for mode in ("merge", "changelog"):
            for stream in (False, True):
                what = (f"{min(UPDATES, opts.rows):,} updated rows after a {opts.rows:,}-row snapshot" if stream
                        else f"the {opts.rows:,}-row snapshot")
                out.append(Benchmark(
                    f"lake_{fmt}_{mode}_{'stream' if stream else 'snapshot'}",
                    f"{fmt} sink ({mode}) into {title}: {what} applied, against {load}",
                    "postgresql", "snapshot",
                    [Contender(f"headwater {fmt} {mode}", SUBJECT, _contender(fmt, mode, stream, False),
                               f"{'DeltaSink' if fmt == 'delta' else 'IcebergSink'}.write of the engine's typed "
                               "blocks, batch by batch (the reading not timed)"),
                     Contender(LIMIT_NAMES[fmt], LIMIT, _contender(fmt, mode, stream, True),
                               f"{load} of the same row images, already typed, in one call into a new table")],
                    [Target("≥ ¼ of the bulk append's rows/s", "rows_per_s", 0.25, LIMIT)],
                    {"rows": opts.rows, "updates": min(UPDATES, opts.rows) if stream else 0},
                ))
    return out


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
