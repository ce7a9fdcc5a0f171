"""The initial snapshot: tables cut into CTID-range chunks, each read under one exported snapshot.

`plan_snapshot` runs on the driver while the replication connection that created the slot holds
the exported snapshot: it imports the snapshot, reads the catalog as of it, takes the snapshot's
transaction id, finds each table's first and last row (for Debezium's `source.snapshot` markers)
and cuts each table into page ranges. Each `SnapshotChunk` is picklable; its `read()` opens its own
connection, imports the same snapshot and streams `COPY (SELECT ... WHERE ctid ...) TO STDOUT`,
so chunks can be read in parallel by Spark executors and still form one consistent snapshot.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from psycopg2 import sql

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import WorkUnit
from headwater.connectors.postgres import catalog
from headwater.connectors.postgres.catalog import TableSchema
from headwater.connectors.postgres.columnar import SnapshotBlockEncoder, parse_csv_block
from headwater.connectors.postgres.connection import ConnectionParams, SourceError, connect
from headwater.connectors.postgres.records import EventContext, RecordMaker, table_events
from headwater.connectors.postgres.slots import lsn_int
from headwater.connectors.postgres.streaming import sequence
from headwater.events.arrays import lit
from headwater.events.batch import ArrowEvents, EventBatch, Events

BLOCK_ROWS_GUESS = 60  # rows per page when the table has no statistics yet
MIN_SPLIT_PAGES = 64  # tables smaller than this many pages per core are not split for parallelism


@dataclass
class SnapshotInfo:
    """What every chunk of one snapshot shares."""

    params: ConnectionParams
    snapshot_name: str
    lsn: int  # source.lsn: pg_current_wal_lsn() inside the snapshot transaction, as Debezium reads it
    txid: int
    ts_us: int
    version: int  # _commit_version: the slot's consistent point, where streaming starts


def import_snapshot(cur, name: str) -> None:
    cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    cur.execute("SET TRANSACTION SNAPSHOT %s", (name,))


def _probe(cur, table: sql.Composable, npages: int, last: bool) -> str | None:
    """The ctid of the table's first (or last) row, probing page ranges from that end."""
    step = 8
    lo_hi = None
    while True:
        if last:
            lo = max(0, npages - step)
            q = sql.SQL("SELECT max(ctid)::text FROM {} WHERE ctid >= %s::tid").format(table)
            cur.execute(q, (f"({lo},0)",))
        else:
            hi = step
            q = sql.SQL("SELECT min(ctid)::text FROM {} WHERE ctid < %s::tid").format(table)
            cur.execute(q, (f"({hi},0)",))
        found = cur.fetchone()[0]
        if found is not None:
            return found
        if step >= npages:
            if lo_hi is not None:
                return None
            lo_hi = True
            # rows may sit beyond the size measured (the table grew since): scan it all once
            q = sql.SQL("SELECT {}(ctid)::text FROM {}").format(sql.SQL("max" if last else "min"), table)
            cur.execute(q)
            return cur.fetchone()[0]
        step *= 8


def plan_snapshot(params: ConnectionParams, snapshot_name: str, lsn: int, tables: list,
                  ctx: EventContext, cfg: ConnectorConfig, parallelism: int = 1) -> list[WorkUnit]:
    """Chunks for every captured table, under the exported snapshot `snapshot_name`."""
    conn = connect(params, autocommit=True)
    try:
        with conn.cursor() as cur:
            import_snapshot(cur, snapshot_name)
            cur.execute("SELECT txid_current(), current_setting('block_size')::int, pg_current_wal_lsn()::text")
            txid, block_size, current_lsn = cur.fetchone()
            ts_us = time.time_ns() // 1000
            schemas = catalog.read_tables(conn, [t.oid for t in tables])
            only = cfg.get("snapshot.include.collection.list")
            overrides = {t: cfg.extra.get(f"snapshot.select.statement.overrides.{t}")
                         for t in cfg.get("snapshot.select.statement.overrides") or ()}
            info = SnapshotInfo(params, snapshot_name, lsn_int(current_lsn), txid, ts_us, lsn)
            chunk_rows = cfg["headwater.snapshot.chunk.rows"]
            planned: list[tuple[TableSchema, list[tuple[int | None, int | None]], str | None, str | None, str | None]] = []
            for t in sorted(schemas, key=lambda s: snapshot_order(s, cfg.get("table.include.list"))):
                fq = f"{t.schema}.{t.name}"
                if only and not catalog.matches_any(only, fq):
                    continue
                override = overrides.get(fq)
                if override:
                    planned.append((t, [(None, None)], override, None, None))
                    continue
                ident = sql.Identifier(t.schema, t.name)
                cur.execute("SELECT pg_relation_size(%s), reltuples, relpages FROM pg_class WHERE oid = %s",
                            (t.oid, t.oid))
                size, reltuples, relpages = cur.fetchone()
                npages = max(1, size // block_size)
                first = _probe(cur, ident, npages, last=False)
                if first is None:
                    continue  # empty table: no events, no markers
                last = _probe(cur, ident, npages, last=True)
                density = (reltuples / relpages) if relpages and reltuples and reltuples > 0 else BLOCK_ROWS_GUESS
                pages_per_chunk = max(1, int(chunk_rows / max(density, 1.0)))
                if npages >= MIN_SPLIT_PAGES * parallelism:
                    # at least two chunks per executor core, so that every core has work to the end
                    pages_per_chunk = min(pages_per_chunk, max(1, -(-npages // (2 * parallelism))))
                ranges: list[tuple[int | None, int | None]] = []
                start = 0
                while start + pages_per_chunk < npages:
                    ranges.append((start, start + pages_per_chunk))
                    start += pages_per_chunk
                ranges.append((start, None))  # open-ended: rows beyond the measured size too
                planned.append((t, ranges, None, first, last))
            cur.execute("COMMIT")
    finally:
        conn.close()
    units: list[WorkUnit] = []
    for i, (t, ranges, override, first, last) in enumerate(planned):
        for j, (lo, hi) in enumerate(ranges):
            units.append(SnapshotChunk(info, ctx, t, lo, hi, override,
                                       first_ctid=first, last_ctid=last,
                                       first_table=(i == 0), last_table=(i == len(planned) - 1),
                                       first_chunk=(j == 0), last_chunk=(j == len(ranges) - 1)))
    return units


def snapshot_order(table: TableSchema, include: list[str] | None) -> tuple[int, str]:
    """Debezium's order: by the first `table.include.list` pattern a table matches, then by name."""
    fq = f"{table.schema}.{table.name}"
    if include:
        for i, pattern in enumerate(include):
            if catalog.matches_any([pattern], fq):
                return i, fq
        return len(include), fq
    return 0, fq


def marker(first_table: bool, last_table: bool, first_row: bool, last_row: bool) -> str:
    """Debezium 3's `source.snapshot` value for a snapshot record (the last marks win over the first)."""
    if last_row and last_table:
        return "last"
    if first_row and first_table:
        return "first"
    if last_row:
        return "last_in_data_collection"
    if first_row:
        return "first_in_data_collection"
    return "true"


class SnapshotChunk(WorkUnit):
    """One table's page range (or its override SELECT), read under the snapshot."""

    def __init__(self, info: SnapshotInfo, ctx: EventContext, table: TableSchema, lo: int | None,
                 hi: int | None, override: str | None, *, first_ctid: str | None, last_ctid: str | None,
                 first_table: bool, last_table: bool, first_chunk: bool, last_chunk: bool):
        self.info = info
        self.ctx = ctx
        self.table = table
        self.lo, self.hi = lo, hi
        self.override = override
        self.first_ctid, self.last_ctid = first_ctid, last_ctid
        self.first_table, self.last_table = first_table, last_table
        self.first_chunk, self.last_chunk = first_chunk, last_chunk

    def describe(self) -> str:
        return f"snapshot of {self.table.schema}.{self.table.name} pages [{self.lo}, {self.hi})"

    def query(self) -> sql.Composable:
        if self.override:
            return sql.SQL(self.override)
        cols = sql.SQL(", ").join(sql.Identifier(c.name) for c in self.table.columns)
        where = []
        if self.lo:
            where.append(sql.SQL("ctid >= {}::tid").format(sql.Literal(f"({self.lo},0)")))
        if self.hi is not None:
            where.append(sql.SQL("ctid < {}::tid").format(sql.Literal(f"({self.hi},0)")))
        q = sql.SQL("SELECT ctid, {} FROM {}").format(cols, sql.Identifier(self.table.schema, self.table.name))
        if where:
            q = q + sql.SQL(" WHERE ") + sql.SQL(" AND ").join(where)
        return q

    def read(self) -> Iterator[Events]:
        q: queue.Queue = queue.Queue(maxsize=4)
        done = object()
        stop = threading.Event()
        info = self.info

        def produce() -> None:
            try:
                conn = connect(info.params, autocommit=True)
                try:
                    with conn.cursor() as cur:
                        import_snapshot(cur, info.snapshot_name)
                        copy = sql.SQL("COPY ({}) TO STDOUT WITH (FORMAT csv)").format(self.query()).as_string(conn)
                        writer = _BlockWriter(self, q, stop)
                        cur.copy_expert(copy, writer)
                        writer.finish()
                        cur.execute("COMMIT")
                finally:
                    conn.close()
                q.put(done)
            except BaseException as exc:  # reported to the consumer
                q.put(exc)

        thread = threading.Thread(target=produce, name="headwater-snapshot-chunk", daemon=True)
        thread.start()
        try:
            while True:
                item = q.get()
                if item is done:
                    return
                if isinstance(item, BaseException):
                    if isinstance(item, SourceError):
                        raise item
                    raise SourceError(f"reading {self.describe()} failed: {item}") from item
                yield item
        finally:
            stop.set()


class _BlockWriter:
    """psycopg2's COPY target: receives one CSV row per write(), encodes blocks of rows column-wise."""

    def __init__(self, chunk: SnapshotChunk, out: queue.Queue, stop: threading.Event):
        self.chunk = chunk
        self.queue = out
        self.stop = stop
        ctx = chunk.ctx
        te = table_events(ctx, chunk.table, chunk.table.columns, streaming=False)
        info = chunk.info
        self.encoder = SnapshotBlockEncoder(te, RecordMaker(ctx, EventBatch()), lsn=info.lsn, txid=info.txid,
                                            ts_us=info.ts_us, sequence=sequence(None, info.lsn),
                                            version=info.version)
        self.limit = ctx.batch_rows
        self.has_ctid = not chunk.override
        self.ncols = len(chunk.table.columns) + (1 if self.has_ctid else 0)
        self.rows: list[bytes] = []
        self.first_block = True
        self.pending: list[pa.Array] | None = None  # override queries: the last block waits for the end

    def write(self, data) -> None:
        if self.stop.is_set():
            raise SourceError("snapshot chunk reader stopped")
        self.rows.append(data.encode() if isinstance(data, str) else bytes(data))
        if len(self.rows) >= self.limit:
            self._flush()

    def _flush(self) -> None:
        if not self.rows:
            return
        columns = parse_csv_block(b"".join(self.rows), self.ncols)
        self.rows = []
        c = self.chunk
        if self.has_ctid:
            ctids, columns = columns[0], columns[1:]
            ends = pc.or_(pc.equal(ctids, lit(c.first_ctid)), pc.equal(ctids, lit(c.last_ctid)))
            markers = {}
            for row in pc.indices_nonzero(pc.fill_null(ends, lit(False))).to_pylist():
                ctid = ctids[row].as_py()
                markers[row] = marker(c.first_table, c.last_table, ctid == c.first_ctid, ctid == c.last_ctid)
            self._emit(columns, markers)
        else:
            if self.pending is not None:
                self._emit_pending(last_block=False)
            self.pending = columns

    def _emit_pending(self, last_block: bool) -> None:
        c, columns = self.chunk, self.pending
        n = len(columns[0])
        markers: dict[int, str] = {}
        for row in {0, n - 1}:
            first_row, last_row = self.first_block and row == 0, last_block and row == n - 1
            if first_row or last_row:
                markers[row] = marker(c.first_table, c.last_table, first_row, last_row)
        self.first_block = False
        self.pending = None
        self._emit(columns, markers)

    def _emit(self, columns: list[pa.Array], markers: dict[int, str]) -> None:
        self.queue.put(ArrowEvents(self.encoder.encode(columns, markers)))

    def finish(self) -> None:
        self._flush()
        if self.pending is not None:
            self._emit_pending(last_block=True)
