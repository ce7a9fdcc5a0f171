"""Kafka headers of typed blocks and of JSON rows, column-wise: read, add, remove, append constants.

A typed block's `headers` column (`events.typed.headers_type`) is a list per event of `{key, value}`
entries whose `value` is a struct with one field per header name of the block, typed by that header's
Connect schema (the block's `header_schemas`); an entry sets only the field of its own name. JSON rows
(`events.batch.HEADER_TYPE`) hold each header's value as JSON text. Everything here works on whole
Arrow columns and numpy index arithmetic; nothing loops over events in Python.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.arrays import (
    bool_array,
    int32_array,
    int64_array,
    list_offsets,
    lit,
    string_array,
    string_layout,
    string_scalar,
    valid_mask,
)
from headwater.events.typed import HEADERS_SCHEMA_META, TypedBlock, headers_type

_INT32_MAX = 2**31 - 1


def list_entries(column: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """The entries of a list column (null lists have none) in order, and the row of each."""
    offsets = list_offsets(column)
    rows = np.repeat(np.arange(len(column)), np.diff(offsets))
    entries = column.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    if column.null_count:
        valid = valid_mask(column)[rows]
        entries, rows = entries.filter(bool_array(valid)), rows[valid]
    return entries, rows


def header_entries(block: TypedBlock) -> tuple[pa.Array, np.ndarray]:
    """The header entries of every row (`{key, value}` structs) in order, and the row of each."""
    return list_entries(block.batch.column("headers"))


def header_values(block: TypedBlock, name: str) -> tuple[pa.Array, dict | None, np.ndarray] | None:
    """Per row, the value of the last header named `name` (null where absent), its Connect schema, and
    which rows have such a header; None when the block can hold no header of that name."""
    schemas = block.header_schemas
    if name not in schemas:
        return None
    entries, rows = header_entries(block)
    hit = pc.equal(entries.field("key"), name).to_numpy(zero_copy_only=False)
    n = len(block)
    where = np.full(n, -1, dtype=np.int64)
    where[rows[hit]] = np.flatnonzero(hit)  # the last entry of a row wins
    present = where >= 0
    picked = pc.struct_field(entries.field("value"), [entries.type.field("value").type.get_field_index(name)])
    return picked.take(pa.array(where, mask=~present)), schemas[name], present


def with_headers_column(block: TypedBlock, schemas: dict[str, dict | None], column: pa.Array) -> TypedBlock:
    """`block` with a new `headers` column typed by `headers_type(schemas)`, the other columns unchanged."""
    b = block.batch
    meta = dict(b.schema.metadata)
    if schemas:
        meta[HEADERS_SCHEMA_META] = orjson.dumps(schemas)
    else:
        meta.pop(HEADERS_SCHEMA_META, None)
    i = b.schema.get_field_index("headers")
    columns = [column if j == i else b.column(j) for j in range(b.num_columns)]
    fields = [pa.field("headers", column.type) if j == i else b.schema.field(j) for j in range(b.num_columns)]
    return TypedBlock(pa.RecordBatch.from_arrays(columns, schema=pa.schema(fields, metadata=meta)))


def set_headers(block: TypedBlock, schemas: dict[str, dict | None], entries: pa.Array, rows: np.ndarray) -> TypedBlock:
    """`block` with these header entries (`{key, value}` structs typed by `headers_type(schemas)`), entry
    j belonging to row `rows[j]` (non-decreasing); rows without entries get null headers."""
    n = len(block)
    counts = np.bincount(rows, minlength=n) if len(rows) else np.zeros(n, dtype=np.int64)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    mask = None if (counts > 0).all() else bool_array(counts == 0)
    column = pa.ListArray.from_arrays(pa.array(offsets), entries.cast(headers_type(schemas).value_type), mask=mask)
    return with_headers_column(block, schemas, column)


def widen(entries: pa.Array, old: dict[str, dict | None], new: dict[str, dict | None]) -> pa.Array:
    """Header entries typed by `old` schemas retyped for `new` (a superset): the new fields null."""
    n = len(entries)
    value_t = headers_type(new).value_type.field("value").type
    values = entries.field("value") if old else None
    fields = []
    for i, name in enumerate(new):
        if name in old and values is not None:
            fields.append((name, values.field(list(old).index(name))))
        else:
            fields.append((name, pa.nulls(n, value_t.field(i).type)))
    value = pa.StructArray.from_arrays([a for _, a in fields], names=[f for f, _ in fields]) if fields else pa.nulls(n)
    return pa.StructArray.from_arrays([entries.field("key"), value], names=["key", "value"])


def add_header(block: TypedBlock, name: str, schema: dict | None, values: pa.Array,
               present: np.ndarray | None = None) -> TypedBlock:
    """`block` with a header `name` of Connect `schema` appended to each row where `present` (default:
    every row), its value from `values` (typed by `connect_type(schema)`; null allowed)."""
    old = block.header_schemas
    if name in old and old[name] != schema:
        raise ValueError(f"header {name} already has another schema in this block")
    schemas = {**old, name: schema}
    n = len(block)
    present = np.ones(n, dtype=bool) if present is None else present
    entries, rows = header_entries(block)
    entries = widen(entries, old, schemas)
    new_rows = np.flatnonzero(present)
    k = len(new_rows)
    value_t = headers_type(schemas).value_type.field("value").type
    fields = [(f, values.filter(bool_array(present)) if f == name else pa.nulls(k, value_t.field(f).type))
              for f in schemas]
    added = pa.StructArray.from_arrays([pa.repeat(string_scalar(name), k),
                                        pa.StructArray.from_arrays([a for _, a in fields], names=list(schemas))],
                                       names=["key", "value"])
    all_rows = np.concatenate([rows, new_rows])
    order = np.argsort(all_rows, kind="stable")
    combined = pa.concat_arrays([entries, added]).take(pa.array(order))
    return set_headers(block, schemas, combined, all_rows[order])


def remove_header(block: TypedBlock, name: str) -> TypedBlock:
    """`block` without its headers named `name`."""
    old = block.header_schemas
    if name not in old:
        return block
    entries, rows = header_entries(block)
    keep = pc.not_equal(entries.field("key"), name).to_numpy(zero_copy_only=False)
    schemas = {k: v for k, v in old.items() if k != name}
    entries = entries.filter(bool_array(keep))
    rows = rows[keep]
    value = entries.field("value")
    fields = [(k, value.field(list(old).index(k))) for k in schemas]
    typed = pa.StructArray.from_arrays(
        [entries.field("key"), pa.StructArray.from_arrays([a for _, a in fields], names=list(schemas))
         if fields else pa.nulls(len(entries))], names=["key", "value"])
    return set_headers(block, schemas, typed, rows)


def append_entries(lists: pa.Array, constant: pa.Array, rows: np.ndarray) -> pa.Array:
    """The list column `lists` with the entries of `constant` (of the lists' value type, or one the old
    entries cast to) appended, in order, to every list where `rows` is True; a list that ends up empty
    is null. One `take` over the old entries and the constant, placed by index arithmetic."""
    n, k = len(lists), len(constant)
    old, old_rows = list_entries(lists)
    old_counts = np.bincount(old_rows, minlength=n) if len(old_rows) else np.zeros(n, dtype=np.int64)
    counts = old_counts + rows.astype(np.int64) * k
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    empty = counts == 0
    mask = bool_array(empty) if empty.any() else None
    added = np.flatnonzero(rows)
    if not len(old):  # the constant's entries only (a snapshot's rows: no headers of their own): tiled
        return pa.ListArray.from_arrays(int32_array(offsets), kept_tiling(constant, len(added)), mask=mask)
    source = np.empty(int(offsets[-1]), dtype=np.int64)
    old_starts = np.zeros(n, dtype=np.int64)
    np.cumsum(old_counts[:-1], out=old_starts[1:])
    rank = np.arange(len(old)) - old_starts[old_rows]
    source[offsets[old_rows] + rank] = np.arange(len(old))
    if len(added) and k:
        at = (offsets[added] + old_counts[added])[:, None] + np.arange(k)
        source[at.ravel()] = len(old) + np.tile(np.arange(k), len(added))
    pool = pa.concat_arrays([old.cast(constant.type), constant])
    return pa.ListArray.from_arrays(int32_array(offsets), pool.take(int64_array(source)), mask=mask)


def tiled(a: pa.Array, times: int) -> pa.Array:
    """`a`'s values repeated `times` times, one after the other; strings (also a struct's fields) without
    nulls are laid out by numpy, anything else taken by index."""
    k = len(a)
    if isinstance(a, pa.StructArray) and not a.null_count:
        return pa.StructArray.from_arrays([tiled(a.field(i), times) for i in range(a.type.num_fields)],
                                          fields=list(a.type))
    if a.type in (pa.string(), pa.binary()) and not a.null_count and k:
        starts, lengths, data = string_layout(a)
        first, stride = int(starts[0]), int(lengths.sum())
        if stride * times <= _INT32_MAX:
            pattern = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int32)
            offsets = np.empty((times * k + 1), dtype=np.int32)  # (int32 is enough: checked above)
            np.add((np.arange(times, dtype=np.int32) * np.int32(stride))[:, None], pattern[None, :],
                   out=offsets[:-1].reshape(times, k))
            offsets[-1] = stride * times
            body = np.tile(data[first:first + stride], times)
            return pa.Array.from_buffers(a.type, k * times, [None, pa.py_buffer(offsets), pa.py_buffer(body)])
    return a.take(int64_array(np.tile(np.arange(k, dtype=np.int64), times)))


# Every batch of a snapshot's rows gets the same entries (Debezium's context headers) on each row: ~300
# bytes of header text a row laid out by `tiled`, then compared back by `same_headers` before a jsonl
# line is written: ~10 % of a MariaDB snapshot task's encoding and writing (py-spy). The tilings of
# text entries are kept (the most recent `_TILINGS_KEPT`, by the entries' text): a batch's entries are
# a slice of one made once, which `same_headers` knows by its buffers without reading them again.
_TILINGS_KEPT = 4
_tilings: dict[tuple[tuple[str, ...], ...], pa.StructArray] = {}  # the entries' texts -> their tiling


def kept_tiling(constant: pa.Array, times: int) -> pa.Array:
    """`tiled(constant, times)`; for text entries (a struct of strings without nulls: JSON rows' headers)
    a slice of a tiling kept from an earlier call of at least as many times."""
    if not (isinstance(constant, pa.StructArray) and len(constant) and not constant.null_count
            and all(f.type == pa.string() and not constant.field(i).null_count for i, f in enumerate(constant.type))):
        return tiled(constant, times)
    key = tuple(tuple(constant.field(i).to_pylist()) for i in range(constant.type.num_fields))
    kept = _tilings.pop(key, None)  # (put back last: the most recently used)
    if kept is None or len(kept) < len(constant) * times:
        kept = tiled(constant, times)
    _tilings[key] = kept
    while len(_tilings) > _TILINGS_KEPT:
        del _tilings[next(iter(_tilings))]
    return kept.slice(0, len(constant) * times)


def _in_kept_tiling(entries: pa.StructArray, k: int) -> bool:
    """Whether `entries` is a slice, from a whole row on, of a kept tiling of `k` entries: its fields' buffers
    equal to the tiling's (Arrow's `Buffer.equals` takes the same memory as equal without reading it)."""
    fields = [entries.field(i) for i in range(entries.type.num_fields)]
    start = fields[0].offset
    if any(f.offset != start or f.null_count for f in fields) or start % k:
        return False
    for key, kept in _tilings.items():
        if len(key[0]) == k and kept.type == entries.type and start + len(entries) <= len(kept) \
                and all(f.buffers()[1:] == kept.field(i).buffers()[1:] and kept.field(i).offset == 0
                        for i, f in enumerate(fields)):
            return True
    return False


def _tiled_strings(a: pa.Array, k: int) -> bool:
    """Whether a string array of whole rows of `k` values (no nulls) is its first `k` values repeated:
    the lengths repeat every `k` values, and so do the bytes every `k` values' worth of them."""
    starts, lengths, data = string_layout(a)
    if len(lengths) <= k:
        return True
    if not np.array_equal(lengths[k:], lengths[:-k]):
        return False
    first, stride = int(starts[0]), int(lengths[:k].sum())
    body = data[first:first + int(lengths.sum())]
    return bool(np.array_equal(body[stride:], body[:-stride]))


def same_headers(column: pa.Array) -> int | None:
    """The number of entries of every row when every row of a JSON rows' `headers` column
    (`events.batch.HEADER_TYPE`) holds the same entries, in the same order, as the first (as Debezium's
    context headers, in a batch of data change records); else None. A few passes of numpy over the
    entries' bytes, far cheaper than writing their JSON per row."""
    n = len(column)
    if not n or column.null_count:
        return None
    offsets = list_offsets(column)
    k = int(offsets[1] - offsets[0])
    if not k or not np.array_equal(offsets - offsets[0], np.arange(n + 1, dtype=np.int64) * k):
        return None
    entries = column.values.slice(int(offsets[0]), n * k)
    if entries.null_count:
        return None
    if _in_kept_tiling(entries, k):
        return k
    for i in range(entries.type.num_fields):
        child = entries.field(i)
        if child.null_count or child.type != pa.string() or not _tiled_strings(child, k):
            return None
    return k


#: the Connect schema of a string header (Kafka's `Schema.STRING_SCHEMA`)
STRING_SCHEMA: dict = {"type": "string", "optional": False}


def append_string_headers(block: TypedBlock, headers: Sequence[tuple[str, str]], rows: np.ndarray) -> TypedBlock:
    """`block` with the same string headers `(name, value)` appended, in order, to each row where `rows` is
    True (after the row's own headers)."""
    if not rows.any():
        return block
    old = block.header_schemas
    for name, _ in headers:
        if name in old and old[name] != STRING_SCHEMA:
            raise ValueError(f"header {name} already has another schema in this block")
    schemas = {**old, **{name: STRING_SCHEMA for name, _ in headers}}
    entry_type = headers_type(schemas).value_type
    value_type = entry_type.field("value").type
    k = len(headers)
    fields = [string_array([value if header == name else None for header, value in headers]) if name in dict(headers)
              else pa.nulls(k, value_type.field(name).type) for name in schemas]
    constant = pa.StructArray.from_arrays([string_array([n for n, _ in headers]),
                                           pa.StructArray.from_arrays(fields, names=list(schemas))],
                                          names=["key", "value"])
    column = block.batch.column("headers")
    if old != schemas:  # the old entries retyped for the new header names
        entries, entry_rows = header_entries(block)
        n = len(block)
        counts = np.bincount(entry_rows, minlength=n) if len(entry_rows) else np.zeros(n, dtype=np.int64)
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        column = pa.ListArray.from_arrays(int32_array(offsets), widen(entries, old, schemas).cast(entry_type))
    return with_headers_column(block, schemas, append_entries(column, constant, rows))


def text_header_entries(headers: Sequence[tuple[str, str]]) -> pa.Array:
    """Header entries `{key, value}` of JSON rows (`events.batch.HEADER_TYPE`): names and JSON text."""
    return pa.StructArray.from_arrays([string_array([n for n, _ in headers]), string_array([v for _, v in headers])],
                                      names=["key", "value"])


def headers_json_members(column: pa.Array) -> pa.Array:
    """Per row of a JSON rows' `headers` column (`events.batch.HEADER_TYPE`: names and JSON text), the
    member `,"headers":{"name":value,...}` of a jsonl line, or "" for a row without headers; column-wise
    (each distinct name made JSON once)."""
    n = len(column)
    if n > 1 and same_headers(column):  # each row's member is the first row's
        return pa.repeat(string_scalar(first_headers_member(column)), n)
    entries, rows = list_entries(column)
    if not len(entries):
        return pa.repeat(string_scalar(""), n)
    names = entries.field("key").dictionary_encode()
    quoted = string_array([orjson.dumps(k).decode() for k in names.dictionary.to_pylist()]).take(names.indices)
    member = pc.binary_join_element_wise(quoted, lit(":"), pc.coalesce(entries.field("value"), lit("null")), lit(""))
    counts = np.bincount(rows, minlength=n)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    joined = pc.binary_join(pa.ListArray.from_arrays(int32_array(offsets), member), lit(","))
    text = pc.binary_join_element_wise(lit(',"headers":{'), joined, lit("}"), lit(""))
    return pc.if_else(bool_array(counts > 0), text, lit(""))


_MEMBERS_KEPT = 64
_members: dict[tuple[tuple[str, str | None], ...], str] = {}  # a row's entries -> its member


def first_headers_member(column: pa.Array) -> str:
    """`headers_json_members` of the first row of a JSON rows' `headers` column (not empty), kept by the
    row's entries (a snapshot's every batch has the same: ~0.5 ms of Arrow calls a batch saved)."""
    row = column[0].as_py() or []
    key = tuple((e["key"], e["value"]) for e in row)
    member = _members.get(key)
    if member is None:
        if len(_members) >= _MEMBERS_KEPT:
            _members.clear()
        member = _members[key] = headers_json_members(column.slice(0, 1))[0].as_py()
    return member
