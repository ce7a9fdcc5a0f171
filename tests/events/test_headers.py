"""The column-wise header helpers of `events.headers` that the snapshot's jsonl lines lean on: the same
entries appended to many rows (`append_entries`, laid out by `tiled`), and `same_headers`, which lets a
jsonl line's headers member be written once."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from headwater.events.arrays import string_array
from headwater.events.batch import HEADER_TYPE
from headwater.events.headers import (
    append_entries,
    first_headers_member,
    headers_json_members,
    kept_tiling,
    same_headers,
    text_header_entries,
    tiled,
)

ENTRIES = text_header_entries([("a", '"x"'), ("bb", '"yé"'), ("c", "7")])


def rows_of(column: pa.Array) -> list:
    return column.to_pylist()


def test_tiled_repeats_strings_structs_and_anything_else():
    assert tiled(string_array(["ab", "", "c"]), 3).to_pylist() == ["ab", "", "c"] * 3
    assert tiled(string_array(["x", None]), 2).to_pylist() == ["x", None, "x", None]  # with nulls: by index
    assert tiled(pa.array([1, 2]), 2).to_pylist() == [1, 2, 1, 2]
    assert tiled(ENTRIES, 0).to_pylist() == []
    out = tiled(ENTRIES.slice(1), 2)  # an offset into the buffers
    out.validate(full=True)
    assert out.to_pylist() == ENTRIES.slice(1).to_pylist() * 2


def test_append_entries_to_rows_without_headers_and_with_some():
    empty = pa.nulls(4, HEADER_TYPE)
    out = append_entries(empty, ENTRIES, np.array([True, False, True, True]))
    out.validate(full=True)
    expected = ENTRIES.to_pylist()
    assert rows_of(out) == [expected, None, expected, expected]
    own = pa.array([[{"key": "o", "value": "1"}], None], HEADER_TYPE)
    out = append_entries(own, ENTRIES, np.array([True, True]))
    assert rows_of(out) == [[{"key": "o", "value": "1"}, *expected], expected]


def test_kept_tilings_are_sliced_and_known_by_same_headers():
    entries = text_header_entries([("a", '"kept"'), ("bb", '"x"'), ("c", "1")])  # (no other test's entries)
    big = append_entries(pa.nulls(5, HEADER_TYPE), entries, np.ones(5, dtype=bool))
    small = append_entries(pa.nulls(3, HEADER_TYPE), entries, np.ones(3, dtype=bool))
    for column, n in ((big, 5), (small, 3)):
        column.validate(full=True)
        assert rows_of(column) == [entries.to_pylist()] * n
    assert small.values.field(1).buffers()[2].address == big.values.field(1).buffers()[2].address  # one tiling
    assert same_headers(small) == 3 and same_headers(big.slice(1, 3)) == 3
    bigger = kept_tiling(entries, 7)  # more rows than kept: tiled again
    assert bigger.to_pylist() == entries.to_pylist() * 7
    kept = kept_tiling(entries, 7)
    assert kept.field(0).buffers()[2].address == bigger.field(0).buffers()[2].address
    # over the kept tiling's entries, lists of another length are not all the same: known by their bytes
    pairs = pa.ListArray.from_arrays(pa.array([0, 2, 4], pa.int32()), kept)
    assert same_headers(pairs) is None
    # a field of other bytes (the same length) over the kept keys: read, not taken for the tiling
    other = pa.StructArray.from_arrays([kept.field(0), string_array(['"kept"', '"y"', "1"] * 7)], names=["key", "value"])
    rows = pa.ListArray.from_arrays(pa.array([0, 3, 6], pa.int32()), other)
    assert same_headers(rows) == 3
    changed = pa.StructArray.from_arrays([kept.field(0), string_array(['"kept"', '"x"', "1"] * 6 + ['"kepT"', '"x"', "1"])],
                                         names=["key", "value"])
    assert same_headers(pa.ListArray.from_arrays(pa.array([15, 18, 21], pa.int32()), changed)) is None
    assert kept_tiling(string_array(["a", "b"]), 2).to_pylist() == ["a", "b", "a", "b"]  # not entries: tiled


def test_same_headers_only_when_every_row_holds_the_first_rows_entries():
    same = append_entries(pa.nulls(5, HEADER_TYPE), ENTRIES, np.ones(5, dtype=bool))
    assert same_headers(same) == 3
    assert same_headers(same.slice(2)) == 3
    one_differs = pa.array(rows_of(same)[:4] + [[{"key": "a", "value": '"x"'}, {"key": "bb", "value": '"yè"'},
                                                 {"key": "c", "value": "7"}]], HEADER_TYPE)
    assert same_headers(one_differs) is None
    shifted = pa.array([[{"key": "ab", "value": "1"}, {"key": "c", "value": "1"}],  # the same bytes, cut elsewhere
                        [{"key": "a", "value": "1"}, {"key": "bc", "value": "1"}]], HEADER_TYPE)
    assert same_headers(shifted) is None
    assert same_headers(pa.array([[{"key": "a", "value": "1"}], [{"key": "a", "value": "1"}, {"key": "a", "value": "1"}]],
                                 HEADER_TYPE)) is None
    assert same_headers(append_entries(pa.nulls(3, HEADER_TYPE), ENTRIES, np.array([True, False, True]))) is None
    assert same_headers(pa.array([[{"key": "a", "value": None}]] * 2, HEADER_TYPE)) is None
    assert same_headers(pa.nulls(0, HEADER_TYPE)) is None
    differ_first = pa.array([[{"key": "a", "value": "1"}], [{"key": "a", "value": "2"}], [{"key": "a", "value": "2"}]],
                            HEADER_TYPE)
    assert same_headers(differ_first) is None and same_headers(differ_first.slice(1)) == 1
    entries = differ_first.values  # lists over a slice of the entries: the slice's own values count
    offsets = pa.array([0, 1, 2], pa.int32())
    assert same_headers(pa.ListArray.from_arrays(offsets, entries.slice(1))) == 1
    assert same_headers(pa.ListArray.from_arrays(offsets, entries.slice(0, 2))) is None


def test_headers_json_members_of_same_headers_are_each_rows_own():
    same = append_entries(pa.nulls(3, HEADER_TYPE), ENTRIES, np.ones(3, dtype=bool))
    general = pa.array(rows_of(same), HEADER_TYPE)  # the same rows, built by pyarrow
    member = ',"headers":{"a":"x","bb":"yé","c":7}'
    assert headers_json_members(same).to_pylist() == [member] * 3
    assert headers_json_members(general.slice(1)).to_pylist() == [member] * 2


def test_first_headers_member_is_the_first_rows_member_each_time():
    rows = [[{"key": "a", "value": '"x"'}, {"key": "b", "value": None}], [{"key": "a", "value": '"y"'}], None, []]
    column = pa.array(rows, HEADER_TYPE)
    for _ in range(2):  # (the second time from what is kept)
        for i in range(len(rows)):
            assert first_headers_member(column.slice(i)) == headers_json_members(column.slice(i, 1))[0].as_py()
    assert first_headers_member(column) == ',"headers":{"a":"x","b":null}'
    assert first_headers_member(column.slice(1)) == ',"headers":{"a":"y"}'
    assert first_headers_member(column.slice(2)) == first_headers_member(column.slice(3)) == ""
