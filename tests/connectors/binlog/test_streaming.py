"""`streaming`'s per-event `source` fields of a column-wise block: each row's JSON of its event's value, as
orjson writes it (texts quoted column-wise when many differ, per value when one needs escaping)."""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa

from headwater.connectors.binlog.streaming import _ints_json_per_row, _json_per_row
from headwater.events.arrays import int64_array


def _rows(out: pa.Array | bytes, n: int) -> list[bytes]:
    return [out] * n if isinstance(out, bytes) else out.to_pylist()


def test_texts_of_many_events_are_their_json():
    gtids = [f"0-1-{i}" for i in range(100)] + [None, "0-1-5"]
    per_row = np.repeat(np.arange(len(gtids)), 2)
    got = _rows(_json_per_row(gtids, int64_array(per_row)), len(per_row))
    assert got == [orjson.dumps(gtids[e]) for e in per_row]
    queries = [f'INSERT INTO t VALUES ({i}, "a\\b")' for i in range(100)] + ["tab\there"]  # JSON escapes these
    got = _rows(_json_per_row(queries, int64_array(np.arange(len(queries)))), len(queries))
    assert got == [orjson.dumps(q) for q in queries]


def test_one_value_of_every_event_is_written_once():
    assert _json_per_row(["binlog.000001"] * 3, int64_array(np.zeros(5, dtype=np.int64))) == b'"binlog.000001"'
    assert _json_per_row([None, None], int64_array(np.zeros(2, dtype=np.int64))) == b"null"
    assert _ints_json_per_row(np.array([7, 7]), np.array([0, 1, 1])) == b"7"
    assert _rows(_ints_json_per_row(np.array([7, -8]), np.array([0, 1, 1])), 3) == [b"7", b"-8", b"-8"]
