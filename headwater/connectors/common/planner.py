"""The streaming planner shared by the stream connectors: batches and slices over a `StreamBuffer`.

`Planner` runs on the driver. `latest` finds where the next batch ends: after whole transactions,
or inside one when `max_events` says so (a position then names the transaction and how many of
its data messages are delivered). `plan` cuts a batch into slices of about equal numbers of data
messages, one per partition, cutting a large transaction too, and trims the buffer behind it. A
slice carries the layouts in force at its start and, per `Segment`, its transactions' context
(with transaction metadata, the counters at the segment's start), so it decodes anywhere. The
connector's `StreamCodec` does what needs its message format or its positions: the planner only
counts data messages and follows layouts. Heartbeats are timed here: a batch carries one when
one is due, and with nothing to deliver a due heartbeat is a batch of its own.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np
import pyarrow as pa

from headwater.connectors.base import WorkUnit
from headwater.connectors.common.codec import Retrying, StreamCodec, StreamReader
from headwater.connectors.common.gcpolicy import streaming_process
from headwater.connectors.common.messages import InTxn, Layouts, Message, Segment
from headwater.connectors.common.txbuffer import Txn
from headwater.connectors.errors import SourceError

log = logging.getLogger("headwater.planner")

P = TypeVar("P")

_COUNT = struct.Struct("<I")  # messages in a frame
_FRAME = struct.Struct("<II")  # a frame's size before and after compression
_CODEC = pa.Codec("zstd", compression_level=1)
FRAME_BYTES = 1 << 20  # payload bytes of a packed slice's frame
MIN_SLICE = 5_000  # data messages; smaller batches are not worth another partition
POLL_S = 0.25
GATHER_S = 0.5  # how long a batch may wait for more of a transaction that is still arriving
REPLAY_WAIT_S = 600.0


@dataclass
class TxnPart:
    """One transaction's part of a batch, as the planner collects it."""

    txn: Txn
    skip: int  # data messages of the transaction before this part
    upto: int  # data messages of the transaction up to the end of this part
    commit: bool  # the part reaches the commit
    msgs: list[Message]
    layouts: dict[int, bytes]  # layouts in force where the part starts
    changed: list[bytes]  # the layout messages among `msgs`


def pack(msgs: list[Message]) -> bytes:
    """Messages as one blob (a slice's payload): frames of about FRAME_BYTES of payloads each (a frame ends
    with the message that brings its payloads to FRAME_BYTES), each its raw and compressed sizes and then, compressed (zstd,
    level 1), its messages' number, positions, sizes, and payloads one after another (so that packing and
    unpacking are array operations). A slice travels from the driver's reader through Spark's JVM, which
    holds a batch's slices in its heap several times over, to the task that decodes it: row messages
    shrink ~5x for ~1 ms of CPU per MB, and in frames neither the driver nor the task holds a whole
    slice's messages uncompressed in one piece. No messages: no frames, an empty blob."""
    n = len(msgs)
    payloads = [p for _, p in msgs]
    positions = np.array([pos for pos, _ in msgs], dtype="<u8")
    sizes = np.fromiter(map(len, payloads), dtype="<u4", count=n)
    ends = np.cumsum(sizes, dtype=np.int64)
    frames = []
    a = 0
    while a < n:  # a frame ends with the message whose payload brings the frame's to FRAME_BYTES
        b = min(n, int(np.searchsorted(ends, (ends[a - 1] if a else 0) + FRAME_BYTES, side="left")) + 1)
        raw = b"".join([_COUNT.pack(b - a), positions[a:b].tobytes(), sizes[a:b].tobytes(), *payloads[a:b]])
        packed = _CODEC.compress(raw, asbytes=True)
        frames += [_FRAME.pack(len(raw), len(packed)), packed]
        a = b
    return b"".join(frames)


def unpack(packed: bytes) -> Iterator[Message]:
    """The messages of a `pack` blob, in order, one frame uncompressed at a time."""
    view = memoryview(packed)
    at = 0
    while at < len(packed):
        size, compressed = _FRAME.unpack_from(packed, at)
        at += _FRAME.size
        frame = _CODEC.decompress(view[at:at + compressed], decompressed_size=size, asbytes=True)
        at += compressed
        yield from _frame_messages(frame)


def _frame_messages(frame: bytes) -> Iterator[Message]:
    n = _COUNT.unpack_from(frame)[0]
    positions = np.frombuffer(frame, "<u8", n, _COUNT.size)
    sizes = np.frombuffer(frame, "<u4", n, _COUNT.size + 8 * n)
    at = _COUNT.size + 12 * n  # where the payloads start
    ends = (np.cumsum(sizes, dtype=np.int64) + at).tolist()
    for pos, end in zip(positions.tolist(), ends, strict=True):
        yield pos, frame[at:end]
        at = end


class Planner(Generic[P]):
    """Driver-side planning over a reader's buffer, for positions of type `P`."""

    def __init__(self, reader: StreamReader[P], codec: StreamCodec[P], retry: Retrying, *,
                 transaction_metadata: bool, heartbeat_interval_ms: int,
                 heartbeat_action: Callable[[], None] | None = None):
        self.reader = reader
        self.codec = codec
        self.retry = retry
        self.transaction_metadata = transaction_metadata
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.heartbeat_action = heartbeat_action  # run every heartbeat interval (heartbeat.action.query)
        self.cached: tuple[tuple[P, P], list[WorkUnit]] | None = None
        self.partial_counters: dict[tuple[int | None, int], dict] = {}
        self.position: P | None = None  # where the buffer's head is
        self.planned: tuple[int, Layouts] | None = None  # what `plan` trims: `_layouts_after` of its slices
        self.last_heartbeat = 0.0  # the first heartbeat is due at once (Debezium sends one after the snapshot)
        self.last_action = time.monotonic()
        streaming_process()  # (full garbage collections kept rare: see gcpolicy)

    # ---- end of the next batch
    def latest(self, start: P, max_events: int | None, target: int | None) -> P | None:
        """Where the batch from `start` ends: at most `max_events` data messages, and with `target`
        (a commit position) only transactions committing before it; None when there is nothing."""
        self._align(start)
        buf = self.reader.buffer
        deadline = time.monotonic() + (REPLAY_WAIT_S if target is not None else POLL_S)
        self._heartbeat_action()
        gather_until = time.monotonic() + GATHER_S
        with buf.cond:
            while True:
                self.reader.check()
                end = self._walk(start, max_events, target)
                if end is not None:
                    # a transaction still arriving: let a bit more of it come, rather than cut a
                    # stream of tiny batches (each costs a plan and, on Spark, a micro-batch)
                    if self._growing_tail(end, max_events) and time.monotonic() < gather_until:
                        buf.cond.wait(0.02)
                        continue
                    return self._with_heartbeat(end)
                if target is not None and buf.received >= target:
                    return self._idle_heartbeat(start)
                if target is None:
                    hb = self._idle_heartbeat(start)
                    if hb is not None:
                        return hb
                left = deadline - time.monotonic()
                if left <= 0:
                    if target is not None:
                        raise SourceError("timed out waiting for the change stream to reach the end "
                                          "position fixed at the start of the run")
                    return None
                if target is not None:
                    self.reader.request_position()
                buf.cond.wait(min(left, 1.0))

    def _growing_tail(self, end: P, max_events: int | None) -> bool:
        """Whether `end` stops at the last message received of a transaction still arriving, with
        fewer messages than a batch may hold."""
        inside = self.codec.in_txn(end)
        if inside is None:
            return False
        for t in self.reader.buffer.txns:
            if t.xid == inside.xid and not t.complete:
                return inside.n >= t.n_data and (max_events is None or inside.n < max_events)
        return False

    def _heartbeat_due(self) -> bool:
        interval = self.heartbeat_interval_ms
        return interval > 0 and (time.monotonic() - self.last_heartbeat) * 1000 >= interval

    def _with_heartbeat(self, end: P) -> P:
        """A batch with changes also carries a heartbeat when one is due (Debezium's are timed)."""
        if not self._heartbeat_due():
            return end
        self.last_heartbeat = time.monotonic()
        return self.codec.with_heartbeat(end, time.time_ns() // 1_000_000)

    def _idle_heartbeat(self, start: P) -> P | None:
        """With nothing to deliver, a due heartbeat is a batch of its own; it moves the position to what
        the server says it has sent (every transaction committing before it was received)."""
        if not self._heartbeat_due():
            return None
        buf = self.reader.buffer
        self.reader.request_position()
        self.last_heartbeat = time.monotonic()
        commit = self.codec.commit(start)
        if not buf.txns and buf.received > commit:
            commit = buf.received
        return self.codec.with_heartbeat(self.codec.idle(start, commit), time.time_ns() // 1_000_000)

    def _heartbeat_action(self) -> None:
        action = self.heartbeat_action
        if self.heartbeat_interval_ms <= 0 or action is None:
            return
        if (time.monotonic() - self.last_action) * 1000 < self.heartbeat_interval_ms:
            return
        self.last_action = time.monotonic()
        self.retry("running heartbeat.action.query", action)

    def _skip(self, start: P, t: Txn) -> int:
        """Data messages of `t`, the first transaction after `start`, delivered before it."""
        inside = self.codec.in_txn(start)
        return inside.n if inside is not None and t.xid == inside.xid else 0

    def _walk(self, start: P, max_events: int | None, target: int | None) -> P | None:
        codec = self.codec
        commit = codec.commit(start)
        left = max_events if max_events else None
        last: Txn | None = None  # the last whole transaction the batch takes
        first = True
        for t in self.reader.buffer.txns:
            if t.ends_by(commit):
                continue
            if target is not None and t.commit_pos >= target:
                break
            skip = self._skip(start, t) if first else 0
            first = False
            avail = t.n_data - skip
            if t.complete and (left is None or avail <= left):
                if left is not None:
                    left -= avail
                last = t
                continue
            take = avail if left is None else min(avail, left)
            if take > 0:
                return codec.inside(start if last is None else codec.after(last), t, skip + take)
            break
        return None if last is None else codec.after(last)

    # ---- work units for (start, end]
    def plan(self, start: P, end: P, parallelism: int) -> list[WorkUnit]:
        key = (start, end)
        if self.cached is not None and self.cached[0] == key:
            return self.cached[1]
        self._align(start)
        codec = self.codec
        units: list[WorkUnit] = []
        heartbeat = codec.heartbeat_ms(end) is not None
        self.planned = None
        if codec.in_txn(end) is not None or self._has_txns(start, end) or not heartbeat:
            self._wait_for(end)
            units = self.retry("reading table metadata", lambda: self._slices(start, end, parallelism))
            self.retry("reading table metadata", lambda: self._keep_partial_counters(start, end))
        if heartbeat:
            units.append(codec.heartbeat(end))
        self.reader.buffer.trim(codec.commit(end), codec.in_txn(end), self.planned)
        self.planned = None
        self.position = end
        self.cached = (key, units)
        return units

    def _has_txns(self, start: P, end: P) -> bool:
        first, last = self.codec.commit(start), self.codec.commit(end)
        return any(not t.ends_by(first) and t.commit_pos < last for t in self.reader.buffer.txns)

    def _align(self, start: P) -> None:
        """Make the buffer begin at `start` (restart the stream there if it does not)."""
        if self.position is None:
            self.position = start
            return
        if self._place(self.position) == self._place(start):
            return
        log.info("restarting the change stream at %s", start)
        self.reader.restart(start)
        self.position = start

    def _place(self, pos: P) -> tuple[int, InTxn | None]:
        """What of a position says where the buffer's head is."""
        inside = self.codec.in_txn(pos)
        return self.codec.commit(pos), None if inside is None else inside._replace(commit=None)

    def _wait_for(self, end: P) -> None:
        buf = self.reader.buffer
        deadline = time.monotonic() + REPLAY_WAIT_S
        with buf.cond:
            while not self._covers(end):
                self.reader.check()
                if time.monotonic() > deadline:
                    raise SourceError(f"the change stream did not deliver up to {end} in time")
                buf.cond.wait(1.0)

    def _covers(self, end: P) -> bool:
        buf = self.reader.buffer
        commit = self.codec.commit(end)
        inside = self.codec.in_txn(end)
        if inside is None:
            return buf.received >= commit
        for t in buf.txns:
            if t.xid == inside.xid and not t.ends_by(commit):
                return t.n_data >= inside.n
        if inside.commit is not None and buf.received > inside.commit:
            # everything committing before the transaction's commit has been received: it will not come
            raise SourceError(f"the change stream no longer serves {end}: transaction {inside.xid} is not in "
                              f"the stream read from {self.position}; the stream has moved past the start "
                              "of this batch")
        return False

    def batch_messages(self, start: P, end: P) -> Iterator[tuple[Txn, Message]]:
        """The messages of (start, end] with their transactions, in log order, from the buffer (for the
        driver's scans: signals and incremental snapshots); waits until the buffer holds them."""
        for part in self.batch_parts(start, end):
            for m in part.msgs:
                yield part.txn, m

    def batch_parts(self, start: P, end: P) -> list[TxnPart]:
        """`batch_messages` by transaction, each part with the layouts in force where it starts."""
        self._align(start)
        self._wait_for(end)
        return self._txn_parts(start, end)

    def _txn_parts(self, start: P, end: P) -> list[TxnPart]:
        """Each transaction's messages in (start, end], with the layouts in force where it starts."""
        buf = self.reader.buffer
        codec = self.codec
        first_commit, last_commit = codec.commit(start), codec.commit(end)
        inside = codec.in_txn(end)
        data_kinds, layout_kind, layout_id = codec.data_kinds, codec.layout_kind, codec.layout_id
        layouts = dict(buf.head_layouts)
        txn_parts: list[TxnPart] = []
        first = True
        for t in buf.txns:
            if t.ends_by(first_commit):
                continue
            skip = self._skip(start, t) if first else 0
            first = False
            ends_inside = inside is not None and t.xid == inside.xid and not t.ends_by(last_commit)
            if inside is not None and ends_inside:
                upto, commit = inside.n, False
            elif t.ends_by(last_commit):
                upto, commit = t.n_data, True
            else:
                break
            di = t.first_index  # data messages already trimmed off this transaction's front
            changed: list[bytes] = []
            if t.only_data():  # no need to look at each message
                msgs, at_start = t.msgs[skip - di:upto - di], layouts
            elif not skip and not di and commit and t.spill is None:  # a whole transaction: its messages as they are
                msgs, at_start = t.msgs, layouts
                for m in msgs:  # (a loop, not comprehensions: one or two messages, most often)
                    p = m[1]
                    if p[0] == layout_kind:
                        if not changed:
                            layouts = dict(layouts)  # (a new map: those handed out are never changed)
                        changed.append(p)
                        layouts[layout_id(p)] = p
            elif t.spill is not None:  # read from the checkpoint before the part's start
                msgs, at_start, layouts, changed = t.spill.part(skip, upto, layouts)
            else:
                msgs = []
                messages = t.messages()
                at_start = layouts  # (the layout maps are never changed in place: no copies)
                for m in messages:
                    p = m[1]
                    kind = p[0]
                    if kind in data_kinds:
                        if di < skip:
                            di += 1
                            continue
                        if di >= upto:
                            break
                        di += 1
                        msgs.append(m)
                    elif di < skip:
                        if kind == layout_kind:
                            layouts = at_start = {**layouts, layout_id(p): p}
                    else:
                        msgs.append(m)
                        if kind == layout_kind:
                            layouts = {**layouts, layout_id(p): p}
                            changed.append(p)
            txn_parts.append(TxnPart(t, skip, upto, commit, msgs, at_start, changed))
            if inside is not None and t.xid == inside.xid:
                break
        return txn_parts

    def _slices(self, start: P, end: P, parallelism: int) -> list[WorkUnit]:
        """Cut (start, end] into slices of about equal numbers of data messages, one per partition;
        a large transaction is cut too (its transaction-metadata counters travel with each part)."""
        codec = self.codec
        txn_parts = self._txn_parts(start, end)
        self.planned = self._layouts_after(txn_parts)
        codec.check_layouts(self.reader.buffer.head_layouts, [p for pc in txn_parts for p in pc.changed])
        total = sum(pc.upto - pc.skip for pc in txn_parts)
        target = max(MIN_SLICE, -(-total // max(1, parallelism)))
        slicer: _Slicer[P] = _Slicer(codec, codec.last_commit(start))
        for pc in txn_parts:
            t = pc.txn
            counters: dict | None = None
            if self.transaction_metadata and t.transactional:
                counters = self._start_counters(t, pc.skip) if pc.skip else {}
            msgs, part_layouts, begin = pc.msgs, pc.layouts, pc.skip == 0
            cut = left = 0  # where the current part starts in `msgs`; data messages in the parts cut
            need = target - slicer.size
            for at, ndata, layouts in self._cuts(pc, need, target) if pc.upto - pc.skip > need else ():
                part = msgs[cut:at]
                slicer.add(t, part, ndata, part_layouts, begin, False, counters)
                slicer.flush()
                if counters is not None:
                    counters = codec.count(counters, t, part, part_layouts)
                cut, left, part_layouts, begin = at, left + ndata, layouts, False
            slicer.add(t, msgs[cut:] if cut else msgs, pc.upto - pc.skip - left, part_layouts, begin, pc.commit,
                       counters)
            if pc.commit:
                slicer.last_commit = t.end_pos
            if slicer.size >= target:
                slicer.flush()
        slicer.flush()
        return slicer.units

    def _layouts_after(self, txn_parts: list[TxnPart]) -> tuple[int, Layouts] | None:
        """The batch's whole transactions (a part that reaches its commit) and the layouts in force after
        them: what trimming them off the buffer leaves as the head's layouts (`StreamBuffer.trim`)."""
        if not txn_parts:
            return None
        last = txn_parts[-1]
        whole = len(txn_parts) - (not last.commit)  # (only the last part may end inside its transaction)
        if not last.commit:
            return whole, last.layouts
        if not last.changed:
            return whole, last.layouts
        layout_id = self.codec.layout_id
        return whole, {**last.layouts, **{layout_id(p): p for p in last.changed}}

    def _cuts(self, pc: TxnPart, need: int, target: int) -> Iterator[tuple[int, int, dict[int, bytes]]]:
        """Where `pc` is cut into parts, the first of `need` data messages, the next of `target`, and
        none after its last data message: (the index in its messages after a part, the part's data
        messages, the layouts in force after it) for each part but the last."""
        msgs = pc.msgs
        data = pc.upto - pc.skip
        if data <= need:  # (a part is cut only before a data message after its `need`-th)
            return
        others = len(msgs) - data  # messages that are not data
        codec = self.codec
        data_kinds, layout_kind, layout_id = codec.data_kinds, codec.layout_kind, codec.layout_id
        layouts = pc.layouts  # (never changed in place)
        i = ndata = seen = 0  # messages looked at; data messages in this part, and in all
        while others:  # look at each message up to the last that is not data
            p = msgs[i][1]
            i += 1
            kind = p[0]
            if kind in data_kinds:
                ndata += 1
                seen += 1
                if ndata == need and seen < data:
                    yield i, ndata, layouts
                    ndata, need = 0, target
            else:
                others -= 1
                if kind == layout_kind:
                    layouts = {**layouts, layout_id(p): p}
        at = i + need - ndata  # only data messages from `i` on: cut by count
        while at < len(msgs):
            yield at, need, layouts
            at, need = at + target, target

    def _start_counters(self, t: Txn, n: int) -> dict:
        """Counters after the first `n` data messages of `t`: kept from when they were planned, or
        counted again from the buffer (after a restart, the transaction is received whole again)."""
        kept = self.partial_counters.get((t.xid, n))
        if kept is not None:
            return kept
        if t.first_index:
            raise SourceError(f"transaction {t.xid}: the counts of its first {n} events are no longer buffered")
        msgs: list[Message] = []
        di = 0
        data_kinds = self.codec.data_kinds
        for m in t.messages():
            if m[1][0] in data_kinds:
                if di >= n:
                    break
                di += 1
            msgs.append(m)
        return self.codec.count({}, t, msgs, dict(self.reader.buffer.head_layouts))

    def _keep_partial_counters(self, start: P, end: P) -> None:
        """A batch ending inside a transaction: count its events so far now, while they are buffered."""
        inside = self.codec.in_txn(end)
        if not self.transaction_metadata or inside is None:
            return
        for pc in self._txn_parts(start, end):
            t = pc.txn
            if t.xid == inside.xid and t.transactional:
                before = self._start_counters(t, pc.skip) if pc.skip else {}
                self.partial_counters = {(t.xid, inside.n): self.codec.count(before, t, pc.msgs, pc.layouts)}
                return


class _Slicer(Generic[P]):
    """Collects segments into slices; `last_commit` is the end of the last transaction before."""

    def __init__(self, codec: StreamCodec[P], last_commit: int | None):
        self.codec = codec
        self.last_commit = last_commit
        self.units: list[WorkUnit] = []
        self.segments: list[Segment] = []
        self.msgs: list[Message] = []
        self.layouts: dict[int, bytes] = {}
        self.first_last_commit: int | None = None  # `last_commit` where the current slice starts
        self.size = 0  # data messages in the current slice

    def add(self, t: Txn, msgs: list[Message], ndata: int, layouts: dict[int, bytes], begin: bool,
            commit: bool, counters: dict | None) -> None:
        if not self.segments:
            self.layouts, self.first_last_commit = layouts, self.last_commit
        self.segments.append(Segment(t.xid, t.begin_pos, t.commit_pos, t.end_pos if commit else None, t.commit_ts,
                                     t.transactional, begin, commit, len(msgs), counters))
        self.msgs.extend(msgs)
        self.size += ndata

    def flush(self) -> None:
        if self.segments:
            self.units.append(self.codec.slice(self.layouts, self.segments, self.msgs, self.first_last_commit))
        self.segments, self.msgs, self.layouts, self.size = [], [], {}, 0
