"""The binlog connectors' hooks for signals and incremental and blocking snapshots (`connectors.common.incremental`).

- **The stream scan** decodes, on the driver, only the rows events of the signalling table and of the
  table whose chunk is open (`streaming.row_images`, with the tables as the schema history holds them);
  other events are passed over by the table their TABLE_MAP names. A key is compared as the JSON of its
  columns' Debezium values (`KeyText`): one row's key gives the same text from a SELECT's text values
  and from a binlog image, whatever the column types.
- **A chunk** is `SELECT <columns> FROM db.t WHERE <key> > <last> AND <key> <= <max> [AND (<condition>)]
  ORDER BY <key> LIMIT n`, the values as the text protocol gives them (as the initial snapshot reads
  them), made into `op: r` events with `source.snapshot: incremental` by the snapshot's encoder.
- **Watermarks**, as Debezium writes them: `INSERT INTO <signal table> VALUES ('<id>-open',
  'snapshot-window-open', '{"openWindowTimestamp": ...}')` before the SELECT and after it
  `('<id>-close', 'snapshot-window-close', ...)` (`insert_insert`) or a DELETE of the open row
  (`insert_delete`), each committed on its own, so each is one binlog transaction in commit order
  (the open watermark's commit returns after every transaction before it in the binlog is visible).
  The chunk's rows are emitted once the scan has met the close event; their `source` is that
  event's (`server_id`, `gtid`, `file`, `pos`, `row`, `thread`), as Debezium's offset context is
  when it closes the window there, with `ts_ms` the time of emission and no `query`.
- **The read-only mode** (`read.only` / `headwater.incremental.snapshot.read.only`) writes nothing.
  MariaDB: the SELECT runs in `START TRANSACTION WITH CONSISTENT SNAPSHOT`, whose binlog position
  (`binlog_snapshot_file`/`_position`) says exactly which transactions it sees: those ending at or
  before it; a streamed change supersedes a chunk row when its transaction ends after it. MySQL (no
  such position; `gtid_mode=ON` is required, as Debezium's read-only mode requires it): the executed
  GTID set read before the SELECT's snapshot, as Debezium's low watermark; a change supersedes when
  its GTID is not in that set. Either way a chunk whose view misses a transaction already delivered
  (the binlog can reach a replica a moment before the commit is visible) is read again, so nothing
  delivered before the window is newer than its rows. The rows are emitted once the stream passes the
  binlog end read after the SELECT (Debezium's high watermark); their `source` is the stream's
  position then (`file`, `pos`; no GTID, row 0).
- **A blocking snapshot** reads the tables in a consistent-snapshot transaction opened when its batch
  is planned (no lock: the schema comes from the history), cut into key ranges as the initial
  snapshot cuts them (`snapshot.plan_chunks`); streaming resumes where it paused.
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
import pyarrow as pa
import pymysql

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import Offset, WorkUnit
from headwater.connectors.binlog import framing as fr
from headwater.connectors.binlog.connection import ConnectionParams, connect
from headwater.connectors.binlog.gtid import GtidSet
from headwater.connectors.binlog.lockfree import exact_position, master_position
from headwater.connectors.binlog.positions import BinlogPosition, split_pos
from headwater.connectors.binlog.reader import BinlogReader
from headwater.connectors.binlog.records import BinlogContext, BinlogMaker, records_of
from headwater.connectors.binlog.schema import Table
from headwater.connectors.binlog.snapshot import DIALECT, TEXT_VALUES, HeldSnapshot, plan_chunks, table_ref
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
from headwater.connectors.common.incremental import Change, Collection, Key, TableSkipped, Window
from headwater.connectors.common.notifications import NotificationUnit
from headwater.connectors.common.planner import Planner
from headwater.connectors.common.signals import WINDOW_CLOSE, WINDOW_OPEN, read_only, split_table
from headwater.connectors.common.snapshot import ChunkKey, key_between, order_by
from headwater.connectors.errors import SourceError
from headwater.events.arrays import binary_array
from headwater.events.batch import Events

log = logging.getLogger("headwater.binlog.incremental")

TableKey = tuple[str, str]
COVER_TRIES = 100  # reads of a read-only chunk until its view holds everything delivered
COVER_WAIT_S = 0.02


class BinlogSourceLike(Protocol):
    """What these hooks use of `connectors.binlog.source.BinlogSource` (which imports this module)."""

    config: ConnectorConfig
    context: BinlogContext
    params: ConnectionParams
    dbms: ClassVar[str]
    gtid_query: ClassVar[str]
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
    """The read-only mode's view of a chunk's SELECT: MariaDB's binlog position of its consistent
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
        self.blocking: HeldSnapshot | None = None
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

    def _view(self, cur: Any) -> tuple[int | None, GtidSet | None]:
        """Open the read-only SELECT's consistent snapshot: MariaDB's exact position of it, or MySQL's
        executed GTID set read before it."""
        if self.source.dbms == "mariadb":
            return exact_position(cur).stream, None
        cur.execute("SELECT @@global.gtid_executed")
        gtids = GtidSet.parse(str(cur.fetchone()[0] or ""))
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        return None, gtids

    def _read(self, cur: Any, sql: str, params: list[Any], window_id: str,
              delivered: BinlogPosition) -> tuple[list[tuple], ChunkView | None]:
        if not self.read_only:
            opened = open_data()
            self._watermark(cur, f"{window_id}-open", WINDOW_OPEN, opened)
            cur.execute(sql, params)
            rows = list(cur.fetchall())
            if self.strategy == "insert_delete":
                self._unwatermark(cur, f"{window_id}-open")
            else:
                self._watermark(cur, f"{window_id}-close", WINDOW_CLOSE, close_data(opened))
            return rows, None
        for _ in range(COVER_TRIES):
            low, gtids = self._view(cur)
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

    def open_window(self, collection: Collection, key_columns: list[str], after: list[Any] | None,
                    upto: list[Any], size: int, window_id: str, delivered: Offset) -> Window | None:
        t = self._table(collection.id)
        sql, params = self.chunk_query(t, key_columns, after, upto, collection.condition, size)
        try:
            with self._connection().cursor() as cur:
                rows, view = self._read(cur, sql, params, window_id, BinlogPosition.from_offset(delivered))
        except BaseException as exc:
            self._drop()  # (it may be inside the read-only mode's transaction)
            if isinstance(exc, pymysql.err.MySQLError):
                _skip(exc, "a chunk cannot be read")
            raise
        if not rows:
            return None
        keys = KeyText(self.source.context, t, key_columns, streaming=False)
        names = [c.name for c in t.columns]
        index = [names.index(k) for k in key_columns]
        window = Window(window_id, collection, key_columns, after, key_text([rows[-1][i] for i in index]),
                        _columns(rows, len(names)), index, snapshot=view,
                        keys=binary_array([keys(r).encode() for r in rows], pa.string()))
        log.info("incremental snapshot chunk %s of %s: %d rows after %s up to %s", window_id, collection.id,
                 len(rows), after, window.to_key)
        self.windows = {window_id: window}  # (a window left open by a stopped snapshot is dropped)
        return window

    def window_ready(self, window: Window, end: Offset) -> bool:
        view = window.snapshot
        if view is None:
            return window.source is not None  # the close event was seen
        pos = BinlogPosition.from_offset(end)
        ready = pos.stream >= view.high
        reader = self.source.reader
        if not ready and reader is not None:  # (the binlog's end may lie past the last transaction's)
            buf = reader.buffer
            with buf.cond:
                ready = buf.received >= view.high and not any(
                    not t.ends_by(pos.stream) and t.commit_pos < view.high for t in buf.txns)
        if ready and window.source is None:
            window.source = {"file": pos.file, "pos": pos.pos, "server_id": self._server_id(), "gtid": None,
                             "row": 0, "thread": None}
        return ready

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
        view = window.snapshot
        return view is None or xid is None or view.sees(*xid)

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
                if window is not None and window.snapshot is None and window.source is None:
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
    def _unit(self, collection_id: str, key_columns: list[str], rows: list[pa.Array] | None,
              query: tuple[str, list[Any]] | None, evicted: set[Key], source: dict[str, Any] | None,
              at: Offset) -> IncrementalChunk:
        pos = BinlogPosition.from_offset(at)
        where = source or {"file": pos.file, "pos": pos.pos}
        return IncrementalChunk(self.source.context, self._table(collection_id), key_columns, rows, self.source.params,
                                query, {k[0] for k in evicted}, where, pos.stream)

    def chunk_unit(self, window: Window, columns: list[pa.Array], at: Offset) -> WorkUnit:
        self.windows.pop(window.id, None)
        return self._unit(window.collection.id, window.key_columns, columns, None, set(), window.source, at)

    def reread_unit(self, chunk: dict[str, Any], evicted: set[Key], at: Offset) -> WorkUnit:
        c = Collection(chunk["table"], chunk.get("condition"), chunk.get("surrogate_key"))
        key = self.key_columns(c) or []
        query = self.chunk_query(self._table(c.id), key, chunk.get("from"), chunk["to"], c.condition, None)
        return self._unit(c.id, key, None, query, evicted, chunk.get("source"), at)

    def notification_unit(self, notifications: list[dict[str, Any]], at: Offset) -> WorkUnit:
        return NotificationUnit(self.source.config["notification.sink.topic.name"], notifications,
                                self.source.context, BinlogPosition.from_offset(at).stream)

    def blocking_units(self, tables: list[str], statements: dict[str, str], at: Offset) -> list[WorkUnit]:
        """Debezium's blocking snapshot: the tables read in one consistent-snapshot transaction held until
        the batch is over (`end_blocking`), cut into key ranges as the initial snapshot cuts them."""
        src = self.source
        self.end_blocking()
        cfg = src.config
        held = HeldSnapshot(src.params, -1, "none", cfg["snapshot.lock.timeout.ms"], src.gtid_query)
        try:
            found = [t for t in src.tracker.current().values() if f"{t.database}.{t.name}" in tables]
            units = plan_chunks(held, found, src.context, blocking_config(cfg, tables, statements))
        except BaseException:
            held.close()
            raise
        self.blocking = held
        log.info("blocking snapshot of %s in %d chunks at %s:%d", ", ".join(tables), len(units), held.position.file,
                 held.position.pos)
        return units

    def end_blocking(self) -> None:
        if self.blocking is not None:
            self.blocking.close()
            self.blocking = None

    def log_position(self, at: Offset) -> str:
        pos = BinlogPosition.from_offset(at)
        return f"{{file={pos.file}, pos={pos.pos}, gtids={pos.gtids}}}"


def _skip(exc: pymysql.err.MySQLError, what: str, hint: str = "") -> NoReturn:
    """Skip the table for an SQL error (a bad condition, a missing column); a lost connection goes on up."""
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
    if code >= 2000 or isinstance(exc, pymysql.err.InterfaceError):  # the client's errors: the connection
        raise exc
    raise TableSkipped(f"{what} ({exc.args[-1] if exc.args else exc}){hint}") from None


def _text(v: Any) -> Any:
    return v.decode("utf-8", "replace") if isinstance(v, bytes | bytearray) else v


def _columns(rows: list[tuple], n: int) -> list[pa.Array]:
    """Rows of text-protocol values as one Arrow column each: text columns as strings, binary ones as bytes."""
    out = []
    for i in range(n):
        values = [r[i] for r in rows]
        if all(v is None or v.__class__ is str for v in values):
            out.append(binary_array([None if v is None else v.encode() for v in values], pa.string()))
        else:
            out.append(binary_array(values))
    return out


@dataclass
class IncrementalChunk(WorkUnit):
    """A chunk's rows as incremental snapshot events (`op: r`, `source.snapshot: incremental`): the rows
    read in the window, or (a replayed batch) its key range read again minus the keys superseded."""

    ctx: BinlogContext
    table: Table
    key_columns: list[str]
    columns: list[pa.Array] | None
    params: ConnectionParams
    query: tuple[str, list[Any]] | None
    evicted: set[str]
    source: dict[str, Any]  # where the window closed: file, pos (server_id, gtid, row, thread)
    version: int

    def describe(self) -> str:
        return f"incremental snapshot chunk of {self.table.database}.{self.table.name}"

    def _rows(self) -> list[tuple]:
        if self.columns is not None:
            return list(zip(*[c.to_pylist() for c in self.columns], strict=True))
        assert self.query is not None
        conn = connect(self.params, conv=TEXT_VALUES)
        try:
            with conn.cursor() as cur:
                cur.execute(*self.query)
                rows = list(cur.fetchall())
        finally:
            with contextlib.suppress(Exception):
                conn.close()
        if not self.evicted:
            return rows
        keys = KeyText(self.ctx, self.table, self.key_columns, streaming=False)
        return [r for r in rows if keys(r) not in self.evicted]

    def read(self) -> Iterator[Events]:
        rows = self._rows()
        if not rows:
            return
        te = records_of(self.ctx, self.table, streaming=False)
        yield from snapshot_events(te, BinlogMaker(self.ctx), rows, ts_us=time.time_ns() // 1000,
                                   version=self.version, position=self.source, ends=None)
