"""Work units pickle their segments by column and get the same segments back."""

from __future__ import annotations

import pickle

from headwater.connectors.common.messages import Segment, SegmentsByColumn


class Unit(SegmentsByColumn):
    def __init__(self, segments: list[Segment], blob: bytes):
        self.segments, self.blob = segments, blob


def test_segments_pickle_by_column_and_come_back_equal():
    segments = [Segment(7, 100, 200, 300, 1_700_000_000_000_000, True, True, True, 3),
                Segment(None, 2**64 - 2, 2**64 - 1, None, 5, False, False, False, 1, {"total": 2, "by": {"t": 1}}),
                Segment(8, 400, 500, None, 6, True, True, False, 0, {})]
    unit = Unit(segments, b"raw")
    state = unit.__getstate__()
    assert "segments" not in state and len(state["segment_columns"]) == 10  # one list per field
    back = pickle.loads(pickle.dumps(unit))
    assert back.segments == segments and back.blob == b"raw"
    assert pickle.loads(pickle.dumps(Unit([], b""))).segments == []
