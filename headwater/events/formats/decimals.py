"""Connect Decimal values of a decimal128 column as the bytes Kafka Connect holds them in.

Connect's Decimal is the unscaled value's minimal big-endian two's-complement bytes (Java's
`BigInteger.toByteArray`); JsonConverter writes them as base64 text, AvroConverter as Avro bytes.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def unscaled_bytes(arr: pa.Array) -> list[bytes]:
    """Each element's unscaled value as Java's `BigInteger.toByteArray` gives it (any bytes at a null)."""
    raw = np.frombuffer(arr.buffers()[1], dtype=np.uint8, count=16 * len(arr), offset=16 * arr.offset)
    out: list[bytes] = []
    for i in range(len(arr)):
        n = int.from_bytes(raw[16 * i:16 * i + 16].tobytes(), "little", signed=True)
        size = (n if n >= 0 else ~n).bit_length() // 8 + 1
        out.append(n.to_bytes(size, "big", signed=True))
    return out
