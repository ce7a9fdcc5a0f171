"""The lock-free parallel snapshot's merge, for any database with an ordered change log.

A table is cut into key chunks (`snapshot.key_ranges`). Each chunk is read by a plain SELECT, without
a lock, between two log positions: `low`, read before the SELECT starts, and `high`, read after it
ends. `merge_chunk` folds the log's row changes of (low, high] into the SELECT's rows and gives the
chunk's rows as they stood at `high`; `roll_back_chunk` undoes them instead and gives the rows as they
stood at `low` (the position the planner chose before any read: the same records whenever, and however
often, the chunk is read; its argument is in its docstring). Either is the chunk's snapshot records
(`r`). `chunkprogress` keeps each
chunk's range, low and high as an offset piece and gives the stream filter that drops, for each
chunk, the changes already folded into it. The connector supplies the reads (a chunk's rows, the
log between two positions) and how positions and keys are ordered; everything here is
database-independent.

Why the merge is right although the SELECT's own position is unknown
--------------------------------------------------------------------
Write T(p)[k] for the row with key k once every change at a position <= p is applied (or its absence).
A change carries full row images: it removes the row under its before-image's key (u, d), then writes
its after-image under its own key (c, u). A key change (u whose keys differ) is thus a delete of the
old key and an insert of the new one, each applied only when its key is inside the chunk's range (the
other side belongs to another chunk, or to none). What a change leaves under a key depends only on
the change, never on what the key held before: replaying a change whose effect the SELECT already saw
changes nothing (it is idempotent), and applying the changes of (low, high] in log order to any state
leaves under each key they touch the image of the last of them (or its absence). For a key k of the
chunk's range:

- a change of (low, high] touches k: the merge ends with the last one's effect, T(high)[k], whatever
  the SELECT saw of k;
- none does: k did not change from low to high; wherever in [low, high] the SELECT saw it, it saw
  T(low)[k] = T(high)[k], and the merge keeps that.

So the merged chunk is T(high) on the range. The argument is per key: the SELECT need not be one
consistent view (each row may be seen at its own point of [low, high]). What it does need, and the
caller guarantees:

1. `low` is early enough: every change at a position <= low is visible to the SELECT. On MySQL and
   MariaDB the binlog position (SHOW MASTER STATUS) may already hold a transaction whose InnoDB
   commit is still under way (the binlog is written before the engine commits); a SELECT that
   starts then misses it. An exact `low` is MariaDB's `binlog_snapshot_file`/`binlog_snapshot_position`
   status after START TRANSACTION WITH CONSISTENT SNAPSHOT: the position of that very read view (a
   SELECT inside that transaction may use low = high, an empty window), and everything up to it is
   committed, so a plain SELECT after that transaction qualifies as well (high read after it; the
   MariaDB test reads chunks so). Elsewhere: the position of a watermark row the reader commits just
   before its SELECT (DBLog's way: with `binlog_order_commits`, every transaction before it in the
   binlog has committed in the engine by the time its own commit returns).
2. `high` is late enough: every change the SELECT saw is at a position <= high (read after the SELECT
   ends: a committed transaction is in the binlog already).
3. Changes are full images (`binlog_row_image=FULL`) and keys are unique and not NULL (the primary key,
   or `message.key.columns` naming a unique key): two rows of the SELECT with one key are refused.
4. A change at position p is part of the state at position q exactly when p <= q (for a binlog: the
   end of the transaction's commit event, which every row change of the transaction shares), and the
   changes come in log order (positions never decrease).
5. Keys order and compare as the database orders them (below).

A table without a usable key is one chunk and cannot be merged (a row image does not say which of
two equal rows a change hit, and a replayed insert would double a row): its window must hold no
change of the table, else `merge_chunk` raises `WindowNotQuiet` and the caller reads it again, at an
exact position (low = high, point 1) or under Debezium's lock.

The stream, a crash and a chunk read again: `chunkprogress`.

Keys and the database's collation
---------------------------------
The database decides which rows a chunk's SELECT returns (`lo <= key < hi` in its collation); the
stream filter and the merge decide with Python. Both must agree, so keys are compared through an
`order` function from the key tuple to a value that sorts, and is equal, exactly as the database's
keys do. The default, `null_first`, is Python's order with NULL first (as `key_ranges` sorts): right
for numbers, temporal values and binary strings. It is wrong for text under a case- or
accent-insensitive collation (`utf8mb4_general_ci`: 'a' = 'A', 'B' < 'a' in Python but not there) and
for PAD SPACE collations ('a' = 'a '). For such keys pass an `order` that maps a value to its
collation's sort key (ICU's, or a `casefold` and `rstrip` where that is the collation's rule), or
read the table as a single chunk, where no bound is compared. The merge refuses a SELECT row whose
key `order` places outside the chunk's range, which is how a mismatch shows itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from headwater.connectors.common.snapshot import KeyRange

R = TypeVar("R")

Key = tuple[Any, ...]
KeyOrder = Callable[[Key], Any]  # a key -> a hashable value that sorts and compares as the database's keys
PositionOrder = Callable[[Any], Any]  # a log position -> a value that sorts as the log's positions


def null_first(key: Key) -> tuple[tuple[bool, Any], ...]:
    """The default key order: each column by Python's order, NULL before every value."""
    return tuple((v is not None, v) for v in key)


def same(position: Any) -> Any:
    """The default position order: positions that sort by themselves (an LSN, an SCN, a counter)."""
    return position


@dataclass(frozen=True, slots=True)
class Change(Generic[R]):
    """One row change of the log: its position, the row before (None for an insert) and after (None
    for a delete), both full rows."""

    position: Any
    before: R | None
    after: R | None


class ChunkMergeError(ValueError):
    """A chunk cannot be merged as given (see the message for the cause and what to do)."""


class WindowNotQuiet(ChunkMergeError):
    """A keyless chunk's window holds changes of its table: read it again."""


class Bounds:
    """A key range's bounds under a key order; `holds` tells whether an ordered key is inside."""

    __slots__ = ("hi", "lo")

    def __init__(self, span: KeyRange, order: KeyOrder) -> None:
        self.lo: Any = None if span.lo is None else order(span.lo)
        self.hi: Any = None if span.hi is None else order(span.hi)

    def holds(self, key: Any) -> bool:
        return (self.lo is None or key >= self.lo) and (self.hi is None or key < self.hi)


def merge_chunk(rows: Iterable[R], changes: Iterable[Change[R]], span: KeyRange, *, low: Any, high: Any,
                row_key: Callable[[R], Key] | None, order: KeyOrder = null_first,
                position: PositionOrder = same) -> list[R]:
    """The rows of `span` as they stood at `high`, from `rows` (the chunk's SELECT, read between `low`
    and `high`) and `changes` (the log's changes of the chunk's table in (low, high], in log order, any
    key: those outside the span are skipped). `row_key` gives a row's key tuple (None: the table has no
    usable key; the window must then hold no change). The result is in key order, or in the SELECT's
    order when no change of the window touches the span (then nothing is compared or copied)."""
    low_at, high_at = position(low), position(high)
    if high_at < low_at:
        raise ChunkMergeError(f"the chunk's high position {high!r} is before its low position {low!r}")
    window = list(changes)
    last = low_at
    for change in window:
        at = position(change.position)
        if not low_at < at <= high_at:
            raise ChunkMergeError(f"a change at {change.position!r} is outside the chunk's window "
                                  f"({low!r}, {high!r}]")
        if at < last:
            raise ChunkMergeError(f"the changes are not in log order: {change.position!r} after a later one")
        last = at
    if row_key is None:
        if window:
            raise WindowNotQuiet(f"{len(window)} changes of a table without a usable key between {low!r} and "
                                 f"{high!r}: read it again, at an exact position or under a lock")
        return list(rows)
    bounds = Bounds(span, order)
    touched: dict[Any, R | None] = {}  # key -> the last change's row there (None: removed)
    for change in window:
        if change.before is not None and bounds.holds(k := order(row_key(change.before))):
            touched[k] = None
        if change.after is not None and bounds.holds(k := order(row_key(change.after))):
            touched[k] = change.after
    if not touched:
        return list(rows)
    merged = _by_key(rows, span, bounds, row_key, order)
    for k, row_at_high in touched.items():
        if row_at_high is None:
            merged.pop(k, None)
        else:
            merged[k] = row_at_high
    return [merged[k] for k in sorted(merged)]


def roll_back_chunk(rows: Iterable[R], changes: Iterable[Change[R]], span: KeyRange, *, low: Any, high: Any,
                    row_key: Callable[[R], Key], order: KeyOrder = null_first,
                    position: PositionOrder = same) -> list[R] | None:
    """The rows of `span` as they stood at `low`, from `rows` (the chunk's SELECT, read between `low` and
    `high`) and `changes` (the log's changes of the chunk's table in (low, high], in log order, full
    images, any key: those outside the span are skipped). None when no change of the window touches the
    span (the SELECT's rows are the chunk at `low` as they are); else the rows in key order.

    Why it is right (`low` exact and `high` late enough, points 1, 2 and 4 above): for a key k of the
    range, let c be the first change of (low, high] that touches k (as its before image's key or its
    after image's). No change between `low` and c touches k, so just before c, k held T(low)[k]: c's
    before image when c removes or updates a row under k, and nothing when c writes k (a write needs the
    key free: an insert, or a key change into k). A key no change touches held the same row from `low`
    to `high`, and the SELECT, whichever moment of [low, high] it saw k in (each row at its own), saw
    T(low)[k]. The result is T(low) on the range, whatever the SELECT saw of a touched key."""
    low_at, high_at = position(low), position(high)
    if high_at < low_at:
        raise ChunkMergeError(f"the chunk's high position {high!r} is before its low position {low!r}")
    bounds = Bounds(span, order)
    first: dict[Any, R | None] = {}  # a touched key -> its row at low (None: absent)
    last = low_at
    for change in changes:
        at = position(change.position)
        if not low_at < at <= high_at:
            raise ChunkMergeError(f"a change at {change.position!r} is outside the chunk's window "
                                  f"({low!r}, {high!r}]")
        if at < last:
            raise ChunkMergeError(f"the changes are not in log order: {change.position!r} after a later one")
        last = at
        if change.before is not None and bounds.holds(k := order(row_key(change.before))) and k not in first:
            first[k] = change.before
        if change.after is not None and bounds.holds(k := order(row_key(change.after))) and k not in first:
            first[k] = None
    if not first:
        return None
    out = _by_key(rows, span, bounds, row_key, order)
    for k, row_at_low in first.items():
        if row_at_low is None:
            out.pop(k, None)
        else:
            out[k] = row_at_low
    return [out[k] for k in sorted(out)]


def _by_key(rows: Iterable[R], span: KeyRange, bounds: Bounds, row_key: Callable[[R], Key],
            order: KeyOrder) -> dict[Any, R]:
    """The SELECT's rows by their ordered key, refusing a key outside the span or one seen twice."""
    out: dict[Any, R] = {}
    for row in rows:
        k = order(row_key(row))
        if not bounds.holds(k):
            raise ChunkMergeError(f"the SELECT of the range {span.lo!r}..{span.hi!r} returned the key "
                                  f"{row_key(row)!r}, which the key order places outside it: the order "
                                  "differs from the database's collation (pass one that matches, or read "
                                  "the table as one chunk)")
        if k in out:
            raise ChunkMergeError(f"two rows of the chunk have the key {row_key(row)!r}: the key columns are "
                                  "not unique (name a unique key in message.key.columns, or read the table "
                                  "as one keyless chunk)")
        out[k] = row
    return out
