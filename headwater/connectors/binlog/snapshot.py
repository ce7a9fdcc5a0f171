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
`DIALECT`); rows come in key order; `source.snapshot` markers are the shared `marker`'s.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

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
from headwater.connectors.binlog.textrows import TextRows, read_text_rows
from headwater.connectors.common.snapshot import (
    ChunkKey,
    KeyDialect,
    KeyRange,
    key_ranges,
    select_overrides,
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


DIALECT = MySqlDialect()

# PyMySQL's encoders (parameters) without its decoders: values as the text protocol gives them (types.py)
TEXT_VALUES = {k: f for k, f in pymysql.converters.conversions.items() if not isinstance(k, int)}

_HELD: dict[str, HeldSnapshot] = {}  # the snapshots held in this process, by token


class HeldSnapshot:
    """Snapshot number `epoch`: its connection, lock and transaction, its binlog position and time."""

    def __init__(self, params: ConnectionParams, epoch: int, locking: str, lock_timeout_ms: int, gtid_query: str):
        self.epoch = epoch
        self.locking = locking
        self.token = uuid.uuid4().hex
        self.lock = threading.Condition()  # the connection, one thread at a time; `claimed` changed
        self.ahead: dict[int, TextRows] = {}  # rows read ahead, by chunk index
        self.claimed: set[int] = set()  # the chunks whose rows a unit took (or is reading)
        self.closing = False
        self.reader: threading.Thread | None = None
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

    def rows(self, chunk: SnapshotChunk) -> TextRows:
        """The chunk's rows, read in the transaction (or taken from those read ahead)."""
        with self.lock:
            self.claimed.add(chunk.index)
            self.lock.notify_all()
            rows = self.ahead.pop(chunk.index, None)
            if rows is None:
                sql, args = chunk.query()
                rows = read_text_rows(self.conn, sql, args)
            return rows

    def read_ahead(self, after: Sequence[int], chunks: Sequence[SnapshotChunk]) -> None:
        """Read the rows of `chunks` in a thread, once the units of the chunks `after` took theirs (those of
        a batch being shipped come first; so the driver holds two batches' rows at most)."""
        self.stop_reading()
        self.closing = False

        def run() -> None:
            try:
                with self.lock:
                    while not self.closing and not self.claimed.issuperset(after):
                        self.lock.wait()
                for chunk in chunks:
                    with self.lock:
                        if self.closing:
                            return
                        if chunk.index not in self.claimed and chunk.index not in self.ahead:
                            sql, args = chunk.query()
                            self.ahead[chunk.index] = read_text_rows(self.conn, sql, args)
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
        with contextlib.suppress(Exception), self.conn.cursor() as cur:
            cur.execute("COMMIT")
            if self.locked:
                cur.execute("UNLOCK TABLES")
        with contextlib.suppress(Exception):
            self.conn.close()


def table_ref(t: Table) -> str:
    return DIALECT.table(t.database, t.name)


def plan_chunks(snap: HeldSnapshot, tables: Sequence[Table], ctx: BinlogContext, cfg: ConnectorConfig
                ) -> list[SnapshotChunk]:
    """The chunks of every captured table, in Debezium's table order, read in `snap` (an empty table counts
    as the first or last table for the markers, as in Debezium, though it has no rows to mark)."""
    overrides = select_overrides(cfg)
    planned: list[tuple[Table, ChunkKey | None, list[KeyRange], str | None]] = []
    with snap.conn.cursor() as cur:
        for t in snapshot_tables(tables, lambda t: f"{t.database}.{t.name}", cfg):
            override = overrides.get(f"{t.database}.{t.name}")
            if not t.primary_key or override is not None:
                planned.append((t, None, [KeyRange(None, None)], override))
                continue
            key = ChunkKey(t.primary_key, tuple(bool(c.optional) for c in (t.column(n) for n in t.primary_key)
                                                if c is not None))
            planned.append((t, key, key_ranges(cur, DIALECT, table_ref(t), key, cfg["headwater.snapshot.chunk.rows"]),
                            None))
    chunks = [(t, key, r, override, (i == 0, i == len(planned) - 1, j == 0, j == len(ranges) - 1))
              for i, (t, key, ranges, override) in enumerate(planned) for j, r in enumerate(ranges)]
    return [SnapshotChunk(snap.token, n, snap.position.file, snap.position.pos, snap.position.stream, snap.ts_us,
                          ctx, *chunk) for n, chunk in enumerate(chunks)]


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
    rows: TextRows | None = field(default=None, repr=False)  # read on the driver into the pickled copy

    def describe(self) -> str:
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
