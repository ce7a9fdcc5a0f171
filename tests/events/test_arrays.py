"""`events.arrays`: arrays made from buffers."""

from __future__ import annotations

import pyarrow as pa
import pytest

from headwater.events.arrays import utf8_view


def test_utf8_view_is_the_binary_arrays_text_nulls_and_offset_kept():
    joined = pa.array([b"a", None, "é€".encode(), b""], pa.binary()).slice(1)
    text = utf8_view(joined)
    text.validate(full=True)
    assert text.type == pa.string() and text.to_pylist() == [None, "é€", ""]
    with pytest.raises(ValueError, match="binary"):
        utf8_view(pa.array(["a"]))
