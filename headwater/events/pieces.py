"""Rows of text given as parts, joined row by row with one copy of their bytes.

A snapshot block's Debezium JSON line is made of a few dozen pieces a row: the literal JSON between
the values, each column's JSON, the source block. Joining the key and the value element-wise
(`binary_join_element_wise`) and then the sink's line around them copies every byte twice more than
needed, and each join pays its per-row, per-part cost. Here the parts stay parts until the last
join: `join_pieces` lays every column's values and the literals (each literal, and each option of a
per-row choice, one value) out in one array (a bulk copy of the bytes they use), works out with numpy
which of its values is each piece of each row, and copies them all, in row order, with one Arrow
`take` (its output reserved at once: see there). The taken values are the rows' pieces back to back:
the rows are that buffer with every `len(parts)`-th offset.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pyarrow as pa

from headwater.events.arrays import int64_array

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
    merged: list[Part] = []  # (fewer pieces: literals merged with the literals and choices next to them)
    for p in parts:
        last = merged[-1] if merged else None
        if isinstance(p, bytes) and isinstance(last, bytes):
            merged[-1] = last + p
        elif isinstance(p, bytes) and isinstance(last, Choice):
            merged[-1] = Choice(tuple(o + p for o in last.options), last.which)
        elif isinstance(p, Choice) and isinstance(last, bytes):
            merged[-1] = Choice(tuple(last + o for o in p.options), p.which)
        elif not isinstance(p, bytes) or p:
            merged.append(p)
    if any(isinstance(p, pa.Array) and (len(p) != rows or p.null_count) for p in merged) \
            or any(isinstance(p, Choice) and len(p.which) != rows for p in merged):
        raise ValueError("join_pieces needs columns of `rows` values without nulls")
    if not rows or not merged:
        return pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(np.zeros(rows + 1, np.int32)),
                                                         pa.py_buffer(b"")])
    # the source: every column's values one after the other, then the literals (one value each), then
    # one value never taken, so long that Arrow's `take` reserves its output's size at once (it reserves
    # the source's mean value length times the values taken; else it grows the output, each time a copy):
    # an array valid as it is; piece j of row i is its value index[i, j]
    k = len(merged)
    layouts = [_layout(p) for p in merged if isinstance(p, pa.Array)]
    literals: list[bytes] = []
    column = np.zeros(k, dtype=bool)  # (row i's value of a column is the column's i-th)
    first = np.zeros(k, dtype=np.int64)  # row 0's value
    size = 0  # the output's bytes
    column[:] = [isinstance(p, pa.Array) for p in merged]
    first[column] = rows * np.arange(len(layouts))
    for j, p in enumerate(merged):
        if isinstance(p, bytes):
            first[j] = rows * len(layouts) + len(literals)
            literals.append(p)
            size += len(p) * rows
        elif isinstance(p, Choice):
            first[j] = rows * len(layouts) + len(literals)
            literals.extend(p.options)
            size += int(np.array([len(o) for o in p.options], dtype=np.int64)[p.which].sum())
    used = [(int(bounds[0]), int(bounds[-1])) for bounds, _ in layouts]
    data_size = sum(hi - lo for lo, hi in used) + sum(len(lit) for lit in literals)
    size += sum(hi - lo for lo, hi in used)
    values = len(layouts) * rows + len(literals) + 1
    padding = max(0, -(-size * values // (rows * k)) - data_size) + 64
    small = data_size + padding <= _INT32_MAX
    offsets = np.empty(values + 1, dtype=np.int32 if small else np.int64)
    data = np.empty(data_size + padding, dtype=np.uint8)  # (the padding's pages never touched)
    at = 0
    for c, ((bounds, raw), (lo, hi)) in enumerate(zip(layouts, used, strict=True)):
        data[at:at + hi - lo] = raw[lo:hi]
        np.subtract(bounds[:-1], lo - at, out=offsets[c * rows:(c + 1) * rows])
        at += hi - lo
    base = len(layouts) * rows
    for i, lit in enumerate(literals):
        offsets[base + i] = at
        data[at:at + len(lit)] = np.frombuffer(lit, dtype=np.uint8)
        at += len(lit)
    offsets[values - 1] = at
    offsets[values] = data_size + padding
    source = pa.Array.from_buffers(pa.binary() if small else pa.large_binary(), values,
                                   [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    index = np.tile(first, rows).reshape(rows, k)  # (~10x cheaper than a broadcast over rows of k values)
    index[:, column] += np.arange(rows, dtype=np.int64)[:, None]
    for j, p in enumerate(merged):
        if isinstance(p, Choice):
            index[:, j] += p.which
    taken = source.take(int64_array(index.reshape(-1)))
    m = rows * k
    offsets = np.frombuffer(taken.buffers()[1], dtype=np.int32 if small else np.int64, count=m + 1)[::k]
    if offsets[-1] > _INT32_MAX:
        return pa.Array.from_buffers(pa.large_binary(), rows, [None, pa.py_buffer(np.ascontiguousarray(offsets)),
                                                               taken.buffers()[2]]).cast(pa.binary())
    return pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(offsets.astype(np.int32)),
                                                     taken.buffers()[2]])


def _layout(a: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """A binary or string array's offsets (one more than its values) and data, as numpy views."""
    width = 8 if a.type in (pa.large_binary(), pa.large_string()) else 4
    bufs = a.buffers()
    bounds = np.frombuffer(bufs[1], dtype=np.int32 if width == 4 else np.int64, count=len(a) + 1, offset=a.offset * width)
    return bounds, np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, dtype=np.uint8)


def check_utf8(joined: pa.Array) -> pa.Array:
    """`joined` (binary) as a string array over the same buffers, each value checked to be UTF-8 (ArrowInvalid,
    a ValueError, if one is not: as a cast to string checks)."""
    if joined.type != pa.binary():
        raise ValueError("check_utf8 needs a binary array")
    out = pa.Array.from_buffers(pa.string(), len(joined), joined.buffers(), null_count=joined.null_count,
                                offset=joined.offset)
    out.validate(full=True)
    return out
