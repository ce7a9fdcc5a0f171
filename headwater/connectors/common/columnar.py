"""Records built column-wise: a block of rows as Arrow string columns -> Debezium JSON, or typed blocks.

Building each record as a Python dict and serializing it costs ~17 us a row (py-spy: the line
split, the converters, the source block, the envelope's `orjson.dumps`, appending to the batch).
Here a block of rows arrives as string columns (a connector reads them: PostgreSQL's snapshot
`COPY ... (FORMAT csv)`, a run of streamed INSERTs); each column becomes its JSON text in one pass
(`column_json`); keys and envelopes are then concatenated column-wise by Arrow kernels.

A column whose `text_kind` names one of the connector's `text_kernels` never becomes Python
objects: integers (the text is the JSON number), text (quoted, escaped where needed), decimals of
fixed scale in precise mode (`decimal_json`), and a connector's own kinds (PostgreSQL's booleans
and timestamps, registered by the PostgreSQL package). Every other column goes value by value
through the same converter and maskers as a row, then `orjson`, so the output is byte for byte
what the row-wise `RecordMaker` writes (tests compare the two).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from headwater.connectors.common.records import RecordMaker, TableRecords, ValueColumn, now_ts
from headwater.connectors.common.source_info import SourceTemplate
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
    utf8_view,
    valid_mask,
)
from headwater.events.batch import ArrowEvents, Events, PieceEvents, insert_batch
from headwater.events.output import STREAMED_SNAPSHOT
from headwater.events.pieces import Choice
from headwater.events.typed import TypedBlock, TypedEvents, connect_type, make_block

#: (text values, the kind's parameter) -> (their JSON, the rows the kernel does not cover or None)
TextKernel = Callable[[pa.Array, int], tuple[pa.Array, pa.Array | None]]

# JSON must escape '"', '\' and the control characters; text without them is quoted as it is
_NEEDS_ESCAPE = '["\\\\\\x00-\\x1f]'

MARKERS = ("true", "first", "last", "first_in_data_collection", "last_in_data_collection", "incremental")

def column_json(values: pa.Array, col: ValueColumn, kernels: Mapping[str, TextKernel]) -> pa.Array:
    """The JSON text of every value of one column (binary, no nulls), as the row-wise path writes it:
    by the kernel of the column's text kind where `kernels` has one, else value by value."""
    null_json = orjson.dumps(col.null_value if col.optional else col.missing)
    kind, param = col.text_kind or (None, 0)
    kernel = kernels.get(kind) if kind is not None else None
    if kernel is None:
        return _per_value(values, col, null_json)
    out, slow = kernel(values, param)  # slow: rows the kernel does not cover, through the converter
    if slow is not None and pc.any(slow).as_py():
        out = pc.replace_with_mask(out, slow, _per_value(pc.filter(values, slow), col, null_json))
    if values.null_count:
        out = pc.if_else(pc.is_null(values), binary_scalar(null_json), out)
    return out


def column_json_parts(values: pa.Array, col: ValueColumn, kernels: Mapping[str, TextKernel]) -> list:
    """`column_json`'s JSON as parts for `join_parts`: a text column without a null or a value to escape
    is its values between two quotes (the quotes then merge with the literals around them: one pass over
    the text fewer), any other column its `column_json`."""
    kind = col.text_kind[0] if col.text_kind else None
    if kind == "text" and kernels.get(kind) is text_json and values.type == pa.string() and not values.null_count \
            and not any_escapable(values):
        return [b'"', values.cast(pa.binary()), b'"']
    return [column_json(values, col, kernels)]


def integer_json(values: pa.Array, _: int) -> tuple[pa.Array, None]:
    """An integer's text is its JSON."""
    return values.cast(pa.binary()), None


def text_json(values: pa.Array, _: int) -> tuple[pa.Array, pa.Array | None]:
    """A JSON string of the text as it is; values JSON must escape are slow."""
    out = join_parts([b'"', values.cast(pa.binary()), b'"'])
    slow = None
    if any_escapable(values):
        slow = pc.fill_null(pc.match_substring_regex(values, _NEEDS_ESCAPE), lit(False))
    return out, slow


def any_escapable(values: pa.Array) -> bool:
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


def decimal_json(values: pa.Array, scale: int) -> tuple[pa.Array, pa.Array | None]:
    """A decimal of fixed scale in precise mode (Debezium's Decimal): the base64 of the unscaled value's minimal big-endian
    two's-complement bytes (Java's BigInteger.toByteArray). Values of up to 18 digits, written as
    PostgreSQL and MySQL write them: an optional '-', digits and, with a scale, '.' and `scale` digits."""
    starts, lengths, data = string_layout(values)
    valid = valid_mask(values)
    ok = valid & (lengths > scale)
    if scale:  # the point where the database puts it
        rows = np.nonzero(ok)[0]
        ok[rows] = data[starts[rows] + lengths[rows] - scale - 1] == ord(".")
    unscaled = None
    if len(values) and _number_bytes(data[starts[0]:starts[-1] + lengths[-1]]):
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
    return base64_twos_complement(low), bool_array(valid & ~ok)


def _number_bytes(used: np.ndarray) -> bool:
    """Whether every byte is one a decimal of fixed scale is written with: a digit, '-' or '.' (three
    comparisons over the bytes: ~7x cheaper than a 256-entry table's lookup of each)."""
    return bool(((used - np.uint8(ord("0")) < 10) | (used == ord("-")) | (used == ord("."))).all())


_B64 = np.frombuffer(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/", dtype=np.uint8)


_SIZE_BOUNDS = np.array([1 << (8 * k - 1) for k in range(1, 8)], dtype=np.int64)


def base64_twos_complement(v: np.ndarray) -> pa.Array:
    """'"<base64>"' of each int64's minimal two's-complement big-endian bytes: every row laid out in one
    matrix as wide as the longest needs, each value then its row's first 4 * groups + 2 bytes. The minimal
    bytes are moved to the top of each word, whose 6-bit groups from the top are then the characters."""
    n = len(v)
    size = 1 + np.searchsorted(_SIZE_BOUNDS, v ^ (v >> 63), side="right")  # bytes of the minimal form
    # the minimal bytes at the word's top (zeros below them: base64's padding bits)
    word = v.view(np.uint64) << (64 - 8 * size).astype(np.uint64)
    groups = (size + 2) // 3  # base64 groups: 3 bytes -> 4 characters
    k = int(groups.max()) if n else 0
    width = 4 * k + 2
    text = np.empty((n, width), np.uint8)
    for j in range(4 * k):  # character j: bits 63 - 6j down to 58 - 6j of the word (zeros past bit 0)
        shift = 58 - 6 * j
        sextet = (word >> np.uint64(shift)) if shift >= 0 else (word << np.uint64(-shift))
        text[:, 1 + j] = _B64[(sextet & np.uint64(63)).astype(np.intp)]
    text[:, 0] = ord('"')
    last = 4 * groups  # the row's last base64 character
    at = np.arange(n) * width + last  # (flat: one index a row)
    flat = text.reshape(-1)
    rest = size % 3  # 1: two '=', 2: one
    flat[at[rest != 0]] = ord("=")
    flat[at[rest == 1] - 1] = ord("=")
    flat[at + 1] = ord('"')
    return ragged_binary(text, last + 2)


def text_layouts(layouts: dict[int, bytes]) -> dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """For each length, a fixed layout of up to 32 bytes ('0' a digit, '=' a literal '0', any other
    byte itself) as three 4-word masks: the text XOR the first must be, byte by byte, below a bound
    (10 for a digit, 1 for a literal); adding the second sets bit 7 of a byte that is not, the third
    keeps the bits of the bytes the layout covers (see `matching`)."""
    out = {}
    for length, layout in layouts.items():
        expect, add, keep = (np.zeros(32, np.uint8) for _ in range(3))
        for i, ch in enumerate(layout):
            expect[i] = ord("0") if ch in b"0=" else ch
            add[i] = 0x80 - (10 if ch == ord("0") else 1)
            keep[i] = 0x80
        out[length] = (expect.view("<u8"), add.view("<u8"), keep.view("<u8"))
    return out


def matching(words: np.ndarray, masks: tuple[np.ndarray, np.ndarray, np.ndarray]) -> np.ndarray:
    """Which rows of 32-byte texts (as 4 little-endian words each) fit a layout of `text_layouts`.
    (A byte at or above 0x80 fails by its own bit 7; its carry then only touches the same row.)"""
    expect, add, keep = masks
    y = words ^ expect
    bad = ((y + add) | y) & keep
    return (bad[:, 0] | bad[:, 1] | bad[:, 2] | bad[:, 3]) == 0


# timestamptz in UTC as PostgreSQL writes it, by length: no fraction, or 1 to 6 digits of it
def _struct_json(parts: list, fragments: list[tuple[str, list]]) -> None:
    """Append `{"name":<json>,...}` pieces for a struct's fields (each field's JSON as parts) to `parts`
    (for one join)."""
    parts.append(b"{")
    for i, (name, frag) in enumerate(fragments):
        parts.append((b"," if i else b"") + orjson.dumps(name) + b":")
        parts.extend(frag)
    parts.append(b"}")


def join_parts(parts: list) -> pa.Array:
    """Concatenate scalars and arrays element-wise (adjacent scalars merged first)."""
    merged: list = []
    for p in parts:
        if isinstance(p, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] += p
        else:
            merged.append(p)
    return pc.binary_join_element_wise(*(lit(p) for p in merged), lit(b""))


#: a connector's own column-wise values: a column's JSON per row (binary; or, as `column_json_parts`
#: gives it, a list of parts joined element-wise), or its typed values
ColumnJson = Callable[[ValueColumn], "pa.Array | list"]
ColumnTyped = Callable[[ValueColumn, dict], pa.Array]


def block_parts(te: TableRecords, columns: Sequence[pa.Array], source: pa.Array | bytes | Choice | list, op: str,
                json_of: ColumnJson | None = None) -> tuple[list | None, list]:
    """The parts (for `join_parts` or `events.pieces.join_pieces`) of insert-shaped events' key (None: the
    table has none) and value (`encode_block`'s), not joined yet; a `source` given as a list is
    `source_parts`' parts."""
    kernels = te.ctx.text_kernels
    cache: dict[tuple[int, bool], list] = {}

    def frag(c: ValueColumn) -> list:
        k = (c.index, bool(c.maskers))
        if k not in cache:
            got = json_of(c) if json_of is not None else column_json_parts(columns[c.index], c, kernels)
            cache[k] = got if isinstance(got, list) else [got]
        return cache[k]

    key: list | None = None
    if te.key_columns:
        key = [te.key_out.head]
        _struct_json(key, [(c.name, frag(c)) for c in te.key_columns])
        if te.key_out.schemas:
            key.append(b"}")
    ms, us, ns = now_ts()
    value: list = [te.value_out.head, b'{"before":null,"after":']
    _struct_json(value, [(c.name, frag(c)) for c in te.columns])
    value += [b',"source":', *(source if isinstance(source, list) else [source]),
              b',"transaction":null,"op":"%s","ts_ms":%d,"ts_us":%d,"ts_ns":%d}' % (op.encode(), ms, us, ns)]
    if te.value_out.schemas:
        value.append(b"}")
    return key, value


def encode_block(te: TableRecords, columns: Sequence[pa.Array], source: pa.Array | bytes | list, op: str,
                 version: int | np.ndarray, ts_us: int | np.ndarray, json_of: ColumnJson | None = None,
                 utf8_json: bool = False, rows: int | None = None) -> pa.RecordBatch:
    """Insert-shaped events (no before image) for rows whose values, in the table's layout order,
    are `columns` (text, made JSON by `column_json`), with each row's `source` block JSON (or, as
    bytes, every row's: then `rows` rows; or as `source_parts`' parts: then `rows` rows too), commit
    version and commit time. A connector that makes each column's JSON itself passes `json_of` (and no
    `columns`), and `utf8_json` if that JSON is known to be valid UTF-8 (else it is checked)."""
    n = len(source) if isinstance(source, pa.Array) else rows or 0
    # JSON made by `column_json` from string columns (valid UTF-8, as Arrow holds them) and the source
    # block's is valid UTF-8: taken as text without checking it again; a connector's own JSON is checked
    # unless it says it is valid
    trusted = _trusted(columns, source, json_of, utf8_json)

    def as_text(joined: pa.Array) -> pa.Array:
        return utf8_view(joined) if trusted else joined.cast(pa.string())

    key_parts, value_parts = block_parts(te, columns, source, op, json_of)
    key = as_text(join_parts(key_parts)) if key_parts is not None else None
    joined = join_parts(value_parts)
    value = as_text(joined if isinstance(joined, pa.Array) else pa.repeat(joined, n))  # (no column: one text)
    return insert_batch(te.topic, op, key, value, version, ts_us)


def piece_block(te: TableRecords, columns: Sequence[pa.Array], source: pa.Array | bytes | Choice | list, op: str,
                version: int | np.ndarray, ts_us: int | np.ndarray, json_of: ColumnJson | None = None,
                utf8_json: bool = False, rows: int | None = None) -> PieceEvents:
    """`encode_block`'s events (the same arguments; `source` also a `Choice` of blocks, then `rows` rows)
    as `PieceEvents`: their key and value not joined yet (the `jsonl` sink joins them straight into its
    lines; `to_arrow` into `encode_block`'s rows)."""
    n = len(source) if isinstance(source, pa.Array) else rows or 0
    key, value = block_parts(te, columns, source, op, json_of)
    return PieceEvents(te.topic, op, key, value, n, version, ts_us, _trusted(columns, source, json_of, utf8_json))


def _trusted(columns: Sequence[pa.Array], source: pa.Array | bytes | Choice | list, json_of: ColumnJson | None,
             utf8_json: bool) -> bool:
    """Whether `encode_block`'s JSON is known to be valid UTF-8 (see there)."""
    return (utf8_json if json_of is not None else all(c.type == pa.string() for c in columns)) \
        and all(not isinstance(p, pa.Array) or p.type == pa.binary()
                for p in (source if isinstance(source, list) else [source]))


class SnapshotBlockEncoder:
    """Turns blocks of one table's snapshot rows into change events, column-wise: JSON rows
    (`ArrowEvents`) or a typed block; the snapshot's position (`position`, e.g. PostgreSQL's lsn,
    txid and sequence) goes to the maker's `snapshot_source`."""

    def __init__(self, te: TableRecords, maker: RecordMaker, *, ts_us: int, version: int, **position: Any):
        self.te = te
        self.maker = maker
        self.ts_us, self.version = ts_us, version
        self.source_json = [maker.snapshot_source(te, ts_us, m, position) for m in MARKERS]

    def encode(self, columns: Sequence[pa.Array], markers: dict[int, str], default: str = "true", *,
               rows: int | None = None, json_of: ColumnJson | None = None,
               typed_of: ColumnTyped | None = None, utf8_json: bool = False, pieces: bool = False) -> Events:
        """Events for rows whose values (in the table's layout order) are `columns` (text), or, for
        a connector that makes each column's JSON or typed values itself (`json_of`, `typed_of`;
        `utf8_json`: that JSON is valid UTF-8), `rows` rows; `markers` gives the `source.snapshot` value
        of the rows that are not `default` (first and last rows). With `pieces`, JSON events are
        `PieceEvents` (their key and value joined where they are written)."""
        which = np.full(len(columns[0]) if columns else rows or 0, MARKERS.index(default), dtype=np.int64)
        for row, marker in markers.items():
            which[row] = MARKERS.index(marker)
        if self.te.ctx.output != "json":
            source_schema = self.te.ctx.source_schema.to_json()
            typ, convert = connect_type(source_schema)
            sources = pa.array([convert(orjson.loads(s)) for s in self.source_json], type=typ)
            return TypedEvents([typed_insert_block(self.te, columns, sources.take(int64_array(which)), "r",
                                                   self.version, self.ts_us, typed_of)])
        default_json = self.source_json[MARKERS.index(default)]
        if pieces:  # each row's source block one of the pool's (the default's for most)
            source: bytes | Choice = Choice(tuple(self.source_json), which) if markers else default_json
            return piece_block(self.te, columns, source, "r", self.version, self.ts_us, json_of, utf8_json,
                               rows=len(which))
        # every row with the default's source block, written as a literal of the join (no column of
        # sources taken and copied again); then the few rows with a marker of their own get theirs
        batch = encode_block(self.te, columns, default_json, "r", self.version, self.ts_us, json_of, utf8_json,
                             rows=len(which))
        if markers:
            batch = _with_sources(batch, default_json, {row: self.source_json[MARKERS.index(m)]
                                                        for row, m in markers.items()})
        return ArrowEvents(batch)


def _with_sources(batch: pa.RecordBatch, default: bytes, sources: dict[int, bytes]) -> pa.RecordBatch:
    """`batch` (of `encode_block`, every row's source block `default`) with the source block of each row
    of `sources` replaced by its own: the envelope's `"source":` is the last one of the value (a column's
    JSON holds that text only inside a JSON string, where its quotes are escaped)."""
    values = batch.column("value")
    rows = sorted(sources)
    fixed = []
    for row in rows:
        text = values[row].as_py().encode()
        head, sep, tail = text.rpartition(b',"source":' + default)
        if not sep:
            raise AssertionError("an event's value without its source block")
        fixed.append(head + b',"source":' + sources[row] + tail)
    mask = np.zeros(len(values), dtype=bool)
    mask[rows] = True
    value = pc.replace_with_mask(values, bool_array(mask), binary_array(fixed, pa.string()))
    return batch.set_column(batch.schema.get_field_index("value"), "value", value)


def typed_column(values: pa.Array, col: ValueColumn, schema: dict, kernels: Mapping[str, TextKernel]) -> pa.Array:
    """One column's values (text) as the typed column of its Connect `schema` (`events.typed`): by
    Arrow's casts for the kinds whose text Arrow reads as the value (integers, text, fixed-scale
    decimals, booleans), by the JSON kernel for text values it re-lays (PostgreSQL's timestamptz),
    else value by value through the converter and maskers, as the row-wise path does."""
    typ, convert = connect_type(schema)
    kind, _ = col.text_kind or (None, 0)
    fast = kind is not None and (col.optional or not values.null_count)  # a null stays null
    out = None
    if fast and kind == "integer" and pa.types.is_integer(typ):
        with contextlib.suppress(pa.ArrowInvalid):
            out = values.cast(typ)
    elif fast and kind == "text" and typ == pa.string():
        out = values
    elif fast and kind == "decimal" and pa.types.is_decimal(typ):
        with contextlib.suppress(pa.ArrowInvalid):  # NaN, or a value the type cannot hold: the converter decides
            out = values.cast(typ)
    elif fast and kind == "boolean" and typ == pa.bool_():
        out = pc.equal(values, lit("t"))
    elif fast and kind in kernels and typ == pa.string():  # a JSON string the kernel re-lays
        json = column_json(values, col, kernels)
        present = json.filter(values.is_valid())  # each a JSON string without escapes: its text is the value
        if pc.all(pc.starts_with(present, '"')).as_py() is not False \
                and not pc.any(pc.match_substring(present, "\\")).as_py():
            out = pc.if_else(values.is_valid(), pc.binary_slice(json, 1, -1).cast(pa.string()), lit(None))
    if out is not None:
        return out
    fill = col.null_value if col.optional else col.missing
    for m in col.maskers:
        fill = m(fill)
    texts = values.to_pylist()
    converted = []
    for v in texts:
        if v is None:
            v = fill
        else:
            v = col.from_text(v)
            for m in col.maskers:
                v = m(v)
        converted.append(None if v is None else convert(v))
    return pa.array(converted, type=typ)


def typed_insert_block(te: TableRecords, columns: Sequence[pa.Array], source: pa.Array, op: str,
                       version: int | np.ndarray, ts_us: int | np.ndarray,
                       typed_of: ColumnTyped | None = None) -> TypedBlock:
    """`encode_block`'s events as a typed block: the columns typed (`typed_column`, or the
    connector's `typed_of`) into the key and the `after` image, `source` (typed by the source
    schema) per row."""
    n = len(source)
    kernels = te.ctx.text_kernels
    cache: dict[tuple[int, bool], pa.Array] = {}

    def typed(c: ValueColumn, schema: dict) -> pa.Array:
        k = (c.index, bool(c.maskers))
        if k not in cache:
            cache[k] = typed_of(c, schema) if typed_of is not None else typed_column(columns[c.index], c, schema,
                                                                                      kernels)
        return cache[k]

    def struct(cols: Sequence[ValueColumn], schema: dict) -> pa.Array:
        fields = schema["fields"]
        typ = connect_type(schema)[0]
        if not cols:
            return pa.array([{}] * n, type=typ)
        return pa.StructArray.from_arrays([typed(c, f) for c, f in zip(cols, fields, strict=True)],
                                          fields=list(typ))

    key_schema = te.key_schema.to_json() if te.key_schema is not None else None
    key = struct(te.key_columns, key_schema) if key_schema is not None else pa.nulls(n)
    value_schema = te.envelope.to_json()
    fields = {f["field"]: f for f in value_schema["fields"]}
    value_type = connect_type(value_schema)[0]
    ms, us, ns = now_ts()
    parts = {"before": pa.nulls(n, value_type.field("before").type), "after": struct(te.columns, fields["after"]),
             "source": source, "transaction": pa.nulls(n, value_type.field("transaction").type),
             "op": pa.repeat(string_scalar(op), n), "ts_ms": int64_array(np.full(n, ms)),
             "ts_us": int64_array(np.full(n, us)), "ts_ns": int64_array(np.full(n, ns))}
    value = pa.StructArray.from_arrays([parts[f.name] for f in value_type], fields=list(value_type))
    return make_block(te.topic, key_schema, key, value_schema, value, pa.repeat(string_scalar(op), n),
                      np.arange(n, dtype=np.int64), np.asarray(version, dtype=np.int64),
                      np.asarray(ts_us, dtype=np.int64))


def source_parts(maker: RecordMaker, te: TableRecords, ts_us: np.ndarray, fields: Mapping[str, pa.Array | bytes],
                 snapshot: str = "false") -> list:
    """`source_column`'s blocks as parts for `join_parts` (`encode_block` takes them as its source: the
    blocks are then joined once, with the rest of each event)."""
    if len(ts_us) and (ts_us == ts_us[0]).all():  # one commit time (a transaction's rows): its text once
        t = int(ts_us[0])
        times: dict[str, pa.Array | bytes] = {"ts_ms": b"%d" % (t // 1000), "ts_us": b"%d" % t, "ts_ns": b"%d" % (t * 1000)}
    else:
        times = {"ts_ms": decimal_text(ts_us // 1000), "ts_us": decimal_text(ts_us), "ts_ns": decimal_text(ts_us * 1000)}
    values = {**times, **fields}
    return [values[p] if isinstance(p, str) else p for p in maker.source_template(te, snapshot)]


def source_column(maker: RecordMaker, te: TableRecords, ts_us: np.ndarray, fields: Mapping[str, pa.Array | bytes],
                  snapshot: str = "false") -> pa.Array:
    """The `source` blocks of streamed records: the commit time per row (`ts_us`) and the JSON of
    the connector's other open slots per row (`fields`: `sequence` and the tail's; bytes: the JSON
    of every row)."""
    out = join_parts(source_parts(maker, te, ts_us, fields, snapshot))
    return out if isinstance(out, pa.Array) else pa.repeat(out, len(ts_us))  # (every field the same)


def typed_source_column(maker: RecordMaker, te: TableRecords, ts_us: np.ndarray, fields: Mapping[str, pa.Array],
                        snapshot: str = "false") -> pa.Array:
    """`source_column` as a typed struct column (`events.typed`): the commit time per row (`ts_us`),
    the values of the connector's other open slots per row (`fields`, typed), and the template's
    constant fields."""
    template = SourceTemplate(maker.source_template(te, snapshot), {})
    constants = orjson.loads(template.render(*(b"null" for _ in template.open)))  # once per block
    if constants["snapshot"] == STREAMED_SNAPSHOT:
        constants["snapshot"] = None  # as `events.output.typed_source` holds it
    n = len(ts_us)
    values = {"ts_ms": int64_array(ts_us // 1000), "ts_us": int64_array(ts_us), "ts_ns": int64_array(ts_us * 1000),
              **fields}
    typ = connect_type(te.ctx.source_schema.to_json())[0]
    arrays = [values[f.name].cast(f.type) if f.name in values else pa.array([constants[f.name]] * n, type=f.type)
              for f in typ]
    return pa.StructArray.from_arrays(arrays, fields=list(typ))


def decimal_text(v: np.ndarray) -> pa.Array:
    return int64_array(v).cast(pa.string()).cast(pa.binary())


#: the kernels of the kinds every connector has (a connector adds its own: `RecordContext.text_kernels`)
COMMON_KERNELS: dict[str, TextKernel] = {"integer": integer_json, "text": text_json, "decimal": decimal_json}
