"""Signals without a database: parsing and checks, the file channel's positions, the read-only
mode's visibility rule, and the chunk's rows a streamed change supersedes."""

from __future__ import annotations

import pyarrow as pa
import pytest

from headwater.connectors.common.incremental import (
    Collection,
    State,
    Window,
    drop_superseded,
    join_key,
    joined_keys,
    parts_of,
)
from headwater.connectors.common.signals import BadSignal, append_signal, parse_signal, read_file
from headwater.connectors.postgres.incremental import Visibility


@pytest.mark.parametrize(("type_", "data", "reason"), [
    ("execute-snapshot", "{x", "not JSON"),
    ("execute-snapshot", "[1]", "JSON object"),
    ("execute-snapshot", {}, "needs data-collections"),
    ("execute-snapshot", {"data-collections": "public.t"}, "array of strings"),
    ("execute-snapshot", {"data-collections": ["("]}, "not a regular expression"),
    ("execute-snapshot", {"data-collections": ["a.b"], "type": "other"}, "not incremental or blocking"),
    ("execute-snapshot", {"data-collections": ["a.b"], "additional-conditions": [{"filter": "x"}]},
     "data-collection and filter"),
    ("stop-snapshot", {}, "needs data.type"),
    ("stop-snapshot", {"type": "blocking"}, "only incremental"),
    ("log", {}, "data.message"),
    ("reboot", None, "is not one of"),
])
def test_malformed_signals_say_why(type_, data, reason):
    with pytest.raises(BadSignal, match=reason):
        parse_signal("id-1", type_, data, "source")


def test_good_signals():
    s = parse_signal("a", "execute-snapshot", '{"data-collections": ["public.t"], "type": "INCREMENTAL", '
                     '"additional-conditions": {"data-collection": "public.t", "filter": "x > 1"}}', "source")
    assert s.data["data-collections"] == ["public.t"]
    assert parse_signal("b", "pause-snapshot", None, "file").data == {}
    assert parse_signal("d", "execute-snapshot", {"data-collections": ["a.b"], "type": "blocking"}, "file")
    assert parse_signal("c", "stop-snapshot", {"type": "incremental"}, "file").type == "stop-snapshot"


def test_file_channel_reads_complete_lines_from_a_position(tmp_path):
    path = tmp_path / "signals.txt"
    assert list(read_file(path, 0, "file")) == []  # no file yet
    append_signal(path, "log", {"message": "one"}, "s1")
    path.open("a").write("garbage\n")
    append_signal(path, "log", {"message": "two"}, "s2")
    path.open("a").write('{"id": "s3", "type": "log", "data"')  # still being written
    got = list(read_file(path, 0, "file"))
    assert [s.id if s else None for s, _ in got] == ["s1", None, "s2"]
    end = got[-1][1]
    assert list(read_file(path, end, "file")) == []
    path.open("a").write(': {"message": "three"}}\n')
    assert [s.id for s, _ in read_file(path, end, "file") if s] == ["s3"]
    path.write_text("")  # replaced by a shorter file: read from its start
    append_signal(path, "log", {"message": "four"}, "s4")
    assert [s.id for s, _ in read_file(path, end + 1000, "file") if s] == ["s4"]


def test_visibility_follows_xmin_xmax_xip_across_wraparound():
    v = Visibility.parse("100:105:101,103", 0)
    assert v.sees(99) and v.sees(100) and v.sees(102) and v.sees(104)
    assert not v.sees(101) and not v.sees(103) and not v.sees(105) and not v.sees(1000)
    wrapped = Visibility.parse(f"{(1 << 32) + 4294967290}:{(1 << 32) + 4294967295 + 5}:4294967291", 0)
    assert wrapped.sees(4294967290) and wrapped.sees(4294967292) and wrapped.sees(2)
    assert not wrapped.sees(4294967291) and not wrapped.sees(4) and not wrapped.sees(5)


def test_superseded_rows_leave_the_chunk():
    cols = [pa.array(["1", "2", "3", "4"]), pa.array(["a", "b", "a", "b"]), pa.array(["x", None, "z", "w"])]
    keys = joined_keys(cols[:2])
    assert [c.to_pylist() for c in drop_superseded(cols, keys, [])] == [c.to_pylist() for c in cols]
    w = Window("w", Collection("public.t"), ["id", "k"], None, ["4", "b"])
    w.evict([("2", "b"), ("3", "b"), ("9", "a")])  # ("3", "b") is not a row of the chunk
    assert drop_superseded(cols, keys, [join_key(k) for k in w.evicted])[0].to_pylist() == ["1", "3", "4"]


def test_a_window_is_read_in_parts_that_its_offset_keeps():
    w = Window("w", Collection("public.t"), ["id"], ["0"], ["9"], [["3"], ["6"]], rows=9)
    assert w.parts() == [(["0"], ["3"]), (["3"], ["6"]), (["6"], ["9"])]
    off = w.chunk_offset()
    assert parts_of(off["from"], off["bounds"], off["to"]) == w.parts()
    assert "bounds" not in Window("w", Collection("public.t"), ["id"], None, ["9"]).chunk_offset()


def test_a_window_reads_whole_chunks_up_to_the_batch_rows_in_parts_per_core():
    inc = _incremental(**{"incremental.snapshot.chunk.size": "1000"})
    inc.parallelism = 2
    assert inc.window_size(None) == (400_000, 4)  # the default batch rows: 400 chunks, two parts per core
    assert inc.window_size(2500) == (2000, 2)  # maxEventsPerTrigger: whole chunks, no more than it
    assert inc.window_size(10) == (1000, 1)  # at least one chunk
    one = _incremental(**{"incremental.snapshot.chunk.size": "1000", "headwater.incremental.snapshot.batch.rows": "1000"})
    assert one.window_size(None) == (1000, 1)  # Debezium's one chunk a batch
    big = _incremental(**{"headwater.incremental.snapshot.batch.rows": "1000000", "headwater.snapshot.chunk.rows": "100000"})
    assert big.window_size(None) == (999_424, 10)  # parts of at most headwater.snapshot.chunk.rows


def test_state_round_trips_through_the_offset():
    s = State((Collection("public.a", "x > 1", None), Collection("public.b")), ["5"], ["9"], "sig-1", True)
    off = s.to_offset()
    assert off["incremental_snapshot_primary_key"] == '["5"]' and off["incremental_snapshot_paused"] is True
    assert State.from_offset(off) == s
    assert State.from_offset({}) == State() and State().to_offset() == {}
    nxt = s.next_table()
    assert nxt.collections == (Collection("public.b"),) and nxt.last_key is None and nxt.correlation_id == "sig-1"


def _incremental(**extra: str):
    from headwater.connectors.common.incremental import Incremental
    from headwater.connectors.registry import validate_connector

    config = validate_connector({"connector.class": "postgres", "database.hostname": "h", "database.user": "u",
                                 "database.dbname": "d", "topic.prefix": "p", **extra})

    class Hooks:
        def visible(self, window, xid):
            return xid < 100

        def resolve_collections(self, patterns):
            return ["public.t"]

    return Incremental(config, Hooks())  # type: ignore[arg-type]


def test_read_only_supersedes_only_changes_its_snapshot_did_not_see():
    from headwater.connectors.common.incremental import Change

    inc = _incremental(**{"headwater.incremental.snapshot.read.only": "true"})
    w = Window("w", Collection("public.t"), ["id"], None, ["3"], opened=True)
    inc._supersede(w, Change("public.t", "u", 99, [("1",)]))  # seen by the chunk's snapshot: the row is newer
    inc._supersede(w, Change("public.t", "d", 100, [("2",)]))  # not seen: it supersedes
    assert w.evicted == {("2",): 100}


def test_watermarks_supersede_only_after_the_open_watermark():
    from headwater.connectors.common.incremental import Change

    inc = _incremental()
    w = Window("w", Collection("public.t"), ["id"], None, ["3"])
    inc._supersede(w, Change("public.t", "u", 5, [("1",)]))  # before the open watermark
    w.opened = True
    inc._supersede(w, Change("public.t", "u", 6, [("3",), ("2",)]))  # a key change from 2 to 3
    inc._supersede(w, Change("public.t", "t", 7))
    assert w.evicted == {("3",): 6, ("2",): 6} and w.truncates == [7]


def test_read_only_has_debeziums_name_too():
    from headwater.config import ConfigErrors
    from headwater.connectors.common.signals import read_only
    from headwater.connectors.registry import validate_connector

    base = {"connector.class": "postgres", "database.hostname": "h", "database.user": "u", "database.dbname": "d",
            "topic.prefix": "p"}
    assert read_only(validate_connector({**base, "read.only": "true"}))
    assert read_only(validate_connector({**base, "headwater.incremental.snapshot.read.only": "true"}))
    assert not read_only(validate_connector(base))
    with pytest.raises(ConfigErrors, match="read.only"):
        validate_connector({**base, "read.only": "false", "headwater.incremental.snapshot.read.only": "true"})


def test_an_incremental_snapshot_without_a_signalling_table_is_skipped(caplog):
    from headwater.connectors.common.incremental import State

    s = parse_signal("x", "execute-snapshot", {"data-collections": ["public.t"]}, "file")
    assert _incremental()._act(State(), s, {}) == State()  # (watermarks need the signalling table)
    assert "signal.data.collection" in caplog.text
    started = _incremental(**{"read.only": "true"})._act(State(), s, {})
    assert started.collections == (Collection("public.t"),) and started.correlation_id == "x"
    blocking = _incremental()
    blocking._act(State(), parse_signal("b", "execute-snapshot", {"data-collections": ["public.t"], "type": "blocking"},
                                        "file"), {})
    assert blocking.blocking is not None and blocking.blocking["tables"] == ["public.t"]
