"""The binlog connectors' lock-free snapshot: key chunks read without a lock where the units run, each rolled
back with its binlog window to the batch's low.

The default when `snapshot.locking.mode` is not set (Debezium's `minimal`, `extended` and `none` take
its locking snapshot, `snapshot.py`). The database-independent core is `common/chunkmerge.py` (the
roll-back, the forward merge, and why they are right) and `common/chunkprogress.py` (the progress and
the stream filter).

Phases of the offset (the `snapshot` key; `pending`, `completed`, `streaming` are the shared lifecycle's):

- `pending` -> `chunks`: the snapshot's schema position P0 is read in a consistent snapshot
  (MariaDB's `binlog_snapshot_file/position`), the schema history starts there, every captured table
  is cut into primary-key chunks, and the first batch of chunks is planned with low = P0;
- `chunks` -> `chunks`: each batch of chunks is one batch of the engine (one Spark micro-batch); the
  offset holds the `Progress` (every chunk's range and position), the chunks of this batch, their
  `low` L, and `next_low`, an exact position read when this offset was planned: the next batch's low.
  The driver reads no rows: when a batch ends its chunks are recorded at its L (known in advance), and
  the batch after it is planned from the offset alone, so planning it again (after a crash, or Spark
  replaying its last planned batch) gives the same batch at the same low;
- `chunks` -> `completed`: every chunk is done; streaming starts at the lowest low, and the stream
  filter (carried in the streaming offsets until the stream passes the last low) drops, per chunk,
  the changes at or before its low: the chunk's records hold them.

A chunk (`LockFreeChunk`, one work unit: table, key range, L) is read where the unit runs (a Spark
executor, or the engine's process): it SELECTs its key range (autocommit, no lock; started after L
was read, so everything at or before L is visible to it), reads H (SHOW MASTER STATUS: everything the
SELECT saw is in the binlog before H), reads the binlog of (L, H] for its table (`read_window`) and
rolls the chunk back to L (`roll_back_chunk`): with full row images, a key no change of the window
touches held the same row from L to H, so the SELECT read it as it stood at L whenever it saw it; a
touched key held at L the before image of its first change in the window (nothing if that change
wrote the key: an insert, or a key change into it; a key change is a delete of the old key and an
insert of the new one). So the result is the range at L whatever moment, or moments, the SELECT saw.
Its `r` records carry `source.file`/`pos` = L (on a quiet server, the position Debezium's locking
snapshot reads) and `_commit_version` L's stream integer; the same chunk read again, at any time,
gives the same records. A primary key of integer and CHAR/VARCHAR columns is cut into ranges by the
server's ORDER BY, and the roll-back and the stream filter order its keys as the server does
(`keyorder.py`: text by its collation's weights).

A table without such a key (no key, a temporal, decimal or binary key column) or with a
`snapshot.select.statement.overrides` is one chunk, read inside a consistent snapshot at its exact
position P (>= L); the window is (L, P]. A keyless table is rolled back as a multiset of rows
(`roll_back_keyless`: each change undone, last first). An override's rows cannot be rolled back (the
statement may filter or reshape them): when its window holds changes of the table, its records are
the table at P, and the stream, filtering at L, replays (L, P] onto them (a change sets or removes its
key whatever the key held: those changes may arrive twice, nothing is lost; a keyless override table
may see a replayed insert double a row).

NOBLOB images (`complete_images`, `images.py`): a before image lacks every BLOB/TEXT column that is
not part of the key, an after image those the change did not set. `fill_first_images` takes such a
column's value at L from the row's later life: while the row's changes leave it out of their after
images it did not change, so a later before image that holds it, or the SELECT's row of the key the
row ends under (when the SELECT cannot have seen another row there), has its value at L. When a change
set it (or the row was deleted first), its value at L is in no image: the chunk is then merged forward
to H as before (`merge_chunk`, absent columns from the row the key held before each change) and its
records carry H; the stream replays (L, H] onto them as for an override.

A batch holds at least two chunks, two per core of the source's parallelism (one per core in the first
batch), or more when `headwater.max.batch.events` / `headwater.snapshot.chunk.rows` say so; the first
batch's chunks hold at most `FIRST_CHUNK_ROWS` rows (the first rows come sooner). A batch planned before a restart is planned
from its offset alone: the tables at P0 and the snapshot's schema change records come back from the
statements the history file holds at P0 (`SchemaHistoryTracker.resume_snapshot`).

MySQL has no exact low position without a watermark write (`chunkmerge` point 1): only MariaDB
takes the lock-free snapshot; a MySQL source keeps Debezium's `minimal` when the mode is not set.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
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
from headwater.connectors.common.chunkmerge import Bounds, Change, merge_chunk, roll_back_chunk
from headwater.connectors.common.chunkprogress import Progress, StreamFilter
from headwater.connectors.common.phases import (
    SNAPSHOT_CHUNKS,
    SNAPSHOT_COMPLETED,
    SNAPSHOT_PENDING,
    STREAMING,
    epoch,
    phase,
)
from headwater.connectors.common.snapshot import (
    ChunkKey,
    KeyRange,
    chunks_per_batch,
    key_ranges,
    marker,
    order_by,
    select_overrides,
    snapshot_tables,
)
from headwater.events.batch import Events

log = logging.getLogger(__name__)
CHUNKS = SNAPSHOT_CHUNKS  # the offset's phase while chunks remain
# The first batch's chunks (those of the first table) hold at most this many rows: on Spark, the first row
# comes when that batch's tasks end.
FIRST_CHUNK_ROWS = 25_000
TableKey = tuple[str, str]
Row = tuple[str, tuple[Any, ...]]  # ("s", a SELECT row as text) or ("b", a binlog image)


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


def fill_first_images(rows: list[Row], window: list[Change[Row]], span: KeyRange,
                      row_key: Callable[[Row], tuple[Any, ...]], order: Callable[[tuple[Any, ...]], Any]
                      ) -> list[Change[Row]] | None:
    """The window with the BLOB/TEXT columns a NOBLOB before image leaves out filled in, for the changes the
    roll-back takes its rows at low from (each range key's first change); None when such a value is not
    known. A NOBLOB before image leaves out every such column (changed or not); an after image leaves out
    those the change did not set. So a column a change leaves out of both images held before the change
    what it holds after it: follow the row (through its key changes) while its changes leave the column out
    of their after images, to a before image that carries it, or to the window's end, where the row's value
    is the SELECT's row of the key it ends under, if the SELECT cannot have seen another row there (the row
    held that key since low, or the key was untouched in the window until the row moved in: empty before,
    so the SELECT saw this row or nothing). A change that sets the column (its after image carries it), a
    delete, or no SELECT row leaves the value at low unknown."""
    if not any(c.before is not None and any(v is ABSENT for v in c.before[1]) for c in window):
        return window
    bounds = Bounds(span, order)
    kb = [None if c.before is None else order(row_key(c.before)) for c in window]
    ka = [None if c.after is None else order(row_key(c.after)) for c in window]
    selected: dict[Any, Row] | None = None
    seen: set[Any] = set()
    out = list(window)
    for i, change in enumerate(window):
        k = kb[i]
        if change.before is not None and k not in seen and bounds.holds(k) \
                and any(v is ABSENT for v in change.before[1]):
            values = list(change.before[1])
            need = {j for j, v in enumerate(values) if v is ABSENT}
            cur, arrived, n = k, -1, i
            while need:
                if n == len(window):
                    break
                if kb[n] == cur:
                    before, after = window[n].before, window[n].after
                    assert before is not None
                    for j in [j for j in need if before[1][j] is not ABSENT]:
                        values[j] = before[1][j]
                        need.discard(j)
                    if need and (after is None or any(after[1][j] is not ABSENT for j in need)):
                        return None  # deleted, or the column set: its value before is in no image
                    if ka[n] != cur:
                        cur, arrived = ka[n], n
                n += 1
            if need:
                if any(kb[j] == cur or ka[j] == cur for j in range(max(arrived, 0))):
                    return None
                if selected is None:
                    selected = {order(row_key(r)): r for r in rows}
                row = selected.get(cur)
                if row is None:
                    return None
                values = [row[1][j] if j in need else v for j, v in enumerate(values)]
            out[i] = Change(change.position, ("b", tuple(values)), change.after)
        seen.update(x for x in (k, ka[i]) if x is not None)
    return out


def roll_back_keyless(rows: list[Row], window: list[Change[Row]], fingerprint: Callable[[Row], bytes]
                      ) -> list[Row] | None:
    """A keyless table's rows at low from its rows at P (read in a consistent snapshot at P) and the
    changes of (low, P], undone last first: an undone change removes one row equal to its after image and
    puts back its before image (the table is a multiset of rows, equal rows interchangeable). None when an
    image is partial or an after image is not there to remove (then the caller falls back)."""
    bag: dict[bytes, list[Row]] = {}
    for r in rows:
        bag.setdefault(fingerprint(r), []).append(r)
    for change in reversed(window):
        if any(img is not None and any(v is ABSENT for v in img[1]) for img in (change.before, change.after)):
            return None
        if change.after is not None:
            same_rows = bag.get(fingerprint(change.after))
            if not same_rows:
                return None
            same_rows.pop()
        if change.before is not None:
            bag.setdefault(fingerprint(change.before), []).append(change.before)
    return [r for group in bag.values() for r in group]


@dataclass
class LockFreeChunk(WorkUnit):
    """One key range of one table (or a whole table), read without a lock where the unit runs and rolled
    back to the batch's low."""

    params: ConnectionParams
    ctx: BinlogContext
    table: Table
    index: int
    order: ChunkOrder | None  # the chunk key's columns and order; None: one chunk read in a consistent snapshot
    span: KeyRange
    override: str | None
    low: int  # the batch's low (stream integer)
    file_like: str
    ts_us: int
    ends: tuple[bool, bool, bool, bool]  # first table, last table, first chunk, last chunk

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

    def _fetch(self) -> tuple[TextRows, int, list[Change[Row]]]:
        """The chunk's rows (as the server sent them), the end of its window (H: SHOW MASTER STATUS after
        the SELECT; P: the consistent snapshot's position for one chunk read in one), and the binlog changes
        of its table in (low, end]."""
        sql, args = self._select()
        conn = connect(self.params, conv=TEXT_VALUES)
        try:
            with conn.cursor() as cur:
                order = self.order
                if order is None:
                    at = exact_position(cur)
                    rows = read_text_rows(conn, sql, args)
                    cur.execute("COMMIT")
                    high = max(at.stream, self.low)
                else:
                    rows = read_text_rows(conn, sql, args)
                    if order.text:
                        n = len(self.table.columns)
                        for r in rows.tuples():
                            order.learn(order.key_of(r[:n], True), r[n:])
                    high = master_position(cur)
                window = read_window(self.params, self.table, self.file_like, self.low, high)
                if order is not None and window:
                    self._check(window)
                    # the weights of the window's keys and the range's bounds, for the roll-back
                    order.prefetch([self.span.lo, self.span.hi, *(order.key_of(r[1], False) for c in window
                                                                  for r in (c.before, c.after) if r)], cur)
        finally:
            with contextlib.suppress(Exception):
                conn.close()
        return rows, high, window

    def _check(self, window: list[Change[Row]]) -> None:
        """Refuse a partial image lacking a column that has no placeholder (or a key column)."""
        assert self.order is not None
        check = ImageCheck(self.table, [c.name for c in self.order.columns])
        for change in window:
            file, pos = split_pos(self.file_like, change.position)
            check.check([[img[1] for img in (change.before, change.after) if img is not None]],
                        f"in the transaction ending at {file}:{pos} for {name_of(self.table)}")

    def _row_key(self) -> Callable[[Row], tuple[Any, ...]] | None:
        order = self.order
        if order is None:
            return None

        def row_key(row: Row) -> tuple[Any, ...]:
            kind, values = row
            return order.key_of(values, kind == "s")
        return row_key

    def _rows_at(self, text: TextRows, high: int, window: list[Change[Row]], kinds: dict[str, Any]
                 ) -> tuple[list[Row] | None, int]:
        """The chunk's rows at its position, and that position: (None, low) when the SELECT's rows are the
        chunk at low as they are; else the rows rolled back to low, or (fallback, when that is not known
        exactly) merged forward to the window's end, at that end."""
        t = self.table
        rows: list[Row] = [("s", values) for values in text.tuples(len(t.columns))]
        row_key, order = self._row_key(), self.order
        if order is not None and row_key is not None:
            filled = fill_first_images(rows, window, self.span, row_key, order.order)
            if filled is not None:
                back = roll_back_chunk(rows, filled, self.span, low=self.low, high=high, row_key=row_key,
                                       order=order.order)
                return back, self.low
            forward = complete_images(rows, window, row_key, order.order)
            return merge_chunk(rows, forward, self.span, low=self.low, high=high, row_key=row_key,
                               order=order.order), high
        if self.override is None:
            def fingerprint(row: Row) -> bytes:
                return orjson.dumps(kinds[row[0]].row(row[1]), default=repr,
                                    option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
            back = roll_back_keyless(rows, window, fingerprint)
            if back is not None:
                return back, self.low
        return rows, high  # an override's rows at P: the stream replays (low, P] onto them

    def read(self) -> Iterator[Events]:
        text, high, window = self._fetch()
        t, ctx = self.table, self.ctx
        kinds = {"s": records_of(ctx, t, streaming=False), "b": records_of(ctx, t, streaming=True)}
        maker = BinlogMaker(ctx)
        ts_us = self.ts_us // 1_000_000 * 1_000_000  # Debezium's snapshot rows carry whole seconds
        first_table, last_table, first_chunk, last_chunk = self.ends
        rows, at = (None, self.low) if not window else self._rows_at(text, high, window, kinds)
        file, pos = split_pos(self.file_like, at)
        if rows is None or all(kind == "s" for kind, _ in rows):  # the SELECT's rows, column-wise
            yield from snapshot_events(kinds["s"], maker, text if rows is None else [values for _, values in rows],
                                       ts_us=ts_us, version=at, position={"file": file, "pos": pos}, ends=self.ends)
            return
        sources: dict[str, orjson.Fragment] = {}
        for i, (kind, values) in enumerate(rows):
            mark = marker(first_table, last_table, first_chunk and i == 0, last_chunk and i == len(rows) - 1)
            src = sources.get(mark)
            if src is None:
                src = sources[mark] = orjson.Fragment(maker.snapshot_source(kinds["s"], ts_us, mark,
                                                                            {"file": file, "pos": pos}))
            te = kinds[kind]
            maker.emit(te, "r", te.key(values), None, te.row(values), src, None, at, ts_us)
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


class LockFreeSnapshot:
    """The driver's side: plans the chunk batches, keeps the progress in the offsets, filters the stream."""

    def __init__(self, source: Any):
        self.source = source  # the BinlogSource
        self.planned: dict[str, Any] = {}  # the offset planned from a start, by the start's JSON
        self.filter_of: tuple[str, ChunkFilter] | None = None
        self.schema_at: int | None = None  # the position of the snapshot whose schema history the tracker holds
        self.key_columns: dict[str, tuple[Table, tuple[KeyColumn, ...] | None]] = {}  # by table name

    @property
    def config(self) -> ConnectorConfig:
        return self.source.config

    # ------------------------------------------------------------------ offsets
    def latest_offset(self, start: Offset, max_events: int | None, base: Callable[..., Offset]) -> Offset:
        src = self.source
        ph = phase(start)
        key = _key(start)
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
                return end
            if phase(end) == STREAMING and CHUNKS in start and self.filter_of is not None:
                horizon = self.filter_of[1].horizon
                if horizon is not None and BinlogPosition.from_offset(end).stream <= horizon:
                    end = {**end, CHUNKS: start[CHUNKS]}
            return end
        self.planned[key] = end
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
                small = self._per_batch(max_events, first=True)  # the first batch's: of FIRST_CHUNK_ROWS at most
                for t in snapshot_tables(captured, name_of, self.config):
                    order = self._order(t)
                    if order is None or name_of(t) in overrides:
                        spans[name_of(t)] = [KeyRange(None, None)]
                    else:
                        ck = ChunkKey(tuple(c.name for c in order.columns), tuple(False for _ in order.columns))
                        spans[name_of(t)] = key_ranges(cur, DIALECT, table_ref(t), ck, chunk_rows,
                                                       (small, min(chunk_rows, FIRST_CHUNK_ROWS)),
                                                       unique_integer=t.integer_key)
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
        return self._batch(offset, progress, p0.stream, p0.stream, max_events, first=True)

    def _batch(self, offset: Offset, progress: Progress, low: int, next_low: int, max_events: int | None,
               first: bool = False) -> Offset:
        """The offset of the next batch of chunks from `offset` (its progress updated), at `low`; the batch
        after it is read at `next_low`."""
        remaining = progress.remaining()
        batch = [[table, i] for table, i, _ in remaining[:self._per_batch(max_events, first)]]
        if not batch:
            lowest = progress.stream_start()
            start = BinlogPosition(*split_pos(offset["file"], low if lowest is None else lowest))
            return {"snapshot": SNAPSHOT_COMPLETED, **start.to_offset(), "epoch": offset["epoch"],
                    CHUNKS: progress.to_json()}
        return {**offset, "progress": progress.to_json(), "batch": batch, "low": low, "next_low": next_low,
                "first": first}

    def _per_batch(self, max_events: int | None, first: bool = False) -> int:
        """Chunks a batch holds: the first batch one a core (its rows come sooner), the later ones two (the
        tasks then run in two waves: the cores stay busy while the first wave's last task ends, and a batch's
        fixed costs are paid half as often: 3M rows on local[2], 254-263k -> 282-291k rows/s, 2 alternated
        rounds), or more as `chunks_per_batch` says."""
        cores = self.source.parallelism
        return chunks_per_batch(self.config, cores if first else 2 * cores, max_events)

    def _next(self, start: Offset, max_events: int | None) -> Offset:
        """After the batch that ended at `start`: its chunks recorded at the batch's low (their records are
        the chunks as they stood there, whichever run of the batch reached the sink), then the next batch at
        the low `start` holds (`next_low`, read when `start` was planned: the batch planned again from
        `start`, after a crash, is read at the low of any earlier run of it), and a fresh exact position for
        the batch after it."""
        progress = Progress.from_json(start["progress"])
        for table, i in start["batch"]:
            progress.finish(table, i, start["low"], start["low"])
        conn = connect(self.source.params)
        try:
            with conn.cursor() as cur:
                next_low = exact_position(cur).stream
                cur.execute("COMMIT")
        finally:
            with contextlib.suppress(Exception):
                conn.close()
        return self._batch(start, progress, int(start["next_low"] if "next_low" in start else start["low"]), next_low, max_events)

    # ------------------------------------------------------------------ planning
    def plan(self, start: Offset, end: Offset) -> list[WorkUnit] | None:
        """The units of a chunk batch; None for other batches (after setting the stream filter)."""
        if phase(end) != CHUNKS:
            if phase(start) == CHUNKS:
                return []  # the last batch's chunks were recorded when this end was planned
            self.set_filter(start)
            return None
        src = self.source
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
        return units + self._chunks(end, progress, end["batch"], int(end["low"]))

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
            units.append(LockFreeChunk(self.source.params, self.source.context, t, i,
                                       None if table in overrides else self._order(t), chunks[i].span,
                                       overrides.get(table), low, end["file"], int(end["ts_us"]),
                                       (table == order[0], table == order[-1], i == 0, i == len(chunks) - 1)))
        return units

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
