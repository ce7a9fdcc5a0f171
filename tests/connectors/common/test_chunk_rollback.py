"""The lock-free snapshot's roll-back (common/chunkmerge.py `roll_back_chunk`, binlog/lockfree.py's NOBLOB
and keyless helpers), no server: a chunk's SELECT, read anywhere in (low, high], and the window's changes
give the chunk as it stood at low; chunks recorded at their low and the filtered stream from the lowest low
give the table, every streamed change meeting the row it changes; the same read at other moments (a batch
run again) gives the same rows."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.connectors.binlog.images import ABSENT
from headwater.connectors.binlog.lockfree import fill_first_images, roll_back_keyless
from headwater.connectors.common.chunkmerge import Change, ChunkMergeError, null_first, roll_back_chunk
from headwater.connectors.common.chunkprogress import Progress
from headwater.connectors.common.snapshot import KeyRange
from tests.connectors.common.test_chunkmerge_property import (
    KEYS,
    TABLE,
    History,
    Row,
    at_position,
    chunk_spans,
    histories,
    inside,
    reads,
    replay,
)


def key(r: Row) -> tuple[int]:
    return (r[0],)


def test_a_window_of_inserts_updates_deletes_and_key_changes_rolls_back_to_low() -> None:
    # at low (0): keys 1, 3, 5, 7, 20; the chunk is [0, 10)
    changes = [
        Change(1, None, (2, "c2")),            # insert of a key absent at low
        Change(1, (1, "a1"), (1, "u1")),       # update...
        Change(2, (1, "u1"), (1, "v1")),       # ... twice: the first one's before image is the row at low
        Change(2, (3, "a3"), None),            # delete
        Change(3, (5, "a5"), (11, "a5")),      # key change out of the range
        Change(3, (20, "a20"), (6, "a20")),    # key change into the range
        Change(4, (6, "a20"), (8, "x")),       # a key moved in, then on
        Change(4, None, (3, "again")),         # the deleted key inserted again
        Change(5, (7, "a7"), None),            # deleted...
        Change(5, None, (7, "new7")),          # ... and inserted again in one transaction
    ]
    seen = [(1, "v1"), (2, "c2"), (3, "again"), (7, "new7"), (8, "x")]  # the SELECT, after all of them
    assert roll_back_chunk(seen, changes, KeyRange((0,), (10,)), low=0, high=5, row_key=key) == \
        [(1, "a1"), (3, "a3"), (5, "a5"), (7, "a7")]
    # the SELECT in the middle of the window (here: after position 2) gives the same
    middle = [(1, "v1"), (2, "c2"), (6, "a20"), (7, "a7")]
    assert roll_back_chunk(middle, changes, KeyRange((0,), (10,)), low=0, high=5, row_key=key) == \
        [(1, "a1"), (3, "a3"), (5, "a5"), (7, "a7")]
    # no change of the window in the range: None (the SELECT's rows as they are)
    assert roll_back_chunk(seen, changes, KeyRange((30,), None), low=0, high=5, row_key=key) is None


def test_a_select_row_outside_the_range_or_a_change_outside_the_window_is_refused() -> None:
    import pytest
    with pytest.raises(ChunkMergeError, match="outside it"):
        roll_back_chunk([(12, "x")], [Change(1, None, (2, "y"))], KeyRange((0,), (10,)), low=0, high=1, row_key=key)
    with pytest.raises(ChunkMergeError, match="outside the chunk's window"):
        roll_back_chunk([], [Change(2, None, (2, "y"))], KeyRange(None, None), low=0, high=1, row_key=key)


def rows_seen(history: History, span: KeyRange, seen_at: list[int]) -> list[Row]:
    return [(k, history.states[seen_at[k]][k]) for k in range(KEYS)
            if inside(span, k) and k in history.states[seen_at[k]]]


@settings(max_examples=500, deadline=None)
@given(data=st.data(), history=histories(), spans=chunk_spans())
def test_chunks_rolled_back_to_their_low_and_the_stream_give_the_table(data: st.DataObject, history: History,
                                                                       spans: list[KeyRange]) -> None:
    progress = Progress({TABLE: spans})
    consumer: dict[int, str] = {}
    for i, span in enumerate(spans):
        read = data.draw(reads(0, history.end))
        rows = rows_seen(history, span, read.seen_at)
        back = roll_back_chunk(rows, history.window(read.low, read.high), span, low=read.low, high=read.high,
                               row_key=key)
        at_low = sorted(rows) if back is None else back
        assert at_low == at_position(history, span, read.low)
        # the same chunk read again at other moments (a batch run again) gives the same rows
        again = data.draw(reads(read.low, history.end))
        rows2 = rows_seen(history, span, [max(read.low, s) for s in again.seen_at])
        back2 = roll_back_chunk(rows2, history.window(read.low, again.high), span, low=read.low,
                                high=again.high, row_key=key)
        assert (sorted(rows2) if back2 is None else back2) == at_low
        progress.finish(TABLE, i, read.low, read.low)
        for k, v in at_low:
            assert k not in consumer
            consumer[k] = v
    replay(consumer, history, progress, strict=True)
    assert consumer == history.states[-1]


# ---------------------------------------------------------------- binlog rows: NOBLOB and keyless
def b(*values: object) -> tuple[str, tuple[object, ...]]:
    return ("b", values)


def s(*values: object) -> tuple[str, tuple[object, ...]]:
    return ("s", values)


def row_key(r: tuple[str, tuple[object, ...]]) -> tuple[object, ...]:
    return (r[1][0],)


def test_noblob_before_images_are_filled_from_the_rows_life_after_them() -> None:
    span = KeyRange(None, None)
    window = [
        Change(1, b(1, "v", ABSENT), b(1, "w", ABSENT)),      # note unchanged: later in the row's life
        Change(2, b(1, "w", "n1"), b(1, "w", "m1")),          # ... here it is
        Change(3, b(2, "v", ABSENT), b(2, "x", ABSENT)),      # never changed again: the SELECT's row of key 2
        Change(4, b(4, "v", ABSENT), b(9, "v", ABSENT)),      # moved to 9, untouched before: the SELECT's row 9
        Change(5, b(5, "v", ABSENT), None),                   # deleted: unknown
    ]
    rows = [s(1, "w", "m1"), s(2, "x", "n2"), s(9, "v", "n4")]
    assert fill_first_images(rows, window[:4], span, row_key, null_first) == [
        Change(1, b(1, "v", "n1"), b(1, "w", ABSENT)), window[1],
        Change(3, b(2, "v", "n2"), b(2, "x", ABSENT)), Change(4, b(4, "v", "n4"), b(9, "v", ABSENT))]
    assert fill_first_images(rows, window, span, row_key, null_first) is None
    # outside the range, nothing is needed
    assert fill_first_images(rows, window, KeyRange(None, (5,)), row_key, null_first) is not None
    # a key that held another row before the row moved in: the SELECT may have seen that one
    moved = [Change(1, b(9, "old", "o9"), None), Change(2, b(4, "v", ABSENT), b(9, "v", ABSENT))]
    assert fill_first_images(rows, moved, span, row_key, null_first) is None
    # a change that sets the column: its value before is in no image
    assert fill_first_images(rows, [Change(1, b(2, "v", ABSENT), b(2, "v", "set"))], span, row_key, null_first) is None
    assert fill_first_images(rows, [Change(1, b(2, "v", ABSENT), b(2, "x", ABSENT)),
                                     Change(2, b(2, "x", ABSENT), b(2, "x", "set"))], span, row_key, null_first) is None
    full = [Change(1, b(1, "v", "x"), None)]
    assert fill_first_images(rows, full, span, row_key, null_first) is full


def test_a_keyless_table_is_rolled_back_as_a_multiset() -> None:
    def fingerprint(r: tuple[str, tuple[object, ...]]) -> bytes:
        return repr(r[1]).encode()
    at_p = [s("a"), s("a"), s("c")]
    window = [Change(1, None, b("a")), Change(2, b("b"), None), Change(3, b("x"), b("c"))]
    assert sorted(v for _, v in roll_back_keyless(at_p, window, fingerprint) or []) == [("a",), ("b",), ("x",)]
    assert roll_back_keyless(at_p, [Change(1, None, b("z"))], fingerprint) is None  # not there to remove
    assert roll_back_keyless(at_p, [Change(1, b(ABSENT), None)], fingerprint) is None
