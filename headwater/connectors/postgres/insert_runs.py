"""A run of pgoutput INSERT messages of one relation, decoded column-wise into Arrow string columns.

Decoding a tuple value by value in Python (`pgoutput._tuple`) costs a few microseconds a message.
Here the messages of a run are laid end to end in one buffer and walked one *column* at a time
across all of them with numpy: every message's kind byte and length at once, then every
message's next offset. Each column's text values become an Arrow string array (gathered out of the
buffer, nulls marked), ready for `columnar.column_json`.

Only what the per-value decoder would decode the same way is taken: text ('t') and null ('n')
values, every message a well-formed INSERT with the expected column count, valid UTF-8. For
anything else `decode_inserts` returns None and the caller decodes the messages one by one, so a
malformed message still gets `pgoutput`'s precise error.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

_INSERT, _NEW, _TEXT, _NULL = ord("I"), ord("N"), ord("t"), ord("n")
_HEAD = 8  # 'I', relation oid (4), 'N', column count (2)


def _be(buf: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """The big-endian unsigned integers of `width` bytes at each offset."""
    out = np.zeros(len(at), dtype=np.int64)
    for k in range(width):
        out = (out << 8) | buf[at + k]
    return out


def decode_inserts(payloads: Sequence[bytes], ncols: int) -> list[pa.Array] | None:
    """The string columns (tuple order) of INSERT messages outside a streamed transaction, or None
    when any message is not a plain text-mode INSERT of `ncols` columns."""
    n = len(payloads)
    sizes = np.fromiter((len(p) for p in payloads), dtype=np.int64, count=n)
    if n == 0 or int(sizes.min()) < _HEAD:
        return None
    ends = np.cumsum(sizes)
    starts = ends - sizes
    raw = b"".join(payloads)
    buf = np.frombuffer(raw, dtype=np.uint8)
    if not ((buf[starts] == _INSERT).all() and (buf[starts + 5] == _NEW).all()
            and (_be(buf, starts + 6, 2) == ncols).all()):
        return None
    pos = starts + _HEAD
    columns = []
    for _ in range(ncols):
        if (pos >= ends).any():
            return None
        kind = buf[pos]
        text = kind == _TEXT
        if not (text | (kind == _NULL)).all():
            return None  # unchanged TOAST or binary values: not in a text-mode INSERT
        if text.any():
            if (pos[text] + 5 > ends[text]).any():
                return None
            length = np.where(text, _be(buf, np.where(text, pos + 1, 0), 4), 0)
        else:
            length = np.zeros(n, dtype=np.int64)
        first = pos + 5
        pos = np.where(text, first + length, pos + 1)
        if (pos > ends).any():
            return None
        column = _strings(buf, first, length, text)
        if column is None:
            return None
        columns.append(column)
    if (pos != ends).any():
        return None  # bytes after the tuple
    return columns


def _strings(buf: np.ndarray, first: np.ndarray, length: np.ndarray, valid: np.ndarray) -> pa.Array | None:
    """A string array of the byte ranges [first, first + length), null where not `valid`."""
    n = len(first)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    total = int(offsets[-1])
    if total >= 2**31:
        return None
    index = np.repeat(first - offsets[:-1], length) + np.arange(total, dtype=np.int64)
    data = buf[index]
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    array = pa.Array.from_buffers(pa.string(), n, [validity, pa.py_buffer(offsets.astype(np.int32)),
                                                    pa.py_buffer(data)])
    try:
        array.validate(full=True)  # UTF-8
    except pa.ArrowInvalid:
        return None
    return array
