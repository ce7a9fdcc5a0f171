"""Arrow arrays and scalars built from buffers, without `pa.array` and `pa.scalar`.

pyarrow's `pa.array` and `pa.scalar` (and so any compute call given a Python value: a literal
separator, a fill value) ask pandas whether the value is one of its objects, importing it the
first time: ~0.35 s of CPU and ~50 MB resident in a process where pandas has no other use. The
helpers here make the same arrays and scalars from their buffers with numpy; `lit` turns the Python
values given to compute functions into scalars. So the Spark workers that read events (and the
engine) never import pandas; a writer worker still does, in pyspark's own code (it wraps each
task's commit message with `pa.array`). A test checks that building events and their jsonl lines
leaves pandas unimported.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

_INT32_MAX = 2**31 - 1


def int64_array(v: np.ndarray) -> pa.Array:
    """An int64 array over a numpy array's buffer."""
    v = np.ascontiguousarray(v, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(v), [None, pa.py_buffer(v)])


def int32_array(v: np.ndarray) -> pa.Array:
    """An int32 array of a numpy array's values (list offsets)."""
    v = np.ascontiguousarray(v, dtype=np.int32)
    return pa.Array.from_buffers(pa.int32(), len(v), [None, pa.py_buffer(v)])


def int64_values(a: pa.Array) -> np.ndarray:
    """An int64 array without nulls as numpy, a view of its buffer (`to_numpy` imports pandas)."""
    if a.type != pa.int64() or a.null_count:
        raise ValueError("int64_values needs an int64 array without nulls")
    return np.frombuffer(a.buffers()[1], dtype=np.int64, count=len(a), offset=a.offset * 8)


def list_offsets(a: pa.Array) -> np.ndarray:
    """A list array's offsets (one more than its length, into its `values`) as numpy, a view of its buffer."""
    return np.frombuffer(a.buffers()[1], dtype=np.int32, count=len(a) + 1, offset=a.offset * 4)


def bool_array(mask: np.ndarray) -> pa.Array:
    """A boolean array from a numpy one."""
    mask = np.asarray(mask, dtype=bool)
    return pa.Array.from_buffers(pa.bool_(), len(mask), [None, pa.py_buffer(np.packbits(mask, bitorder="little"))])


def bool_values(a: pa.Array) -> np.ndarray:
    """A boolean array without nulls as numpy."""
    if a.type != pa.bool_() or a.null_count:
        raise ValueError("bool_values needs a boolean array without nulls")
    packed = np.frombuffer(a.buffers()[1], dtype=np.uint8)
    return np.unpackbits(packed, bitorder="little")[a.offset:a.offset + len(a)].astype(bool)


def _validity(valid: np.ndarray) -> pa.Buffer | None:
    return None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))


def binary_array(values: Sequence[bytes | None], type: pa.DataType = pa.binary()) -> pa.Array:
    """A binary (or, with `type=pa.string()`, string: the bytes must be UTF-8) array; None is null."""
    n = len(values)
    valid = np.fromiter((v is not None for v in values), dtype=bool, count=n)
    lengths = np.fromiter((len(v) if v is not None else 0 for v in values), dtype=np.int64, count=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    data = b"".join(v for v in values if v is not None)
    if len(data) > _INT32_MAX:
        big = pa.large_binary() if type == pa.binary() else pa.large_string()
        return pa.Array.from_buffers(big, n, [_validity(valid), pa.py_buffer(offsets), pa.py_buffer(data)]).cast(type)
    return pa.Array.from_buffers(type, n, [_validity(valid), pa.py_buffer(offsets.astype(np.int32)),
                                           pa.py_buffer(data)])


def string_array(values: Sequence[str | None]) -> pa.Array:
    """A string array; None is null."""
    return binary_array([v.encode() if v is not None else None for v in values], pa.string())


def utf8_view(a: pa.Array) -> pa.Array:
    """A binary array known to hold valid UTF-8 (joined from string values and ASCII) as a string array
    over the same buffers, without `cast`'s check of every byte."""
    if a.type != pa.binary():
        raise ValueError("utf8_view needs a binary array")
    return pa.Array.from_buffers(pa.string(), len(a), a.buffers(), null_count=a.null_count, offset=a.offset)


def string_layout(a: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A string or binary array's values as numpy views: (start of each value in `data`, its length in
    bytes, `data`, the bytes). A null's length is 0."""
    n = len(a)
    bufs = a.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32, count=n + 1, offset=a.offset * 4)
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, dtype=np.uint8)
    return offsets[:-1], np.diff(offsets), data


def valid_mask(a: pa.Array) -> np.ndarray:
    """Which values are not null, as a numpy bool array."""
    n = len(a)
    bits = a.buffers()[0]
    if not a.null_count:
        return np.ones(n, dtype=bool)
    if bits is None:  # a null-typed array: no validity buffer, every value null
        return np.zeros(n, dtype=bool)
    packed = np.frombuffer(bits, dtype=np.uint8)
    return np.unpackbits(packed, bitorder="little")[a.offset:a.offset + n].astype(bool)


def ragged_binary(rows: np.ndarray, widths: np.ndarray) -> pa.Array:
    """A binary array whose i-th value is the first `widths[i]` bytes of row i of a uint8 matrix: the
    matrix itself when every row is whole, else its rows' first bytes taken by `byte_spans` (~5x cheaper
    than numpy's boolean mask over the matrix)."""
    n, width = rows.shape
    data = np.ascontiguousarray(rows)
    if not (widths == width).all():
        return byte_spans(data.reshape(-1), np.arange(n, dtype=np.int64) * width, np.asarray(widths, dtype=np.int64))
    offsets = np.zeros(n + 1, dtype=np.int32)
    offsets[1:] = np.cumsum(widths)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def byte_spans(data: bytes | bytearray | np.ndarray, first: np.ndarray, length: np.ndarray, null: np.ndarray | None = None
               ) -> pa.Array:
    """A binary array of the byte ranges [first, first + length) of `data`, which follow each other (`null`:
    which are null): Arrow's `take` of every other value of a binary array over all of `data` whose values
    are the ranges and the gaps between them (one copy of the ranges' bytes, no Python object per value)."""
    n = len(first)
    small = len(data) <= _INT32_MAX  # (int32 offsets, the spans taken as `binary` at once: no cast after)
    bounds = np.empty(2 * n + 1, dtype=np.int32 if small else np.int64)
    bounds[0:2 * n:2] = first
    bounds[1:2 * n:2] = first + length
    bounds[2 * n] = bounds[2 * n - 1] if n else 0
    spans = pa.Array.from_buffers(pa.binary() if small else pa.large_binary(), 2 * n,
                                  [None, pa.py_buffer(bounds), pa.py_buffer(data)])
    out = spans.take(int64_array(np.arange(0, 2 * n, 2, dtype=np.int64)))
    if not small:
        out = out.cast(pa.binary())
    if null is not None and null.any():
        out = pa.Array.from_buffers(pa.binary(), n, [_validity(~null), *out.buffers()[1:]])
    return out


# Making a scalar from its buffers costs ~20 us of Python and numpy calls, and a snapshot's encoding and
# jsonl lines ask for the same few dozen literals (the schemas' JSON, separators, topic, op) on every
# batch: ~8 % of a snapshot task's samples (py-spy). Arrow scalars are immutable, so the ones of short
# values are kept (the most recently used `_SCALARS_KEPT`).
_SCALARS_KEPT = 1024
_SCALAR_BYTES_KEPT = 1 << 16


@functools.lru_cache(maxsize=_SCALARS_KEPT)
def _kept_scalar(v: bytes | str) -> pa.Scalar:
    return binary_array([v])[0] if isinstance(v, bytes) else string_array([v])[0]


def binary_scalar(b: bytes) -> pa.Scalar:
    if len(b) <= _SCALAR_BYTES_KEPT:
        return _kept_scalar(bytes(b))
    return binary_array([b])[0]


def string_scalar(s: str) -> pa.Scalar:
    if len(s) <= _SCALAR_BYTES_KEPT:
        return _kept_scalar(str(s))
    return string_array([s])[0]


def lit(v: bytes | str | bool | int | None | pa.Scalar | pa.Array) -> pa.Scalar | pa.Array:
    """A compute function's argument: Python bytes, str, bool, int and None as Arrow scalars, Arrow
    values as they are."""
    if v is None:
        return pa.nulls(1)[0]
    if isinstance(v, bytes):
        return binary_scalar(v)
    if isinstance(v, str):
        return string_scalar(v)
    if isinstance(v, bool):
        return bool_array(np.array([v]))[0]
    if isinstance(v, int):
        return int64_array(np.array([v]))[0]
    return v
