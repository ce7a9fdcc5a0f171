"""PostgreSQL's initial snapshot: tables cut into CTID-range chunks, each read under one exported snapshot.

`plan_snapshot` runs on the driver while the replication connection that created the slot holds
the exported snapshot: it imports the snapshot, reads the catalog as of it, takes the snapshot's
transaction id, finds each table's first and last row (for Debezium's `source.snapshot` markers)
and cuts each table into page ranges; which tables, in which order, the override SELECTs and the
markers are the shared planning's (connectors/common/snapshot.py). Each `SnapshotChunk` is
picklable; its `read()` opens its own connection, imports the same snapshot and streams
`COPY (SELECT ... WHERE ctid ...) TO STDOUT`, so chunks can be read in parallel by Spark executors
and still form one consistent snapshot.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from psycopg2 import sql

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import WorkUnit
from headwater.connectors.common.columnar import SnapshotBlockEncoder
from headwater.connectors.common.incremental import abandon_blocking
from headwater.connectors.common.records import table_records
from headwater.connectors.common.snapshot import marker, select_overrides, snapshot_tables
from headwater.connectors.errors import SourceError
from headwater.connectors.postgres import catalog
from headwater.connectors.postgres.catalog import TableSchema
from headwater.connectors.postgres.columnar import read_csv_blocks
from headwater.connectors.postgres.connection import ConnectionParams, clean, connect, query_error
from headwater.connectors.postgres.pgoutput import str_to_lsn
from headwater.connectors.postgres.records import EventContext, RecordMaker
from headwater.connectors.postgres.streaming import sequence
from headwater.events.arrays import lit
from headwater.events.batch import Events

BLOCK_ROWS_GUESS = 60  # rows per page when the table has no statistics yet
# COPY text handed from the connection thread to the parser at a time; Arrow's CSV reader reads
# ahead of its consumer (up to 32 such blocks), so a chunk holds up to ~33 MiB of it in memory
PIPE_BYTES = 1 << 20
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
            overrides = select_overrides(cfg)
            info = SnapshotInfo(params, snapshot_name, str_to_lsn(current_lsn), txid, ts_us, lsn)
            chunk_rows = cfg["headwater.snapshot.chunk.rows"]
            planned: list[tuple[TableSchema, list[tuple[int | None, int | None]], str | None, str | None, str | None]] = []
            for t in snapshot_tables(schemas, _name, cfg):
                override = overrides.get(_name(t))
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


def _name(table: TableSchema) -> str:
    return f"{table.schema}.{table.name}"


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
        self.blocking: Any = None  # a blocking snapshot's chunk: its signal id (a query error abandons it)

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
        """The chunk's events (`_read`). A blocking snapshot's chunk whose query fails for a reason of the query (not
        of the connection) ends there: the snapshot is abandoned (its rows delivered stay delivered)."""
        try:
            yield from self._read()
        except Exception as exc:
            if self.blocking is None or not query_error(exc):
                raise
            self.abandoned = f"{self.table.schema}.{self.table.name}"
            abandon_blocking(self.blocking, f"{self.describe()}: {clean(exc, self.info.params)}")

    def _read(self) -> Iterator[Events]:
        """The chunk's events, from `copy_blocks`; the last block is held back until the next (or the
        end) comes, so that the table's last row can be marked."""
        blocks = _Blocks(self)
        held = None
        for columns in copy_blocks(self.info.params, self.info.snapshot_name, self.query(), blocks.ncols,
                                   self.describe()):
            if held is not None:
                yield from blocks.encode(held)
            held = columns
        yield from blocks.encode(held, last=True)


def copy_blocks(params: ConnectionParams, snapshot_name: str | None, query: sql.Composable, ncols: int,
                what: str) -> Iterator[list[pa.Array]]:
    """The rows of `query` as blocks of text columns (`ncols` of them), read under the exported snapshot
    `snapshot_name` (None: in a transaction of their own). A thread streams COPY's CSV into a pipe
    (psycopg2 hands each row to the pipe's buffered writer, with no Python code per row); Arrow's
    streaming CSV reader parses it in blocks here, so memory stays bounded whatever the rows. The last
    block comes only once COPY has ended: a COPY cut short (a lost connection) fails the read (`what`
    names it) rather than ending it early."""
    rfd, wfd = os.pipe()
    with contextlib.suppress(OSError):  # fewer, larger hand-offs (Linux; up to pipe-max-size)
        fcntl.fcntl(wfd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    failed: list[BaseException] = []

    def produce() -> None:
        try:
            with open(wfd, "wb", buffering=1 << 16) as pipe:
                conn = connect(params, autocommit=True)
                try:
                    with conn.cursor() as cur:
                        if snapshot_name is not None:
                            import_snapshot(cur, snapshot_name)
                        copy = sql.SQL("COPY ({}) TO STDOUT WITH (FORMAT csv)").format(query)
                        cur.copy_expert(copy.as_string(conn), pipe)
                        if snapshot_name is not None:
                            cur.execute("COMMIT")
                finally:
                    conn.close()
        except BaseException as exc:  # reported to the consumer
            failed.append(exc)

    thread = threading.Thread(target=produce, name="headwater-copy", daemon=True)
    thread.start()
    # closing the pipe (also when the consumer stops early) makes an unfinished COPY fail at its next
    # write, and its thread end
    with open(rfd, "rb", buffering=PIPE_BYTES) as pipe:
        held = None
        try:
            for columns in read_csv_blocks(pipe, ncols, PIPE_BYTES):
                if held is not None:
                    yield held
                held = columns
        except pa.ArrowInvalid as exc:
            thread.join()
            if not failed and "Empty CSV" not in str(exc):
                raise SourceError(f"reading {what} failed: {exc}") from exc
        thread.join()
        if failed:
            if isinstance(failed[0], SourceError):
                raise failed[0]
            raise SourceError(f"reading {what} failed: {failed[0]}") from failed[0]
        if held is not None:
            yield held


class _Blocks:
    """Encodes the blocks of one chunk's rows, marking the table's first and last rows."""

    def __init__(self, chunk: SnapshotChunk):
        self.chunk = chunk
        ctx = chunk.ctx
        te = table_records(ctx, chunk.table, chunk.table.columns, streaming=False)
        info = chunk.info
        self.encoder = SnapshotBlockEncoder(te, RecordMaker(ctx), lsn=info.lsn, txid=info.txid,
                                            ts_us=info.ts_us, sequence=sequence(None, info.lsn),
                                            version=info.version)
        self.limit = ctx.batch_rows
        self.has_ctid = not chunk.override
        self.ncols = len(chunk.table.columns) + (1 if self.has_ctid else 0)
        self.first_block = True

    def encode(self, columns: list[pa.Array] | None, last: bool = False) -> Iterator[Events]:
        """Events of a block of rows, in batches of at most `batch_rows`; `last`: the chunk's last."""
        if columns is None:
            return
        c = self.chunk
        if self.has_ctid:
            ctids, columns = columns[0], columns[1:]
            ends = pc.or_(pc.equal(ctids, lit(c.first_ctid)), pc.equal(ctids, lit(c.last_ctid)))
            markers = {}
            for row in pc.indices_nonzero(pc.fill_null(ends, lit(False))).to_pylist():
                ctid = ctids[row].as_py()
                markers[row] = marker(c.first_table, c.last_table, ctid == c.first_ctid, ctid == c.last_ctid)
        else:  # an override query: its first and last rows
            n = len(columns[0])
            markers = {}
            for row in {0, n - 1}:
                first_row, last_row = self.first_block and row == 0, last and row == n - 1
                if first_row or last_row:
                    markers[row] = marker(c.first_table, c.last_table, first_row, last_row)
        self.first_block = False
        n = len(columns[0])
        size = -(-n // -(-n // self.limit))  # equal parts of at most batch_rows
        for start in range(0, n, size):
            part = [col.slice(start, size) for col in columns]
            marks = {row - start: m for row, m in markers.items() if start <= row < start + size}
            yield self.encoder.encode(part, marks)
