"""The binlog connectors' lock-free snapshot: key chunks read without a lock, each merged with its binlog window.

The default when `snapshot.locking.mode` is not set (Debezium's `minimal`, `extended` and `none` take
its locking snapshot, `snapshot.py`). The database-independent core is `common/chunkmerge.py` (the merge
and why it is right) and `common/chunkprogress.py` (the progress and the stream filter).

Phases of the offset (the `snapshot` key; `pending`, `completed`, `streaming` are the shared lifecycle's):

- `pending` -> `chunks`: the snapshot's schema position P0 is read in a consistent snapshot
  (MariaDB's `binlog_snapshot_file/position`), the schema history starts there, every captured table
  is cut into primary-key chunks, and the first batch of chunks is planned with low = P0;
- `chunks` -> `chunks`: each batch of chunks is one batch of the engine (one Spark micro-batch); the
  offset holds the `Progress` (every chunk's range, low, high), the chunks of this batch and their
  `low`, an exact position read when the batch was planned (before any of its SELECTs starts);
- `chunks` -> `completed`: every chunk is done; streaming starts at the lowest low, and the stream
  filter (carried in the streaming offsets until the stream passes the last high) drops every change
  a chunk's records already hold.

A chunk (`LockFreeChunk`, one work unit) SELECTs its key range (autocommit, no lock), reads its high
(SHOW MASTER STATUS), reads the binlog of (low, high] for its table, merges (`merge_chunk`) and emits
`r` records of the chunk as it stood at its high: `source.file`/`pos` are that high (on a quiet server,
the position Debezium's locking snapshot reads), `_commit_version` its stream integer. A primary key of
integer and CHAR/VARCHAR columns is cut into ranges by the server's ORDER BY, and the merge and the
stream filter order its keys as the server does (`keyorder.py`: text by its collation's weights). A
table without such a key (no key, a temporal, decimal or binary key column, or one with a
`snapshot.select.statement.overrides`) is one chunk read inside a consistent snapshot at its exact
position (low = high: an empty window). A batch holds at least two chunks (more when
`headwater.max.batch.events` / `headwater.snapshot.chunk.rows` or the source's parallelism say so);
they are read side by side on driver threads, each on its own connection, from when the batch is
planned; their records are built where the units run (the engine, or Spark executors). Once a batch's
chunks are read, the next batch's are read ahead (`Ahead`) while the batch's records are built and
written: a fresh exact low, then their SELECTs and windows; `_next` plans that batch at that low and
`plan` hands out those chunks, for that batch's first read only (otherwise they are discarded, their
windows never published, and the batch is read as before). A batch not read ahead (the first, or one
planned otherwise) starts its reads when its offset is planned (`_read_now`), before Spark writes its
offset log and plans the query.

The chunks' windows reach the driver through this process's `_WINDOWS` (a chunk pickled for a Spark
executor has been read on the driver). A batch whose windows the driver does not know for sure (planned
before a restart, or read twice) may have reached the sink as copies merged to unknown highs, all after
its low: its chunks are recorded as (low, low), and the batch after it, which may have been delivered
before a crash too, is read from that same low and recorded the same way. The stream then replays the
changes after that low onto whichever copy the sink holds; a change sets or removes its key whatever
the key held, so nothing is lost, and those changes may arrive twice. A batch planned before a restart
(Spark runs its last planned batch again) is planned from its offset alone: the tables at P0 and the
snapshot's schema change records come back from the statements the history file holds at P0
(`SchemaHistoryTracker.resume_snapshot`).

MySQL has no exact low position without a watermark write (`chunkmerge` point 1): only MariaDB
takes the lock-free snapshot; a MySQL source keeps Debezium's `minimal` when the mode is not set.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import orjson
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import QueryEvent, RotateEvent, XidEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import Offset, WorkUnit
from headwater.connectors.binlog.connection import ConnectionParams, connect
from headwater.connectors.binlog.images import ABSENT, ImageCheck
from headwater.connectors.binlog.keyorder import ChunkOrder, KeyColumn, chunk_columns
from headwater.connectors.binlog.positions import BinlogPosition, split_pos, stream_pos
from headwater.connectors.binlog.records import BinlogContext, BinlogMaker, records_of
from headwater.connectors.binlog.schema import Table
from headwater.connectors.binlog.snapshot import DIALECT, TEXT_VALUES, SchemaSnapshotUnit, table_ref
from headwater.connectors.binlog.snapshot_rows import snapshot_events
from headwater.connectors.binlog.textrows import TextRows, read_text_rows
from headwater.connectors.binlog.values import replication_values
from headwater.connectors.common.chunkmerge import Change, merge_chunk, null_first
from headwater.connectors.common.chunkprogress import Progress, StreamFilter
from headwater.connectors.common.phases import SNAPSHOT_COMPLETED, SNAPSHOT_PENDING, STREAMING, epoch, phase
from headwater.connectors.common.snapshot import (
    ChunkKey,
    KeyRange,
    key_ranges,
    marker,
    order_by,
    select_overrides,
    snapshot_tables,
)
from headwater.events.batch import Events

log = logging.getLogger(__name__)
CHUNKS = "chunks"  # the offset's phase while chunks remain
# The first batch's chunks (those of the first table) hold at most this many rows: nothing overlaps that
# batch's reads on the driver, nor its tasks (on Spark, the first row comes when they end); from its
# chunks on, the next batch's are read ahead while a batch's tasks run.
FIRST_CHUNK_ROWS = 25_000
TableKey = tuple[str, str]
Row = tuple[str, tuple[Any, ...]]  # ("s", a SELECT row as text) or ("b", a binlog image)
_WINDOWS: dict[str, dict[tuple[str, int], tuple[int, int]]] = {}  # the chunks' windows read here, by run
_PUBLISHING = threading.Lock()  # a chunk's window published to `_WINDOWS`, or its read-ahead discarded


def lock_free(config: ConnectorConfig, dbms: str) -> bool:
    """Whether the snapshot is the lock-free one: `snapshot.locking.mode` not set, on MariaDB."""
    return config.get("snapshot.locking.mode") is None and dbms == "mariadb"


def name_of(t: Table) -> str:
    return f"{t.database}.{t.name}"


def exact_position(cur: Any) -> BinlogPosition:
    """In a fresh `START TRANSACTION WITH CONSISTENT SNAPSHOT`: the binlog position of its read view
    (everything before it is committed and visible; nothing after it is)."""
    cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
    cur.execute("SHOW STATUS LIKE 'binlog_snapshot_%'")
    status = {str(k).lower(): v for k, v in cur.fetchall()}
    return BinlogPosition(str(status["binlog_snapshot_file"]), int(status["binlog_snapshot_position"]))


def master_position(cur: Any) -> int:
    cur.execute("SHOW MASTER STATUS")
    file, pos = cur.fetchone()[:2]
    return stream_pos(str(file), int(pos))


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _dump_server_id() -> int:
    """A replication client id for one binlog read, unique among readers that run at once in any process on
    any host (Spark executors read chunks' windows too): random in a range of its own."""
    return 4_000_000_000 + random.randrange(1, 294_967_295)


def read_window(params: ConnectionParams, t: Table, file_like: str, low: int, high: int) -> list[Change[Row]]:
    """The row changes of `t` in (low, high], in binlog order, each at its transaction's commit end (a
    partial image's absent columns are ABSENT: `complete_images`). Every
    event is read (not only rows and commits): after a rotation, `high` may be the end of the new file's
    first events, with no transaction after them; the dump blocks for events up to `high`, which SHOW
    MASTER STATUS may name a moment before a replica can read them."""
    if low >= high:
        return []
    file, pos = split_pos(file_like, low)
    stream = BinLogStreamReader(connection_settings=params.kwargs(), server_id=_dump_server_id(),
                                log_file=file, log_pos=pos, resume_stream=True, blocking=True)
    changes: list[Change[Row]] = []
    pending: list[tuple[Row | None, Row | None]] = []

    def image(values: dict[str, Any], nones: dict[str, str] | None) -> Row:
        return ("b", tuple(replication_values(values, nones or {}).values()))
    try:
        for event in stream:
            if isinstance(event, RotateEvent):
                file = event.next_binlog
                continue
            if not event.packet.log_pos:
                continue  # an artificial event of the dump's start
            end = stream_pos(file, event.packet.log_pos)
            if isinstance(event, XidEvent) or (isinstance(event, QueryEvent) and _text(event.query) == "COMMIT"):
                changes += [Change(end, b, a) for b, a in pending]
                pending = []
            elif isinstance(event, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)) and \
                    (event.schema, event.table) == (t.database, t.name):
                for r in event.rows:
                    if isinstance(event, WriteRowsEvent):
                        pending.append((None, image(r["values"], r.get("none_sources"))))
                    elif isinstance(event, DeleteRowsEvent):
                        pending.append((image(r["values"], r.get("none_sources")), None))
                    else:
                        pending.append((image(r["before_values"], r.get("before_none_sources")),
                                        image(r["after_values"], r.get("after_none_sources"))))
            if end >= high:
                break
    finally:
        stream.close()
    return changes


def complete_images(rows: list[Row], window: list[Change[Row]],
                    row_key: Callable[[Row], tuple[Any, ...]], order: Callable[[tuple[Any, ...]], Any]
                    ) -> list[Change[Row]]:
    """The window with the BLOB/TEXT columns a NOBLOB image leaves out filled in: a change leaves those
    columns as they were, so they come from the row its (old) key held before it, the image of an earlier
    change of the window or else the SELECT's row. The SELECT may have seen a later state; that is harmless,
    as the merge keeps the last change's images and a later change that set such a column carries it. An
    insert, or a key moved in from a row the SELECT did not see (it saw the move already, or the old key is
    another chunk's), takes them from the SELECT's row of its key when no earlier change of the window
    touched that key (it was empty before, so what the SELECT saw there is this row, or nothing). What is
    still unknown stays ABSENT: the placeholder, as the stream writes it."""
    if not any(img is not None and any(v is ABSENT for v in img[1]) for c in window for img in (c.before, c.after)):
        return window
    selected = {order(row_key(r)): r for r in rows}
    state: dict[Any, Row | None] = {}  # key -> the row after the window's changes so far (None: removed)

    def complete(image: Row, source: Row | None) -> Row:
        if source is None or not any(v is ABSENT for v in image[1]):
            return image
        return ("b", tuple(s if v is ABSENT else v for v, s in zip(image[1], source[1], strict=True)))

    out = []
    for change in window:
        before, after = change.before, change.after
        if before is not None:
            k = order(row_key(before))
            before = complete(before, state[k] if k in state else selected.get(k))
            state[k] = None
        if after is not None:
            k = order(row_key(after))
            after = complete(after, before)
            if k not in state:
                after = complete(after, selected.get(k))
            state[k] = after
        out.append(Change(change.position, before, after))
    return out


@dataclass
class LockFreeChunk(WorkUnit):
    """One key range of one table (or a whole table, read exactly), read without a lock and merged."""

    run: str  # the `_WINDOWS` entry of this snapshot run
    params: ConnectionParams
    ctx: BinlogContext
    table: Table
    index: int
    order: ChunkOrder | None  # the chunk key's columns and order; None: one exact chunk
    span: KeyRange
    override: str | None
    low: int  # the batch's low (stream integer)
    file_like: str
    ts_us: int
    ends: tuple[bool, bool, bool, bool]  # first table, last table, first chunk, last chunk
    read_rows: tuple[TextRows, int, int, list[Change[Row]]] | None = field(default=None, repr=False)
    reading: Future[Any] | None = field(default=None, repr=False)  # the read started on the driver's threads
    discarded: bool = field(default=False, repr=False)  # read ahead for a batch planned otherwise: not published

    def describe(self) -> str:
        return f"lock-free snapshot of {name_of(self.table)} keys [{self.span.lo}, {self.span.hi})"

    def _select(self) -> tuple[str, list[Any]]:
        t = self.table
        if self.override is not None:
            return self.override, []
        columns = [DIALECT.quote(c.name) for c in t.columns]
        if self.order is None:
            return f"SELECT {', '.join(columns)} FROM {table_ref(t)}", []
        key = ChunkKey(tuple(c.name for c in self.order.columns), tuple(False for _ in self.order.columns))
        where, args = self.span.where(key, DIALECT)
        return (f"SELECT {', '.join(columns + self.order.weight_columns())} FROM {table_ref(t)}"
                + (f" WHERE {where}" if where else "") + f" ORDER BY {order_by(key, DIALECT)}"), args

    def _read(self) -> tuple[TextRows, int, int, list[Change[Row]]]:
        """The chunk's rows (as the server sent them), its low and high, and the binlog changes of its window."""
        if self.reading is not None:
            self.reading.result()
        return self._fetch()

    def _fetch(self) -> tuple[TextRows, int, int, list[Change[Row]]]:
        """`_read`'s work (once), the window recorded for the driver."""
        if self.read_rows is None:
            sql, args = self._select()
            conn = connect(self.params, conv=TEXT_VALUES)
            try:
                with conn.cursor() as cur:
                    order = self.order
                    if order is None:
                        at = exact_position(cur)
                        rows = read_text_rows(conn, sql, args)
                        cur.execute("COMMIT")
                        low = high = at.stream
                        window: list[Change[Row]] = []
                    else:
                        rows = read_text_rows(conn, sql, args)
                        if order.text:
                            n = len(self.table.columns)
                            for r in rows.tuples():
                                order.learn(order.key_of(r[:n], True), r[n:])
                        low, high = self.low, master_position(cur)
                        window = read_window(self.params, self.table, self.file_like, low, high)
                        self._check(window)
                        # the weights of the window's keys and the range's bounds, for the merge
                        order.prefetch([self.span.lo, self.span.hi, *(order.key_of(r[1], False) for c in window
                                                                      for r in (c.before, c.after) if r)], cur)
            finally:
                with contextlib.suppress(Exception):
                    conn.close()
            with _PUBLISHING:
                if not self.discarded:
                    _WINDOWS.setdefault(self.run, {})[(name_of(self.table), self.index)] = (low, high)
            self.read_rows = (rows, low, high, window)
        return self.read_rows

    def _check(self, window: list[Change[Row]]) -> None:
        """Refuse a partial image lacking a column that has no placeholder (or a key column)."""
        assert self.order is not None
        check = ImageCheck(self.table, [c.name for c in self.order.columns])
        for change in window:
            file, pos = split_pos(self.file_like, change.position)
            check.check([[img[1] for img in (change.before, change.after) if img is not None]],
                        f"in the transaction ending at {file}:{pos} for {name_of(self.table)}")

    def __getstate__(self) -> dict[str, Any]:
        self._read()  # pickled for a Spark executor: read here, where the driver finds the window
        return {**self.__dict__, "reading": None, "discarded": False}

    def _row_key(self) -> Callable[[Row], tuple[Any, ...]] | None:
        order = self.order
        if order is None:
            return None

        def row_key(row: Row) -> tuple[Any, ...]:
            kind, values = row
            return order.key_of(values, kind == "s")
        return row_key

    def read(self) -> Iterator[Events]:
        text, low, high, window = self._read()
        t, ctx = self.table, self.ctx
        kinds = {"s": records_of(ctx, t, streaming=False), "b": records_of(ctx, t, streaming=True)}
        maker = BinlogMaker(ctx)
        ts_us = self.ts_us // 1_000_000 * 1_000_000  # Debezium's snapshot rows carry whole seconds
        file, pos = split_pos(self.file_like, high)
        first_table, last_table, first_chunk, last_chunk = self.ends
        if not window:  # nothing to merge: the SELECT's rows, column-wise from the server's text
            yield from snapshot_events(kinds["s"], maker, text, ts_us=ts_us, version=high,
                                       position={"file": file, "pos": pos}, ends=self.ends)
            return
        rows: list[Row] = [("s", values) for values in text.tuples(len(t.columns))]
        row_key = self._row_key()
        if row_key is not None and self.order is not None:
            window = complete_images(rows, window, row_key, self.order.order)
        merged = merge_chunk(rows, window, self.span, low=low, high=high, row_key=row_key,
                             order=self.order.order if self.order is not None else null_first)
        if all(kind == "s" for kind, _ in merged):  # no change in the window touched the range
            yield from snapshot_events(kinds["s"], maker, [values for _, values in merged], ts_us=ts_us, version=high,
                                       position={"file": file, "pos": pos}, ends=self.ends)
            return
        sources: dict[str, orjson.Fragment] = {}
        for i, (kind, values) in enumerate(merged):
            mark = marker(first_table, last_table, first_chunk and i == 0, last_chunk and i == len(merged) - 1)
            src = sources.get(mark)
            if src is None:
                src = sources[mark] = orjson.Fragment(maker.snapshot_source(kinds["s"], ts_us, mark,
                                                                            {"file": file, "pos": pos}))
            te = kinds[kind]
            maker.emit(te, "r", te.key(values), None, te.row(values), src, None, high, ts_us)
            if len(maker.out) >= ctx.batch_rows:
                yield maker.take()
        if len(maker.out):
            yield maker.take()


class ChunkFilter:
    """The stream filter over binlog row images: a `StreamFilter` and each chunked table's key order."""

    def __init__(self, progress: Progress, keys: dict[str, ChunkOrder | None]):
        for table, chunks in progress.tables.items():
            order = keys.get(table)
            if order is not None:  # every bound's weights in one query
                order.prefetch(b for c in chunks for b in (c.span.lo, c.span.hi))
        self.filter = StreamFilter(progress, {t: o.order for t, o in keys.items() if o is not None})
        self.horizon = self.filter.horizon
        self.keys = keys

    def keep(self, table: TableKey, image: Sequence[Any], commit_pos: int) -> bool:
        """Whether the change of the row `image` of `table` in the transaction whose commit event starts
        at `commit_pos` is new to the snapshot's records (its commit end is after the chunk's high)."""
        name = f"{table[0]}.{table[1]}"
        order = self.keys.get(name)
        return self.filter.keep(name, () if order is None else order.key_of(image, False), commit_pos + 1)

    def close(self) -> None:
        """Close the connections the key orders opened to ask for weights."""
        for order in self.keys.values():
            if order is not None:
                order.close()


@dataclass
class Ahead:
    """The chunks of the batch after the one ending at `after` (an offset's key), read ahead from `low`."""

    after: str
    batch: list[list[Any]]
    units: list[LockFreeChunk]
    low: int = 0
    started: Future[None] | None = None  # the low read and the chunks' reads started
    end: str | None = None  # the key of the offset of the batch these chunks are (`_next` or `_read_now` sets it)
    early: bool = True  # read while the batch before was written (else from when the batch was planned)


class LockFreeSnapshot:
    """The driver's side: plans the chunk batches, keeps the progress in the offsets, filters the stream."""

    def __init__(self, source: Any):
        self.source = source  # the BinlogSource
        self.run = uuid.uuid4().hex
        self.planned: dict[str, Any] = {}  # the offset planned from a start, by the start's JSON
        self.produced: set[str] = set()  # the chunk batches planned here, by their offset's JSON
        self.reads: Counter[str] = Counter()  # how often each chunk batch was planned (read) here
        self.filter_of: tuple[str, ChunkFilter] | None = None
        self.schema_at: int | None = None  # the position of the snapshot whose schema history the tracker holds
        self.key_columns: dict[str, tuple[Table, tuple[KeyColumn, ...] | None]] = {}  # by table name
        self.max_events: int | None = None  # the batch size asked for last
        self.ahead: Ahead | None = None  # the next batch's chunks, read ahead

    @property
    def config(self) -> ConnectorConfig:
        return self.source.config

    # ------------------------------------------------------------------ offsets
    def latest_offset(self, start: Offset, max_events: int | None, base: Callable[..., Offset]) -> Offset:
        src = self.source
        ph = phase(start)
        key = _key(start)
        self.max_events = max_events
        if key in self.planned:
            return self.planned[key]
        if ph == SNAPSHOT_PENDING or src.resnapshot:
            src.end_snapshot()
            src._stop_stream()
            end = self._begin(epoch(start) + 1, max_events)
        elif ph == CHUNKS:
            end = self._next(start, max_events)
        else:
            self.set_filter(start)
            end = base(start, max_events)
            if phase(end) == SNAPSHOT_COMPLETED and epoch(end) != epoch(start):
                # the stream's position was lost and the mode snapshots again: lock-free, too
                src.end_snapshot()
                end = self._begin(epoch(end), max_events)
                self.planned[key] = end
                self.produced.add(_key(end))
                return end
            if phase(end) == STREAMING and CHUNKS in start and self.filter_of is not None:
                horizon = self.filter_of[1].horizon
                if horizon is not None and BinlogPosition.from_offset(end).stream <= horizon:
                    end = {**end, CHUNKS: start[CHUNKS]}
            return end
        self.planned[key] = end
        self.produced.add(_key(end))
        if phase(end) == CHUNKS and (self.ahead is None or self.ahead.end != _key(end)):
            self._read_now(start, end)
        return end

    def _order(self, t: Table) -> ChunkOrder | None:
        """A new `ChunkOrder` of the table's chunk key (None: one exact chunk); the key's columns and
        collations are read once per table layout."""
        name = name_of(t)
        cached = self.key_columns.get(name)
        if cached is None or cached[0] != t:
            with self.source._connection().cursor() as cur:
                cached = self.key_columns[name] = (t, chunk_columns(cur, t))
        return None if cached[1] is None else ChunkOrder(self.source.params, cached[1])

    def _begin(self, n: int, max_events: int | None) -> Offset:
        """Snapshot number `n`: its schema position P0, the history there, the chunks, the first batch."""
        src = self.source
        self._discard_ahead()
        conn = connect(src.params)
        try:
            with conn.cursor() as cur:
                p0 = exact_position(cur)
                cur.execute(src.gtid_query)
                g = cur.fetchone()
                p0 = BinlogPosition(p0.file, p0.pos, str(g[0] or "") if g else "")
                changes = src.tracker.start_snapshot(p0, conn)
                cur.execute("COMMIT")
                captured = [t for t in src.tracker.tables_at(p0.stream).values()
                            if src.context.filters.includes(t.database, t.name)]
                overrides = select_overrides(self.config)
                spans: dict[str, list[KeyRange]] = {}
                chunk_rows = self.config["headwater.snapshot.chunk.rows"]
                small = self._per_batch(max_events)  # the first batch's chunks: of FIRST_CHUNK_ROWS at most
                for t in snapshot_tables(captured, name_of, self.config):
                    order = self._order(t)
                    if order is None or name_of(t) in overrides:
                        spans[name_of(t)] = [KeyRange(None, None)]
                    else:
                        ck = ChunkKey(tuple(c.name for c in order.columns), tuple(False for _ in order.columns))
                        spans[name_of(t)] = key_ranges(cur, DIALECT, table_ref(t), ck, chunk_rows,
                                                       (small, min(chunk_rows, FIRST_CHUNK_ROWS)))
                    small = max(0, small - len(spans[name_of(t)]))
        finally:
            with contextlib.suppress(Exception):
                conn.close()
        src.snapshot_changes = changes
        src.resnapshot = False
        self.schema_at = p0.stream
        progress = Progress(spans)
        offset = {"snapshot": CHUNKS, **p0.to_offset(), "epoch": n, "ts_us": time.time_ns() // 1000,
                  "progress": progress.to_json(), "batch": [], "low": p0.stream}
        return self._batch(offset, progress, p0.stream, max_events, first=True)

    def _batch(self, offset: Offset, progress: Progress, low: int, max_events: int | None, first: bool = False,
               cautious: bool = False) -> Offset:
        """The offset of the next batch of chunks from `offset` (its progress updated), at `low`."""
        remaining = progress.remaining()
        batch = [[table, i] for table, i, _ in remaining[:self._per_batch(max_events)]]
        if not batch:
            lowest = progress.stream_start()
            start = BinlogPosition(*split_pos(offset["file"], low if lowest is None else lowest))
            return {"snapshot": SNAPSHOT_COMPLETED, **start.to_offset(), "epoch": offset["epoch"],
                    CHUNKS: progress.to_json()}
        return {**offset, "progress": progress.to_json(), "batch": batch, "low": low, "first": first,
                "cautious": cautious}

    def _per_batch(self, max_events: int | None) -> int:
        """Chunks a batch holds."""
        cap = min(max_events or self.config["headwater.max.batch.events"], self.config["headwater.max.batch.events"])
        return max(2, self.source.parallelism, cap // self.config["headwater.snapshot.chunk.rows"])

    def _next(self, start: Offset, max_events: int | None) -> Offset:
        """After the batch that ended at `start`: its chunks' windows recorded, the next batch.

        A batch planned and read once here has its chunks' windows in `_WINDOWS`. Any other (planned
        before a restart, read again, or `cautious`) may have reached the sink as copies merged to highs
        this process does not know, all after the batch's low: its chunks are recorded as (low, low), so
        the stream replays every change after that low onto whichever copy the sink holds (idempotent:
        nothing lost; those changes may arrive twice). The batch after such a batch may have been read
        and delivered before a crash too, at a low read after `start` was planned: it is read from
        `start`'s low, and is `cautious` as well."""
        progress = Progress.from_json(start["progress"])
        known = _key(start) in self.produced and self.reads[_key(start)] == 1 and not start.get("cautious")
        windows = _WINDOWS.get(self.run, {}) if known else {}
        for table, i in start["batch"]:
            low, high = windows.get((table, i), (start["low"], start["low"]))
            progress.finish(table, i, low, high)
        if _key(start) not in self.produced:
            self._discard_ahead()
            return self._batch(start, progress, int(start["low"]), max_events, cautious=True)
        ahead = self.ahead
        if ahead is not None and ahead.after == _key(start) and ahead.started is not None:
            try:
                ahead.started.result()
            except Exception:  # noqa: BLE001 - the batch is read again below, at a fresh low
                log.debug("reading ahead failed", exc_info=True)
            else:
                end = self._batch(start, progress, ahead.low, max_events)
                if end.get("batch") == ahead.batch:
                    ahead.end = _key(end)
                    return end
        self._discard_ahead()
        conn = connect(self.source.params)
        try:
            with conn.cursor() as cur:
                low = exact_position(cur).stream
                cur.execute("COMMIT")
        finally:
            with contextlib.suppress(Exception):
                conn.close()
        return self._batch(start, progress, low, max_events)

    # ------------------------------------------------------------------ planning
    def plan(self, start: Offset, end: Offset) -> list[WorkUnit] | None:
        """The units of a chunk batch; None for other batches (after setting the stream filter)."""
        if phase(end) != CHUNKS:
            self._discard_ahead()
            if phase(start) == CHUNKS:
                return []  # the last batch's windows were collected when this end was planned
            self.set_filter(start)
            return None
        src = self.source
        key = _key(end)
        self.reads[key] += 1  # read again (a retried batch): which copy reached the sink is unknown
        progress = Progress.from_json(end["progress"])
        p0 = BinlogPosition.from_offset(end)
        if self.schema_at != p0.stream:  # planned before a restart: the snapshot's history and schema records again
            src.snapshot_changes = src.tracker.resume_snapshot(p0, src._connection())
            self.schema_at = p0.stream
        units: list[WorkUnit] = []
        if end.get("first") and src.context.include_schema_changes:
            units.append(SchemaSnapshotUnit(src.context, src.snapshot_changes, end["file"], end["pos"],
                                            stream_pos(end["file"], end["pos"]), end["ts_us"],
                                            last=not progress.tables))
        ahead = self.ahead
        if ahead is not None and ahead.end == key and self.reads[key] == 1:
            self.ahead = None
            chunked = ahead.units  # read ahead while the batch before was written: their reads are under way
        else:
            if ahead is not None and ahead.after != key:  # not the batch after this one (a retry keeps it)
                self._discard_ahead()
            chunked = self._chunks(end, progress, end["batch"], int(end["low"]))
            self._start_reads(chunked)
        if key in self.produced and self.reads[key] == 1:
            self._read_ahead(end, progress, chunked)
        return units + chunked

    def _chunks(self, end: Offset, progress: Progress, batch: Sequence[Sequence[Any]], low: int
                ) -> list[LockFreeChunk]:
        """The units of the chunks `batch` of the snapshot of `end`, from `low`."""
        tables = {name_of(t): t for t in self.source.tracker.tables_at(BinlogPosition.from_offset(end).stream).values()}
        order = list(progress.tables)
        overrides = select_overrides(self.config)
        units = []
        for table, i in batch:
            t = tables[table]
            chunks = progress.tables[table]
            units.append(LockFreeChunk(self.run, self.source.params, self.source.context, t, i,
                                       None if len(chunks) == 1 and chunks[0].span == KeyRange(None, None)
                                       else self._order(t), chunks[i].span, overrides.get(table), low, end["file"],
                                       int(end["ts_us"]), (table == order[0], table == order[-1], i == 0,
                                                           i == len(chunks) - 1)))
        return units

    def _start_reads(self, chunked: list[LockFreeChunk]) -> None:
        """The chunks' SELECTs and windows read side by side on driver threads, each on its own connection."""
        if chunked:
            pool = ThreadPoolExecutor(min(len(chunked), max(2, self.source.parallelism)),
                                      thread_name_prefix="lock-free")
            for unit in chunked:
                unit.reading = pool.submit(unit._fetch)
            pool.shutdown(wait=False)

    def _read_ahead(self, end: Offset, progress: Progress, current: list[LockFreeChunk]) -> None:
        """Start reading the chunks of the batch that will follow `end`'s (the chunks `_next` picks unless the
        batch size changes) once `end`'s own chunks are read: while `end`'s records are built and written
        (by Spark's tasks, or the engine's caller), the next batch's SELECTs and windows are read. Their low
        is an exact position read after `end`'s chunks are read and before their SELECTs start (`_next`
        plans the batch at that low); `_next` and `plan` use them only for that batch, read once."""
        for table, i in end["batch"]:
            progress.finish(table, i, end["low"], end["low"])  # done, for `remaining` only
        batch = [[table, i] for table, i, _ in progress.remaining()[:self._per_batch(self.max_events)]]
        if not batch:
            return
        units = self._chunks(end, progress, batch, int(end["low"]))  # here: key orders may ask the server
        ahead = Ahead(_key(end), batch, units)

        def start() -> None:
            for unit in current:
                if unit.reading is not None:
                    with contextlib.suppress(Exception):  # the batch's own read reports its error
                        unit.reading.result()
            conn = connect(self.source.params)
            try:
                with conn.cursor() as cur:
                    low = exact_position(cur).stream
                    cur.execute("COMMIT")
            finally:
                with contextlib.suppress(Exception):
                    conn.close()
            for unit in units:
                unit.low = low
            ahead.low = low
            self._start_reads(units)

        self._discard_ahead()
        self.ahead = ahead
        runner = ThreadPoolExecutor(1, thread_name_prefix="lock-free-ahead")
        ahead.started = runner.submit(start)
        runner.shutdown(wait=False)

    def _read_now(self, start: Offset, end: Offset) -> None:
        """Start reading the chunks of the batch just planned (`end`, not read ahead) at once: during Spark's
        offset log write and query planning, before `plan` asks for them."""
        if self.schema_at != BinlogPosition.from_offset(end).stream:
            return  # a restart's first batch: `plan` reads the history at P0 first
        self._discard_ahead()
        units = self._chunks(end, Progress.from_json(end["progress"]), end["batch"], int(end["low"]))
        self._start_reads(units)
        done: Future[None] = Future()
        done.set_result(None)
        self.ahead = Ahead(_key(start), end["batch"], units, int(end["low"]), done, _key(end), early=False)

    def _discard_ahead(self) -> None:
        """Drop the chunks read ahead: their windows are never published (the batch was planned otherwise)."""
        ahead, self.ahead = self.ahead, None
        if ahead is not None:
            with _PUBLISHING:
                for unit in ahead.units:
                    unit.discarded = True

    def set_filter(self, start: Offset) -> None:
        """The stream filter of a streaming batch from `start` (none once the stream passed every high)."""
        data = start.get(CHUNKS)
        codec = self.source.planner.codec if self.source.planner is not None else None
        if data is None:
            self._drop_filter()
        else:
            key = orjson.dumps(data, option=orjson.OPT_SORT_KEYS).decode()
            if self.filter_of is None or self.filter_of[0] != key:
                self._drop_filter()
                keys = {name_of(t): self._order(t) for t in self.source.tracker.current().values()
                        if name_of(t) in data["tables"]}
                self.filter_of = (key, ChunkFilter(Progress.from_json(data), keys))
        self.source.stream_filter = None if self.filter_of is None else self.filter_of[1]
        if codec is not None:
            codec.keep = self.source.stream_filter

    def _drop_filter(self) -> None:
        if self.filter_of is not None:
            self.filter_of[1].close()
        self.filter_of = None


def _key(offset: Offset) -> str:
    return orjson.dumps(offset, option=orjson.OPT_SORT_KEYS).decode()
