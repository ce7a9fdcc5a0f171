"""The binlog connectors' column-wise JSON kernels for the snapshot's text (`common/columnar.py`).

`BINLOG_KERNELS` adds TIMESTAMP to the common kinds: MariaDB and MySQL write a TIMESTAMP in the
session time zone (UTC for the snapshot) as 'YYYY-MM-DD HH:MM:SS[.fraction]', and Debezium's
snapshot value is its ISO form with the fraction's trailing zeros dropped ('...T...[.f]Z'); a zero
TIMESTAMP and anything else not of that form go through the converter.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from headwater.connectors.common.columnar import COMMON_KERNELS, TextKernel, matching, text_layouts
from headwater.events.arrays import bool_array, ragged_binary, string_layout, valid_mask

# a TIMESTAMP as the server writes it, by length: no fraction, or 1 to 6 digits of it (the year's first
# digit, which must not be 0, is checked apart)
_LAYOUTS = text_layouts({19 + (f + 1 if f else 0): b"0000-00-00 00:00:00" + (b"." + b"0" * f if f else b"")
                         for f in range(7)})
_ZERO = ord("0")
# the bytes a fraction keeps ('.' and its digits up to the last that is not 0; none if every digit is 0),
# by which of its digits are not 0 (bit i: digit i)
_FRACTION_WIDTH = np.array([0] + [1 + b.bit_length() for b in range(1, 64)], dtype=np.int64)


def timestamp_json(values: pa.Array, _: int) -> tuple[pa.Array, pa.Array]:
    """A TIMESTAMP's text as Debezium's snapshot ZonedTimestamp JSON string ('"<date>T<time>[.<f>]Z"', the
    fraction without its trailing zeros), laid out with numpy; other values (a zero TIMESTAMP, ...) are slow.
    A column of one length without NULLs (a TIMESTAMP(p)'s rows) is read in place, as one strided matrix."""
    n = len(values)
    starts, lengths, data = string_layout(values)
    valid = valid_mask(values)
    out = np.empty((n, 1 + 26 + 2), np.uint8)  # '"', the longest text, 'Z"'
    width = np.full(n, 1 + 19 + 2, dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    padded = np.concatenate([data, np.zeros(32, np.uint8)])
    counts = np.bincount(lengths[valid], minlength=32)
    for length, masks in _LAYOUTS.items():
        if not counts[length]:
            continue
        if counts[length] == n:  # every value: one after the other, `length` bytes apart
            rows = np.arange(n)
            text = as_strided(padded[int(starts[0]):], shape=(n, 32), strides=(length, 1), writeable=False)
        else:
            rows = np.nonzero((lengths == length) & valid)[0]
            text = sliding_window_view(padded, 32)[starts[rows]]
        good = matching(text.view("<u8"), masks) & (text[:, 0] != _ZERO)
        if not good.all():
            rows, text = rows[good], text[good]
        everyone = len(rows) == n  # (then `rows` is every row in order: slices instead of indices)
        out[slice(None) if everyone else rows, 1:1 + length] = text[:, :length]
        end = np.full(len(rows), 20, dtype=np.int64)  # where 'Z"' goes: after the seconds,
        if length > 19:  # or after the fraction's last digit that is not 0 (no '.' if every digit is)
            digits = (text[:, 20:length] != _ZERO).view(np.uint8)
            bits = digits[:, 0].copy()
            for i in range(1, length - 20):
                bits |= digits[:, i] << i
            end += _FRACTION_WIDTH[bits]
        at = rows * out.shape[1] + end  # (flat: one index a row)
        out.reshape(-1)[at] = ord("Z")
        out.reshape(-1)[at + 1] = ord('"')
        width[slice(None) if everyone else rows] = end + 2
        ok[slice(None) if everyone else rows] = True
    out[:, 0] = ord('"')
    out[:, 11] = ord("T")
    return ragged_binary(out, width), bool_array(valid & ~ok)


BINLOG_KERNELS: dict[str, TextKernel] = {**COMMON_KERNELS, "timestamp": timestamp_json}
