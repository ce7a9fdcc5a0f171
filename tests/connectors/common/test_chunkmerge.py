"""The lock-free snapshot's chunk merge (common/chunkmerge.py), rule by rule, no server: a chunk's SELECT
rows plus the window's changes give the chunk at its high position, whichever state in the window the
SELECT saw."""

from __future__ import annotations

import pytest

from headwater.connectors.common.chunkmerge import (
    Change,
    ChunkMergeError,
    WindowNotQuiet,
    merge_chunk,
    null_first,
)
from headwater.connectors.common.snapshot import KeyRange

SPAN = KeyRange((10,), (20,))  # 10 <= id < 20


def key(row):
    return (row[0],)


def merge(rows, changes, span=SPAN, low=0, high=100, **kw):
    kw.setdefault("row_key", key)
    return merge_chunk(rows, [Change(p, b, a) for p, b, a in changes], span, low=low, high=high, **kw)


def test_quiet_window_keeps_the_select_as_it_came():
    rows = [(12, "b"), (11, "a")]  # not even compared: nothing in the window touches the range
    assert merge(rows, []) == rows
    assert merge(rows, [(5, None, (3, "x")), (6, (25, "y"), None)]) == rows  # other chunks' keys


@pytest.mark.parametrize("seen", ["before", "after"])
def test_insert_update_delete_whether_or_not_the_select_saw_them(seen):
    changes = [(1, None, (15, "new")), (2, (11, "a"), (11, "a2")), (3, (12, "b"), None)]
    rows = [(11, "a"), (12, "b")] if seen == "before" else [(11, "a2"), (15, "new")]
    assert merge(rows, changes) == [(11, "a2"), (15, "new")]


def test_the_last_change_of_a_key_wins():
    changes = [(1, None, (15, "v1")), (2, (15, "v1"), None), (3, None, (15, "v2")), (4, (15, "v2"), None)]
    for rows in ([], [(15, "v1")], [(15, "v2")]):
        assert merge(rows, changes) == []
    assert merge([(15, "v1")], changes[:3]) == [(15, "v2")]


def test_key_changes_across_the_chunk_bounds():
    # into the range: an insert of the new key; out of it: a delete of the old one; inside: both
    assert merge([(11, "a")], [(1, (5, "x"), (13, "x"))]) == [(11, "a"), (13, "x")]
    assert merge([(11, "a"), (13, "x")], [(1, (13, "x"), (25, "x"))]) == [(11, "a")]
    assert merge([(11, "a")], [(1, (11, "a"), (19, "a"))]) == [(19, "a")]
    assert merge([(19, "a")], [(1, (11, "a"), (19, "a"))]) == [(19, "a")]  # the SELECT saw it already
    # a key moved away and another row moved onto it
    changes = [(1, (11, "a"), (30, "a")), (2, (14, "b"), (11, "b"))]
    for rows in ([(11, "a"), (14, "b")], [(14, "b")], [(11, "b")]):
        assert merge(rows, changes) == [(11, "b")]


def test_bounds_are_lo_inclusive_hi_exclusive_and_open_at_the_ends():
    changes = [(1, None, (10, "lo")), (2, None, (20, "hi")), (3, None, (-5, "neg")), (4, None, (99, "big"))]
    assert merge([], changes) == [(10, "lo")]
    assert merge([], changes, span=KeyRange(None, (20,))) == [(-5, "neg"), (10, "lo")]
    assert merge([], changes, span=KeyRange((20,), None)) == [(20, "hi"), (99, "big")]


def test_result_in_key_order_with_null_first_and_composite_keys():
    rows = [((None, 1), "n"), ((1, 1), "a")]
    changes = [(1, None, ((0, 5), "z")), (2, None, ((None, 0), "m"))]
    out = merge_chunk(rows, [Change(p, b, a) for p, b, a in changes], KeyRange(None, None), low=0, high=9,
                      row_key=lambda r: r[0])
    assert out == [((None, 0), "m"), ((None, 1), "n"), ((0, 5), "z"), ((1, 1), "a")]
    assert null_first((None, 3)) < null_first((0, 0))


def test_window_and_order_are_checked():
    with pytest.raises(ChunkMergeError, match="outside the chunk's window"):
        merge([], [(0, None, (11, "a"))], low=0)  # at low: the SELECT saw it for sure, not in the window
    with pytest.raises(ChunkMergeError, match="outside the chunk's window"):
        merge([], [(101, None, (11, "a"))], high=100)
    with pytest.raises(ChunkMergeError, match="not in log order"):
        merge([], [(5, None, (11, "a")), (4, None, (12, "a"))])
    with pytest.raises(ChunkMergeError, match="before its low"):
        merge([], [], low=5, high=4)
    assert merge([(11, "a")], [], low=7, high=7) == [(11, "a")]  # an exact position: an empty window


def test_changes_sharing_a_position_apply_in_the_given_order():
    changes = [(3, (11, "a"), (11, "b")), (3, (11, "b"), (11, "c"))]  # one transaction, one commit position
    assert merge([(11, "a")], changes) == [(11, "c")]


def test_positions_through_the_callers_order():
    def binlog(p):
        return p["file"], p["pos"]

    low, high = {"file": "bin.000001", "pos": 900}, {"file": "bin.000002", "pos": 120}
    changes = [Change({"file": "bin.000002", "pos": 4}, None, (12, "x"))]
    assert merge_chunk([], changes, SPAN, low=low, high=high, row_key=key, position=binlog) == [(12, "x")]
    with pytest.raises(ChunkMergeError, match="outside"):
        merge_chunk([], [Change({"file": "bin.000001", "pos": 4}, None, (12, "x"))], SPAN, low=low, high=high,
                    row_key=key, position=binlog)


def test_duplicate_keys_are_refused():
    with pytest.raises(ChunkMergeError, match="not unique"):
        merge([(11, "a"), (11, "b")], [(1, None, (12, "c"))])


def test_a_collation_the_order_does_not_follow_shows():
    # utf8mb4_general_ci: 'a' <= 'B' < 'c'; Python's order puts 'B' before 'a'
    span = KeyRange(("a",), ("c",))
    rows, changes = [("B", 1)], [(1, None, ("bb", 2))]
    with pytest.raises(ChunkMergeError, match="collation"):
        merge(rows, changes, span=span)

    def ci(k):
        return tuple(v.casefold() for v in k)

    assert merge(rows, changes, span=span, order=ci) == [("B", 1), ("bb", 2)]
    # the same order is the key's identity: 'A' replacing 'a' is one key, as in the database
    assert merge([("a", 1)], [(1, ("a", 1), ("A", 1))], span=span, order=ci) == [("A", 1)]


def test_keyless_tables_need_a_quiet_window():
    rows = [(1, "x"), (1, "x")]
    assert merge(rows, [], span=KeyRange(None, None), row_key=None) == rows
    with pytest.raises(WindowNotQuiet, match="read it again"):
        merge(rows, [(1, None, (1, "x"))], span=KeyRange(None, None), row_key=None)
