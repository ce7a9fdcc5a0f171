"""Rows of text given as parts, joined row by row with one copy of their bytes.

A snapshot block's Debezium JSON line is made of a few dozen pieces a row: the literal JSON between
the values, each column's JSON, the source block. Joining the key and the value element-wise
(`binary_join_element_wise`) and then the sink's line around them copies every byte twice more than
needed, and each join pays its per-row, per-part cost. Here the parts stay parts until the last
join: `join_pieces` works out where every piece of every row comes from with numpy (the literals
and the per-row choices of a literal from one small pool, each column's bytes from its own buffer,
the range its rows use, copied once into one source buffer) and then copies all pieces, in row
order, with one Arrow `take` over a binary array whose values are the pieces (its offsets in pairs:
a piece's start and end; the values between the pairs are never taken). The taken values are the
rows' pieces back to back: the rows are that buffer with every `parts`-th offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pyarrow as pa

from headwater.events.arrays import int64_array, string_layout

_INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class Choice:
    """A part that is, in row i, the literal `options[which[i]]`."""

    options: tuple[bytes, ...]
    which: np.ndarray  # int64, one per row

    def slice(self, start: int, stop: int) -> Choice:
        return Choice(self.options, self.which[start:stop])


#: a part of every row: a literal, a per-row literal, or a column (binary or string, no nulls)
Part: TypeAlias = bytes | Choice | pa.Array


def slice_parts(parts: Sequence[Part], start: int, stop: int) -> list[Part]:
    """`parts` for rows [start, stop) (their columns sliced, zero-copy)."""
    return [p if isinstance(p, bytes) else p.slice(start, stop - start) if isinstance(p, pa.Array)
            else p.slice(start, stop) for p in parts]


def join_pieces(parts: Sequence[Part], rows: int) -> pa.Array:
    """The `rows` rows' concatenations of `parts` (binary), with one copy of the pieces' bytes."""
    merged: list[Part] = []
    for p in parts:
        if isinstance(p, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += p
        elif not isinstance(p, bytes) or p:
            merged.append(p)
    if any(isinstance(p, pa.Array) and (len(p) != rows or p.null_count) for p in merged) \
            or any(isinstance(p, Choice) and len(p.which) != rows for p in merged):
        raise ValueError("join_pieces needs columns of `rows` values without nulls")
    if not rows or not merged:
        return pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(np.zeros(rows + 1, np.int32)),
                                                         pa.py_buffer(b"")])
    # the source: each column's used bytes (a column's values follow each other), then the pool of literals
    sources: list[np.ndarray] = []
    size = 0
    pieces: list[tuple[np.ndarray | int, np.ndarray | int]] = []  # each piece's (first byte, length)
    for p in merged:
        if isinstance(p, pa.Array):
            starts, lengths, data = string_layout(p)
            lo, hi = int(starts[0]), int(starts[-1] + lengths[-1])
            sources.append(data[lo:hi])
            pieces.append((starts.astype(np.int64) + (size - lo), lengths))
            size += hi - lo
    pool: list[bytes] = []
    for j, p in enumerate(merged):
        if isinstance(p, bytes):
            pieces.insert(j, (size, len(p)))
            pool.append(p)
            size += len(p)
        elif isinstance(p, Choice):
            lens = np.array([len(o) for o in p.options], dtype=np.int64)
            firsts = size + np.cumsum(lens) - lens
            pieces.insert(j, (firsts[p.which], lens[p.which]))
            pool.extend(p.options)
            size += int(lens.sum())
    sources.append(np.frombuffer(b"".join(pool), dtype=np.uint8))
    small = size <= _INT32_MAX
    k = len(merged)
    m = rows * k
    bounds = np.empty(2 * m + 1, dtype=np.int32 if small else np.int64)
    pairs = bounds[:2 * m].reshape(rows, k, 2)
    for j, (first, length) in enumerate(pieces):
        pairs[:, j, 0] = first
        pairs[:, j, 1] = np.add(first, length)
    bounds[2 * m] = size  # (the values between the pairs may be of negative length: never taken, and an
    # array's cheap validation only looks at its first and last offsets)
    values = pa.Array.from_buffers(pa.binary() if small else pa.large_binary(), 2 * m,
                                   [None, pa.py_buffer(bounds), pa.py_buffer(np.concatenate(sources))])
    taken = values.take(int64_array(np.arange(0, 2 * m, 2, dtype=np.int64)))
    offsets = np.frombuffer(taken.buffers()[1], dtype=np.int32 if small else np.int64, count=m + 1)[::k]
    if offsets[-1] > _INT32_MAX:
        return pa.Array.from_buffers(pa.large_binary(), rows, [None, pa.py_buffer(np.ascontiguousarray(offsets)),
                                                               taken.buffers()[2]]).cast(pa.binary())
    return pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                     taken.buffers()[2]])


def check_utf8(joined: pa.Array) -> pa.Array:
    """`joined` (binary) as a string array over the same buffers, each value checked to be UTF-8 (ArrowInvalid,
    a ValueError, if one is not: as a cast to string checks)."""
    if joined.type != pa.binary():
        raise ValueError("check_utf8 needs a binary array")
    out = pa.Array.from_buffers(pa.string(), len(joined), joined.buffers(), null_count=joined.null_count,
                                offset=joined.offset)
    out.validate(full=True)
    return out
