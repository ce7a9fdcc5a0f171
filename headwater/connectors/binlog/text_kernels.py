"""The binlog connectors' column-wise JSON kernels for the snapshot's text (`common/columnar.py`).

`BINLOG_KERNELS` adds TIMESTAMP to the common kinds: MariaDB and MySQL write a TIMESTAMP in the
session time zone (UTC for the snapshot) as 'YYYY-MM-DD HH:MM:SS[.fraction]', and Debezium's
snapshot value is its ISO form with the fraction's trailing zeros dropped ('...T...[.f]Z'); a zero
TIMESTAMP and anything else not of that form go through the converter.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from numpy.lib.stride_tricks import sliding_window_view

from headwater.connectors.common.columnar import COMMON_KERNELS, TextKernel, matching, text_layouts
from headwater.events.arrays import bool_array, ragged_binary, string_layout, valid_mask

# a TIMESTAMP as the server writes it, by length: no fraction, or 1 to 6 digits of it (the year's first
# digit, which must not be 0, is checked apart)
_LAYOUTS = text_layouts({19 + (f + 1 if f else 0): b"0000-00-00 00:00:00" + (b"." + b"0" * f if f else b"")
                         for f in range(7)})
_ZERO = ord("0")


def timestamp_json(values: pa.Array, _: int) -> tuple[pa.Array, pa.Array]:
    """A TIMESTAMP's text as Debezium's snapshot ZonedTimestamp JSON string ('"<date>T<time>[.<f>]Z"', the
    fraction without its trailing zeros), laid out with numpy; other values (a zero TIMESTAMP, ...) are slow."""
    n = len(values)
    starts, lengths, data = string_layout(values)
    valid = valid_mask(values)
    out = np.empty((n, 1 + 26 + 2), np.uint8)  # '"', the longest text, 'Z"'
    width = np.full(n, 1 + 19 + 2, dtype=np.int64)
    ok = np.zeros(n, dtype=bool)
    texts = sliding_window_view(np.concatenate([data, np.zeros(32, np.uint8)]), 32)
    counts = np.bincount(lengths[valid], minlength=32)
    for length, masks in _LAYOUTS.items():
        if not counts[length]:
            continue
        rows = np.nonzero((lengths == length) & valid)[0]
        text = texts[starts[rows]]
        good = matching(text.view("<u8"), masks) & (text[:, 0] != _ZERO)
        if not good.all():
            rows, text = rows[good], text[good]
        out[rows, 1:1 + length] = text[:, :length]
        end = np.full(len(rows), 20, dtype=np.int64)  # where 'Z"' goes: after the seconds,
        if length > 19:  # or after the fraction's last digit that is not 0 (no '.' if every digit is)
            fraction = text[:, 20:length] != _ZERO
            kept = np.where(fraction.any(axis=1), length - 20 - np.argmax(fraction[:, ::-1], axis=1), 0)
            end += np.where(kept > 0, 1 + kept, 0)
        out[rows, end] = ord("Z")
        out[rows, end + 1] = ord('"')
        width[rows] = end + 2
        ok[rows] = True
    out[:, 0] = ord('"')
    out[:, 11] = ord("T")
    return ragged_binary(out, width), bool_array(valid & ~ok)


BINLOG_KERNELS: dict[str, TextKernel] = {**COMMON_KERNELS, "timestamp": timestamp_json}
