"""The transaction buffer shared by the stream connectors: transactions in commit order, raw.

A connector's reader thread appends `Txn`s to a `StreamBuffer` in commit order, their messages
kept as raw bytes (decoding them is the executors' work). The buffer is bounded in bytes: the
reader stops reading while it is `full()`, and the planner frees memory by trimming what it has
handed out, also from inside a transaction (a batch may end there). A transaction that arrives
before it commits (PostgreSQL's protocol 2 streams large ones in progress) goes to a `Spill` file
instead, so a huge transaction never fills memory. Messages are told apart through the
connector's `MessageKinds` only.

Positions here are ordered integers: a transaction's begin, commit and end (the commit position
that a restart after it starts from), and `received`, below which every commit has arrived.
"""

from __future__ import annotations

import bisect
import contextlib
import mmap
import os
import struct
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from headwater.connectors.common.messages import InTxn, Message, MessageKinds

_SPILL = struct.Struct("<QII")  # position, (sub)transaction id, length


@dataclass
class Txn:
    """One transaction (or one non-transactional message) in commit order."""

    xid: int | None
    begin_pos: int
    commit_pos: int
    commit_ts: int  # Unix microseconds
    end_pos: int | None = None  # set when the commit arrived
    msgs: list[Message] = field(default_factory=list)  # minus the trimmed prefix
    first_index: int = 0  # data messages trimmed off the front
    n_data: int = 0  # data messages received (including trimmed ones)
    nbytes: int = 0
    spill: Spill | None = None
    transactional: bool = True

    @property
    def complete(self) -> bool:
        return self.end_pos is not None

    def ends_by(self, commit: int) -> bool:
        """Whether the transaction is complete and its commit ends at or before `commit`."""
        return self.end_pos is not None and self.end_pos <= commit

    def only_data(self) -> bool:
        """Whether the transaction is held in memory and holds only data messages. (The reader may
        be adding to it: it appends a message before it counts it, so `n_data` is read first.)"""
        n = self.n_data
        return self.spill is None and len(self.msgs) == n - self.first_index

    def messages(self) -> Iterable[Message]:
        return self.msgs if self.spill is None else self.spill.read()


class Spill:
    """A transaction's messages on disk, written while it is still in progress.

    Messages of aborted subtransactions are left out when read, except layouts: pgoutput sends a
    relation's layout once per streamed transaction, so one sent inside a subtransaction that later
    aborted still describes the changes that follow it.

    `scan()` (once the transaction committed) gives the number of data messages, and `checkpoints`
    note one every `CHECKPOINT_EVERY` of them (file offset, layouts sent before it), so that a batch
    starting deep inside the transaction seeks there instead of reading the file from its start.
    `add()` keeps both as the messages arrive, so the commit does not read the file again; only a
    transaction with an aborted subtransaction (whose data messages are left out) is scanned then.
    """

    CHECKPOINT_EVERY = 1024

    def __init__(self, directory: str, xid: int, kinds: MessageKinds):
        fd, self.path = tempfile.mkstemp(prefix=f"xid{xid}-", suffix=".spill", dir=directory)
        self.file = os.fdopen(fd, "wb", buffering=1 << 20)
        self.xid = xid
        self.kinds = kinds
        self.aborted_subxids: set[int] = set()
        self.size = 0  # bytes written
        # (data messages before it, file offset, layouts sent before it), from scan()
        self.checkpoints: list[tuple[int, int, dict[int, bytes]]] = [(0, 0, {})]
        self.layouts: dict[int, bytes] = {}  # layouts sent in the whole transaction (never changed in place)
        # what `scan()` finds, kept as the messages are added (valid while no subtransaction aborted)
        self.n_data = 0
        self.first: int | None = None
        self._every = self.CHECKPOINT_EVERY
        self._data_kinds, self._layout_kind = kinds.data_kinds, kinds.layout_kind

    def add(self, pos: int, xid: int, payload: bytes) -> None:
        """Append a message of (sub)transaction `xid`, noting what `scan()` needs as it goes (so that a
        streamed transaction's commit finds its count, first position and checkpoints ready)."""
        kind = payload[0]
        if kind in self._data_kinds:
            n = self.n_data
            if not n:
                self.first = pos
            elif not n % self._every:
                self.checkpoints.append((n, self.size, self.layouts))  # (a layout replaces the dict)
            self.n_data = n + 1
        elif kind == self._layout_kind:
            self.layouts = {**self.layouts, self.kinds.layout_id(payload): payload}
        self.file.write(_SPILL.pack(pos, xid, len(payload)))
        self.file.write(payload)
        self.size += _SPILL.size + len(payload)

    def add_split(self, pos: int, xid: int, head: bytes, body: memoryview) -> None:
        """`add` of a message given in two pieces (its first bytes, then a view of the rest), written
        one after the other without joining them first."""
        n = self.n_data
        if head[0] in self._data_kinds and n % self._every:  # (neither the first nor at a checkpoint)
            self.n_data = n + 1
            length = len(head) + len(body)
            write = self.file.write
            write(_SPILL.pack(pos, xid, length))
            write(head)
            write(body)
            self.size += _SPILL.size + length
        else:
            self.add(pos, xid, head + bytes(body))

    def seal(self) -> None:
        self.file.close()

    def _records(self, offset: int = 0) -> Iterator[tuple[int, int, bytes]]:
        """(file offset, position, payload) of the messages kept, from `offset` on."""
        aborted, layout_kind = self.aborted_subxids, self.kinds.layout_kind
        head, unpack_from = _SPILL.size, _SPILL.unpack_from
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if offset >= size:
                return
            # mapped: one slice per payload, instead of two buffered reads per message
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                here = offset
                while here < size:
                    pos, xid, n = unpack_from(mm, here)
                    start = here + head
                    payload = mm[start:start + n]
                    if xid not in aborted or payload[0] == layout_kind:
                        yield here, pos, payload
                    here = start + n

    def read(self) -> Iterator[Message]:
        for _, pos, payload in self._records():
            yield pos, payload

    def part(self, skip: int, upto: int, layouts: dict[int, bytes]) -> tuple[list[Message], dict[int, bytes],
                                                                         dict[int, bytes], list[bytes]]:
        """The messages kept after the first `skip` data messages, up to data message `upto` (1-based; to
        the end of the file when that is the last), seeking to the checkpoint before them: the messages,
        the layouts in force where they start and after them (from `layouts`, those in force before the
        transaction), and the layout messages among them. (One loop over the mapped file, no layers of
        generators: a batch inside a large streamed transaction is planned from here.)"""
        n, offset, sent = self.checkpoints[bisect.bisect_right(self.checkpoints, skip, key=lambda c: c[0]) - 1]
        if sent:
            layouts = {**layouts, **sent}
        at_start = layouts
        msgs: list[Message] = []
        changed: list[bytes] = []
        append = msgs.append
        aborted, data_kinds = self.aborted_subxids, self._data_kinds
        layout_kind, layout_id = self._layout_kind, self.kinds.layout_id
        head, unpack_from = _SPILL.size, _SPILL.unpack_from
        di = n
        with open(self.path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if offset >= size:
                return msgs, at_start, layouts, changed
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
                here = offset
                while here < size:
                    pos, xid, length = unpack_from(mm, here)
                    start = here + head
                    here = start + length
                    kind = mm[start]
                    if aborted and xid in aborted and kind != layout_kind:
                        continue
                    if kind in data_kinds:
                        if di < skip:
                            di += 1
                            continue
                        if di >= upto:
                            break
                        di += 1
                        append((pos, mm[start:here]))
                    elif di < skip:
                        if kind == layout_kind:
                            p = mm[start:here]
                            layouts = at_start = {**layouts, layout_id(p): p}
                    else:
                        p = mm[start:here]
                        append((pos, p))
                        if kind == layout_kind:
                            layouts = {**layouts, layout_id(p): p}
                            changed.append(p)
        return msgs, at_start, layouts, changed

    def scan(self) -> tuple[int, int | None]:
        """The number of data messages kept, and the position of the first: where a transaction
        received whole would begin (PostgreSQL's protocol 1, and so Debezium, puts its BEGIN there).
        Kept by `add()` as the messages came, unless a subtransaction aborted: then the file is read."""
        if not self.aborted_subxids:
            return self.n_data, self.first
        n, first = 0, None
        layouts: dict[int, bytes] = {}
        checkpoints: list[tuple[int, int, dict[int, bytes]]] = [(0, 0, {})]
        every = self.CHECKPOINT_EVERY
        data_kinds, layout_kind, layout_id = self.kinds.data_kinds, self.kinds.layout_kind, self.kinds.layout_id
        for offset, pos, p in self._records():
            kind = p[0]
            if kind in data_kinds:
                if n and n % every == 0:
                    shared = checkpoints[-1][2]
                    checkpoints.append((n, offset, shared if shared == layouts else dict(layouts)))
                if first is None:
                    first = pos
                n += 1
            elif kind == layout_kind:
                layouts[layout_id(p)] = p
        self.checkpoints, self.layouts = checkpoints, layouts
        return n, first

    def discard(self) -> None:
        try:
            self.file.close()
        finally:
            with contextlib.suppress(OSError):
                os.unlink(self.path)


class StreamBuffer:
    """Transactions received and not yet handed out, in commit order, with a byte bound.

    The reader and the planner share it under `cond`; the reader notifies on every change."""

    def __init__(self, limit_bytes: int, kinds: MessageKinds):
        self.cond = threading.Condition()
        self.kinds = kinds
        self.txns: list[Txn] = []
        self.nbytes = 0
        self.limit = limit_bytes
        self.received = 0  # every transaction committing before this has been received
        self.head_layouts: dict[int, bytes] = {}  # layouts in force at the buffer's head
        self.peak_nbytes = 0  # high-water mark of `nbytes`

    def full(self) -> bool:
        return self.nbytes >= self.limit

    def add_bytes(self, n: int) -> None:
        self.nbytes += n
        if self.nbytes > self.peak_nbytes:
            self.peak_nbytes = self.nbytes

    def reset_incomplete(self) -> None:
        """Forget transactions not complete (after a lost connection: they will come again)."""
        with self.cond:
            for t in self.txns:
                if not t.complete:
                    self.nbytes -= t.nbytes
            self.txns = [t for t in self.txns if t.complete]

    def resume_pos(self, committed: int) -> int:
        """Where a reconnect should start: the end of the last complete transaction held."""
        with self.cond:
            return max([committed, *(t.end_pos for t in self.txns if t.end_pos is not None)])

    def trim(self, commit: int, inside: InTxn | None,
             known: tuple[int, Mapping[int, bytes]] | None = None) -> None:
        """Drop what has been handed out: the transactions ending by `commit`, and the first
        data messages of the next one that `inside` names. `known`: (how many transactions at the head
        end by `commit`, the layouts in force after them), when the caller has them (the planner, from
        the batch it planned): if the count is right and none was spilled, the layouts are taken as the
        head's instead of reading the dropped transactions' layout messages again."""
        with self.cond:
            done = freed = 0  # complete transactions at the head that end by `commit` (dropped at once at the end)
            spilled = False
            for t in self.txns:  # (`ends_by` inlined: this runs per transaction)
                end = t.end_pos
                if end is None or end > commit:
                    break
                done += 1
                freed += t.nbytes
                if t.spill is not None:
                    spilled = True
            if known is not None and known[0] == done and not spilled:
                if done:
                    self.head_layouts = dict(known[1])  # (a copy: the head's map is changed in place)
            else:
                self._absorb_whole(self.txns[:done])
            self.nbytes -= freed
            del self.txns[:done]
            head = self.txns[0] if self.txns else None
            if head is not None and inside is not None and head.xid == inside.xid and head.spill is None:
                self._trim_front(head, inside.n - head.first_index)
            self.cond.notify_all()

    def _absorb_whole(self, txns: list[Txn]) -> None:
        """Take the layouts of whole transactions dropped into the head's, and discard their spill files."""
        head_layouts = self.head_layouts
        layout_kind, layout_id = self.kinds.layout_kind, self.kinds.layout_id
        for t in txns:  # (`only_data` and `_absorb_layouts` inlined: this runs per transaction)
            if t.spill is not None:
                head_layouts.update(t.spill.layouts)
                t.spill.discard()
            elif len(t.msgs) != t.n_data - t.first_index:  # (not only data messages)
                for _, p in t.msgs:
                    if p[0] == layout_kind:
                        head_layouts[layout_id(p)] = p

    def _trim_front(self, t: Txn, drop: int) -> None:
        """Drop the first `drop` data messages of `t` (and what comes between them)."""
        if drop <= 0:
            return
        cut, seen = 0, 0
        data_kinds = self.kinds.data_kinds
        for i, (_, p) in enumerate(t.msgs):
            if p[0] in data_kinds:
                seen += 1
                cut = i + 1
                if seen == drop:
                    break
        gone = t.msgs[:cut]
        self._absorb_layouts(gone)
        freed = sum(len(p) for _, p in gone)
        t.msgs = t.msgs[cut:]
        t.first_index += seen
        t.nbytes -= freed
        self.nbytes -= freed

    def _absorb_layouts(self, msgs: Iterable[Message]) -> None:
        layout_kind, layout_id = self.kinds.layout_kind, self.kinds.layout_id
        for _, p in msgs:
            if p[0] == layout_kind:
                self.head_layouts[layout_id(p)] = p
