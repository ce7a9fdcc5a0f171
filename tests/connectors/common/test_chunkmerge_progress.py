"""The lock-free snapshot's progress and stream filter (common/chunkprogress.py), no server: chunk
states as a JSON offset piece, what remains after a crash, where streaming starts, and which streamed
changes a chunk already holds."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pytest

from headwater.connectors.common.chunkprogress import Progress, StreamFilter, decode_key, encode_key
from headwater.connectors.common.snapshot import KeyRange

SPANS = {"db.t": [KeyRange(None, (10,)), KeyRange((10,), (20,)), KeyRange((20,), None)], "db.one": [KeyRange(None, None)]}


def binlog(p):
    return p["file"], p["pos"]


def at(pos, file="bin.000001"):
    return {"file": file, "pos": pos}


def test_remaining_finish_and_stream_start():
    progress = Progress(SPANS)
    assert [(t, i) for t, i, _ in progress.remaining()] == [("db.t", 0), ("db.t", 1), ("db.t", 2), ("db.one", 0)]
    progress.finish("db.t", 1, 5, 9)
    assert ("db.t", 1, KeyRange((10,), (20,))) not in progress.remaining() and not progress.done
    with pytest.raises(ValueError, match="3 chunks left"):
        progress.stream_start()
    progress.finish("db.t", 0, 7, 8)
    progress.finish("db.t", 2, 3, 12)
    progress.finish("db.one", 0, 4, 4)
    assert progress.done and progress.remaining() == [] and progress.stream_start() == 3
    with pytest.raises(ValueError, match="before the low"):
        progress.finish("db.t", 0, 9, 8)
    assert Progress({}).stream_start() is None


def test_a_chunk_read_again_keeps_its_earliest_window():
    progress = Progress(SPANS)
    progress.finish("db.t", 0, 5, 9)
    progress.finish("db.t", 0, 11, 14)  # a replayed batch read it again later
    assert (progress.tables["db.t"][0].low, progress.tables["db.t"][0].high) == (5, 9)
    progress.tables["db.t"][1].low, progress.tables["db.t"][1].high = 20, 30  # as a clock could go
    progress.finish("db.t", 1, 15, 25)
    assert (progress.tables["db.t"][1].low, progress.tables["db.t"][1].high) == (15, 25)


def test_json_round_trip_after_a_crash():
    spans = {"db.k": [KeyRange(None, (b"\x00\xff", Decimal("1.50"))),
                      KeyRange((b"\x00\xff", Decimal("1.50")), (dt.datetime(2024, 1, 2, 3, 4, 5, 6), dt.date(2024, 1, 2))),
                      KeyRange((dt.datetime(2024, 1, 2, 3, 4, 5, 6), dt.date(2024, 1, 2)),
                               (dt.time(1, 2, 3, 4), dt.timedelta(days=-1, microseconds=7))),
                      KeyRange((dt.time(1, 2, 3, 4), dt.timedelta(days=-1, microseconds=7)), ("x", None)),
                      KeyRange(("x", None), (True, 2**64 - 1)), KeyRange((True, 2**64 - 1), None)]}
    progress = Progress(spans, binlog)
    progress.finish("db.k", 2, at(100), at(4, "bin.000002"))
    restored = Progress.from_json(json.loads(json.dumps(progress.to_json())), binlog)
    assert restored.tables == progress.tables
    assert [i for _, i, _ in restored.remaining()] == [0, 1, 3, 4, 5]
    restored.finish("db.k", 2, at(50), at(900))  # the earlier window wins, compared by (file, pos)
    assert restored.tables["db.k"][2].high == at(900)


def test_key_encoding():
    assert encode_key(None) is None and decode_key(None) is None
    assert encode_key((1, "a", None, 1.5, False)) == [1, "a", None, 1.5, False]
    assert encode_key((b"\x01", Decimal("-0.10"))) == [{"bytes": "AQ=="}, {"decimal": "-0.10"}]
    assert decode_key(encode_key((dt.timedelta(seconds=-1),))) == (dt.timedelta(seconds=-1),)
    with pytest.raises(TypeError, match="no JSON form"):
        encode_key((object(),))


def finished(**highs):
    """db.t's three chunks done with these highs (lows one before), db.one undone unless named."""
    progress = Progress(SPANS)
    for name, high in highs.items():
        table, index = ("db.one", 0) if name == "one" else ("db.t", int(name[1:]))
        progress.finish(table, index, high - 1, high)
    return progress


def test_filter_drops_what_a_chunk_holds():
    f = StreamFilter(finished(c0=10, c1=20, c2=30))
    assert not f.keep("db.t", (5,), 10) and f.keep("db.t", (5,), 11)
    assert not f.keep("db.t", (10,), 20) and f.keep("db.t", (10,), 21)  # lo is inside
    assert not f.keep("db.t", (19,), 11) and not f.keep("db.t", (20,), 30) and f.keep("db.t", (20,), 31)
    assert not f.keep("db.t", (-(2**70),), 1) and not f.keep("db.t", (2**70,), 1)  # open ends
    assert f.horizon == 30 and f.keep("db.t", (25,), 31)
    assert f.keep("db.other", (5,), 1)  # a table without chunks
    assert f.keep("db.one", (), 1)  # its chunk is not done: nothing folded into it


def test_filter_key_change_is_asked_per_side():
    f = StreamFilter(finished(c0=10, c1=20, c2=30))
    # a row moved from 5 (chunk 0, high 10) to 15 (chunk 1, high 20) at 12: its delete is new, its insert is not
    assert f.keep("db.t", (5,), 12) and not f.keep("db.t", (15,), 12)


def test_filter_keyless_single_chunk_and_positions():
    progress = Progress({"db.one": [KeyRange(None, None)]}, binlog)
    assert StreamFilter(progress).horizon is None and StreamFilter(progress).keep("db.one", (), at(1))
    progress.finish("db.one", 0, at(7), at(7))
    f = StreamFilter(progress)
    assert not f.keep("db.one", (), at(7)) and f.keep("db.one", (), at(8))
    assert f.keep("db.one", (), at(1, "bin.000002"))


def test_filter_gaps_order_and_overlaps():
    spans = {"db.t": [KeyRange(("m",), ("t",)), KeyRange(None, ("c",))]}  # not covering, given out of order
    progress = Progress(spans)
    progress.finish("db.t", 0, 1, 5)
    progress.finish("db.t", 1, 1, 5)
    f = StreamFilter(progress)
    assert not f.keep("db.t", ("a",), 3) and f.keep("db.t", ("d",), 3) and not f.keep("db.t", ("n",), 3)
    assert f.keep("db.t", ("t",), 3) and f.keep("db.t", ("c",), 3)
    # case-insensitive keys: the table's order decides
    ci = StreamFilter(progress, {"db.t": lambda k: tuple(v.casefold() for v in k)})
    assert not f.keep("db.t", ("D",), 3) and ci.keep("db.t", ("D",), 3)  # "D" < "c" in Python, not there
    for bad in ([KeyRange(None, (5,)), KeyRange((3,), None)], [KeyRange(None, (5,)), KeyRange(None, (7,))],
                [KeyRange((1,), None), KeyRange((4,), (9,))]):
        with pytest.raises(ValueError, match="overlap"):
            StreamFilter(Progress({"db.t": bad}))
