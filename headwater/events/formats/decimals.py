"""Connect Decimal values of a decimal128 column as the bytes Kafka Connect holds them in.

Connect's Decimal is the unscaled value's minimal big-endian two's-complement bytes (Java's
`BigInteger.toByteArray`); JsonConverter writes them as base64 text, AvroConverter as Avro bytes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def unscaled_bytes(arr: pa.Array) -> list[bytes]:
    """Each element's unscaled value as Java's `BigInteger.toByteArray` gives it (any bytes at a null).
    Values within 64 bits (the usual) are cut from their big-endian bytes column-wise."""
    words = np.frombuffer(arr.buffers()[1], dtype="<i8", count=2 * len(arr), offset=16 * arr.offset).reshape(-1, 2)
    low, high = words[:, 0], words[:, 1]
    if not np.array_equal(high, low >> 63):  # some value needs more than 64 bits
        return [_minimal(int(lo) & (2**64 - 1) | int(hi) << 64) for lo, hi in zip(low.tolist(), high.tolist(),
                                                                                 strict=True)]
    magnitude = np.where(low < 0, ~low, low)
    sizes = np.ones(len(arr), dtype=np.int64)
    for k in range(1, 8):
        sizes += magnitude >= (1 << (8 * k - 1))
    data = low.astype(">i8").tobytes()
    return [data[8 * i + 8 - n:8 * i + 8] for i, n in enumerate(sizes.tolist())]


def _minimal(n: int) -> bytes:
    size = (n if n >= 0 else ~n).bit_length() // 8 + 1
    return n.to_bytes(size, "big", signed=True)
