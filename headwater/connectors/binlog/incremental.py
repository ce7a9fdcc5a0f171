"""The binlog connectors' hooks for signals and incremental and blocking snapshots (`connectors.common.incremental`).

- **The stream scan** decodes, on the driver, only the rows events of the signalling table and of the
  table whose window is open (`streaming.row_images`, with the tables as the schema history holds
  them); other events are passed over by the table their TABLE_MAP names. A key is compared as the JSON
  of its columns' Debezium values (`KeyText`): one row's key gives the same text from a SELECT's text
  values and from a binlog image, whatever the column types.
- **A window** opens on the driver: the open watermark, as Debezium writes it (`INSERT INTO <signal
  table> VALUES ('<id>-open', 'snapshot-window-open', '{"openWindowTimestamp": ...}')`), one query
  for the keys that cut the window's range (after the last key emitted, up to the table's maximum,
  under the signal's condition) into parts of about equal rows, then the close watermark (`('<id>-close',
  'snapshot-window-close', ...)` for `insert_insert`, a DELETE of the open row for `insert_delete`),
  each committed on its own, so each is one binlog transaction in commit order. The rows are emitted
  once the scan has met the close event; their `source` is that event's (`server_id`, `gtid`,
  `file`, `pos`, `row`, `thread`), as Debezium's offset context is when it closes the window there,
  with `ts_ms` the time of emission and no `query`.
- **Each part** is a unit (`IncrementalChunk`, a Spark partition) that reads its range where it runs:
  `SELECT <columns> FROM db.t WHERE <key> > <from> AND <key> <= <to> [AND (<condition>)] ORDER BY <key>`
  in a consistent snapshot of its own (MariaDB: `START TRANSACTION WITH CONSISTENT SNAPSHOT`, whose
  `binlog_snapshot_file`/`_position` says exactly which transactions it sees, those ending at or
  before it; MySQL, which has no such position and needs `gtid_mode=ON`, as Debezium's read-only mode
  does: the executed GTID set read before the snapshot), read again while the view misses a change
  delivered before the window (the binlog can reach a replica a moment before the commit is
  visible). The values come as the text protocol gives them (as the initial snapshot reads them) and
  are made into `op: r` events with `source.snapshot: incremental` by the snapshot's encoder. Dropped:
  the keys the driver's scan found superseded (watermarks: every change after the open one;
  read-only: the changes whose transaction the view did not see, judged here by each change's end
  position or GTID), and every key the part finds changed in the binlog from the batch's end to the
  binlog's end read after its SELECT (`lockfree.read_window`): the view may be past the batch's end,
  and a row emitted there must not carry a later change.
- **The read-only mode** (`read.only` / `headwater.incremental.snapshot.read.only`) writes nothing: no
  watermarks; the window is emitted in the batch it opens in, its rows' `source` the stream's position
  then (`file`, `pos`; no GTID, row 0).
- **A replayed batch** (after a restart) reads its window's parts again the same way, dropping every
  key its stream range changes.
- **A blocking snapshot** reads the tables in a consistent-snapshot transaction opened when its first
  batch is planned (no lock: the schema comes from the history), cut into key ranges as the initial
  snapshot cuts them (`HeldSnapshot.plan`), in batches of `chunks_per_batch` chunks, as the locking
  snapshot is read (`BlockingBatches` is its `LockingBatches`): the `blocking_snapshot` offset field
  names the held snapshot (`token`) and the batch's chunks (`chunk_range`, [from, to)), and the next
  batch's rows are read ahead in the transaction while a batch's are shipped, so the driver holds about
  two batches' rows. Streaming resumes where it paused once no chunk is left. The transaction does not
  outlive the process, so each batch's field also says where the snapshot goes on after it (`resume`: after
  its last chunk's key range, or after its table) and the key ranges it reads (`ranges`). After a restart the
  batch after a `blocking_snapshot` offset whose token is not held goes on from its `resume` in a new
  transaction (keyed tables from the next key on; a table read by one streamed SELECT, without a key or by a
  statement, again from its start when the batch holds chunks of it: its rows delivered before come again, and
  the batch's chunks after it), and a batch replayed (Spark's,
  planned before the restart and not committed) reads its `ranges` again in a new transaction (a streamed
  table's chunks in it are read by the batch after it, from the table's start). This is exact: streaming
  stays paused at the same position P for the whole snapshot and resumes from P afterwards, so a row read in
  a later transaction is as consistent as one read late in the first (every change since P comes after it).
- **A query error** (a table dropped since the signal, a bad statement: `connection.query_error`) met
  planning or reading the chunks abandons the blocking snapshot (`BlockingAbandoned`; met where a unit takes
  its chunk's rows, that chunk and those after it read nothing and the next batch abandons it): streaming
  resumes where it paused, the rows delivered stay delivered. An error of the connection fails the batch.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NoReturn, Protocol

import orjson
import pymysql

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import Offset, WorkUnit
from headwater.connectors.binlog import framing as fr
from headwater.connectors.binlog import lockfree
from headwater.connectors.binlog.connection import ConnectionParams, clean, connect, query_error
from headwater.connectors.binlog.gtid import GtidSet
from headwater.connectors.binlog.lockfree import exact_position, master_position, read_window
from headwater.connectors.binlog.locking import RANGE, TOKEN, LockingBatches
from headwater.connectors.binlog.positions import BinlogPosition, split_pos
from headwater.connectors.binlog.reader import BinlogReader
from headwater.connectors.binlog.records import BinlogContext, BinlogMaker, records_of
from headwater.connectors.binlog.schema import Table
from headwater.connectors.binlog.snapshot import (
    DIALECT,
    TEXT_VALUES,
    HeldSnapshot,
    SnapshotChunk,
    table_name,
    table_ref,
)
from headwater.connectors.binlog.snapshot_rows import snapshot_events
from headwater.connectors.binlog.streaming import DecodeControl, map_table, row_images, truncated_tables
from headwater.connectors.binlog.tracking import SchemaHistoryTracker
from headwater.connectors.common.adhoc import (
    blocking_config,
    choose_collections,
    chunk_key,
    close_data,
    key_text,
    key_values,
    open_data,
)
from headwater.connectors.common.incremental import (
    BlockingAbandoned,
    Change,
    Collection,
    Key,
    TableSkipped,
    Window,
    parts_of,
)
from headwater.connectors.common.notifications import NotificationUnit
from headwater.connectors.common.planner import Planner
from headwater.connectors.common.signals import WINDOW_CLOSE, WINDOW_OPEN, read_only, split_table
from headwater.connectors.common.snapshot import ChunkKey, KeyRange, key_between, order_by
from headwater.connectors.errors import SourceError
from headwater.events.batch import Events

log = logging.getLogger("headwater.binlog.incremental")

TableKey = tuple[str, str]
RESUME = "resume"  # a blocking batch's field: where the snapshot goes on after it, in a new transaction after a restart
REREAD = "ranges"  # its keyed chunks' ranges, read again in a new transaction when it is replayed after a restart
COVER_TRIES = 100  # reads of a read-only chunk until its view holds everything delivered
COVER_WAIT_S = 0.02
AWAIT_CLOSE_S = 1.0  # how long opening a window waits for the stream to receive its close watermark


class BinlogSourceLike(Protocol):
    """What these hooks use of `connectors.binlog.source.BinlogSource` (which imports this module)."""

    config: ConnectorConfig
    context: BinlogContext
    params: ConnectionParams
    dbms: ClassVar[str]
    gtid_query: ClassVar[str]
    parallelism: int
    tracker: SchemaHistoryTracker
    reader: BinlogReader | None
    file_like: str

    def _planner(self, start: Offset) -> Planner[BinlogPosition]: ...


class KeyText:
    """A table's chunk key as one string per row: the JSON of the key columns' Debezium values, from a
    SELECT's text values (`streaming` False) or a binlog image (True)."""

    def __init__(self, ctx: BinlogContext, table: Table, key_columns: Sequence[str], streaming: bool):
        names = [c.name for c in table.columns]
        self.index = [names.index(k) for k in key_columns]
        collection = f"{table.database}.{table.name}"
        convs = [ctx.converter(table.columns[i], collection) for i in self.index]
        self.convert: list[tuple[Callable[[str], Any], Callable[[Any], Any]]] = [
            (c.from_stream_text, c.from_stream_binary) if streaming else (c.from_text, c.from_binary)
            for c in convs if c is not None]
        if len(self.convert) != len(self.index):
            raise TableSkipped("a key column has no type mapping")

    def __call__(self, values: Sequence[Any]) -> str:
        out = []
        for i, (text, binary) in zip(self.index, self.convert, strict=True):
            v = values[i]
            out.append(None if v is None else text(v) if v.__class__ is str else binary(v))
        return orjson.dumps(out, default=_plain).decode()


def _plain(v: Any) -> Any:
    return v.hex() if isinstance(v, bytes | bytearray) else str(v)


@dataclass(frozen=True)
class ChunkView:
    """The view a part's SELECT read in: MariaDB's binlog position of its consistent
    snapshot (`low`), or MySQL's executed GTID set read before it (`gtids`); the binlog end read after it."""

    high: int
    low: int | None = None
    gtids: GtidSet | None = None

    def sees(self, end: int | None, gtid: str | None) -> bool:
        """Whether the SELECT saw the transaction ending at stream position `end` with GTID `gtid`."""
        if self.gtids is not None:
            return gtid is not None and GtidSet.parse(gtid) <= self.gtids
        return end is not None and self.low is not None and end <= self.low

    def covers(self, delivered: BinlogPosition) -> bool:
        """Whether the SELECT saw every change delivered up to `delivered`."""
        if self.gtids is not None:
            return not delivered.gtids or GtidSet.parse(delivered.gtids) <= self.gtids
        assert self.low is not None
        if delivered.event and delivered.commit is not None:  # rows of a transaction whose commit is at `commit`
            return delivered.commit < self.low
        return delivered.stream <= self.low


@dataclass
class _Watched:
    """A table the scan decodes: its name, its tracked schema and how its keys are compared."""

    name: str
    table: Table
    key: KeyText | None  # None: the signalling table


class BlockingBatches(LockingBatches):
    """A blocking snapshot's batches, read as the locking snapshot's are (`LockingBatches`: the held
    snapshot's token and the batch's chunk range in the offset, the next batch's rows read ahead), over a
    snapshot of its own (no lock: the schema is the history's) and the signal's tables, without schema
    change records."""

    def __init__(self, source: BinlogSourceLike):
        super().__init__(source)
        self.snapshot: HeldSnapshot | None = None
        self.tables: list[str] = []
        self.statements: dict[str, str] = {}

    def take(self, tables: list[str], statements: dict[str, str], resume: dict[str, Any] | None = None) -> None:
        """Take the snapshot of `tables` (`statements`: a table's SELECT in place of its own), letting go of
        any held before; `resume`: going on after a restart from there (a batch's `resume`)."""
        self.end()
        self.resume_at = resume
        src = self.source
        self.snapshot = HeldSnapshot(src.params, -1, "none", src.config["snapshot.lock.timeout.ms"], src.gtid_query)
        self.snapshot.abandon = lambda exc: clean(exc, src.params) if query_error(exc) else None
        self.tables, self.statements = list(tables), dict(statements)

    @contextlib.contextmanager
    def abandoning(self) -> Iterator[None]:
        """A query error of the snapshot (planning its chunks, reading them here, or met by a unit before) is
        `BlockingAbandoned`; an error of the connection goes on up."""
        held = self.snapshot
        if held is not None and held.failed is not None:
            raise BlockingAbandoned(held.failed[1], held.failed[2])
        try:
            yield
        except pymysql.err.MySQLError as exc:
            if not query_error(exc):
                raise
            now = self.snapshot  # (the table whose planning met the error names it in the notifications)
            raise BlockingAbandoned(clean(exc, self.source.params), now.planning if now is not None else None) from None

    def held(self) -> HeldSnapshot | None:
        return self.snapshot

    def plan_tables(self, held: HeldSnapshot) -> tuple[list[Table], ConnectorConfig]:
        src = self.source
        found = [t for t in src.tracker.current().values() if f"{t.database}.{t.name}" in self.tables]
        return found, blocking_config(src.config, self.tables, self.statements)

    def first_units(self, held: HeldSnapshot) -> list[WorkUnit]:
        return []

    def batch(self, after: Offset | None, max_events: int | None) -> Offset | None:
        """`LockingBatches.batch`, with where the snapshot goes on after the batch (`resume`) and the key ranges
        it reads (`ranges`), so that a restart needs no chunk numbers of a transaction that is gone."""
        out = super().batch(after, max_events)
        held = self.held()
        if out is None or held is None:
            return out
        lo, hi = out[RANGE]
        chunks = held.planned(hi)[lo:hi]
        return {**out, RESUME: resume_after(chunks), REREAD: reread_ranges(chunks)}

    def reread(self, blocking: dict[str, Any]) -> list[WorkUnit]:
        """The batch `blocking`, planned before a restart, read again in a new transaction: its keyed chunks
        before any streamed table's (`ranges`), with their markers (a streamed table is read again from its
        start after the batch: `resume`)."""
        self.take(blocking["tables"], blocking.get("statements") or {})
        held = self.held()
        assert held is not None
        current = self.source.tracker.current()
        chunks = []
        for name, lo, hi, ends, part in blocking[REREAD]:
            t = current.get(split_table(name))
            if t is None:
                raise BlockingAbandoned(f"the table {name} is no longer known", name)
            chunks.append((t, KeyRange(None if lo is None else tuple(key_values(lo)),
                                       None if hi is None else tuple(key_values(hi))), tuple(ends), part))
        held.adopt(chunks, self.source.context)
        log.info("blocking snapshot %s: the batch of chunks %s planned before a restart is read again in a new "
                 "transaction (%d chunks)", blocking.get("id"), blocking[RANGE], len(chunks))
        return self.plan({**blocking, TOKEN: held.token, RANGE: [0, len(chunks)]})

    def end(self) -> None:
        """The blocking snapshot is over (or taken again): its transaction is let go."""
        if self.snapshot is not None:
            self.snapshot.close()
            self.snapshot = None


def resume_after(chunks: Sequence[SnapshotChunk]) -> dict[str, Any]:
    """Where a blocking snapshot goes on after `chunks` (a batch's), in a new transaction after a restart: the
    start of the first table read by a streamed SELECT that has chunks among them (its rows read after a
    restart are other rows: it is read again whole), else after the last chunk's key range (`from`: its
    upper bound), or after its table (`done`)."""
    streamed = next((c for c in chunks if c.key is None), None)
    if streamed is not None:
        return {"table": table_name(streamed.table), "from": None}
    last = chunks[-1]
    if last.range.hi is None:
        return {"table": table_name(last.table), "done": True}
    return {"table": table_name(last.table), "from": key_text(last.range.hi)}


def reread_ranges(chunks: Sequence[SnapshotChunk]) -> list[list[Any]]:
    """The key ranges of `chunks` before the first one of a streamed table: `[table, lo, hi, ends, part]`."""
    out: list[list[Any]] = []
    for c in chunks:
        if c.key is None:
            break
        out.append([table_name(c.table), None if c.range.lo is None else key_text(c.range.lo),
                    None if c.range.hi is None else key_text(c.range.hi), list(c.ends), c.part])
    return out


class BinlogIncremental:
    """`IncrementalHooks` for a `BinlogSource`."""

    def __init__(self, source: BinlogSourceLike):
        self.source = source
        cfg = source.config
        self.signal_name: str | None = cfg.get("signal.data.collection")  # as the configuration writes it
        self.signal_key: TableKey | None = split_table(self.signal_name) if self.signal_name else None
        self.signal_table = ".".join(self.signal_key) if self.signal_key else None
        self.strategy = cfg["incremental.snapshot.watermarking.strategy"]
        self.read_only = read_only(cfg)
        self.windows: dict[str, Window] = {}  # windows whose rows are not emitted yet, by id
        self.blocking = BlockingBatches(source)  # a blocking snapshot's held transaction and batches
        self.ctl = DecodeControl(source.dbms)
        self.warned: set[str] = set()
        self.server_id: int | None = None
        self.conn: pymysql.Connection | None = None  # chunk reads and watermarks (values as text)

    def _connection(self) -> pymysql.Connection:
        """The connection chunks are read through, opened again when the server dropped it."""
        if self.conn is not None:
            try:
                self.conn.ping(reconnect=False)
            except pymysql.err.MySQLError:
                self._drop()
        if self.conn is None:
            self.conn = connect(self.source.params, conv=TEXT_VALUES)
        return self.conn

    def _drop(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
            self.conn = None

    def close(self) -> None:
        """Release the connection and a blocking snapshot's transaction."""
        self.end_blocking()
        self._drop()

    # ---- tables
    def _table(self, name: str) -> Table:
        database, table = split_table(name)
        found = self.source.tracker.current().get((database, table))
        if found is None:
            raise TableSkipped("the schema history does not know it", "UNKNOWN_SCHEMA")
        return found

    def resolve_collections(self, patterns: Sequence[str]) -> list[str]:
        ctx = self.source.context
        names = [f"{t.database}.{t.name}" for t in self.source.tracker.current().values()
                 if ctx.filters.includes(t.database, t.name)]
        return choose_collections(names, patterns, self.signal_table, self.source.config.get("table.include.list"))

    def key_columns(self, collection: Collection) -> list[str] | None:
        t = self._table(collection.id)
        return chunk_key(collection, [c.name for c in t.columns], t.primary_key)

    def _chunk_key(self, t: Table, key_columns: Sequence[str]) -> ChunkKey:
        nullable = tuple(bool(c.optional) if (c := t.column(k)) is not None else False for k in key_columns)
        return ChunkKey(tuple(key_columns), nullable)

    def chunk_query(self, t: Table, key_columns: Sequence[str], after: Sequence[Any] | None,
                    upto: Sequence[Any] | None, condition: str | None, size: int | None) -> tuple[str, list[Any]]:
        """The SELECT of the rows with keys in (after, upto] (stored keys, `adhoc.key_text`) under `condition`."""
        key = self._chunk_key(t, key_columns)
        where, params = key_between(key, DIALECT, None if after is None else key_values(after),
                                    None if upto is None else key_values(upto))
        conds = [c for c in (where, f"({condition})" if condition else None) if c]
        sql = (f"SELECT {', '.join(DIALECT.quote(c.name) for c in t.columns)} FROM {table_ref(t)}"
               + (f" WHERE {' AND '.join(conds)}" if conds else "") + f" ORDER BY {order_by(key, DIALECT)}")
        return sql + (f" LIMIT {int(size)}" if size is not None else ""), params

    def max_key(self, collection: Collection, key_columns: list[str]) -> list[Any] | None:
        t = self._table(collection.id)
        cols = ", ".join(DIALECT.quote(k) for k in key_columns)
        sql = (f"SELECT {cols} FROM {table_ref(t)}" + (f" WHERE ({collection.condition})" if collection.condition
                                                        else "")
               + " ORDER BY " + ", ".join(f"{DIALECT.quote(k)} DESC" for k in key_columns) + " LIMIT 1")
        try:
            with self._connection().cursor() as cur:
                cur.execute(sql)
                row = cur.fetchone()
        except pymysql.err.MySQLError as exc:
            _skip(exc, "its largest key cannot be read", "; check the signal's additional-conditions")
        return None if row is None else key_text(row)

    # ---- chunks
    def _watermark(self, cur: Any, id_: str, kind: str, data: dict[str, str]) -> None:
        assert self.signal_key is not None
        cur.execute(f"INSERT INTO {DIALECT.table(*self.signal_key)} VALUES (%s, %s, %s)", (id_, kind, json.dumps(data)))

    def _unwatermark(self, cur: Any, id_: str) -> None:
        assert self.signal_key is not None
        first = self._table(".".join(self.signal_key)).columns[0].name
        cur.execute(f"DELETE FROM {DIALECT.table(*self.signal_key)} WHERE {DIALECT.quote(first)} = %s", (id_,))

    def bounds_query(self, t: Table, key_columns: Sequence[str], after: Sequence[Any] | None, upto: Sequence[Any],
                     condition: str | None, rows: int, parts: int) -> tuple[str, list[Any]]:
        """The keys ending each part of the next `rows` rows (at most) with keys in (after, upto] (stored keys,
        `adhoc.key_text`) under `condition`, each with its row number and the rows counted: `parts` parts
        (fewer when the rows make fewer than `parts` chunks) of about equal rows, the last ending at the
        last row. The rows are numbered after the LIMIT: MariaDB computes a window function over every row
        its WHERE leaves."""
        key = self._chunk_key(t, key_columns)
        where, params = key_between(key, DIALECT, None if after is None else key_values(after), key_values(upto))
        conds = [c for c in (where, f"({condition})" if condition else None) if c]
        names = [f"_k{i}" for i in range(len(key_columns))]
        aliased = ChunkKey(tuple(names), key.nullable)
        chunk = int(self.source.config["incremental.snapshot.chunk.size"])
        inner = (f"SELECT {', '.join(f'{DIALECT.quote(k)} AS {n}' for k, n in zip(key_columns, names, strict=True))} "
                 f"FROM {table_ref(t)}" + (f" WHERE {' AND '.join(conds)}" if conds else "")
                 + f" ORDER BY {order_by(key, DIALECT)} LIMIT {int(rows)}")
        numbered = (f"SELECT {', '.join(names)}, ROW_NUMBER() OVER (ORDER BY {order_by(aliased, DIALECT)}) AS _n, "
                    f"COUNT(*) OVER () AS _total FROM ({inner}) AS w")
        split = f"LEAST({int(parts)}, (_total + {chunk - 1}) DIV {chunk})"
        return (f"SELECT {', '.join(names)}, _n, _total FROM ({numbered}) AS x "
                f"WHERE _n * {split} DIV _total > (_n - 1) * {split} DIV _total ORDER BY _n"), params

    def open_window(self, collection: Collection, key_columns: list[str], after: list[Any] | None,
                    upto: list[Any], rows: int, parts: int, window_id: str, delivered: Offset) -> Window | None:
        """The open watermark, the parts' bounds (no view is shared: each part reads in a view of its own),
        then the close watermark (each committed on its own); the rows are read by `chunk_units`."""
        t = self._table(collection.id)
        sql, params = self.bounds_query(t, key_columns, after, upto, collection.condition, rows, parts)
        high = None
        try:
            with self._connection().cursor() as cur:
                opened = open_data()
                if not self.read_only:
                    self._watermark(cur, f"{window_id}-open", WINDOW_OPEN, opened)
                cur.execute(sql, params)
                found = [tuple(r) for r in cur.fetchall()]
                if not self.read_only:
                    if self.strategy == "insert_delete":
                        self._unwatermark(cur, f"{window_id}-open")
                    else:
                        self._watermark(cur, f"{window_id}-close", WINDOW_CLOSE, close_data(opened))
                    high = binlog_end(cur)
        except BaseException as exc:
            self._drop()
            if isinstance(exc, pymysql.err.MySQLError):
                _skip(exc, "a chunk cannot be read")
            raise
        if not found:
            return None
        n = len(key_columns)
        keys = [key_text(r[:n]) for r in found]
        window = Window(window_id, collection, key_columns, after, keys[-1], keys[:-1], int(found[-1][n + 1]),
                        snapshot=BinlogPosition.from_offset(delivered))
        log.info("incremental snapshot window %s of %s: %d rows after %s up to %s in %d parts", window_id,
                 collection.id, window.rows, after, window.to_key, len(keys))
        self.windows = {window_id: window}  # (a window left open by a stopped snapshot is dropped)
        if high is not None:
            self._await(high)
        return window

    def _await(self, high: int) -> None:
        """Give the stream a moment to receive up to `high` (the close watermark), so that the batch being
        planned can emit the window rather than the next one."""
        reader = self.source.reader
        if reader is None:
            return
        buf = reader.buffer
        deadline = time.monotonic() + AWAIT_CLOSE_S
        with buf.cond:
            while buf.received < high and time.monotonic() < deadline:
                buf.cond.wait(min(0.05, max(0.0, deadline - time.monotonic())))

    def window_ready(self, window: Window, end: Offset) -> bool:
        if not self.read_only:
            return window.source is not None  # the close event was seen
        if window.source is None:  # read-only: each part's view is checked where it is read
            pos = BinlogPosition.from_offset(end)
            window.source = {"file": pos.file, "pos": pos.pos, "server_id": self._server_id(), "gtid": None,
                             "row": 0, "thread": None}
        return True

    def _server_id(self) -> int:
        if self.server_id is None:
            conn = connect(self.source.params)
            try:
                with conn.cursor() as cur:
                    cur.execute("SELECT @@global.server_id")
                    self.server_id = int(cur.fetchone()[0])
            finally:
                conn.close()
        return self.server_id

    def visible(self, window: Window, xid: Any) -> bool:
        return False  # the views are taken where the parts are read: they decide by each change's xid

    def end_window(self, window: Window) -> None:
        self.windows.pop(window.id, None)

    # ---- the stream scan
    def scan_stream(self, start: Offset, end: Offset, watched: Mapping[str, list[str]]) -> Iterator[Change]:
        src = self.source
        tables: dict[TableKey, _Watched] = {}
        for name, key in watched.items():
            t = self._table(name)
            tables[(t.database, t.name)] = _Watched(name, t, KeyText(src.context, t, key, streaming=True))
        if self.signal_key is not None:
            t_signal = src.tracker.current().get(self.signal_key)
            if t_signal is not None:
                tables[self.signal_key] = _Watched(self.signal_name or "", t_signal, None)
            elif "signal" not in self.warned:
                self.warned.add("signal")
                log.warning("the signalling table %s is not known to the schema history (is it captured?): its "
                            "signals are not seen", self.signal_table)
        if not tables:
            return
        planner = src._planner(start)
        names: dict[int, _Watched] = {}  # table id -> watched table, from the TABLE_MAPs met
        table_map: dict[int, Any] = {}
        for part in planner.batch_parts(BinlogPosition.from_offset(start), BinlogPosition.from_offset(end)):
            txn = part.txn
            for layout in part.layouts.values():
                self._layout(layout, tables, names, table_map)
            gtid, thread = src.reader.txn_info.get(txn.xid or 0, (None, None)) if src.reader else (None, None)
            xid = (txn.end_pos, gtid)
            for pos, payload in part.msgs:
                kind = payload[0]
                if kind == fr.TABLE_MAP:
                    self._layout(payload, tables, names, table_map)
                elif kind == fr.QUERY:
                    q = fr.query(payload[1:])
                    for emptied in truncated_tables(q.sql, q.database):
                        w = tables.get(emptied)
                        if w is not None and w.key is not None:
                            yield Change(w.name, "t", xid)
                elif kind in fr.ROWS_EVENTS:
                    w = names.get(fr.framed_table_id(payload))
                    if w is not None:
                        yield from self._changes(w, pos, payload, table_map, xid, gtid, thread)

    def _layout(self, payload: bytes, tables: dict[TableKey, _Watched], names: dict[int, _Watched],
                table_map: dict[int, Any]) -> None:
        table_id = fr.framed_table_id(payload)
        w = tables.get(fr.table_map_name(payload))
        if w is None:
            names.pop(table_id, None)
        else:
            names[table_id] = w
            map_table(payload, table_map, self.ctl)

    def _changes(self, w: _Watched, pos: int, payload: bytes, table_map: dict[int, Any], xid: tuple[Any, ...],
                 gtid: str | None, thread: int | None) -> Iterator[Change]:
        kind = payload[0]
        images = row_images(payload, table_map, self.ctl, len(w.table.columns))
        if w.key is None:  # the signalling table: signals, and the watermarks that close windows
            for i, image in enumerate(images):
                row = tuple(_text(v) for v in image[0])
                id_ = row[0] if row and isinstance(row[0], str) else ""
                closed = ""
                if kind in fr.WRITES:
                    yield Change(w.name, "c", xid, row=row)
                    closed = id_.removesuffix("-close") if id_.endswith("-close") else ""
                elif kind in fr.DELETES and self.strategy == "insert_delete":
                    closed = id_.removesuffix("-open") if id_.endswith("-open") else ""
                window = self.windows.get(closed)
                if window is not None and not self.read_only and window.source is None:
                    file, at = split_pos(self.source.file_like, pos)
                    window.source = {"file": file, "pos": at, "server_id": fr.header(payload[1:]).server_id,
                                     "gtid": gtid, "row": i, "thread": thread}
            return
        op = "c" if kind in fr.WRITES else "u" if kind in fr.UPDATES else "d"
        keys: list[Key] = []
        for image in images:
            keys += [(w.key(values),) for values in image]
        yield Change(w.name, op, xid, keys)

    # ---- units
    def _units(self, c: Collection, parts: list[tuple[list[Any] | None, list[Any]]], evicted: dict[Key, Any],
               by_view: bool, truncates: list[Any], since: BinlogPosition, source: dict[str, Any] | None,
               at: Offset) -> list[WorkUnit]:
        t = self._table(c.id)
        key = self.key_columns(c) or []
        pos = BinlogPosition.from_offset(at)
        where = source or {"file": pos.file, "pos": pos.pos}
        gone = {k[0]: xid for k, xid in evicted.items()}
        return [IncrementalChunk(self.source.context, t, key, self.source.params, self.source.dbms,
                                 self.chunk_query(t, key, after, upto, c.condition, None), gone, by_view, truncates,
                                 since, pos, self.source.file_like, where) for after, upto in parts]

    def chunk_units(self, window: Window, at: Offset) -> list[WorkUnit]:
        self.windows.pop(window.id, None)
        return self._units(window.collection, window.parts(), window.evicted, self.read_only, window.truncates,
                           window.snapshot, window.source, at)

    def reread_units(self, chunk: dict[str, Any], evicted: dict[Key, Any], at: Offset, since: Offset) -> list[WorkUnit]:
        c = Collection(chunk["table"], chunk.get("condition"), chunk.get("surrogate_key"))
        parts = parts_of(chunk.get("from"), chunk.get("bounds") or [], chunk["to"])
        return self._units(c, parts, evicted, False, [], BinlogPosition.from_offset(since), chunk.get("source"), at)

    def notification_unit(self, notifications: list[dict[str, Any]], at: Offset) -> WorkUnit:
        return NotificationUnit(self.source.config["notification.sink.topic.name"], notifications,
                                self.source.context, BinlogPosition.from_offset(at).stream)

    def blocking_batch(self, snapshot: dict[str, Any], after: dict[str, Any] | None,
                       max_events: int | None) -> dict[str, Any] | None:
        """The next `chunks_per_batch` chunks of the blocking snapshot (`BlockingBatches`): the first ones in a
        snapshot taken now when `after` is None or names a snapshot not held here (a restart: it is taken
        again from its start); None when no chunk is left."""
        batches = self.blocking
        if after is not None and RANGE not in after:
            return None  # read whole in one batch (an offset of a version without batches)
        resume = None
        if after is not None and not batches.holds(after):
            resume = after.get(RESUME)
            if resume is None:  # (an offset of a version that did not say where to go on)
                log.warning("blocking snapshot %s: its transaction is gone (a restart after chunks %s): it is taken "
                            "again from its start", snapshot["id"], after[RANGE])
            else:
                log.info("blocking snapshot %s: its transaction is gone (a restart after chunks %s): it goes on in a "
                         "new one from %s", snapshot["id"], after[RANGE], resume)
            after = None
        if after is None:
            batches.take(snapshot["tables"], snapshot.get("statements") or {}, resume)
        with batches.abandoning():
            batch = batches.batch(after, max_events)
        if after is None:
            held = batches.held()
            assert held is not None
            log.info("blocking snapshot %s of %s at %s:%d, %d chunks planned first", snapshot["id"],
                     ", ".join(snapshot["tables"]), held.position.file, held.position.pos, len(batches.chunks(held, 0)))
        return batch

    def blocking_units(self, blocking: dict[str, Any], at: Offset) -> list[WorkUnit]:
        """The chunks of the blocking snapshot's batch `blocking`, read in its held transaction, or, when that
        transaction is gone (a batch replayed after a restart), its key ranges read again in a new one
        (`BlockingBatches.reread`)."""
        batches = self.blocking
        if RANGE in blocking and REREAD in blocking and not batches.holds(blocking):
            with batches.abandoning():
                return batches.reread(blocking)
        if RANGE not in blocking:  # planned by a version without batches, replayed: taken again, in one batch
            batches.take(blocking["tables"], blocking.get("statements") or {})
            held = batches.held()
            assert held is not None
            with batches.abandoning():
                blocking = {**blocking, TOKEN: held.token, RANGE: [0, len(batches.chunks(held, None))]}
        with batches.abandoning():
            return batches.plan(blocking)

    def end_blocking(self) -> None:
        self.blocking.end()

    def log_position(self, at: Offset) -> str:
        pos = BinlogPosition.from_offset(at)
        return f"{{file={pos.file}, pos={pos.pos}, gtids={pos.gtids}}}"


def _skip(exc: pymysql.err.MySQLError, what: str, hint: str = "") -> NoReturn:
    """Skip the table for an SQL error (a bad condition, a missing column); a lost connection goes on up."""
    if not query_error(exc):  # the connection's, or transient
        raise exc
    raise TableSkipped(f"{what} ({exc.args[-1] if exc.args else exc}){hint}") from None


def _text(v: Any) -> Any:
    return v.decode("utf-8", "replace") if isinstance(v, bytes | bytearray) else v


def open_view(cur: Any, dbms: str) -> tuple[int | None, GtidSet | None]:
    """Open a consistent snapshot for a read: MariaDB's exact binlog position of it, or MySQL's executed GTID
    set read before it."""
    if dbms == "mariadb":
        return exact_position(cur).stream, None
    cur.execute("SELECT @@global.gtid_executed")
    gtids = GtidSet.parse(str(cur.fetchone()[0] or ""))
    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
    return None, gtids


def read_in_view(cur: Any, dbms: str, sql: str, params: list[Any], delivered: BinlogPosition) -> tuple[list[tuple],
                                                                                                     ChunkView]:
    """The rows of `sql`, read in a consistent snapshot that saw every change delivered up to `delivered`
    (read again, a moment later, while it misses one), and the view: the snapshot's position (or GTIDs)
    and the binlog's end read after it."""
    for _ in range(COVER_TRIES):
        low, gtids = open_view(cur, dbms)
        cur.execute(sql, params)
        rows = list(cur.fetchall())
        cur.execute("COMMIT")
        view = ChunkView(master_position(cur), low, gtids)
        if view.covers(delivered):
            return rows, view
        time.sleep(COVER_WAIT_S)
    raise SourceError(f"an incremental snapshot chunk's consistent snapshot (binlog position {low}, GTIDs "
                      f"{gtids}) keeps missing changes already delivered (up to {delivered}): is the server "
                      "a replica whose binlog order differs from its commit order?")


def binlog_end(cur: Any) -> int:
    """The binlog's end (SHOW MASTER STATUS), as a stream integer."""
    return lockfree.master_position(cur)


@dataclass
class IncrementalChunk(WorkUnit):
    """One part of a window, read where the unit runs (a Spark executor, or the engine), in a consistent
    snapshot of its own that saw every change delivered before the window (`since`); rows whose keys a
    change supersedes are dropped, the others emitted as incremental snapshot events (`op: r`,
    `source.snapshot: incremental`) at the batch's end (`upto`). A key is superseded by

    - a change the driver's scan met in the window (`evicted`, key text -> the change's xid): always, or,
      `by_view` (the read-only mode), when the view did not see its transaction;
    - a change after `upto` up to the binlog's end read after the SELECT, read from the binlog here: the
      view may have seen it, and the row must not be newer than the position it is emitted at.

    A truncate in the window (`truncates`, their xids) the view did not see (or any, unless `by_view`)
    leaves no rows."""

    ctx: BinlogContext
    table: Table
    key_columns: list[str]
    params: ConnectionParams
    dbms: str
    query: tuple[str, list[Any]]
    evicted: dict[str, Any]
    by_view: bool
    truncates: list[Any]
    since: BinlogPosition
    upto: BinlogPosition
    file_like: str
    source: dict[str, Any]  # where the window closed: file, pos (server_id, gtid, row, thread)

    def describe(self) -> str:
        return f"incremental snapshot chunk of {self.table.database}.{self.table.name}"

    def _rows(self) -> list[tuple]:
        conn = connect(self.params, conv=TEXT_VALUES)
        try:
            with conn.cursor() as cur:
                rows, view = read_in_view(cur, self.dbms, *self.query, self.since)
        finally:
            with contextlib.suppress(Exception):
                conn.close()
        if self.truncates and (not self.by_view or not all(view.sees(*x) for x in self.truncates)):
            return []
        gone = {k for k, xid in self.evicted.items() if not self.by_view or xid is None or not view.sees(*xid)}
        after = self.upto.stream
        if view.high > after:  # changes the view may have seen, after the position the rows are emitted at
            image_key = KeyText(self.ctx, self.table, self.key_columns, streaming=True)
            for change in read_window(self.params, self.table, self.file_like, after, view.high):
                gone.update(image_key(r[1]) for r in (change.before, change.after) if r is not None)
        if not gone:
            return rows
        keys = KeyText(self.ctx, self.table, self.key_columns, streaming=False)
        return [r for r in rows if keys(r) not in gone]

    def read(self) -> Iterator[Events]:
        rows = self._rows()
        if not rows:
            return
        te = records_of(self.ctx, self.table, streaming=False)
        yield from snapshot_events(te, BinlogMaker(self.ctx), rows, ts_us=time.time_ns() // 1000,
                                   version=self.upto.stream, position=self.source, ends=None)
