"""Connect Decimal bytes of decimal128 columns: Java's `BigInteger.toByteArray`, within and beyond 64 bits."""

from __future__ import annotations

import decimal
import random

import pyarrow as pa

from headwater.events.formats.decimals import unscaled_bytes


def java_bytes(n: int) -> bytes:
    """BigInteger.toByteArray: the minimal big-endian two's complement."""
    return n.to_bytes((n if n >= 0 else ~n).bit_length() // 8 + 1, "big", signed=True)


def test_unscaled_bytes() -> None:
    rng = random.Random(7)
    small = [0, 1, -1, 127, 128, -128, -129, 255, 256, 2**63 - 1, -2**63, 2**55, -2**55 - 1]
    small += [rng.randint(-2**63, 2**63 - 1) >> rng.randint(0, 62) for _ in range(3000)]
    column = pa.array([decimal.Decimal(v) for v in small], pa.decimal128(38, 0))
    assert unscaled_bytes(column) == [java_bytes(v) for v in small]
    assert unscaled_bytes(column.slice(5, 10)) == [java_bytes(v) for v in small[5:15]]
    big = [2**100, -2**100, 5, -7, 10**37, -10**37, 2**64, -2**64]
    column = pa.array([decimal.Decimal(v) for v in big], pa.decimal128(38, 0))
    assert unscaled_bytes(column) == [java_bytes(v) for v in big]
