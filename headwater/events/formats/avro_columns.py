"""Avro binary encoding of typed columns, column-wise: each element's Avro bytes as one binary array.

The encoding is Avro's (as Java's `BinaryEncoder` writes it) for the schema `avro.avro_schema` makes
from the column's Connect schema: ints and longs as zigzag varints (computed on numpy arrays, all
rows at once), floats and doubles as little-endian IEEE bytes, strings and bytes as a varint length
and the bytes, a record as its fields' encodings one after the other, an array or map as one block
(`count`, the items, then 0; an empty one as 0), a union as its branch index and the branch's
encoding. A null whose schema has a default is encoded as the default (as Connect's `Struct.get`
reads it); a null in a required field without one is refused (`AvroDataError`), as Confluent's
AvroConverter refuses it. Each part is an Arrow binary array and parts are joined with Arrow's
element-wise joins, so no Python code runs per event. `container_file` writes encoded records as
an Avro object container file (one data block, codec `null` or `deflate`).
"""

from __future__ import annotations

import base64
import decimal
import os
import zlib
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.arrays import binary_array, binary_scalar, ragged_binary, valid_mask
from headwater.events.formats.decimals import unscaled_bytes
from headwater.events.typed import DECIMAL, TEMPORAL, physical_int

EMPTY = binary_scalar(b"")  # (pa.scalar would import pandas: see headwater.events.arrays)


class AvroDataError(ValueError):
    """A value its Avro schema cannot hold: a null in a required field, as Confluent's AvroConverter
    refuses it ("Invalid null value for required ... field")."""


def varints(values: np.ndarray) -> pa.Array:
    """Avro's zigzag varint of each int64 value."""
    v = values.astype(np.int64, copy=False)
    x = ((v << 1) ^ (v >> 63)).view(np.uint64)
    n = len(x)
    out = np.zeros((n, 10), dtype=np.uint8)
    widths = np.ones(n, dtype=np.int64)
    used = 1
    for i in range(10):
        low = (x & np.uint64(0x7F)).astype(np.uint8)
        x = x >> np.uint64(7)
        more = x != 0
        out[:, i] = low | (more.astype(np.uint8) << 7)
        widths += more
        used = i + 1
        if not more.any():
            break
    return ragged_binary(out[:, :used], widths)


def _fixed(values: np.ndarray) -> pa.Array:
    """Each value's little-endian bytes (a float32 or float64 array)."""
    rows = np.ascontiguousarray(values).view(np.uint8).reshape(len(values), values.dtype.itemsize)
    return ragged_binary(rows, np.full(len(values), values.dtype.itemsize, dtype=np.int64))


def _join(*parts: pa.Array | pa.Scalar) -> pa.Array:
    return pc.binary_join_element_wise(*parts, EMPTY)


def _length_prefixed(data: pa.Array) -> pa.Array:
    """Avro bytes or string: the varint length, then the bytes (a null as empty)."""
    data = data.cast(pa.binary()).fill_null(EMPTY)
    lengths = pc.binary_length(data).to_numpy(zero_copy_only=False)
    return _join(varints(lengths), data)


def encode_column(arr: pa.Array, schema: dict, where: str) -> pa.Array:
    """Each element's Avro encoding for the Avro form of Connect schema `schema` (anything at a null
    the schema has no default for); `where` names the column in errors."""
    return _encode(arr, schema, np.ones(len(arr), dtype=bool), where, top=True)


def _encode(arr: pa.Array, schema: dict, relevant: np.ndarray, where: str, top: bool = False) -> pa.Array:
    """The encoding of each element, the union index first for an optional schema; `relevant` marks
    the rows whose values are written (the others belong to null parents)."""
    default = schema.get("default")
    if arr.null_count and default is not None:
        arr = _with_default(arr, schema, default)
    valid = valid_mask(arr)
    if not schema.get("optional", False) and not top and (relevant & ~valid).any():
        raise AvroDataError(f"cannot write {where} as Avro: a null in the required field "
                            f"{schema.get('field', schema.get('name', ''))!r} (Confluent's AvroConverter refuses it "
                            f"too: Invalid null value for required field)")
    body = _body(arr, schema, relevant & valid, where)
    if not schema.get("optional", False):
        return body
    if default is not None:  # [T, "null"], and no null left
        return _join(pa.scalar(b"\x00", pa.binary()), body)
    return pc.if_else(pa.array(valid), _join(pa.scalar(b"\x02", pa.binary()), body), pa.scalar(b"\x00", pa.binary()))


def _with_default(arr: pa.Array, schema: dict, default: Any) -> pa.Array:
    """`arr` with its nulls replaced by the schema's default (JSON form)."""
    t = schema["type"]
    if t == "bytes" and not pa.types.is_decimal(arr.type):
        value: Any = base64.b64decode(default)
    elif pa.types.is_decimal(arr.type):
        scale = arr.type.scale
        value = decimal.Decimal(int.from_bytes(base64.b64decode(default), "big", signed=True)).scaleb(-scale)
    elif t in ("float", "double") and isinstance(default, str):
        value = float(default.replace("Infinity", "inf"))
    elif t in ("struct", "array", "map"):
        raise AvroDataError(f"a null {t} with a default is not supported: {schema.get('field')!r}")
    else:
        value = default
    if pa.types.is_temporal(arr.type):
        return arr.view(physical_int(arr.type)).fill_null(value).view(arr.type)
    return arr.fill_null(pa.scalar(value, arr.type))


def _body(arr: pa.Array, schema: dict, relevant: np.ndarray, where: str) -> pa.Array:
    """The encoding of each element without a union index."""
    name, t = schema.get("name"), schema["type"]
    n = len(arr)
    if name in TEMPORAL:
        return varints(arr.view(physical_int(arr.type)).fill_null(0).to_numpy(zero_copy_only=False))
    if name == DECIMAL and pa.types.is_decimal(arr.type):
        return _length_prefixed(binary_array(unscaled_bytes(arr)))
    if t in ("int8", "int16", "int32", "int64"):
        return varints(arr.fill_null(0).cast(pa.int64()).to_numpy(zero_copy_only=False))
    if t == "boolean":
        return ragged_binary(arr.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint8).reshape(n, 1),
                             np.ones(n, dtype=np.int64))
    if t == "float":
        return _fixed(arr.fill_null(0.0).to_numpy(zero_copy_only=False).astype("<f4"))
    if t == "double":
        return _fixed(arr.fill_null(0.0).to_numpy(zero_copy_only=False).astype("<f8"))
    if t in ("string", "bytes"):
        return _length_prefixed(arr)
    if t == "struct":
        fields = schema["fields"]
        if not fields:
            return pa.array([b""] * n, pa.binary())
        return _join(*(_encode(arr.field(i), f, relevant, f"{where}.{f['field']}") for i, f in enumerate(fields)))
    if t in ("array", "map"):
        offsets = arr.offsets
        if t == "array":
            items = arr.values
            encoded = _encode(items, schema["items"], np.ones(len(items), dtype=bool), where)
        else:
            keys, values = arr.keys, arr.items
            everything = np.ones(len(keys), dtype=bool)
            encoded = _join(_encode(keys, schema["keys"], everything, where),
                            _encode(values, schema["values"], everything, where))
        lists = pa.ListArray.from_arrays(offsets, encoded)
        counts = pc.list_value_length(lists).fill_null(0).to_numpy(zero_copy_only=False)
        joined = pc.binary_join(lists, EMPTY).fill_null(EMPTY)
        blocks = _join(varints(counts), joined, pa.scalar(b"\x00", pa.binary()))
        return pc.if_else(pa.array(counts > 0), blocks, pa.scalar(b"\x00", pa.binary()))
    raise ValueError(f"not a Connect schema type: {t!r}")


CONTAINER_MAGIC = b"Obj\x01"
CODECS = ("null", "deflate")


def container_file(schema_text: str, encoded: pa.Array, codec: str = "null") -> bytes:
    """An Avro object container file of records already encoded (`encode_column`, no nulls): the
    header (magic, `avro.schema` and `avro.codec` metadata, a sync marker), then one data block."""
    if codec not in CODECS:
        raise ValueError(f"Avro codec {codec!r} is not one of {', '.join(CODECS)}")
    sync = os.urandom(16)

    def long(v: int) -> bytes:
        return varints(np.array([v], dtype=np.int64))[0].as_py()

    def text(b: bytes) -> bytes:
        return long(len(b)) + b

    meta = {b"avro.schema": schema_text.encode(), b"avro.codec": codec.encode()}
    header = CONTAINER_MAGIC + long(len(meta)) + b"".join(text(k) + text(v) for k, v in meta.items()) + long(0) + sync
    data = encoded.buffers()
    offsets = np.frombuffer(data[1], dtype=np.int32, count=len(encoded) + 1, offset=4 * encoded.offset)
    body = bytes(memoryview(data[2])[offsets[0]:offsets[-1]]) if len(encoded) else b""
    if codec == "deflate":
        compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -15)
        body = compressor.compress(body) + compressor.flush()
    return header + long(len(encoded)) + long(len(body)) + body + sync
