"""Partition routing: `io.debezium.transforms.partitions.PartitionRouting`, and where a partition goes.

The Kafka partition of an event, which Debezium sets on the record, is the `__partition` header
(`PARTITION_HEADER`, Connect int32) in headwater: the event keeps its topic, key, value and other
headers; a sink that writes partitions reads it there (the jsonl sink shows it among the headers).

PartitionRouting hashes the values of `partition.payload.fields` (dotted paths into the envelope;
`change.` means `before.` for a delete and `after.` otherwise; a missing field or a null value is
left out; no value at all leaves the event as it is), adds the hashes with int32 overflow, clears the
sign bit (0x7fffffff becomes 0) and takes the rest modulo `partition.topic.num`.
`partition.hash.function` is `java` (each value's Java `hashCode`) or `murmur` (Debezium's
MurmurHash3: x64 variant, seed 9001, of a string's UTF-8 bytes, and of any other value's `hashCode`);
any other value means `java`, as in Debezium. Structs and maps, whose Java hash depends on object
identities, cannot be hashed and fail the event. Tombstones, records that are not change
envelopes, truncate and logical-message events pass unchanged.

Column-wise: each field's hash is computed once per distinct value and spread with numpy.
"""

from __future__ import annotations

import re
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from headwater.config.properties import prop
from headwater.events.arrays import valid_mask
from headwater.events.typed import DECIMAL, TypedBlock
from headwater.transforms.base import Transform, TransformError
from headwater.transforms.blocks import add_header, field_schema, struct_field
from headwater.transforms.registry import register

PARTITION_HEADER = "__partition"
PARTITION_SCHEMA: dict = {"type": "int32", "optional": False}

_MASK64 = (1 << 64) - 1
_SURROGATE = re.compile("[\ud800-\udfff]")


@register
class PartitionRouting(Transform):
    """The partition from a hash of payload fields (see the module's docstring)."""

    CLASS_NAMES = ("io.debezium.transforms.partitions.PartitionRouting",)
    SHORT_NAME = "PartitionRouting"
    OPTIONS = (
        prop("partition.payload.fields", "list", required=True),
        prop("partition.topic.num", "int", required=True, minimum=1),
        prop("partition.hash.function", default="java"),
    )

    def configure(self) -> None:
        fields = self.values["partition.payload.fields"] or []
        if not fields or any(not f.strip() for f in fields):
            self.fail("partition.payload.fields", "must list fields without empty elements",
                      "e.g. after.name,source.table,change.id")
        self.fields = [[p.strip() for p in f.split(".")] for f in fields]
        self.murmur = (self.values["partition.hash.function"] or "").strip().lower() == "murmur"

    def apply(self, block: TypedBlock) -> list[TypedBlock]:
        schema = block.value_schema
        if schema is None or not str(schema.get("name") or "").endswith(".Envelope"):
            return [block]
        op = block.batch.column("op").to_numpy(zero_copy_only=False)
        valid = valid_mask(block.batch.column("value")) & (op != "t") & (op != "m")
        if not valid.any():
            return [block]
        n = len(block)
        total = np.zeros(n, dtype=np.int64)
        found = np.zeros(n, dtype=bool)
        value = block.batch.column("value")
        for path in self.fields:
            for rows, column, fschema in self._columns(block, value, schema, path, op):
                hashes, present = self._hashes(column, fschema)
                take_rows = rows & present
                total[take_rows] += hashes[take_rows]
                found |= take_rows
        found &= valid
        if not found.any():
            return [block]
        h = (total & 0xFFFFFFFF).astype(np.int64)
        n31 = h & 0x7FFFFFFF
        n31[n31 == 0x7FFFFFFF] = 0
        partitions = (n31 % self.values["partition.topic.num"]).astype(np.int32)
        if found.all():
            return [add_header(block, PARTITION_HEADER, PARTITION_SCHEMA, pa.array(partitions, pa.int32()))]
        return [add_header(block, PARTITION_HEADER, PARTITION_SCHEMA, pa.array(partitions, pa.int32()), found)]

    def _columns(self, block: TypedBlock, value: pa.Array, schema: dict, path: list[str], op: np.ndarray
                 ) -> list[tuple[np.ndarray, pa.Array, dict]]:
        """The columns a field path reads, each with the rows it applies to."""
        n = len(block)
        if path[0] != "change" or len(path) == 1:
            found = struct_field(value, schema, ".".join(path)) if field_schema(schema, ".".join(path)) else None
            return [] if found is None else [(np.ones(n, dtype=bool), found[0], found[1])]
        out = []
        for image, rows in (("before", op == "d"), ("after", op != "d")):
            dotted = ".".join([image, *path[1:]])
            if rows.any() and field_schema(schema, dotted) is not None:
                column, fschema = struct_field(value, schema, dotted)  # type: ignore[misc]
                out.append((rows, column, fschema))
        return out

    def _hashes(self, column: pa.Array, schema: dict) -> tuple[np.ndarray, np.ndarray]:
        """Each row's hash (as int64 holding an int32) and whether the row has a value."""
        present = valid_mask(column)
        out = np.zeros(len(column), dtype=np.int64)
        if not present.any():
            return out, present
        if pa.types.is_nested(column.type):  # lists: no dictionary encoding, each value hashed
            distinct = column.filter(pa.array(present)).to_pylist()
            codes = np.zeros(len(column), dtype=np.int64)
            codes[present] = np.arange(len(distinct))
        else:
            encoded = pc.dictionary_encode(column)
            distinct, codes = encoded.dictionary.to_pylist(), np.asarray(encoded.indices.fill_null(0))
        if self.murmur and distinct and not isinstance(distinct[0], str):  # murmur of hashCodes, vectorized
            table = murmur3_ints(np.array([java_hash(v, schema) for v in distinct], dtype=np.int64))
        else:
            table = np.array([self._hash(v, schema) for v in distinct] or [0], dtype=np.int64)
        out[present] = table[codes[present]]
        return out, present

    def _hash(self, value: Any, schema: dict) -> int:
        if self.murmur:
            return murmur3_string(value) if isinstance(value, str) else murmur3_ints(
                np.array([java_hash(value, schema)], dtype=np.int64))[0]
        return java_hash(value, schema)


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def java_string_hash(s: str) -> int:
    """Java's `String.hashCode`: over UTF-16 code units, s[0]*31^(n-1) + ... with int32 overflow."""
    units = np.frombuffer(s.encode("utf-16-be"), dtype=">u2").astype(np.uint32)
    if not len(units):
        return 0
    powers = np.ones(len(units), dtype=np.uint32)
    if len(units) > 1:
        powers[:-1] = np.cumprod(np.full(len(units) - 1, 31, dtype=np.uint32), dtype=np.uint32)[::-1]
    return _int32(int((units * powers).sum(dtype=np.uint32)))


def java_hash(value: Any, schema: dict) -> int:
    """The Java `hashCode` of the Connect value `value` of `schema` (as Debezium's Struct holds it)."""
    t, name = schema["type"], schema.get("name")
    if name == DECIMAL:
        return _big_decimal_hash(value)
    if isinstance(value, str):
        return java_string_hash(value)
    if t == "boolean":
        return 1231 if value else 1237
    if t in ("int8", "int16", "int32"):
        return _int32(_number(value))
    if t == "int64":
        v = _number(value) & _MASK64
        return _int32(v ^ (v >> 32))
    if t == "float":
        return _int32(struct.unpack(">i", struct.pack(">f", value))[0])
    if t == "double":
        bits = struct.unpack(">q", struct.pack(">d", value))[0] & _MASK64 if value == value else 0x7FF8000000000000
        return _int32(bits ^ (bits >> 32))
    if t == "bytes":  # a ByteBuffer: 31 * h + each signed byte, from the last to the first
        h = 1
        for b in reversed(value):
            h = _int32(31 * h + (b - 256 if b >= 128 else b))
        return h
    if t == "array":  # a List: 31 * h + each element's hashCode (0 for null)
        h = 1
        for item in value:
            h = _int32(31 * h + (0 if item is None else java_hash(item, schema["items"])))
        return h
    raise TransformError(f"cannot hash a {name or t} value as Java does (its hashCode depends on object identities)")


def _number(value: Any) -> int:
    """The number a temporal value is held as (days, ms, µs, ns), or the integer itself."""
    if isinstance(value, int):
        return value
    arr = pa.array([value])
    return int(arr.view(pa.int32() if arr.type in (pa.date32(), pa.time32("ms")) else pa.int64())[0].as_py())


def _big_decimal_hash(value: Any) -> int:
    """Java's BigDecimal.hashCode: 31 * unscaled BigInteger's hashCode + scale."""
    sign, digits, exponent = value.as_tuple()
    unscaled = int("".join(map(str, digits)) or "0")
    scale = -exponent
    magnitude, h = unscaled, 0
    words = []
    while magnitude:
        words.append(magnitude & 0xFFFFFFFF)
        magnitude >>= 32
    for w in reversed(words):
        h = _int32(31 * h + w)
    if sign and unscaled:
        h = _int32(-h)
    return _int32(31 * h + scale)


# Debezium's MurmurHash3 (from Infinispan): the x64 variant, seed 9001, upper 32 bits of h1.

_C1, _C2 = 0x87C37B91114253D5, 0x4CF5AD432745937F


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK64


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK64
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK64
    return k ^ (k >> 33)


class _State:
    __slots__ = ("c1", "c2", "h1", "h2", "k1", "k2")

    def __init__(self, seed: int = 9001) -> None:
        self.h1 = 0x9368E53C2F6AF274 ^ seed
        self.h2 = 0x586DCD208F7CD3FD ^ seed
        self.c1, self.c2 = _C1, _C2
        self.k1 = self.k2 = 0

    def bmix(self) -> None:
        self.k1 = (self.k1 * self.c1) & _MASK64
        self.k1 = _rotl(self.k1, 23)
        self.k1 = (self.k1 * self.c2) & _MASK64
        self.h1 ^= self.k1
        self.h1 = (self.h1 + self.h2) & _MASK64
        self.h2 = _rotl(self.h2, 41)
        self.k2 = (self.k2 * self.c2) & _MASK64
        self.k2 = _rotl(self.k2, 23)
        self.k2 = (self.k2 * self.c1) & _MASK64
        self.h2 ^= self.k2
        self.h2 = (self.h2 + self.h1) & _MASK64
        self.h1 = (self.h1 * 3 + 0x52DCE729) & _MASK64
        self.h2 = (self.h2 * 3 + 0x38495AB5) & _MASK64
        self.c1 = (self.c1 * 5 + 0x7B7D159C) & _MASK64
        self.c2 = (self.c2 * 5 + 0x6BCE6396) & _MASK64

    def finish(self, length: int) -> int:
        self.h2 ^= length
        self.h1 = (self.h1 + self.h2) & _MASK64
        self.h2 = (self.h2 + self.h1) & _MASK64
        self.h1, self.h2 = _fmix(self.h1), _fmix(self.h2)
        self.h1 = (self.h1 + self.h2) & _MASK64
        return _int32(self.h1 >> 32)


def _signed_byte(b: int) -> int:
    """A byte as Java's `(long) byteValue`: sign-extended to 64 bits."""
    return (b - 256 if b >= 128 else b) & _MASK64


def _tail(data: bytes) -> tuple[int, int]:
    """k1 and k2 of the last (< 16) bytes, each byte sign-extended before its shift, as Java does."""
    k1 = k2 = 0
    for i, b in enumerate(data):
        if i < 8:
            k1 ^= (_signed_byte(b) << (8 * i)) & _MASK64
        else:
            k2 ^= (_signed_byte(b) << (8 * (i - 8))) & _MASK64
    return k1, k2


def murmur3_string(s: str) -> int:
    """Debezium's MurmurHash3 of a string: its UTF-8 bytes (unpaired surrogates as '?')."""
    data = _SURROGATE.sub("?", s).encode("utf-8")
    state = _State()
    full = len(data) // 16 * 16
    for i in range(0, full, 16):
        state.k1 = int.from_bytes(data[i:i + 8], "little")
        state.k2 = int.from_bytes(data[i + 8:i + 16], "little")
        state.bmix()
    if len(data) & 15:
        state.k1, state.k2 = _tail(data[full:])
        state.bmix()
    return state.finish(len(data))


def murmur3_ints(hashcodes: np.ndarray) -> np.ndarray:
    """Debezium's MurmurHash3 of ints (values' hashCodes), all at once: each int's 4 little-endian
    bytes, sign-extended as Java does, through one block of the x64 variant (numpy's uint64 arithmetic
    wraps as Java's long does)."""
    u = np.uint64
    with np.errstate(over="ignore"):
        raw = (hashcodes.astype(np.int64) & 0xFFFFFFFF).astype(u)
        k1 = np.zeros(len(raw), dtype=u)
        for i in range(4):  # byte i, sign-extended to 64 bits, shifted into place
            b = (raw >> u(8 * i)) & u(0xFF)
            extended = np.where(b >= u(128), b | u(0xFFFFFFFFFFFFFF00), b)
            k1 ^= extended << u(8 * i)
        h1 = np.full(len(raw), u(0x9368E53C2F6AF274 ^ 9001))
        h2 = np.full(len(raw), u(0x586DCD208F7CD3FD ^ 9001))
        c1, c2 = u(_C1), u(_C2)
        k1 = k1 * c1
        k1 = (k1 << u(23)) | (k1 >> u(41))
        k1 = k1 * c2
        h1 ^= k1
        h1 = h1 + h2
        h2 = (h2 << u(41)) | (h2 >> u(23))
        h2 = h2 + h1  # k2 is 0: its mix adds nothing but h1
        h1 = h1 * u(3) + u(0x52DCE729)
        h2 = h2 * u(3) + u(0x38495AB5)
        h2 ^= u(4)
        h1 = h1 + h2
        h2 = h2 + h1
        h1, h2 = _fmix_array(h1), _fmix_array(h2)
        h1 = h1 + h2
        return (h1 >> u(32)).astype(np.int64).astype(np.int32).astype(np.int64)


def _fmix_array(k: np.ndarray) -> np.ndarray:
    u = np.uint64
    k = k ^ (k >> u(33))
    k = k * u(0xFF51AFD7ED558CCD)
    k = k ^ (k >> u(33))
    k = k * u(0xC4CEB9FE1A85EC53)
    return k ^ (k >> u(33))
