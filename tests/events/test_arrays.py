"""`events.arrays`: arrays made from buffers."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from headwater.events import arrays
from headwater.events.arrays import byte_spans, ragged_binary, utf8_view


def test_utf8_view_is_the_binary_arrays_text_nulls_and_offset_kept():
    joined = pa.array([b"a", None, "é€".encode(), b""], pa.binary()).slice(1)
    text = utf8_view(joined)
    text.validate(full=True)
    assert text.type == pa.string() and text.to_pylist() == [None, "é€", ""]
    with pytest.raises(ValueError, match="binary"):
        utf8_view(pa.array(["a"]))


def test_ragged_binary_is_each_rows_first_bytes():
    rows = np.frombuffer(b"abcd" b"efgh" b"ijkl", dtype=np.uint8).reshape(3, 4)
    for widths, want in (([4, 4, 4], [b"abcd", b"efgh", b"ijkl"]), ([2, 0, 3], [b"ab", b"", b"ijk"]),
                         ([0, 0, 1], [b"", b"", b"i"]), ([4, 1, 4], [b"abcd", b"e", b"ijkl"])):
        out = ragged_binary(rows, np.array(widths))
        out.validate(full=True)
        assert out.type == pa.binary() and out.to_pylist() == want
    assert ragged_binary(rows[::2], np.array([1, 2])).to_pylist() == [b"a", b"ij"]  # a strided matrix
    assert ragged_binary(np.zeros((0, 4), np.uint8), np.zeros(0, np.int64)).to_pylist() == []


@pytest.mark.parametrize("large", [False, True])
def test_byte_spans_are_the_ranges_of_the_data_nulls_kept(large: bool, monkeypatch: pytest.MonkeyPatch):
    if large:  # data past int32 offsets: taken as large_binary, then cast
        monkeypatch.setattr(arrays, "_INT32_MAX", 4)
    data = np.frombuffer(b"0123456789", dtype=np.uint8)
    out = byte_spans(data, np.array([1, 3, 3, 7]), np.array([2, 0, 4, 3]), np.array([False, True, False, False]))
    out.validate(full=True)
    assert out.type == pa.binary() and out.to_pylist() == [b"12", None, b"3456", b"789"]
    assert byte_spans(b"", np.zeros(0, np.int64), np.zeros(0, np.int64)).to_pylist() == []
