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

from collections.abc import Sequence

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from headwater.connectors.postgres.records import RecordMaker, TableEvents, ValueColumn, now_ts
from headwater.events.arrays import (
    binary_array,
    binary_scalar,
    bool_array,
    int64_array,
    int64_values,
    lit,
    string_scalar,
)
from headwater.events.batch import ARROW_SCHEMA, CHANGE_TYPES, HEADER_TYPE

# JSON must escape '"', '\' and the control characters; text without them is quoted as it is
_NEEDS_ESCAPE = '["\\\\\\x00-\\x1f]'

_MARKERS = ("true", "first", "last", "first_in_data_collection", "last_in_data_collection")


def parse_csv_block(data: bytes, ncols: int) -> list[pa.Array]:
    """The string columns of a block of PostgreSQL CSV rows (NULL is an unquoted empty field, so a
    one-column row holding NULL is an empty line)."""
    table = pacsv.read_csv(
        pa.py_buffer(data),
        read_options=pacsv.ReadOptions(column_names=[f"c{i}" for i in range(ncols)], use_threads=False,
                                       block_size=max(1 << 20, len(data) + 1)),
        parse_options=pacsv.ParseOptions(delimiter=",", quote_char='"', double_quote=True, escape_char=False,
                                         newlines_in_values=True, ignore_empty_lines=False),
        convert_options=pacsv.ConvertOptions(column_types={f"c{i}": pa.string() for i in range(ncols)},
                                             strings_can_be_null=True, null_values=[""],
                                             quoted_strings_can_be_null=False),
    )
    return [table.column(i).combine_chunks() for i in range(ncols)]


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
    two's-complement bytes (Java's BigInteger.toByteArray). Values of up to 18 digits."""
    pattern = r"^-?\d{1,18}$" if scale == 0 else rf"^-?\d+\.\d{{{scale}}}$"
    ok = pc.and_(pc.fill_null(pc.match_substring_regex(values, pattern), lit(False)),
                 pc.less_equal(pc.utf8_length(values), lit(19 + (1 if scale else 0))))
    ok = pc.fill_null(ok, lit(False))
    digits = pc.replace_substring(values, ".", "") if scale else values
    unscaled = int64_values(pc.if_else(ok, digits, lit("0")).cast(pa.int64()))
    return _base64_twos_complement(unscaled), pc.and_(pc.invert(ok), pc.is_valid(values))


_B64 = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8)


def _base64_twos_complement(v: np.ndarray) -> pa.Array:
    """'"<base64>"' of each int64's minimal two's-complement big-endian bytes."""
    n = len(v)
    length = np.ones(n, dtype=np.int64)
    for k in range(1, 8):
        bound = 1 << (8 * k - 1)
        length += (v >= bound) | (v < -bound)
    be = v.astype(">i8").view(np.uint8).reshape(n, 8)
    pieces, order = [], []
    for size in np.unique(length).tolist():
        rows = np.nonzero(length == size)[0]
        m, pad = len(rows), (-size) % 3
        raw = np.concatenate([be[rows, 8 - size:], np.zeros((m, pad), np.uint8)], axis=1)
        g = raw.reshape(m, -1, 3).astype(np.uint32)
        n24 = (g[..., 0] << 16) | (g[..., 1] << 8) | g[..., 2]
        six = np.stack([n24 >> 18, (n24 >> 12) & 63, (n24 >> 6) & 63, n24 & 63], axis=-1).reshape(m, -1)
        chars = _B64[six]
        if pad:
            chars[:, -pad:] = ord("=")
        quote = np.full((m, 1), ord('"'), np.uint8)
        text = np.ascontiguousarray(np.concatenate([quote, chars, quote], axis=1))
        width = text.shape[1]
        pieces.append(pa.Array.from_buffers(pa.binary(width), m, [None, pa.py_buffer(text.tobytes())])
                      .cast(pa.binary()))
        order.append(rows)
    if not pieces:
        return binary_array([])
    joined = pa.concat_arrays(pieces)
    return joined.take(int64_array(np.argsort(np.concatenate(order), kind="stable")))


_TSTZ_UTC = r"^(?P<d>\d{4}-\d\d-\d\d) (?P<t>\d\d:\d\d:\d\d)(?:\.(?P<f>\d{1,6}))?\+00$"


def _timestamptz_json(values: pa.Array, digits: int) -> tuple[pa.Array, pa.Array]:
    """timestamptz written in UTC with a 4-digit year: "<date>T<time>[.<digits>]Z" (Debezium's
    ZonedTimestamp, the fraction padded or cut to the column's precision)."""
    parts = pc.extract_regex(values, _TSTZ_UTC)
    ok = pc.fill_null(parts.is_valid(), lit(False))
    pieces: list = [b'"', pc.struct_field(parts, "d").cast(pa.binary()), b"T",
                    pc.struct_field(parts, "t").cast(pa.binary())]
    if digits:
        frac = pc.utf8_slice_codeunits(pc.utf8_rpad(pc.struct_field(parts, "f"), digits, "0"), 0, digits)
        pieces += [b".", frac.cast(pa.binary())]
    pieces.append(b'Z"')
    out = _join(pieces)
    return out, pc.and_(pc.invert(ok), pc.is_valid(values))


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


def encode_block(te: TableEvents, columns: Sequence[pa.Array], source: pa.Array, op: str,
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

    def __init__(self, te: TableEvents, maker: RecordMaker, *, lsn: int, txid: int, ts_us: int, sequence: str,
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


def stream_sources(maker: RecordMaker, te: TableEvents, ts_us: np.ndarray, txid: np.ndarray,
                   last_commit: np.ndarray, lsn: np.ndarray) -> pa.Array:
    """The `source` blocks of streamed events: commit time, transaction id, the previous commit's
    LSN (-1: none) and the event's LSN per row; `source.sequence` is `["<last commit>","<lsn>"]`."""
    lsn_text = _decimal_text(lsn)
    first = pc.if_else(bool_array(last_commit < 0), lit(b"null"), _join([b'\\"', _decimal_text(last_commit), b'\\"']))
    fields = {"ts_ms": _decimal_text(ts_us // 1000), "ts_us": _decimal_text(ts_us),
              "ts_ns": _decimal_text(ts_us * 1000), "txId": _decimal_text(txid), "lsn": lsn_text,
              "sequence": _join([b'"[', first, b',\\"', lsn_text, b'\\"]"'])}
    return _join([fields[p] if isinstance(p, str) else p for p in maker.source_template(te, "false")])
