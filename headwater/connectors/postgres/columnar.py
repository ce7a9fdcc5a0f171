"""Events built column-wise: a block of rows as Arrow string columns -> Debezium JSON.

Building each event as a Python dict and serializing it cost ~17 us a row (py-spy: the line
split, the converters, the source block, the envelope's `orjson.dumps`, appending to the batch).
Here a block of rows arrives as string columns (a snapshot's `COPY ... (FORMAT csv)` parsed by
Arrow's CSV reader, a run of streamed INSERTs by `insert_runs`); each column becomes
its JSON text in one pass (`column_json`); keys and envelopes are then concatenated column-wise
by Arrow kernels. Integer, boolean and plain-text columns never become Python objects: their
COPY text is already their JSON (quoted and, where needed, escaped for text). Every other column
goes value by value through the same converter and maskers as a streamed row, then `orjson`, so
the output is byte for byte what the row-wise `RecordMaker` writes (tests compare the two).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from numpy.lib.stride_tricks import sliding_window_view

from headwater.connectors.common.records import TableRecords, ValueColumn, now_ts
from headwater.connectors.postgres.records import RecordMaker
from headwater.events.arrays import (
    binary_array,
    binary_scalar,
    bool_array,
    bool_values,
    int64_array,
    lit,
    ragged_binary,
    string_layout,
    string_scalar,
    valid_mask,
)
from headwater.events.batch import ARROW_SCHEMA, CHANGE_TYPES, HEADER_TYPE

# JSON must escape '"', '\' and the control characters; text without them is quoted as it is
_NEEDS_ESCAPE = '["\\\\\\x00-\\x1f]'
_NUMBER_BYTE = np.zeros(256, dtype=bool)  # what PostgreSQL writes a numeric of fixed scale with
_NUMBER_BYTE[[*b"0123456789-."]] = True

_MARKERS = ("true", "first", "last", "first_in_data_collection", "last_in_data_collection")


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


def column_json(values: pa.Array, col: ValueColumn) -> pa.Array:
    """The JSON text of every value of one column (binary, no nulls), as the row-wise path writes it."""
    null_json = orjson.dumps(col.null_value if col.optional else col.missing)
    kind, param = col.text_kind or (None, 0)
    if kind is None:
        return _per_value(values, col, null_json)
    slow = None  # rows the kernel does not cover: they go through the converter
    if kind == "integer":
        out = values.cast(pa.binary())
    elif kind == "boolean":
        out = pc.if_else(pc.equal(values, lit("t")), lit(b"true"), lit(b"false"))
    elif kind == "text":
        out = _join([b'"', values.cast(pa.binary()), b'"'])
        if _any_escapable(values):
            slow = pc.fill_null(pc.match_substring_regex(values, _NEEDS_ESCAPE), lit(False))
    elif kind == "decimal":
        out, slow = _decimal_json(values, param)
    else:
        out, slow = _timestamptz_json(values, param)
    if slow is not None and pc.any(slow).as_py():
        out = pc.replace_with_mask(out, slow, _per_value(pc.filter(values, slow), col, null_json))
    if values.null_count:
        out = pc.if_else(pc.is_null(values), binary_scalar(null_json), out)
    return out


def _any_escapable(values: pa.Array) -> bool:
    """Whether any value holds a byte JSON escapes (a few passes over the values' bytes)."""
    if not len(values):
        return False
    starts, lengths, data = string_layout(values)
    used = data[starts[0]:starts[-1] + lengths[-1]]
    return bool((used < 0x20).any() or (used == ord('"')).any() or (used == ord("\\")).any())


def _per_value(values: pa.Array, col: ValueColumn, null_json: bytes) -> pa.Array:
    """Each value through the column's converter and maskers (a null as its fill-in, masked too)."""
    convert, maskers, dumps = col.from_text, col.maskers, orjson.dumps
    if maskers:
        fill = col.null_value if col.optional else col.missing
        for m in maskers:
            fill = m(fill)
        null_json = dumps(fill)
    texts = []
    for v in values.to_pylist():
        if v is None:
            texts.append(null_json)
            continue
        v = convert(v)
        for m in maskers:
            v = m(v)
        texts.append(dumps(v))
    return binary_array(texts)


def _decimal_json(values: pa.Array, scale: int) -> tuple[pa.Array, pa.Array]:
    """numeric(p, scale) in precise mode: the base64 of the unscaled value's minimal big-endian
    two's-complement bytes (Java's BigInteger.toByteArray). Values of up to 18 digits, written as
    PostgreSQL writes them: an optional '-', digits and, with a scale, '.' and `scale` digits."""
    starts, lengths, data = string_layout(values)
    valid = valid_mask(values)
    ok = valid & (lengths > scale)
    if scale:  # the point where PostgreSQL puts it
        rows = np.nonzero(ok)[0]
        ok[rows] = data[starts[rows] + lengths[rows] - scale - 1] == ord(".")
    unscaled = None
    if len(values) and _NUMBER_BYTE[data[starts[0]:starts[-1] + lengths[-1]]].all():
        with contextlib.suppress(pa.ArrowInvalid):  # Arrow's parser checks the rest: one sign in front,
            unscaled = values.cast(pa.decimal128(18, scale))  # one point, at most 18 digits
    if unscaled is None:  # some value is not a plain number of up to 18 digits (NaN, ...): find which
        whole = 18 - scale
        pattern = r"^-?\d{1,18}$" if scale == 0 else rf"^-?\d{{1,{whole}}}\.\d{{{scale}}}$" if whole else None
        ok &= bool_values(pc.fill_null(pc.match_substring_regex(values, pattern), lit(False))) if pattern \
            else np.zeros(len(values), dtype=bool)
        unscaled = pc.if_else(bool_array(ok), values, lit("0")).cast(pa.decimal128(18, scale))
    # a decimal128 is 16 little-endian bytes: the low 8 hold any unscaled value of up to 18 digits
    # (a null's are whatever they are: its JSON is replaced)
    low = np.frombuffer(unscaled.buffers()[1], dtype=np.int64, count=2 * len(values),
                        offset=unscaled.offset * 16)[::2]
    return _base64_twos_complement(low), bool_array(valid & ~ok)


_B64 = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8)


_SIZE_BOUNDS = np.array([1 << (8 * k - 1) for k in range(1, 8)], dtype=np.int64)


def _base64_twos_complement(v: np.ndarray) -> pa.Array:
    """'"<base64>"' of each int64's minimal two's-complement big-endian bytes."""
    n = len(v)
    size = 1 + np.searchsorted(_SIZE_BOUNDS, v ^ (v >> 63), side="right")  # bytes of the minimal form
    # the minimal bytes moved to the front (zeros behind them: base64's padding bits)
    front = (v.view(np.uint64) << (64 - 8 * size).astype(np.uint64)).astype(">u8").view(np.uint8).reshape(n, 8)
    groups = (size + 2) // 3  # base64 groups: 3 bytes -> 4 characters
    counts = np.bincount(groups, minlength=4)
    pieces, order = [], []
    for k in np.nonzero(counts)[0].tolist():
        rows = np.nonzero(groups == k)[0] if counts[k] < n else np.arange(n)
        b = front[rows] if counts[k] < n else front
        text = np.empty((len(rows), 4 * k + 2), np.uint8)
        for i in range(k):
            b0, b1 = b[:, 3 * i], b[:, 3 * i + 1]
            b2 = b[:, 3 * i + 2] if 3 * i + 2 < 8 else np.uint8(0)
            text[:, 1 + 4 * i] = b0 >> 2
            text[:, 2 + 4 * i] = ((b0 & 3) << 4) | (b1 >> 4)
            text[:, 3 + 4 * i] = ((b1 & 15) << 2) | (b2 >> 6)
            text[:, 4 + 4 * i] = b2 & 63
        text[:, 1:-1] = _B64.take(text[:, 1:-1])
        text[:, 0] = text[:, -1] = ord('"')
        rest = size[rows] % 3  # 1: two '=', 2: one
        text[rest == 1, -3] = ord("=")
        text[rest != 0, -2] = ord("=")
        pieces.append(pa.Array.from_buffers(pa.binary(4 * k + 2), len(rows), [None, pa.py_buffer(text)])
                      .cast(pa.binary()))
        order.append(rows)
    if len(pieces) == 1:
        return pieces[0]
    back = np.empty(n, dtype=np.int64)  # where each row's text is among the pieces
    back[np.concatenate(order)] = np.arange(n)
    return pa.concat_arrays(pieces).take(int64_array(back))


def _text_layouts(layouts: dict[int, bytes]) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """For each length, a fixed layout of up to 32 bytes ('0' a digit, '=' a literal '0', any other
    byte itself) as three 4-word masks: the text XOR the first must be, byte by byte, below a bound
    (10 for a digit, 1 for a literal); adding the second sets bit 7 of a byte that is not, the third
    keeps the bits of the bytes the layout covers (see `_matching`)."""
    out = {}
    for length, layout in layouts.items():
        expect, add, keep = (np.zeros(32, np.uint8) for _ in range(3))
        for i, ch in enumerate(layout):
            expect[i] = ord("0") if ch in b"0=" else ch
            add[i] = 0x80 - (10 if ch == ord("0") else 1)
            keep[i] = 0x80
        out[length] = tuple(a.view("<u8") for a in (expect, add, keep))
    return out


def _matching(words: np.ndarray, masks: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """Which rows of 32-byte texts (as 4 little-endian words each) fit a layout of `_text_layouts`.
    (A byte at or above 0x80 fails by its own bit 7; its carry then only touches the same row.)"""
    expect, add, keep = masks
    y = words ^ expect
    bad = ((y + add) | y) & keep
    return (bad[:, 0] | bad[:, 1] | bad[:, 2] | bad[:, 3]) == 0


# timestamptz in UTC as PostgreSQL writes it, by length: no fraction, or 1 to 6 digits of it
_TSTZ = _text_layouts({19 + (f + 1 if f else 0) + 3: b"0000-00-00 00:00:00" + (b"." + b"0" * f if f else b"") + b"+=="
                       for f in range(7)})


def _timestamptz_json(values: pa.Array, digits: int) -> tuple[pa.Array, pa.Array]:
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
        good = _matching(text.view("<u8"), masks)
        if not good.all():
            rows, text = rows[good], text[good]
        out[rows, 1:20] = text[:, :19]
        frac = min(digits, length - 23)
        if frac > 0:
            out[rows, 21:21 + frac] = text[:, 20:20 + frac]
        ok[rows] = True
    out[:, 11] = ord("T")
    return ragged_binary(out, np.full(n, width + 3)), bool_array(valid & ~ok)


def _struct_json(parts: list, fragments: list[tuple[bytes, pa.Array]]) -> None:
    """Append `{"name":<json>,...}` pieces for a struct's fields to `parts` (for one join)."""
    parts.append(b"{")
    for i, (name, frag) in enumerate(fragments):
        parts.append((b"," if i else b"") + orjson.dumps(name) + b":")
        parts.append(frag)
    parts.append(b"}")


def _join(parts: list) -> pa.Array:
    """Concatenate scalars and arrays element-wise (adjacent scalars merged first)."""
    merged: list = []
    for p in parts:
        if isinstance(p, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += p
        else:
            merged.append(p)
    return pc.binary_join_element_wise(*(lit(p) for p in merged), lit(b""))


def encode_block(te: TableRecords, columns: Sequence[pa.Array], source: pa.Array, op: str,
                 version: int | np.ndarray, ts_us: int | np.ndarray) -> pa.RecordBatch:
    """Insert-shaped events (no before image) for rows whose values, in the table's layout order,
    are `columns`, with each row's `source` block JSON, commit version and commit time."""
    n = len(source)
    cache: dict[tuple[int, bool], pa.Array] = {}

    def frag(c: ValueColumn) -> pa.Array:
        k = (c.index, bool(c.maskers))
        if k not in cache:
            cache[k] = column_json(columns[c.index], c)
        return cache[k]

    key = None
    if te.key_columns:
        parts: list = [te.key_out.head]
        _struct_json(parts, [(c.name, frag(c)) for c in te.key_columns])
        if te.key_out.schemas:
            parts.append(b"}")
        key = _join(parts).cast(pa.string())

    ms, us, ns = now_ts()
    parts = [te.value_out.head, b'{"before":null,"after":']
    _struct_json(parts, [(c.name, frag(c)) for c in te.columns])
    parts += [b',"source":', source, b',"transaction":null,"op":"%s","ts_ms":%d,"ts_us":%d,"ts_ns":%d}'
              % (op.encode(), ms, us, ns)]
    if te.value_out.schemas:
        parts.append(b"}")
    value = _join(parts).cast(pa.string())
    return pa.RecordBatch.from_arrays([
        pa.repeat(string_scalar(te.topic), n),
        key if key is not None else pa.nulls(n, pa.string()),
        value,
        pa.repeat(string_scalar(op), n),
        pa.nulls(n, HEADER_TYPE),
        pa.repeat(string_scalar(CHANGE_TYPES[op]), n),
        int64_array(np.broadcast_to(version, n)),
        int64_array(np.broadcast_to(ts_us, n)).cast(pa.timestamp("us", tz="UTC")),
    ], schema=ARROW_SCHEMA)


class SnapshotBlockEncoder:
    """Turns blocks of one table's snapshot rows into Arrow record batches of change events."""

    def __init__(self, te: TableRecords, maker: RecordMaker, *, lsn: int, txid: int, ts_us: int, sequence: str,
                 version: int):
        self.te = te
        self.ts_us, self.version = ts_us, version
        self.sources = binary_array([maker.source_bytes(te, ts_us, m, sequence, txid, lsn) for m in _MARKERS])

    def encode(self, columns: Sequence[pa.Array], markers: dict[int, str]) -> pa.RecordBatch:
        """Events for rows whose values (in the table's layout order) are `columns`; `markers` gives
        the `source.snapshot` value of the rows that are not plain "true" (first and last rows)."""
        which = np.zeros(len(columns[0]) if columns else 0, dtype=np.int64)
        for row, marker in markers.items():
            which[row] = _MARKERS.index(marker)
        return encode_block(self.te, columns, pc.take(self.sources, int64_array(which)), "r", self.version,
                            self.ts_us)


def _decimal_text(v: np.ndarray) -> pa.Array:
    return int64_array(v).cast(pa.string()).cast(pa.binary())


def stream_sources(maker: RecordMaker, te: TableRecords, ts_us: np.ndarray, txid: np.ndarray,
                   last_commit: np.ndarray, lsn: np.ndarray) -> pa.Array:
    """The `source` blocks of streamed events: commit time, transaction id, the previous commit's
    LSN (-1: none) and the event's LSN per row; `source.sequence` is `["<last commit>","<lsn>"]`."""
    lsn_text = _decimal_text(lsn)
    first = pc.if_else(bool_array(last_commit < 0), lit(b"null"), _join([b'\\"', _decimal_text(last_commit), b'\\"']))
    fields = {"ts_ms": _decimal_text(ts_us // 1000), "ts_us": _decimal_text(ts_us),
              "ts_ns": _decimal_text(ts_us * 1000), "txId": _decimal_text(txid), "lsn": lsn_text,
              "sequence": _join([b'"[', first, b',\\"', lsn_text, b'\\"]"'])}
    return _join([fields[p] if isinstance(p, str) else p for p in maker.source_template(te, "false")])
