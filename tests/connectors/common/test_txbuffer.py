"""The shared transaction buffer with a fake codec, no server: the byte bound and trimming (also
from inside a transaction), reconnect bookkeeping, and spill files with aborted subtransactions
and checkpoints."""

from __future__ import annotations

import os

from headwater.connectors.common.messages import InTxn
from headwater.connectors.common.txbuffer import Spill, StreamBuffer
from tests.connectors.common.fakes import KINDS, data, txn


def _buffer(*txns, limit=1 << 20) -> StreamBuffer:
    buf = StreamBuffer(limit, KINDS)
    for t in txns:
        buf.txns.append(t)
        buf.add_bytes(t.nbytes)
        if t.end_pos is not None:
            buf.received = max(buf.received, t.end_pos)
    return buf


def test_byte_bound_and_peak():
    a = txn(1, 100, [b"L1:a", *data(1, range(10))])
    b = txn(2, 200, data(1, range(10, 20)))
    buf = _buffer(a, b, limit=a.nbytes + b.nbytes)
    assert buf.full() and buf.nbytes == buf.peak_nbytes == a.nbytes + b.nbytes
    buf.trim(100, None)
    assert not buf.full() and buf.nbytes == b.nbytes
    assert buf.peak_nbytes == a.nbytes + b.nbytes  # the high-water mark stays


def test_trim_whole_transactions_keeps_their_layouts():
    a = txn(1, 100, [b"L1:a", *data(1, range(3)), b"L2:a", b"Xother"])
    b = txn(2, 200, [b"L1:b", *data(1, range(3))])
    c = txn(3, 300, data(2, range(3)))
    buf = _buffer(a, b, c)
    buf.trim(200, None)
    assert [t.xid for t in buf.txns] == [3]
    assert buf.head_layouts == {1: b"L1:b", 2: b"L2:a"}  # the latest of each, in stream order
    assert buf.nbytes == c.nbytes
    buf.trim(250, None)  # nothing more ends by 250
    assert [t.xid for t in buf.txns] == [3]


def test_trim_inside_a_transaction_drops_its_front():
    t = txn(7, 100, [b"L1:a", b"D1:0", b"D1:1", b"L1:b", b"Xx", b"D1:2", b"D1:3", b"D1:4"])
    buf = _buffer(t)
    total = t.nbytes
    assert not t.only_data()
    buf.trim(0, InTxn(7, 2, None))  # the first two data messages were handed out
    assert [p for _, p in t.msgs] == [b"L1:b", b"Xx", b"D1:2", b"D1:3", b"D1:4"]
    assert not t.only_data()
    assert t.first_index == 2 and t.n_data == 5
    assert buf.head_layouts == {1: b"L1:a"}
    assert buf.nbytes == t.nbytes == total - len(b"L1:a") - 2 * len(b"D1:0")
    buf.trim(0, InTxn(7, 4, None))  # two more: counted from what was trimmed already
    assert [p for _, p in t.msgs] == [b"D1:4"]
    assert t.first_index == 4 and t.only_data()
    assert buf.head_layouts == {1: b"L1:b"}
    buf.trim(0, InTxn(8, 1, None))  # another transaction: nothing of this one goes
    assert [p for _, p in t.msgs] == [b"D1:4"]


def test_reset_incomplete_and_resume():
    a = txn(1, 100, data(1, range(3)))
    b = txn(2, 200, data(1, range(3)), complete=False)
    buf = _buffer(a, b)
    assert buf.resume_pos(50) == 100 and buf.resume_pos(150) == 150
    buf.reset_incomplete()
    assert [t.xid for t in buf.txns] == [1] and buf.nbytes == a.nbytes


def _spill(tmp_path, messages) -> Spill:
    sp = Spill(str(tmp_path), 5, KINDS)
    for pos, xid, p in messages:
        sp.add(pos, xid, p)
    return sp


def test_spill_leaves_out_aborted_subtransactions_but_not_their_layouts(tmp_path):
    sp = _spill(tmp_path, [(10, 5, b"Xorigin"), (11, 5, b"L1:a"), (12, 5, b"D1:0"), (13, 6, b"L1:b"),
                           (14, 6, b"D1:1"), (15, 6, b"Xsub"), (16, 5, b"D1:2"), (17, 7, b"D1:3")])
    sp.aborted_subxids.add(6)
    sp.seal()
    assert [p for _, p in sp.read()] == [b"Xorigin", b"L1:a", b"D1:0", b"L1:b", b"D1:2", b"D1:3"]
    assert sp.scan() == (3, 12)  # data messages kept, and where the first is
    assert sp.layouts == {1: b"L1:b"}
    assert sp.size == os.path.getsize(sp.path)
    sp.discard()
    assert not os.path.exists(sp.path)


def test_spill_checkpoints_and_parts(tmp_path, monkeypatch):
    monkeypatch.setattr(Spill, "CHECKPOINT_EVERY", 3)
    msgs, pos = [], 0
    for i in range(10):
        if i in (2, 7):
            msgs.append((pos, 5, b"L1:v%d" % i))
            pos += 1
        msgs.append((pos, 5, b"D1:%d" % i))
        pos += 1
    msgs.append((pos, 5, b"Xlast"))
    sp = _spill(tmp_path, msgs)
    sp.seal()
    assert sp.scan() == (10, 0)
    assert [(n, layouts) for n, _, layouts in sp.checkpoints] == [
        (0, {}), (3, {1: b"L1:v2"}), (6, {1: b"L1:v2"}), (9, {1: b"L1:v7"})]
    every = [p for _, _, p in msgs]
    head = {2: b"L2:head"}
    for skip in range(10):
        for upto in range(skip, 11):
            got, at_start, after, changed = sp.part(skip, upto, head)
            # what follows the skip-th data message, up to the upto-th (to the end after the last)
            first = every.index(b"D1:%d" % skip)
            last = len(every) if upto == 10 else every.index(b"D1:%d" % upto)
            expected = every[first:last] if skip == 0 else every[every.index(b"D1:%d" % (skip - 1)) + 1:last]
            assert [p for _, p in got] == expected
            assert [pos for pos, _ in got] == [pos for pos, _, p in msgs if p in expected]
            sent = [p for p in every[:every.index(expected[0]) if expected else first] if p.startswith(b"L")]
            assert at_start == {**head, **({1: sent[-1]} if sent else {})}
            assert changed == [p for p in expected if p.startswith(b"L")]
            assert after == {**at_start, **({1: changed[-1]} if changed else {})}
    sp.discard()


def test_trim_of_a_spilled_transaction_takes_its_layouts_and_removes_the_file(tmp_path):
    sp = _spill(tmp_path, [(10, 5, b"L3:a"), (11, 5, b"D3:0"), (12, 5, b"L4:a"), (13, 5, b"D4:0")])
    sp.seal()
    n, first = sp.scan()
    assert first is not None
    t = txn(5, 20, [])
    t.msgs, t.spill, t.n_data, t.begin_pos = [], sp, n, first
    buf = _buffer(t)
    assert [p for _, p in t.messages()] == [b"L3:a", b"D3:0", b"L4:a", b"D4:0"]
    assert not t.only_data()  # (it holds none in memory)
    buf.trim(0, InTxn(5, 1, None))  # inside a spilled transaction: the file stays whole
    assert os.path.exists(sp.path) and buf.txns == [t]
    buf.trim(20, None)
    assert buf.txns == [] and buf.head_layouts == {3: b"L3:a", 4: b"L4:a"}
    assert not os.path.exists(sp.path)


def test_spill_keeps_what_a_scan_finds_as_messages_are_added(tmp_path, monkeypatch):
    # the count, first position, checkpoints and layouts that add() keeps are those a scan of the file finds
    monkeypatch.setattr(Spill, "CHECKPOINT_EVERY", 4)
    msgs, pos = [(0, 5, b"Xorigin")], 1
    for i in range(23):
        if i % 7 == 3:
            msgs.append((pos, 5, b"L%d:v%d" % (i % 2, i)))
            pos += 1
        msgs.append((pos, 5, b"D1:%d" % i))
        pos += 1
    sp = _spill(tmp_path, msgs)
    sp.seal()
    kept = (sp.scan(), sp.checkpoints, sp.layouts)
    assert kept[0] == (23, 1)
    sp.aborted_subxids.add(99)  # no message of it: the file is read, and gives the same
    assert (sp.scan(), sp.checkpoints, sp.layouts) == kept
    sp.discard()


def test_spill_add_split_writes_what_add_writes(tmp_path, monkeypatch):
    monkeypatch.setattr(Spill, "CHECKPOINT_EVERY", 3)
    msgs = [(i, 5, b"L1:v%d" % i if i % 4 == 1 else b"D1:%d" % i) for i in range(12)]
    whole, split = _spill(tmp_path, msgs), Spill(str(tmp_path), 5, KINDS)
    for pos, xid, p in msgs:
        framed = b"??" + p  # the message inside what a connection returned
        split.add_split(pos, xid, framed[2:3], memoryview(framed)[3:])
    for sp in (whole, split):
        sp.seal()
    assert [p for _, p in split.read()] == [p for _, p in whole.read()] == [p for _, _, p in msgs]
    assert (split.scan(), split.checkpoints, split.layouts, split.size) == \
        (whole.scan(), whole.checkpoints, whole.layouts, whole.size)
    whole.discard()
    split.discard()
