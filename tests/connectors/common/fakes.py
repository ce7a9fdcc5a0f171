"""A tiny connector for the shared buffer and planner, with no server: the proof that another
connector's messages and positions can use them.

Messages: `b"D<layout>:<value>"` is a data message of the table with that layout id,
`b"L<id>:<version>"` a table layout, anything else (`b"X..."`) a message that only travels along.
A position is `Pos`: an ordered commit position plus, inside a transaction, its id and the number
of its data messages delivered. The fake reader keeps every transaction it was given, so that a
restart fills a fresh buffer from the restart position, as a server would send them again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

from headwater.connectors.base import WorkUnit
from headwater.connectors.common.messages import InTxn, Layouts, Message, Segment
from headwater.connectors.common.planner import Planner, pack, unpack
from headwater.connectors.common.txbuffer import StreamBuffer, Txn
from headwater.events.batch import Events

T = TypeVar("T")


class FakeKinds:
    data_kinds = frozenset(b"D")
    layout_kind = ord("L")

    def layout_id(self, payload: bytes) -> int:
        return int(payload[1:].split(b":")[0])


KINDS = FakeKinds()


def is_data(payload: bytes) -> bool:
    return payload[:1] == b"D"


def layout_of(payload: bytes) -> int | None:
    """The layout id of a layout message, None for any other."""
    return KINDS.layout_id(payload) if payload[:1] == b"L" else None


def table_of(payload: bytes) -> int:
    """The layout id a data message refers to."""
    return int(payload[1:].split(b":")[0])


@dataclass(frozen=True)
class Pos:
    commit: int
    xid: int | None = None
    n: int = 0
    last_commit: int | None = None
    heartbeat_ms: int | None = None


@dataclass
class FakeSlice(WorkUnit):
    layouts: dict[int, bytes]
    segments: list[Segment]
    blob: bytes
    last_commit: int | None

    def read(self) -> Iterator[Events]:
        return iter(())

    def messages(self) -> list[Message]:
        return list(unpack(self.blob))

    def data(self) -> list[bytes]:
        return [p for _, p in self.messages() if is_data(p)]


@dataclass
class FakeHeartbeat(WorkUnit):
    ts_ms: int
    commit: int

    def read(self) -> Iterator[Events]:
        return iter(())


@dataclass
class FakeCodec(FakeKinds):
    checked: list[tuple[dict[int, bytes], list[bytes]]] = field(default_factory=list)

    def commit(self, pos: Pos) -> int:
        return pos.commit

    def in_txn(self, pos: Pos) -> InTxn | None:
        return InTxn(pos.xid, pos.n, None) if pos.xid is not None and pos.n else None

    def last_commit(self, pos: Pos) -> int | None:
        return pos.last_commit

    def heartbeat_ms(self, pos: Pos) -> int | None:
        return pos.heartbeat_ms

    def after(self, txn: Txn) -> Pos:
        assert txn.end_pos is not None
        return Pos(txn.end_pos, last_commit=txn.end_pos)

    def inside(self, before: Pos, txn: Txn, n: int) -> Pos:
        return Pos(before.commit, txn.xid, n, last_commit=before.last_commit)

    def idle(self, start: Pos, commit: int) -> Pos:
        return Pos(commit, last_commit=start.last_commit)

    def with_heartbeat(self, pos: Pos, heartbeat_ms: int) -> Pos:
        return replace(pos, heartbeat_ms=heartbeat_ms)

    def check_layouts(self, head: Layouts, changed: list[bytes]) -> None:
        self.checked.append((dict(head), list(changed)))

    def slice(self, layouts: Layouts, segments: list[Segment], msgs: list[Message],
              last_commit: int | None) -> FakeSlice:
        return FakeSlice(dict(layouts), segments, pack(msgs), last_commit)

    def count(self, counters: dict, txn: Txn, msgs: list[Message], layouts: Layouts) -> dict:
        """Data messages per table, and in all."""
        out = {"total": counters.get("total", 0), "per": dict(counters.get("per", {}))}
        for _, p in msgs:
            if is_data(p):
                out["total"] += 1
                out["per"][table_of(p)] = out["per"].get(table_of(p), 0) + 1
        return out

    def heartbeat(self, pos: Pos) -> FakeHeartbeat:
        assert pos.heartbeat_ms is not None
        return FakeHeartbeat(pos.heartbeat_ms, pos.commit)


def txn(xid: int, commit: int, payloads: list[bytes], *, complete: bool = True) -> Txn:
    """A transaction whose messages sit at positions commit - len .. commit - 1, ending at `commit`."""
    msgs = [(commit - len(payloads) + i, p) for i, p in enumerate(payloads)]
    return Txn(xid, msgs[0][0] if msgs else commit, commit, commit * 10, end_pos=commit if complete else None,
               msgs=msgs, n_data=sum(1 for _, p in msgs if is_data(p)), nbytes=sum(len(p) for _, p in msgs))


def data(table: int, values: range | list[int]) -> list[bytes]:
    return [b"D%d:%d" % (table, v) for v in values]


class FakeReader:
    """Holds the whole stream; the buffer is what was "received" from the start position on."""

    def __init__(self, stream: list[Txn], start: int = 0, limit: int = 1 << 30,
                 head_layouts: Mapping[int, bytes] | None = None):
        self.stream = stream
        self.limit = limit
        self.head_layouts = dict(head_layouts or {})
        self.restarts: list[Pos] = []
        self.buffer = self._fill(start)

    def _fill(self, start: int) -> StreamBuffer:
        buf = StreamBuffer(self.limit, KINDS)
        # the layouts in force at `start`: those at the stream's start, then those sent before it
        buf.head_layouts = dict(self.head_layouts)
        for t in self.stream:
            if t.ends_by(start):
                for _, p in t.msgs:
                    lid = layout_of(p)
                    if lid is not None:
                        buf.head_layouts[lid] = p
                continue
            copy = replace(t, msgs=list(t.msgs), spill=t.spill)
            buf.txns.append(copy)
            buf.add_bytes(copy.nbytes)
            if t.end_pos is not None:
                buf.received = max(buf.received, t.end_pos)
        buf.received = max(buf.received, start)
        return buf

    def check(self) -> None:
        pass

    def request_position(self) -> None:
        pass

    def restart(self, at: Pos) -> None:
        self.restarts.append(at)
        self.buffer = self._fill(at.commit)


def retry_once(what: str, fn: Callable[[], T]) -> T:
    return fn()


def planner(reader: FakeReader, *, metadata: bool = False, heartbeat_ms: int = 0) -> Planner[Pos]:
    return Planner(reader, FakeCodec(), retry_once, transaction_metadata=metadata, heartbeat_interval_ms=heartbeat_ms)
