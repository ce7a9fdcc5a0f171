"""The binlog snapshot's TIMESTAMP kernel (numpy) against the plain definition of its output (Arrow's regex kernels)."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc

from headwater.connectors.binlog.text_kernels import timestamp_json
from headwater.connectors.common.columnar import join_parts
from headwater.events.arrays import lit

_TIMESTAMP = r"^[1-9]\d{3}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?$"


def _reference(values: pa.Array) -> tuple[list, list]:
    """(JSON of each value, whether it is slow) by regexes: the ISO form, the fraction's trailing zeros dropped."""
    iso = pc.utf8_replace_slice(values, 10, 11, "T")
    iso = pc.replace_substring_regex(iso, r"\.(\d*?)0+$", r".\1")
    iso = pc.replace_substring_regex(iso, r"\.$", "")
    out = join_parts([b'"', iso.cast(pa.binary()), b'Z"'])
    slow = pc.invert(pc.fill_null(pc.match_substring_regex(values, _TIMESTAMP), lit(True)))
    return out.to_pylist(), slow.to_pylist()


EDGES = ["2024-01-02 03:04:05", "2024-01-02 03:04:05.000000", "2024-01-02 03:04:05.120000", "2024-01-02 03:04:05.1",
         "2024-01-02 03:04:05.0", "0000-00-00 00:00:00", "0000-00-00 00:00:00.000000", "0999-01-01 00:00:00",
         "1970-01-01 00:00:00.000001", "2038-01-19 03:14:07.999999", None, "x", "", "2024-01-02 03:04:05.1234567",
         "2024-01-02T03:04:05", "2024-01-02 03:04:05.", "2024-1-02 03:04:05", "2024-01-02 03:04:05.10",
         "9999-12-31 23:59:59.500", "2024-01-02 03:04:05.00010", "2024-01-02 03:04:0a", "2024-01-02 03:04:05.0a",
         "2024-01-02 03:04:05 ", "é024-01-02 03:04:05"]


def test_timestamp_kernel_matches_the_regex_definition() -> None:
    rnd = random.Random(16)
    values = list(EDGES)
    for _ in range(5000):  # the edges, cut anywhere
        v = rnd.choice(EDGES)
        values.append(v[:rnd.randint(0, len(v))] if v and rnd.random() < 0.5 else v)
    array = pa.array(values, pa.string())
    for part in (array, array.slice(7, 3001)):
        want, want_slow = _reference(part)
        got, got_slow = timestamp_json(part, 0)
        texts = part.to_pylist()
        assert [bool(s) for s in got_slow.to_pylist()] == [bool(s) for s in want_slow]
        assert [g for g, s, v in zip(got.to_pylist(), want_slow, texts, strict=True) if v is not None and not s] \
            == [w for w, s, v in zip(want, want_slow, texts, strict=True) if v is not None and not s]


def _check(part: pa.Array) -> None:
    want, want_slow = _reference(part)
    got, got_slow = timestamp_json(part, 0)
    assert [bool(s) for s in got_slow.to_pylist()] == [bool(s) for s in want_slow]
    assert [g for g, s in zip(got.to_pylist(), want_slow, strict=True) if not s] \
        == [w for w, s in zip(want, want_slow, strict=True) if not s]


def test_timestamp_kernel_on_columns_of_one_length() -> None:
    """A TIMESTAMP(p) column without NULLs (every value the same length: read in place), its trailing zeros
    and the values of its length the kernel leaves to the converter."""
    rnd = random.Random(6)
    for digits in range(7):
        values = []
        for _ in range(2000):
            fraction = "".join(rnd.choice("0000123456789") for _ in range(digits))
            values.append(f"{rnd.randint(1000, 9999)}-{rnd.randint(1, 12):02}-{rnd.randint(1, 28):02} "
                          f"{rnd.randint(0, 23):02}:{rnd.randint(0, 59):02}:{rnd.randint(0, 59):02}"
                          + (f".{fraction}" if digits else ""))
        good = pa.array(values, pa.string())
        _check(good)
        _check(good.slice(1, 1500))  # (an offset into the values)
        bad = list(values)
        for i in rnd.sample(range(len(bad)), 50):  # a zero date, a letter, a bad separator: of the same length
            v = bad[i]
            bad[i] = rnd.choice(["0" + v[1:], v[:5] + "a" + v[6:], v[:10] + "T" + v[11:], v[:-1] + "x"])
        _check(pa.array(bad, pa.string()))
    _check(pa.array([], pa.string()))
    _check(pa.array(["2024-01-02 03:04:05.000000"], pa.string()))
