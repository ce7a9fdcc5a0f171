"""PostgreSQL's part of building records column-wise (see connectors/common/columnar.py).

`read_csv_blocks` reads a snapshot's `COPY ... (FORMAT csv)` output as Arrow string columns.
`PG_KERNELS` adds the kernels of PostgreSQL's own text kinds to the common ones: booleans (`t`/`f`)
and timestamptz written in UTC (re-laid as Debezium's ISO-8601 ZonedTimestamp). `stream_sources`
makes the `source` blocks of streamed rows from their commit times, transaction ids and LSNs.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from numpy.lib.stride_tricks import sliding_window_view

from headwater.connectors.common.columnar import (
    COMMON_KERNELS,
    TextKernel,
    decimal_text,
    join_parts,
    matching,
    source_column,
    text_layouts,
    typed_source_column,
)
from headwater.connectors.common.records import RecordMaker, TableRecords
from headwater.events.arrays import bool_array, int64_array, lit, ragged_binary, string_layout, valid_mask


def read_csv_blocks(source, ncols: int, block_size: int = 1 << 20) -> Iterator[list[pa.Array]]:
    """The string columns of PostgreSQL CSV rows read from a file object, a block of about
    `block_size` bytes at a time (NULL is an unquoted empty field, so a one-column row holding
    NULL is an empty line). No rows at all: Arrow's "Empty CSV file" error."""
    names = [f"c{i}" for i in range(ncols)]
    reader = pacsv.open_csv(
        source,
        read_options=pacsv.ReadOptions(column_names=names, use_threads=False, block_size=block_size),
        parse_options=pacsv.ParseOptions(delimiter=",", quote_char='"', double_quote=True, escape_char=False,
                                         newlines_in_values=True, ignore_empty_lines=False),
        convert_options=pacsv.ConvertOptions(column_types=dict.fromkeys(names, pa.string()),
                                             strings_can_be_null=True, null_values=[""],
                                             quoted_strings_can_be_null=False),
    )
    for batch in reader:
        if batch.num_rows:
            yield batch.columns



def boolean_json(values: pa.Array, _: int) -> tuple[pa.Array, None]:
    """PostgreSQL's boolean text, 't' or 'f'."""
    return pc.if_else(pc.equal(values, lit("t")), lit(b"true"), lit(b"false")), None


# timestamptz in UTC as PostgreSQL writes it, by length: no fraction, or 1 to 6 digits of it
_TSTZ = text_layouts({19 + (f + 1 if f else 0) + 3: b"0000-00-00 00:00:00" + (b"." + b"0" * f if f else b"") + b"+=="
                       for f in range(7)})


def timestamptz_json(values: pa.Array, digits: int) -> tuple[pa.Array, pa.Array]:
    """timestamptz written in UTC with a 4-digit year ("YYYY-MM-DD HH:MM:SS[.f{1,6}]+00") as
    "<date>T<time>[.<digits>]Z" (Debezium's ZonedTimestamp, the fraction padded or cut to the
    column's precision), laid out with numpy; other values (another offset, BC, infinity) are slow."""
    n = len(values)
    starts, lengths, data = string_layout(values)
    valid = valid_mask(values)
    width = 19 + (1 + digits if digits else 0)
    out = np.empty((n, width + 3), np.uint8)
    out[:] = np.frombuffer(b'"' + b" " * 19 + (b"." + b"0" * digits if digits else b"") + b'Z"', np.uint8)
    ok = np.zeros(n, dtype=bool)
    texts = sliding_window_view(np.concatenate([data, np.zeros(32, np.uint8)]), 32)
    counts = np.bincount(lengths, minlength=32)
    for length, masks in _TSTZ.items():
        if not counts[length]:
            continue
        rows = np.nonzero((lengths == length) & valid)[0]
        text = texts[starts[rows]]
        good = matching(text.view("<u8"), masks)
        if not good.all():
            rows, text = rows[good], text[good]
        out[rows, 1:20] = text[:, :19]
        frac = min(digits, length - 23)
        if frac > 0:
            out[rows, 21:21 + frac] = text[:, 20:20 + frac]
        ok[rows] = True
    out[:, 11] = ord("T")
    return ragged_binary(out, np.full(n, width + 3)), bool_array(valid & ~ok)



PG_KERNELS: dict[str, TextKernel] = {**COMMON_KERNELS, "boolean": boolean_json, "timestamptz": timestamptz_json}


def stream_sources(maker: RecordMaker, te: TableRecords, ts_us: np.ndarray, txid: np.ndarray,
                   last_commit: np.ndarray, lsn: np.ndarray, typed: bool = False) -> pa.Array:
    """The `source` blocks of streamed events, as JSON or (`typed`) as a typed struct column: commit
    time, transaction id, the previous commit's LSN (-1: none) and the event's LSN per row;
    `source.sequence` is `["<last commit>","<lsn>"]`."""
    lsn_text = decimal_text(lsn)
    quote = b'"' if typed else b'\\"'  # inside the JSON string, escaped
    first = pc.if_else(bool_array(last_commit < 0), lit(b"null"), join_parts([quote, decimal_text(last_commit), quote]))
    sequence = join_parts([b"[", first, b"," + quote, lsn_text, quote + b"]"])
    if typed:
        return typed_source_column(maker, te, ts_us, {"txId": int64_array(txid), "lsn": int64_array(lsn),
                                                      "sequence": sequence.cast(pa.string())})
    return source_column(maker, te, ts_us, {"txId": decimal_text(txid), "lsn": lsn_text,
                                            "sequence": join_parts([b'"', sequence, b'"'])})
