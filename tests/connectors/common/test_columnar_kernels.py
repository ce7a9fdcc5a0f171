"""The common column-wise JSON kernels without a server: `decimal_json` (precise decimals of fixed scale)
and its `base64_twos_complement` against Java's definition of Debezium's Decimal (BigInteger.toByteArray
of the unscaled value, base64)."""

from __future__ import annotations

import base64
import random
import re
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from headwater.connectors.common.columnar import base64_twos_complement, decimal_json


def _reference(text: str, scale: int) -> bytes | None:
    """The value's JSON as Debezium writes it, or None where the kernel must leave it to the converter."""
    whole = 18 - scale
    if not re.fullmatch(rf"-?\d{{1,{whole}}}" + (rf"\.\d{{{scale}}}" if scale else ""), text) or not whole:
        return None
    unscaled = int(Decimal(text).scaleb(scale))
    size = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1  # BigInteger.toByteArray's length
    return b'"' + base64.b64encode(unscaled.to_bytes(size, "big", signed=True)) + b'"'


EDGES = {0: ["0", "-0", "1", "-1", "127", "128", "-128", "-129", "255", "256", "32767", "32768", "-32768", "-32769",
             "8388607", "8388608", "-8388609", "2147483647", "-2147483648", "999999999999999999",
             "-999999999999999999", "1000000000000000000", "", "NaN", "1e5", "+1", "1.0", "--1", "12a"],
         2: ["0.00", "-0.00", "1.27", "1.28", "-1.28", "-1.29", "99999.99", "-99999.99", "0.01", "-0.01",
             "9999999999999999.99", "-9999999999999999.99", "10000000000000000.00", "1.2", "1.234", "12", ".12",
             "-.12", "1.-2", "NaN", "Infinity", "1,23", "1.2 ", " 1.23"]}


@pytest.mark.parametrize("scale", [0, 2])
def test_decimal_kernel_matches_javas_definition(scale: int) -> None:
    rnd = random.Random(scale)
    values: list[str | None] = [*EDGES[scale], None]
    for _ in range(3000):
        digits = rnd.randint(1, 18)
        n = rnd.randint(-(10 ** digits) + 1, 10 ** digits - 1)
        values.append(str(Decimal(n).scaleb(-scale)) if scale else str(n))
    values += [None, "-" + "9" * 16 + ".99" if scale else "-" + "9" * 18]
    for part in (pa.array(values, pa.string()), pa.array(values, pa.string()).slice(5, 2000),
                 pa.array([v for v in values if v is not None and _reference(v, scale)], pa.string())):
        got, slow = decimal_json(part, scale)
        assert slow is not None and len(got) == len(part) == len(slow)
        for text, json, s in zip(part.to_pylist(), got.to_pylist(), slow.to_pylist(), strict=True):
            want = None if text is None else _reference(text, scale)
            assert s == (want is None and text is not None), text  # slow: a value the kernel does not cover
            if want is not None:
                assert json == want, text


def test_decimal_kernel_of_no_rows() -> None:
    got, slow = decimal_json(pa.array([], pa.string()), 2)
    assert got.to_pylist() == [] and slow is not None and slow.to_pylist() == []


def test_base64_of_any_int64() -> None:
    """Every minimal size (1 to 8 bytes, both signs, at their bounds) and int64's ends."""
    edges = [0, -1, 2**63 - 1, -2**63] + [s * (2**(8 * k - 1)) + d for k in range(1, 8) for s in (1, -1) for d in (-1, 0, 1)]
    rnd = random.Random(8)
    values = edges + [rnd.randint(-2**63, 2**63 - 1) >> rnd.randint(0, 63) for _ in range(2000)]
    got = base64_twos_complement(np.array(values, dtype=np.int64)).to_pylist()
    for v, json in zip(values, got, strict=True):
        size = (v if v >= 0 else ~v).bit_length() // 8 + 1
        assert json == b'"' + base64.b64encode(v.to_bytes(size, "big", signed=True)) + b'"', v
    assert base64_twos_complement(np.zeros(0, dtype=np.int64)).to_pylist() == []
