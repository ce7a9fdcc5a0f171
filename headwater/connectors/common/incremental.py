"""Incremental snapshots (Debezium's watermark algorithm, from Netflix's DBLog), and blocking snapshots,
for every stream connector.

`Incremental` runs on the driver beside the streaming planner; the shared lifecycle
(`common.phases.SnapshotThenStream`) calls it for each streaming batch, and a connector fills in
`IncrementalHooks` (PostgreSQL: `connectors.postgres.incremental`; MySQL and MariaDB:
`connectors.binlog.incremental`). For a batch (start, end] of the change log it

1. reads the file channels (`signal.file`, and the command line's file) and scans the batch's
   messages (`scan_stream`) for inserts into the signalling table (the `source` channel), acting
   on the signals in log order: `execute-snapshot`, `stop-snapshot`, `pause-snapshot`,
   `resume-snapshot`, `log`;
2. while a window is open, notes the keys of the streamed changes to its table that supersede its
   rows: every change after the window's open watermark (watermarking strategies `insert_insert`
   and `insert_delete`), or, in the read-only mode, every change whose transaction the window's
   view did not see (or, when only the units reading the rows know the view, every change with
   its transaction's id, for them to decide);
3. once the window may close (its close watermark is in the batch; read-only: the stream has
   passed every transaction the view saw), emits the window's rows that were not superseded, as
   `op: r` events with `source.snapshot: incremental`, after the batch's streamed events;
4. opens the next window (before the batch's stream range is fixed, so that its watermarks are
   likely in it): up to `headwater.incremental.snapshot.batch.rows` rows (whole chunks of
   `incremental.snapshot.chunk.size` rows, at least one; no more than `maxEventsPerTrigger`), by
   key, after the last key emitted, up to the table's maximum key read when the table's turn came.

Beyond Debezium: a window holds several chunks, and its rows are not read by the driver. The
connector cuts its key range into parts of about equal rows (at least two per core of the
source's `parallelism`, at most `headwater.snapshot.chunk.rows` rows and at least a chunk each)
when it opens it, and emits it as one unit per part (`chunk_units`): on Spark one partition each,
read side by side by the executors, which SELECT their range, drop the superseded keys shipped in
the unit and encode the rest column-wise; the driver only decides where the rows go in the
stream (after the batch's streamed events, at its end E). Setting the batch rows to the chunk
size gives Debezium's one chunk a batch.

Why it is exact. Write T(p) for the table once every change at a log position <= p is applied.
A row emitted at E must be T(E) for its key, and every key of the window's range that T(E) holds
must come either as a row or through the stream. The parts' rows are read in a view V, after the
batch's end E was fixed, at log position P(V):

- PostgreSQL: one view for the whole window, the snapshot a connection exports while the driver
  opens the window and holds until the batch is over; every unit imports it, so P(V) lies between
  the open and the close watermark (read-only: before the WAL position read after it), and E is
  past the close (that position), so P(V) <= E. A key with a change in (open, E] (read-only: a
  change V did not see) is dropped; any other key did not change between P(V) and E, so V's row
  is T(E)'s. The driver knows every such change before the rows are read: it ships the keys.
- MySQL/MariaDB: no snapshot can be shared, so each part takes its own consistent snapshot, which
  must see everything delivered before the window (read again until it does), and P(V) may be
  past E. The part drops the keys of the driver's changes (watermarks: all after the open one;
  read-only: those its view did not see) and reads the binlog itself from E to its end after the
  SELECT (>= P(V)), dropping every key changed there too. A key left did not change between
  min(P(V), E) and max(P(V), E), so V's row is T(E)'s.

A dropped key loses nothing: its change is in the stream, with the row's full image (an insert or
an update's after image) or its absence (a delete), and comes after the window's rows or in the
same batch before them. Rows the range did not hold in V come through the stream if the table
holds them later. So replaying the events gives the table's state, as with Debezium, and the
window's rows never carry a change that a later event in the stream undoes ("from the future").

A blocking snapshot (`execute-snapshot` with `type: blocking`) is noted in the batch's offset
(`blocking_snapshot_pending`); the batches after it (`blocking_snapshot`: the signal's id, tables and
statements, and the connector's fields naming the batch) have an empty stream range and read the
tables as the initial snapshot does, under a snapshot taken when the first of them is planned. The
connector's `blocking_batch` says how many: PostgreSQL's units read under an exported snapshot on the
executors (no rows pass through the driver), one batch; MySQL/MariaDB's chunks carry rows read on the
driver, so a batch holds `chunks_per_batch` of them (the held snapshot's token and the chunk range
in the field, as the locking snapshot's batches) while any are left, and the driver holds about two
batches' rows whatever the tables' size. Then streaming resumes where it paused (rows changed between
the pause and that snapshot come again: Debezium's "possible duplicates"). A restart in the middle
(a `blocking_snapshot` field naming a snapshot this process does not hold: its transaction is gone)
goes on from where the last batch stored left it, in a new snapshot, streaming still paused at the same
position (MySQL/MariaDB: `connectors.binlog.incremental`; nothing delivered comes again but the rows of a
table read by one streamed SELECT, read again from its start). That is exact because streaming pauses at
one position P for the whole snapshot and resumes from P: rows read in a later snapshot are as consistent
as rows read late in the first one (every change since P is streamed after them). The spec says nothing of
restarts in a blocking snapshot; Debezium keeps the stream's offset through one and does not turn an
interrupted one into an initial snapshot (DBZ-7903, DBZ-9337). The batch after the last one leaves the
snapshot (its offset has no `blocking_snapshot`), even when the stream has nothing new.

An error the database returns for the blocking snapshot's query (a table dropped after the signal, a bad
`additional-conditions` statement or override; not an error of the connection, which fails the batch so that
it is read again from the last durable offset) abandons it, as Debezium 3's `ChangeEventSourceCoordinator`
does (it catches the blocking snapshot's exception, logs "Error while executing requested blocking
snapshot." at WARN and resumes streaming; DBZ-8244): a connector raises `BlockingAbandoned` from
`blocking_batch` or `blocking_units` (or a unit that meets it logs it, `abandon_blocking`, and ends), the
warning names the signal and the error, and the next batch streams from where streaming paused. Rows the
snapshot delivered before stay delivered; nothing streamed is lost or doubled. That batch's offset says so
(`blocking_snapshot_abandoned`: the signal's id and tables, and the table whose query failed when the error
names one), for the snapshot's notifications (`observe.observer`: Debezium's ABORTED); a unit that meets it
while reading (PostgreSQL's chunks, on the executors) says so itself (`WorkUnit.abandoned`).

Notifications of incremental snapshots go to `connectors.common.notifications` (IN_PROGRESS once a
window, not once a chunk).

The progress is in the offsets under Debezium's names (`incremental_snapshot_collections`,
`..._primary_key`, `..._maximum_key`, `..._correlation_id`, keys as JSON arrays of text, not Java
serialization) plus `incremental_snapshot_paused`, the window a batch emits
(`incremental_snapshot_chunk`: its table, key range and the bounds of its parts) and the bytes read
of each signal file (`signal_file_positions`): a restart resumes at the window after the last one
delivered (nothing delivered is read again, nothing is skipped). A batch replayed from Spark's
checkpoint (its view is gone) reads its window's ranges again, dropping the keys its stream range
changes: on MySQL/MariaDB in a new view per part, exact as above from the batch's start; on
PostgreSQL as the table is at the replay, which is state-exact (the rows are as new as or newer
than the window's, and the changes after them follow) but may carry a change the next batches
deliver again.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import Offset, WorkUnit
from headwater.connectors.common import signals as sig
from headwater.connectors.common.notifications import Notifier

log = logging.getLogger("headwater.incremental")

COLLECTIONS = "incremental_snapshot_collections"
PRIMARY_KEY = "incremental_snapshot_primary_key"
MAXIMUM_KEY = "incremental_snapshot_maximum_key"
CORRELATION_ID = "incremental_snapshot_correlation_id"
PAUSED = "incremental_snapshot_paused"
ROWS_SCANNED = "incremental_snapshot_rows_scanned"
CHUNK = "incremental_snapshot_chunk"
FILE_POSITIONS = "signal_file_positions"
NOTIFICATIONS = "notifications"
BLOCKING_PENDING = "blocking_snapshot_pending"  # a blocking snapshot signalled: the next batch reads it
BLOCKING = "blocking_snapshot"  # a batch that reads (part of) a blocking snapshot (its stream range is empty)
BLOCKING_ABANDONED = "blocking_snapshot_abandoned"  # the batch after an abandoned blocking snapshot: its id and tables
BLOCKING_SIGNAL = ("id", "tables", "statements")  # what `blocking_snapshot` keeps of the signal (and the connector's
# batch fields beside them)
OFFSET_KEYS = (COLLECTIONS, PRIMARY_KEY, MAXIMUM_KEY, CORRELATION_ID, PAUSED, ROWS_SCANNED, CHUNK, FILE_POSITIONS,
               NOTIFICATIONS, BLOCKING_PENDING, BLOCKING, BLOCKING_ABANDONED)

Key = tuple[Any, ...]  # a row's key values, as the database writes them as text


@dataclass(frozen=True)
class Collection:
    """A table an incremental snapshot reads: `schema.table`, its condition and surrogate key."""

    id: str
    condition: str | None = None
    surrogate_key: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"incremental_snapshot_collections_id": self.id,
                "incremental_snapshot_collections_additional_condition": self.condition,
                "incremental_snapshot_collections_surrogate_key": self.surrogate_key}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Collection:
        return cls(d["incremental_snapshot_collections_id"],
                   d.get("incremental_snapshot_collections_additional_condition"),
                   d.get("incremental_snapshot_collections_surrogate_key"))


@dataclass(frozen=True)
class State:
    """A running incremental snapshot: the tables left (the first is being read), the last key
    emitted and the maximum key of the current table."""

    collections: tuple[Collection, ...] = ()
    last_key: list[Any] | None = None
    max_key: list[Any] | None = None
    correlation_id: str | None = None
    paused: bool = False
    rows: int = 0  # rows read of the current table

    @property
    def active(self) -> bool:
        return bool(self.collections)

    def to_offset(self) -> Offset:
        if not self.collections:
            return {}
        out: Offset = {COLLECTIONS: json.dumps([c.to_json() for c in self.collections]),
                       PRIMARY_KEY: None if self.last_key is None else json.dumps(self.last_key),
                       MAXIMUM_KEY: None if self.max_key is None else json.dumps(self.max_key),
                       CORRELATION_ID: self.correlation_id}
        if self.paused:
            out[PAUSED] = True
        if self.rows:
            out[ROWS_SCANNED] = self.rows
        return out

    @classmethod
    def from_offset(cls, offset: Offset) -> State:
        raw = offset.get(COLLECTIONS)
        if not raw:
            return cls()

        def key(name: str) -> list[Any] | None:
            v = offset.get(name)
            return None if v is None else json.loads(v)

        return cls(tuple(Collection.from_json(c) for c in json.loads(raw)), key(PRIMARY_KEY), key(MAXIMUM_KEY),
                   offset.get(CORRELATION_ID), bool(offset.get(PAUSED)), int(offset.get(ROWS_SCANNED) or 0))

    def next_table(self) -> State:
        return State(self.collections[1:], None, None, self.correlation_id if len(self.collections) > 1 else None,
                     self.paused and len(self.collections) > 1)

    def with_(self, **changes: Any) -> State:
        return dataclasses.replace(self, **changes)

    def names(self) -> str:
        return ",".join(c.id for c in self.collections)


class WindowStale(Exception):
    """`window_ready`: the window's view cannot be used (it misses a change the stream delivered before the
    window, whose commit was not yet visible when the view was taken): the window is dropped, and its range is
    read in a new one."""


class BlockingAbandoned(Exception):
    """An error the database returned for a blocking snapshot's query (a table dropped since the signal, a bad
    `additional-conditions` statement or `snapshot.select.statement.overrides`, ...), not one of the connection:
    the snapshot is abandoned and streaming resumes where it paused (`abandon_blocking`). The message never
    holds the password; `table` is the table (`schema.table`) whose query failed, when known."""

    def __init__(self, message: str, table: str | None = None):
        super().__init__(message)
        self.table = table


def abandon_blocking(signal_id: Any, why: str) -> None:
    """Say that the blocking snapshot of signal `signal_id` is abandoned for the query error `why`, at WARN, as
    Debezium's `ChangeEventSourceCoordinator` does ("Error while executing requested blocking snapshot.")."""
    log.warning("Error while executing requested blocking snapshot %s: %s; the snapshot is abandoned and streaming "
                "resumes where it paused (the rows it delivered stay delivered)", signal_id, why)


class TableSkipped(Exception):
    """A table an incremental snapshot cannot read (its condition is not valid SQL, a column is
    missing, ...): the message says why; the table is skipped with Debezium's status (`SQL_EXCEPTION`,
    `NO_PRIMARY_KEY`, `UNKNOWN_SCHEMA`) in its TABLE_SCAN_COMPLETED notification."""

    def __init__(self, message: str, status: str = "SQL_EXCEPTION"):
        super().__init__(message)
        self.status = status


@dataclass
class Change:
    """A streamed change the scan reports: a change to a watched table (its keys before and after),
    or an insert into the signalling table (`row`: its id, type and data)."""

    table: str
    op: str  # c, u, d, or t (a truncate)
    xid: Any  # what the read-only mode's `visible` reads of the change's transaction (its id, GTID or position)
    keys: list[Key] = field(default_factory=list)
    row: tuple[Any, ...] | None = None


@dataclass
class Window:
    """One window of an incremental snapshot: the key range of its chunks, cut into parts that are read side
    by side (one Spark partition each), and the streamed changes that supersede their rows."""

    id: str
    collection: Collection
    key_columns: list[str]
    from_key: list[Any] | None
    to_key: list[Any]  # the key of the window's last row
    bounds: list[list[Any]] = field(default_factory=list)  # the last key of each part but the last (`to_key`)
    rows: int = 0  # the rows counted in the range when the window opened
    opened: bool = False  # the open watermark has been seen in the stream (always, read-only)
    snapshot: Any = None  # what the connector keeps of the window (its view, its exported snapshot, ...)
    evicted: dict[Key, Any] = field(default_factory=dict)  # superseded keys -> the xid of their last change
    truncates: list[Any] = field(default_factory=list)  # the xids of truncates of the table in the window
    source: dict[str, Any] | None = None  # where the window closed, for the rows' `source` (kept in the offset)

    def evict(self, keys: Sequence[Key], xid: Any = None) -> None:
        for k in keys:
            self.evicted[k] = xid

    def parts(self) -> list[tuple[list[Any] | None, list[Any]]]:
        """The key ranges (after, upto] the window's rows are read in, in key order."""
        return parts_of(self.from_key, self.bounds, self.to_key)

    def chunk_offset(self) -> dict[str, Any]:
        c = self.collection
        out: dict[str, Any] = {"id": self.id, "table": c.id, "condition": c.condition, "surrogate_key": c.surrogate_key,
                               "from": self.from_key, "to": self.to_key}
        if self.bounds:
            out["bounds"] = self.bounds
        if self.source is not None:
            out["source"] = self.source
        return out


def parts_of(first: list[Any] | None, bounds: Sequence[list[Any]], last: list[Any]) -> list[tuple[list[Any] | None,
                                                                                                  list[Any]]]:
    """The ranges (after, upto] from `first` through each of `bounds` to `last`."""
    ends = [*bounds, last]
    return list(zip([first, *bounds], ends, strict=True))


def drop_superseded(columns: list[pa.Array], keys: pa.Array, evicted: Iterable[str]) -> list[pa.Array]:
    """The rows (`columns`) whose key (`keys`, one string a row, as `join_key` writes a key) is not in `evicted`."""
    value_set = pa.array(list(evicted), pa.string())
    if not len(value_set) or not len(keys):
        return columns
    mask = pc.invert(pc.is_in(keys, value_set=value_set))
    return [c.filter(mask) for c in columns]


_SEP = "\x1f"


def join_key(key: Key) -> str:
    """A key's values as one string (a streamed change's keys compare with a chunk's rows so)."""
    return _SEP.join("\x00" if v is None else str(v) for v in key)


def joined_keys(columns: list[pa.Array]) -> pa.Array:
    """Each row's key columns (the database's text) as one string, as `join_key` writes it."""
    if len(columns) == 1:
        return pc.fill_null(columns[0], "\x00")
    return pc.binary_join_element_wise(*[pc.fill_null(c, "\x00") for c in columns], _SEP)


class IncrementalHooks(Protocol):
    """What a connector gives incremental snapshots. Stream positions are its own (the offset's
    position fields)."""

    def resolve_collections(self, patterns: Sequence[str]) -> list[str]:
        """The captured tables (`schema.table`) the regexes match, in snapshot order."""
        ...

    def scan_stream(self, start: Offset, end: Offset, watched: Mapping[str, list[str]]) -> Iterator[Change]:
        """The changes in (start, end] to the tables `watched` (their keys: the columns given), and the
        inserts into the signalling table when it is set, in log order, decoded on the driver."""
        ...

    def key_columns(self, collection: Collection) -> list[str] | None:
        """The columns a table's chunks are ordered by (the surrogate key, else the primary key);
        None when it has none."""
        ...

    def max_key(self, collection: Collection, key_columns: list[str]) -> list[Any] | None:
        """The table's largest key (under the collection's condition); None when it has no rows."""
        ...

    def open_window(self, collection: Collection, key_columns: list[str], after: list[Any] | None,
                    upto: list[Any], rows: int, parts: int, window_id: str, delivered: Offset) -> Window | None:
        """Open a window over the next `rows` rows (at most) with keys in (after, upto], by key, cut into
        `parts` ranges of about equal rows (watermarks written as configured; the rows themselves are read
        by the units of `chunk_units`); None when there are no such rows (no window stays open).
        `delivered`: the stream position the changes delivered so far reach (the batch's start)."""
        ...

    def window_ready(self, window: Window, end: Offset) -> bool:
        """Whether the window's rows may be emitted at stream position `end`; `WindowStale` when they never may."""
        ...

    def visible(self, window: Window, xid: Any) -> bool:
        """Read-only mode: whether the window's view saw transaction `xid`'s changes (False when only the
        units reading the rows know it: they decide by each evicted key's xid)."""
        ...

    def chunk_units(self, window: Window, at: Offset) -> list[WorkUnit]:
        """The units reading the window's rows, one per part, and emitting those not superseded as
        incremental snapshot events at `at`."""
        ...

    def reread_units(self, chunk: dict[str, Any], evicted: dict[Key, Any], at: Offset, since: Offset) -> list[WorkUnit]:
        """A replayed batch's chunk: its key ranges read again, minus the keys `evicted` (every change
        of the batch's stream range, from `since`)."""
        ...

    def end_window(self, window: Window) -> None:
        """The window is over (its batch was planned and the next one is being planned, or it was dropped):
        release what held its view."""
        ...

    def log_position(self, at: Offset) -> str:
        """The streaming coordinates a `log` signal's `{}` stands for."""
        ...

    def notification_unit(self, notifications: list[dict[str, Any]], at: Offset) -> WorkUnit:
        """The unit writing the sink channel's records of `notifications`, at `at`."""
        ...

    def blocking_batch(self, snapshot: dict[str, Any], after: dict[str, Any] | None,
                       max_events: int | None) -> dict[str, Any] | None:
        """The fields naming the next batch of the blocking snapshot `snapshot` (its signal's `id`, `tables` and
        `statements`) after the batch whose `blocking_snapshot` field is `after` (None: the first batch; or
        one this process did not plan, after a restart), kept beside them in that batch's field; None when
        no batch is left (streaming resumes). A snapshot read in one batch gives `{}`, then None.
        `BlockingAbandoned` for a query error: streaming resumes."""
        ...

    def blocking_units(self, blocking: dict[str, Any], at: Offset) -> list[WorkUnit]:
        """The units of the blocking snapshot's batch whose `blocking_snapshot` field is `blocking`: its part of
        the `tables`, read as an initial snapshot reads them (`statements`: a table's SELECT in place of its
        own); streaming resumes at `at` once the snapshot is over. `BlockingAbandoned` for a query error: the
        batch reads nothing and the next one streams."""
        ...

    def end_blocking(self) -> None:
        """The blocking snapshot is over (its last batch was planned; the next one streams): release what held
        its snapshot."""
        ...


class Incremental:
    """Signals and incremental snapshots over one connector's stream (driver-side)."""

    def __init__(self, config: ConnectorConfig, hooks: IncrementalHooks, parallelism: int = 1):
        self.hooks = hooks
        self.signal_table = config.get("signal.data.collection")
        channels = config.get("signal.enabled.channels") or ["source"]
        self.source_channel = "source" in channels and bool(self.signal_table)
        self.files: list[tuple[Path, str]] = []
        if "file" in channels:
            self.files.append((Path(config["signal.file"]), "file"))
        if config.get(sig.CLI_FILE):
            self.files.append((Path(config[sig.CLI_FILE]), "cli"))
        self.poll_s = config["signal.poll.interval.ms"] / 1000
        self.chunk_size = config["incremental.snapshot.chunk.size"]
        self.batch_rows = config[sig.BATCH_ROWS]
        self.part_rows = config["headwater.snapshot.chunk.rows"]
        self.parallelism = max(1, parallelism)
        self.read_only = sig.read_only(config)
        self.last_poll = 0.0
        self.window: Window | None = None
        self.pending: dict[str, Window] = {}  # window id -> window, emitted by the batch planned last
        self.keys: dict[str, list[str] | None] = {}
        self._last_id: str | None = None  # the snapshot's signal id, when its last table is done
        self.blocking: dict[str, Any] | None = None  # a blocking snapshot signalled in the batch being planned
        self.abandoned: Any = None  # the signal id of a blocking snapshot abandoned for a query error
        self.abandoned_table: str | None = None  # the table whose query failed, when known
        self.notify = Notifier(config.get("notification.enabled.channels"),
                               config.get("name") or config["topic.prefix"])

    # ------------------------------------------------------------------ the batch's end
    def latest(self, start: Offset, start_pos: Offset, stream: Callable[[], Offset | None],
               stream_offset: Callable[[Offset], Offset], max_events: int | None = None) -> Offset | None:
        """The end of the batch from `start` (an offset; `start_pos` its stream position): the next
        window is opened first (so that its watermarks are likely in this batch; at most `max_events`
        rows), then `stream()` gives the end of the batch's stream range (None: nothing new), and
        `stream_offset` makes an offset of a stream position; the incremental-snapshot and signal
        fields are added to it. None when the batch has nothing to do."""
        for done in self.pending.values():  # the batch that emitted it is over
            self.hooks.end_window(done)
        self.pending = {}
        state = State.from_offset(start)
        blocking = self._blocking_batch(start, max_events)
        if blocking is not None:  # streaming pauses for this batch: the tables are read, the stream does not move
            return {**stream_offset(without_heartbeat(start_pos)), **state.to_offset(),
                    **({FILE_POSITIONS: start[FILE_POSITIONS]} if start.get(FILE_POSITIONS) else {}),
                    BLOCKING: blocking}
        self.hooks.end_blocking()
        if self.window is None and state.active and not state.paused:
            state = self._open_next(state, start_pos, max_events)
        end_pos = stream()
        files = dict(start.get(FILE_POSITIONS) or {})
        signals: list[sig.Signal] = []
        if self.files and time.monotonic() - self.last_poll >= self.poll_s:
            self.last_poll = time.monotonic()
            for path, channel in self.files:
                pos = int(files.get(str(path), 0))
                for signal, after in sig.read_file(path, pos, channel):
                    files[str(path)] = after
                    if signal is not None:
                        signals.append(signal)
        window = self.window
        if end_pos is not None and (self.source_channel or window is not None):
            watched = {window.collection.id: window.key_columns} if window is not None else {}
            for change in self.hooks.scan_stream(start_pos, end_pos, watched):
                if change.table == self.signal_table and change.op == "c" and change.row is not None:
                    s = self._source_signal(change.row, window)
                    if s is not None and self.source_channel:  # (the table holds only watermarks otherwise)
                        signals.append(s)
                elif window is not None and change.table == window.collection.id:
                    self._supersede(window, change)
        at = end_pos if end_pos is not None else start_pos
        chunk: dict[str, Any] | None = None
        if window is not None and window.opened and self._ready(window, at):
            chunk = window.chunk_offset()
            self.pending = {window.id: window}
            self.window = None
            state = state.with_(last_key=window.to_key, rows=state.rows + window.rows)
            self.notify(state.correlation_id, "IN_PROGRESS", current_collection_in_progress=window.collection.id,
                        data_collections=state.names(), last_processed_key=_key_text(window.to_key),
                        maximum_key=_key_text(state.max_key))
        for s in signals:
            state = self._act(state, s, at)
        if chunk is not None and (not state.active or state.collections[0].id != chunk["table"]):
            chunk = None  # its table's snapshot was stopped in this batch: the chunk's rows are not emitted
            self._end(self.pending.pop(window.id, None) if window is not None else None)
        changed = (state != State.from_offset(start) or files != (start.get(FILE_POSITIONS) or {})
                   or chunk is not None or bool(self.notify.pending) or self.blocking is not None
                   or bool(start.get(BLOCKING)) or bool(start.get(BLOCKING_PENDING)))  # (the offset leaves a
        # blocking snapshot after its last batch, or when its first was abandoned)
        if end_pos is None and not changed:
            return None
        out = {**stream_offset(end_pos if end_pos is not None else without_heartbeat(start_pos)),
               **state.to_offset()}
        if files:
            out[FILE_POSITIONS] = files
        if chunk is not None:
            out[CHUNK] = chunk
        notes = self.notify.take()
        if notes:
            out[NOTIFICATIONS] = notes
        if self.blocking:
            out[BLOCKING_PENDING] = self.blocking
            self.blocking = None
        ended = start.get(BLOCKING) or start.get(BLOCKING_PENDING)
        if ended and ended.get("id") == self.abandoned:  # the batch after the snapshot says it was abandoned
            out[BLOCKING_ABANDONED] = {"id": ended["id"], "tables": ended.get("tables") or [],
                                       **({"table": self.abandoned_table} if self.abandoned_table else {})}
        return out

    def _blocking_batch(self, start: Offset, max_events: int | None) -> dict[str, Any] | None:
        """The `blocking_snapshot` field of the batch after `start`: the first batch of the blocking snapshot
        `start` signalled, or its next batch after the one `start` ends; None when none is left."""
        signalled, running = start.get(BLOCKING_PENDING), start.get(BLOCKING) or {}
        if not signalled and not running:
            return None
        snapshot = signalled or {k: running[k] for k in BLOCKING_SIGNAL if k in running}
        if signalled:
            self.abandoned, self.abandoned_table = None, None
        elif running.get("id") == self.abandoned:  # abandoned while its last batch was planned: streaming resumes
            return None
        try:
            batch = self.hooks.blocking_batch(snapshot, None if signalled else running, max_events)
        except BlockingAbandoned as exc:  # (the caller lets go of the snapshot: `end_blocking`)
            abandon_blocking(snapshot["id"], str(exc))
            self.abandoned, self.abandoned_table = snapshot["id"], exc.table
            return None
        if batch is None:
            log.info("blocking snapshot %s done: streaming resumes", snapshot["id"])
            return None
        return {**snapshot, **batch}

    def _ready(self, window: Window, at: Offset) -> bool:
        """Whether the open window's rows are emitted in this batch; a stale window is dropped (the next batch
        opens another over the same range)."""
        try:
            return self.hooks.window_ready(window, at)
        except WindowStale as exc:
            log.warning("incremental snapshot window %s of %s dropped, its range read again in a new window: %s",
                        window.id, window.collection.id, exc)
            self._end(window)
            return False

    def _source_signal(self, row: tuple[Any, ...], window: Window | None) -> sig.Signal | None:
        if len(row) < 2:
            log.warning("skipping a signal: the signalling table %s has fewer than 2 columns", self.signal_table)
            return None
        id_, type_ = row[0], row[1]
        if type_ in (sig.WINDOW_OPEN, sig.WINDOW_CLOSE):
            if window is not None and type_ == sig.WINDOW_OPEN and id_ == f"{window.id}-open":
                window.opened = True
            return None  # a watermark (of this window, or of one a restart abandoned)
        try:
            return sig.parse_signal(id_, type_, row[2] if len(row) > 2 else None, "source")
        except sig.BadSignal as exc:
            log.warning("skipping a malformed signal %r from %s: %s", id_, self.signal_table, exc)
            return None

    def _supersede(self, window: Window, change: Change) -> None:
        if self.read_only:
            if self.hooks.visible(window, change.xid):
                return
        elif not window.opened:
            return
        if change.op == "t":
            window.truncates.append(change.xid)
        window.evict(change.keys, change.xid)

    # ------------------------------------------------------------------ signals
    def _act(self, state: State, s: sig.Signal, at: Offset) -> State:
        log.info("%s: %s", s.describe(), json.dumps(s.data))
        if s.type == sig.LOG:
            log.warning("%s", s.data["message"].replace("{}", self.hooks.log_position(at), 1))
            return state
        if s.type == sig.EXECUTE_SNAPSHOT:
            return self._execute(state, s)
        if not state.active:
            log.warning("%s: no incremental snapshot is running", s.describe())
            return state
        if s.type == sig.PAUSE_SNAPSHOT:
            log.info("incremental snapshot paused")
            self.notify(state.correlation_id, "PAUSED", data_collections=state.names())
            return state.with_(paused=True)
        if s.type == sig.RESUME_SNAPSHOT:
            log.info("incremental snapshot resumed")
            self.notify(state.correlation_id, "RESUMED", data_collections=state.names())
            return state.with_(paused=False)
        # stop-snapshot: all tables, or those the regexes match
        patterns = s.data.get("data-collections")
        if not patterns:
            self._end(self.window)
            log.info("incremental snapshot stopped")
            self.notify(state.correlation_id, "ABORTED")
            return State()
        regexes = [re.compile(p) for p in patterns]
        keep = tuple(c for c in state.collections if not any(r.fullmatch(c.id) for r in regexes))
        if keep and keep[0] == state.collections[0]:
            return state.with_(collections=keep)
        self._end(self.window)  # the table being read was removed
        if not keep:
            self.notify(state.correlation_id, "ABORTED")
        return State(keep, None, None, state.correlation_id if keep else None, state.paused and bool(keep))

    def _execute(self, state: State, s: sig.Signal) -> State:
        d = s.data
        patterns = d["data-collections"]
        if not patterns:
            log.info("%s lists no data-collections: nothing to snapshot", s.describe())
            return state
        conditions: dict[str, str] = {}
        for c in _as_list(d.get("additional-conditions")):
            conditions[c["data-collection"]] = c["filter"]
        tables = self.hooks.resolve_collections(patterns)
        if not tables:
            log.warning("%s: data-collections %s match no captured table", s.describe(), patterns)
            return state
        legacy = d.get("additional-condition")
        if str(d.get("type", "incremental")).lower() == "blocking":
            log.info("blocking snapshot %s of %s: streaming pauses for it", s.id, ", ".join(tables))
            statements = {t: f for t in tables
                          for name, f in conditions.items() if re.fullmatch(name, t) or name == t}
            self.blocking = {"id": s.id, "tables": tables, "statements": statements}
            return state
        if not self.read_only and not self.signal_table:
            log.warning("skipping %s: incremental snapshots write their watermarks to signal.data.collection, which "
                        "is not set (set it, or read.only: true)", s.describe())
            return state
        new = []
        for t in tables:
            cond = next((f for name, f in conditions.items() if re.fullmatch(name, t) or name == t), legacy)
            new.append(Collection(t, cond or None, d.get("surrogate-key")))
        known = {c.id for c in state.collections}
        added = tuple(c for c in new if c.id not in known)
        log.info("incremental snapshot %s of %s", s.id, ", ".join(c.id for c in added))
        self.notify(s.id, "STARTED", data_collections=",".join(c.id for c in added))
        if state.active:
            return state.with_(collections=state.collections + added)
        return State(added, None, None, s.id, False)

    # ------------------------------------------------------------------ chunks
    def _end(self, window: Window | None) -> None:
        """Drop the open window (or one emitted in this batch) `window`, releasing what holds its view."""
        if window is not None:
            self.hooks.end_window(window)
            if window is self.window:
                self.window = None

    def window_size(self, max_events: int | None) -> tuple[int, int]:
        """The most rows the next window reads and into how many parts: whole chunks of
        `incremental.snapshot.chunk.size` rows (at least one) up to `headwater.incremental.snapshot.batch.rows`
        and `max_events`; parts of at most `headwater.snapshot.chunk.rows` rows, at least two per core and
        at most one per chunk."""
        cap = self.batch_rows if max_events is None else min(self.batch_rows, max_events)
        chunks = max(1, cap // self.chunk_size)
        rows = chunks * self.chunk_size
        parts = min(chunks, max(2 * self.parallelism, -(-rows // self.part_rows)))
        return rows, parts

    def _open_next(self, state: State, delivered: Offset, max_events: int | None = None) -> State:
        """Open the next window, moving past tables that are done (or cannot be read)."""
        was_active = state.active
        rows, parts = self.window_size(max_events)
        while state.active:
            c = state.collections[0]
            try:
                cols = self._key_columns(c)
                if cols is None:
                    raise TableSkipped("it has no primary key (and the signal gave no surrogate-key)",
                                       "NO_PRIMARY_KEY")
                if state.max_key is None:
                    top = self.hooks.max_key(c, cols)
                    if top is None:
                        log.info("incremental snapshot: %s is empty", c.id)
                        state = self._table_done(state, "EMPTY")
                        continue
                    state = state.with_(max_key=top)
                assert state.max_key is not None
                window = self.hooks.open_window(c, cols, state.last_key, state.max_key, rows, parts,
                                                str(uuid.uuid4()), delivered)
            except TableSkipped as exc:
                log.warning("incremental snapshot: skipping %s: %s", c.id, exc)
                state = self._table_done(state, exc.status)
                continue
            if window is None:
                log.info("incremental snapshot: %s done", c.id)
                state = self._table_done(state, "SUCCEEDED")
                continue
            if self.read_only:
                window.opened = True
            self.window = window
            return state
        if was_active:
            self.notify(state.correlation_id or self._last_id, "COMPLETED")
        return state

    def _table_done(self, state: State, status: str) -> State:
        self._last_id = state.correlation_id
        self.notify(state.correlation_id, "TABLE_SCAN_COMPLETED", data_collections=state.names(),
                    scanned_collection=state.collections[0].id, total_rows_scanned=str(state.rows), status=status)
        return state.next_table()

    def _key_columns(self, c: Collection) -> list[str] | None:
        if c.id + "/" + str(c.surrogate_key) not in self.keys:
            self.keys[c.id + "/" + str(c.surrogate_key)] = self.hooks.key_columns(c)
        return self.keys[c.id + "/" + str(c.surrogate_key)]

    # ------------------------------------------------------------------ the batch's units
    def units(self, start_pos: Offset, end: Offset, end_pos: Offset) -> list[WorkUnit]:
        """The units emitting the chunk the batch ending at `end` carries, and the sink channel's
        notifications it carries (none when it carries none)."""
        notes = end.get(NOTIFICATIONS)
        tail = [self.hooks.notification_unit(notes, end_pos)] if notes and self.notify.sink else []
        blocking = end.get(BLOCKING)
        if blocking:
            try:
                return self.hooks.blocking_units(blocking, end_pos) + tail
            except BlockingAbandoned as exc:  # the batch reads nothing; the next one streams
                abandon_blocking(blocking.get("id"), str(exc))
                self.abandoned, self.abandoned_table = blocking.get("id"), exc.table
                self.hooks.end_blocking()
                return tail
        return self._chunk_units(start_pos, end, end_pos) + tail

    def _chunk_units(self, start_pos: Offset, end: Offset, end_pos: Offset) -> list[WorkUnit]:
        chunk = end.get(CHUNK)
        if not chunk:
            return []
        window = self.pending.get(chunk["id"])
        if window is not None:
            return self.hooks.chunk_units(window, end_pos)
        # a batch replayed (after a restart): the window's key ranges again, minus what the batch's stream
        # range changes
        evicted: dict[Key, Any] = {}
        c = Collection(chunk["table"], chunk.get("condition"), chunk.get("surrogate_key"))
        key = self._key_columns(c)
        if start_pos != end_pos and key:
            for change in self.hooks.scan_stream(start_pos, end_pos, {c.id: key}):
                if change.table == chunk["table"]:
                    for k in change.keys:
                        evicted[k] = None
        return self.hooks.reread_units(chunk, evicted, end_pos, start_pos)


def status(offset: Offset | None) -> dict[str, Any]:
    """A running incremental snapshot's progress in `offset`, and a blocking snapshot's (signalled, or the
    chunks of its last batch), for `headwater status` (nothing when none runs)."""
    offset = offset or {}
    out: dict[str, Any] = {}
    blocking = offset.get(BLOCKING) or offset.get(BLOCKING_PENDING)
    if blocking:
        out = {"blocking_snapshot": "running" if offset.get(BLOCKING) else "signalled",
               "blocking_snapshot_signal": blocking.get("id"),
               "blocking_snapshot_tables": ", ".join(blocking.get("tables") or ())}
        if blocking.get("chunk_range"):
            out["blocking_snapshot_chunks"] = "[{}, {})".format(*blocking["chunk_range"])
    state = State.from_offset(offset)
    if not state.active:
        return out
    return {**out, "incremental_snapshot": "paused" if state.paused else "running",
            "incremental_snapshot_signal": state.correlation_id,
            "incremental_snapshot_tables_left": ", ".join(c.id for c in state.collections),
            "incremental_snapshot_last_key": state.last_key, "incremental_snapshot_maximum_key": state.max_key}


def without_heartbeat(position: Offset) -> Offset:
    """A stream position that moves nothing: `position` without the heartbeat its batch carried."""
    return {k: v for k, v in position.items() if k != "heartbeat_ms"}


def _key_text(key: list[Any] | None) -> str:
    """A key as Debezium's notifications write it: the value of a one-column key, else the values
    as a JSON array."""
    if key is None:
        return ""
    return str(key[0]) if len(key) == 1 else json.dumps(key)


def _as_list(v: Any) -> list[Any]:
    if v is None:
        return []
    return v if isinstance(v, list) else [v]
