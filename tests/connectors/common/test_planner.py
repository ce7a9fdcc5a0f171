"""The shared streaming planner over a fake connector (see fakes.py), no server: batches after
whole transactions and inside them, slices of about equal size with the layouts in force at
each one's start, transaction-metadata counters across slices and batches, restarts, spilled
transactions, transactions still arriving, the end target, heartbeats, and the frames of a packed slice."""

from __future__ import annotations

import os
import random
import time
from typing import Any

import pytest

from headwater.connectors.base import WorkUnit
from headwater.connectors.common import planner as planner_module
from headwater.connectors.common.planner import Planner, pack, unpack
from headwater.connectors.common.txbuffer import Spill, StreamBuffer, Txn
from tests.connectors.common.fakes import (
    KINDS,
    FakeCodec,
    FakeHeartbeat,
    FakeReader,
    FakeSlice,
    Pos,
    data,
    is_data,
    layout_of,
    planner,
    retry_once,
    table_of,
    txn,
)

HEAD = {1: b"L1:v0"}


def stream() -> list[Txn]:
    return [
        txn(1, 100, [b"L1:v1", *data(1, range(30)), b"L2:v1", *data(2, range(10))]),
        txn(2, 200, [*data(1, range(30, 50)), b"L1:v2", *data(1, range(50, 70)), b"Xmisc"]),
        txn(3, 300, data(2, range(10, 30))),
    ]


def all_data(txns: list[Txn]) -> list[bytes]:
    return [p for t in txns for _, p in t.messages() if is_data(p)]


def layouts_before(txns: list[Txn], head: dict[int, bytes]) -> dict[int, dict[int, bytes]]:
    """For each message's position, the layouts in force just before it."""
    cur, out = dict(head), {}
    for t in txns:
        for pos, p in t.messages():
            out[pos] = dict(cur)
            lid = layout_of(p)
            if lid is not None:
                cur[lid] = p
    return out


def latest(pl: Planner[Pos], start: Pos, max_events: int | None = None) -> Pos:
    end = pl.latest(start, max_events, None)
    assert end is not None
    return end


def plan(pl: Planner[Pos], start: Pos, end: Pos, parallelism: int) -> list[FakeSlice]:
    return fake_slices(pl.plan(start, end, parallelism))


def fake_slices(units: list[WorkUnit]) -> list[FakeSlice]:
    return [u for u in units if isinstance(u, FakeSlice)]


def run_batches(pl: Planner[Pos], start: Pos, max_events: int | None, parallelism: int,
                ) -> list[tuple[Pos, Pos, list[FakeSlice]]]:
    out: list[tuple[Pos, Pos, list[FakeSlice]]] = []
    for _ in range(1000):
        end = pl.latest(start, max_events, None)
        if end is None:
            return out
        out.append((start, end, plan(pl, start, end, parallelism)))
        start = end
    raise AssertionError("too many batches")


def slices(batches: list[tuple[Pos, Pos, list[FakeSlice]]]) -> list[FakeSlice]:
    return [u for _, _, units in batches for u in units]


def check_layouts_in_force(sls: list[FakeSlice], txns: list[Txn]) -> None:
    before = layouts_before(txns, HEAD)
    for s in sls:
        assert s.layouts == before[s.messages()[0][0]]


def test_one_batch_one_slice():
    txns = stream()
    reader = FakeReader(txns, head_layouts=HEAD)
    codec = FakeCodec()
    pl = Planner(reader, codec, retry_once, transaction_metadata=False, heartbeat_interval_ms=0)
    end = latest(pl, Pos(0))
    assert end == Pos(300, last_commit=300)
    units = pl.plan(Pos(0), end, 4)
    assert pl.plan(Pos(0), end, 4) is units  # planned once
    [s] = fake_slices(units)
    assert s.data() == all_data(txns) and s.layouts == HEAD and s.last_commit is None
    assert [(g.xid, g.begin, g.commit, g.end_pos, g.count) for g in s.segments] == [
        (1, True, True, 100, 42), (2, True, True, 200, 42), (3, True, True, 300, 20)]
    assert codec.checked == [(HEAD, [b"L1:v1", b"L2:v1", b"L1:v2"])]
    assert reader.buffer.txns == [] and reader.buffer.nbytes == 0  # trimmed behind the batch
    assert reader.buffer.head_layouts == {1: b"L1:v2", 2: b"L2:v1"}
    assert pl.latest(end, None, None) is None


def test_slices_of_about_equal_size_with_the_layouts_in_force(monkeypatch):
    monkeypatch.setattr(planner_module, "MIN_SLICE", 1)
    txns = stream()
    pl = planner(FakeReader(txns, head_layouts=HEAD))
    sls = plan(pl, Pos(0), latest(pl, Pos(0)), 4)
    assert [len(s.data()) for s in sls] == [25, 25, 25, 25]
    assert [d for s in sls for d in s.data()] == all_data(txns)
    check_layouts_in_force(sls, txns)
    assert [s.layouts for s in sls] == [HEAD, {1: b"L1:v1"}, {1: b"L1:v1", 2: b"L2:v1"},
                                        {1: b"L1:v2", 2: b"L2:v1"}]
    # the end of the last commit before each slice's first event
    assert [s.last_commit for s in sls] == [None, None, 100, 100]
    # a transaction cut across slices: begins in one, commits in a later one
    assert [[(g.xid, g.begin, g.commit) for g in s.segments] for s in sls] == [
        [(1, True, False)], [(1, False, True), (2, True, False)], [(2, False, False)],
        [(2, False, True), (3, True, True)]]


@pytest.mark.parametrize("max_events", [1, 7, 15, 40, 41])
def test_batches_ending_inside_transactions_resume_there(monkeypatch, max_events):
    monkeypatch.setattr(planner_module, "MIN_SLICE", 4)
    txns = stream()
    reader = FakeReader(txns, head_layouts=HEAD)
    batches = run_batches(planner(reader), Pos(0), max_events, 2)
    sls = slices(batches)
    assert [d for s in sls for d in s.data()] == all_data(txns)  # each once, in order
    assert all(len(s.data()) <= max_events for s in sls)
    for _, end, units in batches:
        n = sum(len(u.data()) for u in units)
        assert n == max_events or end == batches[-1][1]  # cut at max_events, but the last
        assert end.xid is None or 0 < end.n < 100  # inside a transaction: how far into it
    inside = [end for _, end, _ in batches if end.xid is not None]
    assert bool(inside) == (max_events not in (40,))
    check_layouts_in_force(sls, txns)
    assert reader.buffer.txns == [] and reader.buffer.nbytes == 0


def test_transaction_metadata_counters_across_slices_and_batches(monkeypatch):
    monkeypatch.setattr(planner_module, "MIN_SLICE", 3)
    txns = stream()
    batches = run_batches(planner(FakeReader(txns, head_layouts=HEAD), metadata=True), Pos(0), 13, 3)
    counted: dict[int | None, dict] = {}  # per transaction: its events so far, as the fake codec counts them
    segments = 0
    for s in slices(batches):
        msgs = iter(s.messages())
        for seg in s.segments:
            so_far = counted.get(seg.xid, {"total": 0, "per": {}})
            assert seg.counters == ({} if seg.begin else so_far)
            assert seg.begin == (so_far["total"] == 0)
            for _ in range(seg.count):
                _, p = next(msgs)
                if is_data(p):
                    so_far = {"total": so_far["total"] + 1,
                              "per": {**so_far["per"], table_of(p): so_far["per"].get(table_of(p), 0) + 1}}
            counted[seg.xid] = so_far
            segments += 1
    assert {x: c["total"] for x, c in counted.items()} == {1: 40, 2: 40, 3: 20}
    assert segments > 10
    without = run_batches(planner(FakeReader(stream(), head_layouts=HEAD)), Pos(0), 13, 3)
    assert all(g.counters is None for s in slices(without) for g in s.segments)


def test_restart_plans_a_range_again_the_same(monkeypatch):
    monkeypatch.setattr(planner_module, "MIN_SLICE", 3)
    txns = stream()
    first = run_batches(planner(FakeReader(txns, head_layouts=HEAD), metadata=True), Pos(0), 11, 2)
    assert len(first) > 5
    # another planner, its reader started at the stream's start, plans the ranges out of order:
    # each range whose start is not where the buffer is restarts the reader there
    reader = FakeReader(txns, head_layouts=HEAD)
    again = planner(reader, metadata=True)
    order = [3, 0, 1, 5, 4, 2, *range(6, len(first))]
    for i in order:
        start, end, units = first[i]
        replanned = plan(again, start, end, 2)
        assert [(s.data(), s.layouts, s.last_commit, s.segments) for s in replanned] == \
               [(s.data(), s.layouts, s.last_commit, s.segments) for s in units], f"range {i}"
    assert reader.restarts == [first[i][0] for i in (0, 5, 4, 2, 6)]  # (the first plan sets the head)


def test_a_transaction_still_arriving_is_cut_and_resumed(monkeypatch):
    monkeypatch.setattr(planner_module, "GATHER_S", 0.0)
    monkeypatch.setattr(planner_module, "POLL_S", 0.01)
    txns = stream()
    reader = FakeReader(txns, head_layouts=HEAD)
    pl = planner(reader)
    end = latest(pl, Pos(0))
    pl.plan(Pos(0), end, 1)
    buf = reader.buffer
    growing = txn(4, 400, [b"L3:v1", *data(3, range(5))], complete=False)
    buf.txns.append(growing)
    part = latest(pl, end)
    assert part == Pos(300, 4, 5, last_commit=300)
    [s] = plan(pl, end, part, 1)
    assert s.data() == data(3, range(5)) and s.segments[0].commit is False
    for i, p in enumerate(data(3, range(5, 8))):
        growing.msgs.append((396 + i, p))
        growing.n_data += 1
    growing.end_pos, buf.received = 400, 400
    last = latest(pl, part)
    assert last == Pos(400, last_commit=400)
    [s] = plan(pl, part, last, 1)
    assert s.data() == data(3, range(5, 8)) and s.layouts == {1: b"L1:v2", 2: b"L2:v1", 3: b"L3:v1"}
    assert (s.segments[0].begin, s.segments[0].commit) == (False, True)


def test_spilled_transaction_batches_start_at_checkpoints(tmp_path, monkeypatch):
    monkeypatch.setattr(planner_module, "MIN_SLICE", 2)
    monkeypatch.setattr(Spill, "CHECKPOINT_EVERY", 4)
    sp = Spill(str(tmp_path), 9, KINDS)
    pos = 1000
    for i in range(30):
        if i % 7 == 3:
            sp.add(pos, 9, b"L1:s%d" % i)
            pos += 1
        sp.add(pos, 10 if i % 5 == 4 else 9, b"D1:%d" % i)  # subtransaction 10 aborts
        pos += 1
    sp.aborted_subxids.add(10)
    sp.seal()
    n, first = sp.scan()
    assert n == 24 and first == 1000
    spilled = Txn(9, first, 2000, 1, end_pos=2000, spill=sp, n_data=n)
    txns = [*stream(), spilled]
    expected, before = all_data(txns), layouts_before(txns, HEAD)  # (the file goes once handed out)
    seeks: list[int] = []
    part = Spill.part

    def seeking(self: Spill, skip: int, upto: int, layouts: dict[int, bytes]):
        if skip:
            seeks.append(skip)
        return part(self, skip, upto, layouts)

    monkeypatch.setattr(Spill, "part", seeking)
    batches = run_batches(planner(FakeReader(txns, head_layouts=HEAD)), Pos(0), 5, 2)
    sls = slices(batches)
    assert [d for s in sls for d in s.data()] == expected
    assert all(s.layouts == before[s.messages()[0][0]] for s in sls)
    assert seeks == [5, 10, 15, 20]  # batches starting inside the spilled transaction seek
    assert not os.path.exists(sp.path)  # trimmed behind the last batch


def test_target_stops_before_transactions_committing_at_it():
    pl = planner(FakeReader(stream(), head_layouts=HEAD))
    assert pl.latest(Pos(0), None, 200) == Pos(100, last_commit=100)
    assert pl.latest(Pos(0), 50, 300) == Pos(100, 2, 10, last_commit=100)


def test_heartbeats(monkeypatch):
    monkeypatch.setattr(planner_module, "POLL_S", 0.01)
    actions: list[float] = []
    reader = FakeReader(stream(), head_layouts=HEAD)
    pl = Planner(reader, FakeCodec(), retry_once, transaction_metadata=False, heartbeat_interval_ms=1000,
                 heartbeat_action=lambda: actions.append(time.monotonic()))
    end = latest(pl, Pos(0), 10)
    assert end.heartbeat_ms is not None  # the first is due at once
    units = pl.plan(Pos(0), end, 1)
    beat = units[-1]
    assert isinstance(beat, FakeHeartbeat) and beat.commit == 0 and len(units) == 2
    nxt = latest(pl, end)  # not due again yet
    assert nxt.heartbeat_ms is None and nxt.commit == 300
    pl.plan(end, nxt, 1)
    assert pl.latest(nxt, None, None) is None  # nothing to deliver, no heartbeat due
    time.sleep(1.05)  # an interval long enough that a loaded machine does not make the second due early
    reader.buffer.received = 350  # the server went on, with nothing for us
    idle = latest(pl, nxt)
    assert idle.commit == 350 and idle.heartbeat_ms is not None
    assert [type(u) for u in pl.plan(nxt, idle, 1)] == [FakeHeartbeat]
    assert len(actions) >= 1


def frame_counts(blob: bytes) -> list[int]:
    """The messages in each frame of a packed blob (its frames' headers, as `unpack` walks them)."""
    counts, at = [], 0
    while at < len(blob):
        size, compressed = planner_module._FRAME.unpack_from(blob, at)
        at += planner_module._FRAME.size
        counts.append(len(list(planner_module._frame_messages(
            planner_module._CODEC.decompress(blob[at:at + compressed], decompressed_size=size, asbytes=True)))))
        at += compressed
    return counts


def test_pack_and_unpack_keep_positions_and_payloads():
    msgs = [(0, b"D1:0"), (1 << 63, b""), ((1 << 64) - 1, b"L2:" + bytes(range(256))), (7, b"X"), (8, b"D2:1")]
    for n in range(len(msgs) + 1):
        assert list(unpack(pack(msgs[:n]))) == msgs[:n]
    assert pack([]) == b"" and list(unpack(b"")) == []


def test_packed_frames_end_with_the_message_that_fills_them(monkeypatch):
    monkeypatch.setattr(planner_module, "FRAME_BYTES", 10)
    sizes = [4, 4, 4, 25, 0, 0, 3, 7, 1, 9, 0]  # frames: 4+4+4 | 25 | 0+0+3+7 | 1+9 | 0
    msgs = [(i, bytes([65 + i]) * n) for i, n in enumerate(sizes)]
    blob = pack(msgs)
    assert frame_counts(blob) == [3, 1, 4, 2, 1]
    assert list(unpack(blob)) == msgs
    assert frame_counts(pack(msgs[:3])) == [3] and frame_counts(pack(msgs[3:6])) == [1, 2]


def test_unpack_uncompresses_one_frame_at_a_time(monkeypatch):
    monkeypatch.setattr(planner_module, "FRAME_BYTES", 1000)
    rng = random.Random(5)
    msgs = [(i, rng.randbytes(rng.choice([0, 1, 50, 999, 1000, 1001, 3000]))) for i in range(300)]
    blob = pack(msgs)
    frames = len(frame_counts(blob))
    assert frames > 100
    seen: list[int] = []
    codec = planner_module._CODEC

    class Counting:
        @staticmethod
        def decompress(*args: Any, **kwargs: Any) -> bytes:
            seen.append(1)
            return codec.decompress(*args, **kwargs)

    monkeypatch.setattr(planner_module, "_CODEC", Counting)
    messages = unpack(blob)
    assert next(messages) == msgs[0] and len(seen) == 1
    assert list(messages) == msgs[1:] and len(seen) == frames


def random_payloads(rng: random.Random) -> list[list[bytes]]:
    """Transactions' messages: data messages with layouts and other messages anywhere, or none."""
    txns = []
    for _ in range(12):
        payloads = []
        for i in range(rng.choice([1, 2, 5, 30, 90])):
            payloads.append(b"D%d:%d" % (rng.randint(1, 3), i))
            if rng.random() < 0.05:
                payloads.append(rng.choice([b"L%d:x%d" % (rng.randint(1, 3), i), b"X%d" % i]))
        if rng.random() < 0.2:
            payloads.insert(0, b"L%d:y" % rng.randint(1, 3))
        txns.append(payloads)
    return txns


def plain(sls: list[FakeSlice]) -> list:
    """What slices deliver, the other messages aside."""
    return [(s.data(), s.layouts, s.last_commit,
             [(g.xid, g.begin, g.commit, g.end_pos, g.counters) for g in s.segments]) for s in sls]


@pytest.mark.parametrize("seed", range(12))
def test_slices_the_same_whether_transactions_hold_only_data_or_not(monkeypatch, seed):
    """Transactions of data messages only are cut by count; the same transactions with another
    message after their data are looked at message by message: their slices are the same."""
    monkeypatch.setattr(planner_module, "MIN_SLICE", 3)
    monkeypatch.setattr(planner_module, "POLL_S", 0.001)
    rng = random.Random(seed)
    payloads = random_payloads(rng)
    txns = [txn(xid, 1000 * xid, ps) for xid, ps in enumerate(payloads, start=1)]
    marked = [txn(xid, 1000 * xid, [*ps, b"Xend"]) for xid, ps in enumerate(payloads, start=1)]
    max_events, parallelism = rng.choice([None, 1, 4, 17, 60]), rng.choice([1, 2, 3, 8])
    for metadata in (False, True):
        batches = run_batches(planner(FakeReader(txns, head_layouts=HEAD), metadata=metadata), Pos(0), max_events,
                              parallelism)
        sls = slices(batches)
        assert [d for s in sls for d in s.data()] == all_data(txns)
        check_layouts_in_force(sls, txns)
        for _, _, units in batches:  # about equal slices: all but the last of a batch are full
            target = max(3, -(-sum(len(u.data()) for u in units) // parallelism))
            assert all(len(u.data()) >= target for u in units[:-1])
        again = run_batches(planner(FakeReader(marked, head_layouts=HEAD), metadata=metadata), Pos(0), max_events,
                            parallelism)
        assert [(s, e) for s, e, _ in again] == [(s, e) for s, e, _ in batches]
        assert plain(slices(again)) == plain(sls)


@pytest.mark.parametrize("seed", range(12))
def test_trimming_a_planned_batch_leaves_the_layouts_reading_it_would(monkeypatch, seed):
    """`plan` hands the buffer the layouts in force after the batch's whole transactions, which it found
    while planning: the buffer's head layouts after each batch (their order too) and the slices are those
    of a trim that reads the dropped transactions' layout messages again, and nothing is read again."""
    monkeypatch.setattr(planner_module, "MIN_SLICE", 3)
    monkeypatch.setattr(planner_module, "POLL_S", 0.001)
    rng = random.Random(seed)
    txns = [txn(xid, 1000 * xid, ps) for xid, ps in enumerate(random_payloads(rng), start=1)]
    max_events, parallelism = rng.choice([None, 1, 4, 17, 60]), rng.choice([1, 2, 3, 8])
    read_again: list[int] = []
    absorb = StreamBuffer._absorb_whole

    def counted(self: StreamBuffer, dropped: list[Txn]) -> None:
        read_again.append(len(dropped))
        absorb(self, dropped)

    monkeypatch.setattr(StreamBuffer, "_absorb_whole", counted)

    def batches() -> list:
        reader = FakeReader(txns, head_layouts=HEAD)
        pl = planner(reader)
        out, start = [], Pos(0)
        while (end := pl.latest(start, max_events, None)) is not None:
            sls = plan(pl, start, end, parallelism)
            out.append((end, plain(sls), list(reader.buffer.head_layouts.items())))
            start = end
        return out

    planned = batches()
    assert planned and not any(read_again)
    trim = StreamBuffer.trim
    monkeypatch.setattr(StreamBuffer, "trim", lambda self, commit, inside, known=None: trim(self, commit, inside))
    assert batches() == planned
    assert any(read_again)
