"""The binlog connectors' snapshot, Debezium's way: a lock, one consistent transaction, the binlog position.

`HeldSnapshot` (on the driver) follows Debezium's steps for `snapshot.locking.mode`:

- `minimal`: `FLUSH TABLES WITH READ LOCK`; a REPEATABLE READ transaction
  `START TRANSACTION WITH CONSISTENT SNAPSHOT`; the binlog position and GTID state read under the
  lock (so the snapshot and the stream meet exactly); the tables' schema read; `UNLOCK TABLES`;
  then the rows are read in the transaction;
- `extended`: the same, with the lock held until the snapshot's last batch is over (writes wait meanwhile);
- `none`: no lock (safe only when no schema changes happen during the snapshot).

MySQL and MariaDB cannot share one transaction's view between connections, so every chunk is
read through the held transaction: `SnapshotChunk.read()` uses it when it runs in the process that
holds it (the embedded engine), and a chunk pickled for a Spark executor reads its rows on the
driver as it is pickled and carries them, as the server sent them (`textrows.py`: about their size as
text; the executor cuts them into columns); the driver keeps no reference to them once pickled. The
snapshot is read in batches of chunks (`locking.py`), so the driver holds a batch's rows at most (and
the next batch's, read ahead in the transaction meanwhile: `HeldSnapshot.read_ahead`; the one
connection is used by one thread at a time). This snapshot is taken when `snapshot.locking.mode` is
set (and on MySQL); without it MariaDB takes the lock-free parallel snapshot, `lockfree.py`.

Tables are cut into primary-key ranges by the shared `key_ranges` (MySQL's spelling in
`DIALECT`); rows come in key order; `source.snapshot` markers are the shared `marker`'s. A table
without a primary key, or read through `snapshot.select.statement.overrides`, is read with one SELECT
(Debezium's: the table's columns, or the override) streamed in the transaction (`RowStream`) and cut
into chunks of `headwater.snapshot.chunk.rows` rows as it is read: its chunks are planned as their
rows are read (`HeldSnapshot.planned`; the chunk numbers after them are known once its last chunk is),
the last one known by the SELECT's end coming right after its rows. The connection serves one result
at a time, so chunks are read in order (the chunks before a streamed one first); a streamed chunk read
out of order (a batch planned again) reads its table's SELECT again up to it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pymysql
import pymysql.converters

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import WorkUnit
from headwater.connectors.binlog.connection import ConnectionParams, clean, connect
from headwater.connectors.binlog.positions import BinlogPosition
from headwater.connectors.binlog.reader import current_position
from headwater.connectors.binlog.records import BinlogContext, BinlogMaker, records_of
from headwater.connectors.binlog.schema import Table
from headwater.connectors.binlog.snapshot_rows import snapshot_events
from headwater.connectors.binlog.streaming import SchemaChange
from headwater.connectors.binlog.textrows import RowStream, TextRows, read_text_rows
from headwater.connectors.common.adhoc import key_values
from headwater.connectors.common.snapshot import (
    ChunkKey,
    KeyDialect,
    KeyRange,
    key_ranges,
    select_overrides,
    snapshot_order,
    snapshot_tables,
)
from headwater.connectors.errors import SourceError
from headwater.events.batch import Events

log = logging.getLogger("headwater.binlog")


class MySqlDialect(KeyDialect):
    """MySQL's spelling of the key-range queries: backquotes; NULL already sorts first; a composite key's
    bound spelt column by column (`a > x OR (a = x AND b > y)`): MariaDB 10.11 reads a row comparison
    `(a, b) > (x, y)` by scanning the key from its start (EXPLAIN: access type `index`, every row before
    the bound read), the spelt-out form by a range."""

    row_values = False

    def quote(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def nulls_first(self, column: str) -> str:
        return column

    def estimated_rows(self, cursor: Any, table: str) -> int | None:
        """The optimizer's row estimate of a full read of `table` (`EXPLAIN`: InnoDB's statistics, no row read)."""
        cursor.execute(f"EXPLAIN SELECT * FROM {table}")
        row = cursor.fetchone()
        names = [d[0].lower() for d in cursor.description or ()]
        cursor.fetchall()
        if row is None or "rows" not in names:
            return None
        rows = row[names.index("rows")]
        return None if rows is None else int(rows)


DIALECT = MySqlDialect()

# PyMySQL's encoders (parameters) without its decoders: values as the text protocol gives them (types.py)
TEXT_VALUES = {k: f for k, f in pymysql.converters.conversions.items() if not isinstance(k, int)}

_HELD: dict[str, HeldSnapshot] = {}  # the snapshots held in this process, by token


@dataclass
class TablePlan:
    """One table of the snapshot: its key ranges, or None when its rows are cut from one streamed SELECT."""

    table: Table
    key: ChunkKey | None
    ranges: list[KeyRange] | None
    override: str | None  # snapshot.select.statement.overrides for this table
    first: bool  # the snapshot's first table
    last: bool  # its last
    resumed: bool = False  # its first range goes on after keys delivered before a restart (not its first rows)


@dataclass
class Streamed:
    """The streamed SELECT open on the connection: the table's first chunk number, the next part's number."""

    origin: int
    part: int
    rows: RowStream


class HeldSnapshot:
    """Snapshot number `epoch`: its connection, lock and transaction, its binlog position and time, its chunks."""

    def __init__(self, params: ConnectionParams, epoch: int, locking: str, lock_timeout_ms: int, gtid_query: str):
        self.epoch = epoch
        self.locking = locking
        self.token = uuid.uuid4().hex
        self.lock = threading.Condition()  # the connection, one thread at a time; `claimed` changed
        self.ahead: dict[int, TextRows] = {}  # rows read ahead, by chunk index
        self.claimed: set[int] = set()  # the chunks whose rows a unit took (or is reading)
        self.closing = False
        self.reader: threading.Thread | None = None
        self.chunks: list[SnapshotChunk] = []  # the chunks planned so far (`planned`)
        self.todo: deque[TablePlan] | None = None  # the tables whose chunks are not all planned (None: no plan yet)
        self.part = 0  # the next chunk number within the first table of `todo` (a streamed one)
        self.chunk_rows = 1
        self.ctx: BinlogContext | None = None
        self.stream: Streamed | None = None
        self.read_to = 0  # the chunks before this one have their rows read (or taken)
        # a blocking snapshot's: the text of a query error that abandons it (None for an error that fails the read)
        self.abandon: Callable[[BaseException], str | None] | None = None
        # the chunk whose read abandoned the snapshot, why, and its table
        self.failed: tuple[int, str, str] | None = None
        self.planning: str | None = None  # the table being cut into chunks (where a planning error was met)
        self.conn = connect(params, conv=TEXT_VALUES)
        self.locked = False
        try:
            with self.conn.cursor() as cur:
                cur.execute(f"SET SESSION lock_wait_timeout = {max(1, lock_timeout_ms // 1000)}")
                if locking != "none":
                    try:
                        cur.execute("FLUSH TABLES WITH READ LOCK")
                    except pymysql.err.MySQLError as exc:
                        raise SourceError(f"the snapshot could not take its global read lock "
                                          f"(snapshot.locking.mode={locking}): {clean(exc, params)}; grant "
                                          "RELOAD, raise snapshot.lock.timeout.ms, or set "
                                          "snapshot.locking.mode=none if no schema changes happen meanwhile") from None
                    self.locked = True
                cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            self.position: BinlogPosition = current_position(self.conn, gtid_query)
            self.ts_us = time.time_ns() // 1000
        except BaseException:
            self.close()
            raise
        _HELD[self.token] = self

    # ---- planning
    def plan(self, tables: Sequence[Table], ctx: BinlogContext, cfg: ConnectorConfig,
             resume: Mapping[str, Any] | None = None) -> None:
        """Plan the chunks of the captured `tables`, in Debezium's table order (an empty table counts as the
        first or last table for the markers, as in Debezium, though it has no rows to mark): a table with a
        primary key is cut into key ranges at once; one without (or with a select override) is read with
        one streamed SELECT and cut into chunks of as many rows as it is read (`planned`).

        `resume` (a blocking snapshot going on after a restart, `resume_at`): only the tables from its `table`
        on, in order (none of them the snapshot's first: its first row was delivered), that table after it is
        `done`, or from key `from` on (a keyed table), or whole (a streamed one, or `from` None)."""
        overrides = select_overrides(cfg)
        chosen = snapshot_tables(tables, table_name, cfg)
        include = cfg.get("table.include.list")
        self.chunk_rows = cfg["headwater.snapshot.chunk.rows"]
        self.ctx = ctx
        todo: deque[TablePlan] = deque()
        with self.lock, self.conn.cursor() as cur:
            for i, t in enumerate(chosen):
                self.planning = table_name(t)
                override = overrides.get(table_name(t))
                ends = (i == 0 and resume is None, i == len(chosen) - 1)
                start: tuple[Any, ...] | None = None
                if resume is not None:
                    order, at = snapshot_order(table_name(t), include), snapshot_order(resume["table"], include)
                    if order < at or (order == at and resume.get("done")):
                        continue  # delivered before the restart
                    if order == at and resume.get("from") is not None:
                        start = tuple(key_values(resume["from"]))
                if not t.primary_key or override is not None:
                    todo.append(TablePlan(t, None, None, override, *ends))
                    continue
                key = ChunkKey(t.primary_key, tuple(bool(c.optional) for c in (t.column(n) for n in t.primary_key)
                                                    if c is not None))
                todo.append(TablePlan(t, key, key_ranges(cur, DIALECT, table_ref(t), key, self.chunk_rows,
                                                         start=start, unique_integer=t.integer_key),
                                      None, *ends, resumed=start is not None))
            self.todo, self.planning = todo, None

    def adopt(self, chunks: Sequence[tuple[Table, KeyRange, tuple[bool, bool, bool, bool], int]],
              ctx: BinlogContext) -> None:
        """Plan exactly `chunks` (keyed tables' ranges, with their markers and numbers within their tables): a
        batch planned before a restart, read again in this snapshot."""
        self.ctx = ctx
        with self.lock:
            pos = self.position
            for t, r, ends, part in chunks:
                key = ChunkKey(t.primary_key, tuple(bool(c.optional) for c in (t.column(n) for n in t.primary_key)
                                                    if c is not None))
                self.chunks.append(SnapshotChunk(self.token, len(self.chunks), pos.file, pos.pos, pos.stream,
                                                 self.ts_us, ctx, t, key, r, None, ends, part))
            self.todo = deque()

    def planned(self, n: int | None) -> list[SnapshotChunk]:
        """The chunks planned so far, at least `n` of them (None: all) when the snapshot has as many. A
        streamed table's next chunk is planned as its rows are read (kept for it in `ahead`)."""
        assert self.todo is not None, "the snapshot's chunks are planned (plan) before they are asked for"
        with self.lock:
            while self.todo and (n is None or len(self.chunks) < n):
                self._plan_next()
            return self.chunks

    def _plan_next(self) -> None:
        """Plan the next table's key ranges, or read the next chunk of a streamed table (under `lock`)."""
        assert self.todo and self.ctx is not None
        t = self.todo[0]
        pos = self.position
        if t.ranges is not None:
            self.todo.popleft()
            for j, r in enumerate(t.ranges):
                self.chunks.append(SnapshotChunk(self.token, len(self.chunks), pos.file, pos.pos, pos.stream,
                                                 self.ts_us, self.ctx, t.table, t.key, r, t.override,
                                                 (t.first, t.last, j == 0 and not t.resumed, j == len(t.ranges) - 1),
                                                 j))
            return
        chunk = SnapshotChunk(self.token, len(self.chunks), pos.file, pos.pos, pos.stream, self.ts_us, self.ctx,
                              t.table, None, KeyRange(None, None), t.override, (t.first, t.last, self.part == 0, False),
                              self.part)
        self.planning = table_name(t.table)
        rows = self._read(chunk)
        self.planning = None
        last = self.stream is None  # (the SELECT's end follows the rows: it is let go)
        chunk.ends = (t.first, t.last, self.part == 0, last)
        self.chunks.append(chunk)
        self.ahead[chunk.index] = rows
        if last:
            self.todo.popleft()
            self.part = 0
        else:
            self.part += 1

    # ---- reading
    def _read(self, chunk: SnapshotChunk) -> TextRows:
        """The chunk's rows, read in the transaction (under `lock`). A streamed chunk's are the next of its
        table's SELECT, the chunks before it read first (the connection serves one result at a time); a
        chunk read out of that order (a batch planned again) reads its table's SELECT again up to it."""
        if chunk.key is not None:
            self._end_stream()
            sql, args = chunk.query()
            return read_text_rows(self.conn, sql, args)
        for index in range(self.read_to, chunk.index):
            if index not in self.claimed and index not in self.ahead:
                self.ahead[index] = self._read(self.chunks[index])
        self.read_to = max(self.read_to, chunk.index)
        s = self.stream
        origin = chunk.index - chunk.part
        if s is None or s.origin != origin or s.part != chunk.part:
            self._end_stream()
            sql, args = chunk.query()
            s = self.stream = Streamed(origin, 0, RowStream(self.conn, sql, args))
            if chunk.part:
                log.info("%s: its table's SELECT is read again up to it", chunk.describe())
        try:
            while s.part < chunk.part:
                s.rows.take(self.chunk_rows)
                s.part += 1
            rows = s.rows.take(self.chunk_rows)
        except BaseException:
            self.stream = None  # (an error ends the result: a chunk read again opens the SELECT again)
            raise
        s.part += 1
        if s.rows.done:
            self.stream = None
        return rows

    def _end_stream(self) -> None:
        """Let the streamed SELECT go: its rows left are read and dropped."""
        if self.stream is not None:
            self.stream.rows.drain()
            self.stream = None

    def rows(self, chunk: SnapshotChunk) -> TextRows:
        """The chunk's rows, read in the transaction (or taken from those read ahead). A blocking snapshot
        (`abandon`) whose query fails is abandoned: that chunk and the ones after it have no rows."""
        with self.lock:
            self.claimed.add(chunk.index)
            self.lock.notify_all()
            rows = self.ahead.pop(chunk.index, None)
            if self.failed is not None and chunk.index >= self.failed[0]:
                return NO_ROWS
            if rows is not None:
                return rows
            try:
                return self._read(chunk)
            except Exception as exc:
                why = self.abandon(exc) if self.abandon is not None else None
                if why is None:
                    raise
                log.info("%s failed (%s): the blocking snapshot reads no more rows", chunk.describe(), why)
                self.failed = (chunk.index, why, table_name(chunk.table))
                return NO_ROWS

    def read_ahead(self, after: Sequence[int], upto: int) -> None:
        """Read the rows of the chunks after `after` up to chunk number `upto` (planning those not planned
        yet) in a thread, once the units of the chunks `after` took theirs (those of a batch being shipped
        come first; so the driver holds two batches' rows at most)."""
        self.stop_reading()
        self.closing = False

        def run() -> None:
            try:
                with self.lock:
                    while not self.closing and not self.claimed.issuperset(after):
                        self.lock.wait()
                index = max(after, default=-1) + 1
                while index < upto:
                    with self.lock:
                        if self.closing:
                            return
                        if index < len(self.chunks):
                            if index not in self.claimed and index not in self.ahead:
                                self.ahead[index] = self._read(self.chunks[index])
                            index += 1
                        elif self.todo:
                            self._plan_next()
                        else:
                            return
            except Exception:  # the unit reads its rows itself, and meets the error there
                log.debug("reading the snapshot's next chunks ahead failed", exc_info=True)

        self.reader = threading.Thread(target=run, name="headwater-snapshot-read-ahead", daemon=True)
        self.reader.start()

    def stop_reading(self) -> None:
        """Stop reading ahead (the chunk being read is read to its end)."""
        reader, self.reader = self.reader, None
        if reader is not None:
            with self.lock:
                self.closing = True
                self.lock.notify_all()
            reader.join()

    def release_lock(self) -> None:
        """`minimal`: the schema and position are read; writes may go on."""
        if self.locked and self.locking == "minimal":
            with self.conn.cursor() as cur:
                cur.execute("UNLOCK TABLES")
            self.locked = False

    def close(self) -> None:
        _HELD.pop(self.token, None)
        self.stop_reading()
        self.ahead.clear()
        if self.stream is None:  # (a SELECT still streaming: closing the connection ends it, and the lock)
            with contextlib.suppress(Exception), self.conn.cursor() as cur:
                cur.execute("COMMIT")
                if self.locked:
                    cur.execute("UNLOCK TABLES")
        self.stream = None
        with contextlib.suppress(Exception):
            self.conn.close()


NO_ROWS = TextRows(b"", np.zeros(0, np.int64), ())


def table_name(t: Table) -> str:
    """`database.table`."""
    return f"{t.database}.{t.name}"


def table_ref(t: Table) -> str:
    return DIALECT.table(t.database, t.name)


@dataclass
class SnapshotChunk(WorkUnit):
    """One key range of one table, read in the held snapshot `token` (its chunk number `index` there)."""

    token: str
    index: int
    file: str  # the snapshot's binlog position (source.file, source.pos)
    pos: int
    version: int  # _commit_version: the position as a stream integer
    ts_us: int
    ctx: BinlogContext
    table: Table
    key: ChunkKey | None
    range: KeyRange
    override: str | None  # snapshot.select.statement.overrides for this table
    ends: tuple[bool, bool, bool, bool]  # first table, last table, first chunk, last chunk
    part: int  # the chunk's number within its table
    rows: TextRows | None = field(default=None, repr=False)  # read on the driver into the pickled copy

    def describe(self) -> str:
        if self.key is None:
            return f"snapshot of {self.table.database}.{self.table.name} part {self.part}"
        return f"snapshot of {self.table.database}.{self.table.name} keys [{self.range.lo}, {self.range.hi})"

    def query(self) -> tuple[str, list[Any]]:
        t = self.table
        if self.override is not None:
            return self.override, []
        names = [c.name for c in t.columns]
        if self.key is None:
            return f"SELECT {', '.join(DIALECT.quote(c) for c in names)} FROM {table_ref(t)}", []
        return self.range.select(table_ref(t), names, self.key, DIALECT)

    def _held(self) -> HeldSnapshot:
        held = _HELD.get(self.token)
        if held is None:
            raise SourceError(f"{self.describe()}: its snapshot transaction is no longer open (the snapshot "
                              "batch is read again after a restart: a new snapshot is taken)")
        return held

    def _fetch(self) -> TextRows:
        """The chunk's rows as the server sends them: those it carries (a pickled copy), else read in the held
        transaction."""
        return self.rows if self.rows is not None else self._held().rows(self)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "rows": self._fetch()}  # (the driver's chunk keeps none: they are shipped)

    def read(self) -> Iterator[Events]:
        te = records_of(self.ctx, self.table, streaming=False)
        ts_us = self.ts_us // 1_000_000 * 1_000_000  # Debezium's snapshot rows carry whole seconds
        rows, self.rows = self._fetch(), None  # (the buffer is let go once its events are made)
        yield from snapshot_events(te, BinlogMaker(self.ctx), rows, ts_us=ts_us, version=self.version,
                                   position={"file": self.file, "pos": self.pos}, ends=self.ends)


class SchemaSnapshotUnit(WorkUnit):
    """The snapshot's schema change records (Debezium's `SET`, `DROP`, `CREATE`, `USE` sequence)."""

    def __init__(self, ctx: BinlogContext, changes: list[SchemaChange], file: str, pos: int, version: int,
                 ts_us: int, last: bool):
        self.ctx, self.changes, self.file, self.pos, self.version, self.ts_us = ctx, changes, file, pos, version, ts_us
        self.last = last  # no rows follow: the last record is the snapshot's last (`source.snapshot` "last")

    def describe(self) -> str:
        return f"the snapshot's {len(self.changes)} schema change records"

    def read(self) -> Iterator[Events]:
        maker = BinlogMaker(self.ctx)
        for i, change in enumerate(self.changes):
            mark = "last" if self.last and i == len(self.changes) - 1 else "true"
            src = maker.source_bytes(None, mark, self.ts_us, server_id=0, gtid=None, file=self.file, pos=self.pos,
                                     row=0, thread=None, query=None, database=change.database, table=change.table)
            maker.schema_change(change.database, change.ddl, list(change.table_changes), src, self.version,
                                self.ts_us)
        yield maker.take()
