"""The lock-free snapshot's state and the stream that follows it (the merge itself: `chunkmerge`).

- `Progress`: per table its chunks (key range, low, high; done once it has a high) as a JSON offset
  piece: which chunks remain after a crash, and where streaming starts;
- `StreamFilter`: whether a streamed row change is already in a chunk's records, asked per change
  (a bisect over the table's sorted chunk bounds).

The stream
----------
Streaming starts at the lowest `low` of all chunks (`Progress.stream_start`), once every chunk is
done, and its records follow every chunk's records. A change at p of a key k in chunk c's range is
dropped when p <= high(c): the chunk's records are T(high(c)), which holds it. Otherwise it passes,
and the changes of k after high(c), applied in log order on top of T(high(c))[k], give T(p)[k] after
each. None is missed: the stream starts at or before every low, so at or before every high. A key
change is judged on each side: the decoder asks once for the old key (its delete and tombstone) and
once for the new key (its create); each side lands in its own chunk, or outside every chunk. A change
passes, too, when its table has no chunks here, when its key is outside every chunk (the ranges are
`lo <= key < hi`, open at the table's ends as `snapshot.key_ranges` makes them, so this happens only
for ranges that do not cover the table), when its chunk is not done (nothing is folded into it), and
when p is beyond every high (`horizon`; from there on the filter passes everything).

A crash, and a chunk read again
-------------------------------
A chunk without a high is read again after a crash, in a new window of its own; one with a high is
not. A chunk read again is merged to a later high' and gives T(high'): the same state or a later one.
Its records and the stream from its recorded high lose nothing, as above. The engine keeps one rule:
**a chunk's high is recorded no later than its records can reach the sink**, and when a chunk whose
records may have reached the sink is read again (a replayed batch whose first run the sink may have
committed), `finish` keeps the earliest high. The stream then replays every change after the
earliest high any delivered copy was merged to; replaying is idempotent (a change sets or removes its
key whatever the key held), so copies at high <= high' followed by the changes after high end in the
table's state: the changes of (high, high'] may reach the sink twice, none is lost. The other way
round would lose changes: with high' recorded and only the copy at high delivered, the changes of
(high, high'] are dropped (a row deleted there would stay forever).

A chunk rolled back to its low (`roll_back_chunk`) is recorded as (low, low): every copy of it, read
at any time, is T(low), so a chunk read again delivers the same rows, and the stream from low drops
exactly the changes they hold.

Key values go into the JSON offset as themselves when JSON holds them (int, float, str, bool, null)
and tagged otherwise (`{"bytes": base64}`, `{"decimal": "1.50"}`, `{"datetime": iso}`, `{"date": iso}`,
`{"time": iso}`, `{"timedelta_us": n}`). Positions go in as the caller gives them (JSON dicts, as
offsets are) and are ordered through the caller's `position` function.
"""

from __future__ import annotations

import base64
import bisect
import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from headwater.connectors.common.chunkmerge import Bounds, Key, KeyOrder, PositionOrder, null_first, same
from headwater.connectors.common.snapshot import KeyRange


@dataclass
class ChunkState:
    """One chunk of a table: its key range, and the window it was merged to (None until done)."""

    span: KeyRange
    low: Any = None
    high: Any = None

    @property
    def done(self) -> bool:
        return self.high is not None


class Progress:
    """The chunks of every table of a lock-free snapshot, by `schema.table`, in key order; chunk i of a
    table is `(table, i)` throughout (its range is fixed when the table is planned)."""

    def __init__(self, spans: Mapping[str, Sequence[KeyRange]], position: PositionOrder = same) -> None:
        self.tables = {table: [ChunkState(span) for span in ranges] for table, ranges in spans.items()}
        self.position = position

    def finish(self, table: str, index: int, low: Any, high: Any) -> None:
        """Chunk `index` of `table` was merged to `high` from a SELECT after `low`. A chunk done before
        keeps its earlier window (see the module docstring: the earliest high is the safe one)."""
        if self.position(high) < self.position(low):
            raise ValueError(f"chunk {index} of {table}: the high position {high!r} is before the low {low!r}")
        chunk = self.tables[table][index]
        if chunk.done and self.position(chunk.high) <= self.position(high):
            return
        chunk.low, chunk.high = low, high

    def remaining(self) -> list[tuple[str, int, KeyRange]]:
        """The chunks still to read: (table, index, range)."""
        return [(table, i, c.span) for table, chunks in self.tables.items() for i, c in enumerate(chunks) if not c.done]

    @property
    def done(self) -> bool:
        return all(c.done for chunks in self.tables.values() for c in chunks)

    def stream_start(self) -> Any:
        """Where streaming starts: the lowest low of all chunks (None without chunks). Refused before
        every chunk is done: a chunk finished later would bring an older state after newer changes."""
        if not self.done:
            raise ValueError(f"the snapshot has {len(self.remaining())} chunks left to read; streaming starts "
                             "after the last")
        lows = [c.low for chunks in self.tables.values() for c in chunks]
        return min(lows, key=self.position) if lows else None

    def to_json(self) -> dict[str, Any]:
        return {"tables": {table: [{"lo": encode_key(c.span.lo), "hi": encode_key(c.span.hi), "low": c.low,
                                    "high": c.high} for c in chunks]
                           for table, chunks in self.tables.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], position: PositionOrder = same) -> Progress:
        progress = cls({}, position)
        for table, chunks in data["tables"].items():
            progress.tables[table] = [ChunkState(KeyRange(decode_key(c["lo"]), decode_key(c["hi"])), c["low"], c["high"])
                                      for c in chunks]
        return progress


class StreamFilter:
    """Whether a streamed change is new to the snapshot's records, from a `Progress` (a snapshot of it:
    build a new filter when the progress changes) and each table's key order (`null_first` for a table
    `orders` does not name)."""

    def __init__(self, progress: Progress, orders: Mapping[str, KeyOrder] | None = None) -> None:
        self.position = progress.position
        highs = [progress.position(c.high) for chunks in progress.tables.values() for c in chunks if c.done]
        self.horizon = max(highs) if highs else None  # every change after it passes
        self._tables = {table: _TableChunks(chunks, (orders or {}).get(table, null_first), progress.position)
                        for table, chunks in progress.tables.items()}

    def keep(self, table: str, key: Key, position: Any) -> bool:
        """False when the change of `key` (a tuple; () for a keyless table) of `table` at `position` is
        in its chunk's records already. A key change is asked about once per key."""
        if self.horizon is None:
            return True
        at = self.position(position)
        if at > self.horizon:
            return True
        chunks = self._tables.get(table)
        return chunks is None or chunks.keep(key, at)


class _TableChunks:
    """One table's chunk bounds sorted by their low key, and each chunk's ordered high (None: not done)."""

    def __init__(self, chunks: Sequence[ChunkState], order: KeyOrder, position: PositionOrder) -> None:
        self.order = order
        bounded = sorted(((Bounds(c.span, order), c) for c in chunks if c.span.lo is not None), key=lambda b: b[0].lo)
        open_lo = [(Bounds(c.span, order), c) for c in chunks if c.span.lo is None]
        if len(open_lo) > 1:
            raise ValueError("two chunks of a table have no lower bound: the ranges overlap")
        ordered = open_lo + bounded
        for (a, _), (b, _) in zip(ordered, ordered[1:], strict=False):
            if a.hi is None or b.lo < a.hi:
                raise ValueError("the chunks of a table overlap: their ranges must be lo <= key < hi, disjoint")
        self.starts = [b.lo for b, _ in bounded]
        self.bounded = [(b.hi, None if c.high is None else position(c.high)) for b, c in bounded]
        self.first = [(b.hi, None if c.high is None else position(c.high)) for b, c in open_lo]

    def keep(self, key: Key, at: Any) -> bool:
        k = self.order(key)
        i = bisect.bisect_right(self.starts, k) - 1
        entry = self.bounded[i] if i >= 0 else (self.first[0] if self.first else None)
        if entry is None:
            return True
        hi, high = entry
        if hi is not None and not k < hi:
            return True
        return high is None or at > high


# ------------------------------------------------------------------------ key values in JSON

_TAGGED: dict[type, tuple[str, Any]] = {
    bytes: ("bytes", lambda v: base64.b64encode(v).decode("ascii")),
    Decimal: ("decimal", str),
    dt.datetime: ("datetime", dt.datetime.isoformat),
    dt.date: ("date", dt.date.isoformat),
    dt.time: ("time", dt.time.isoformat),
    dt.timedelta: ("timedelta_us", lambda v: (v.days * 86400 + v.seconds) * 1_000_000 + v.microseconds),
}
_UNTAG: dict[str, Any] = {
    "bytes": base64.b64decode,
    "decimal": Decimal,
    "datetime": dt.datetime.fromisoformat,
    "date": dt.date.fromisoformat,
    "time": dt.time.fromisoformat,
    "timedelta_us": lambda n: dt.timedelta(microseconds=n),
}


def encode_key(key: Key | None) -> list[Any] | None:
    """A chunk bound as JSON: JSON's own values as they are, others tagged."""
    if key is None:
        return None
    out: list[Any] = []
    for v in key:
        if v is None or isinstance(v, bool | int | float | str):
            out.append(v)
        elif type(v) in _TAGGED:
            tag, encode = _TAGGED[type(v)]
            out.append({tag: encode(v)})
        else:
            raise TypeError(f"a key value of type {type(v).__name__} has no JSON form here: {v!r}")
    return out


def decode_key(data: list[Any] | None) -> Key | None:
    """The chunk bound `encode_key` wrote."""
    if data is None:
        return None
    return tuple(_UNTAG[next(iter(v))](next(iter(v.values()))) if isinstance(v, dict) else v for v in data)
