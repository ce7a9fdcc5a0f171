"""Streaming the change log: positions, the reader filling the shared buffer, the codec, the slices.

A message is one log row (`tbl`, `op`, `before`, `after` as JSON); every message is a data message
and there are no layout messages (a slice carries the captured tables' columns instead). A
`LogPosition` is `seq`, the first log row not yet delivered, plus, when a batch ends inside a
transaction, how many of its rows were delivered. `LogReader` polls the log on a thread and appends
whole transactions to a `StreamBuffer`; the shared `Planner` cuts batches and slices over it with
`LogCodec`; a `LogSlice` decodes its rows into Debezium records anywhere (a Spark executor).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import orjson
import psycopg2

from headwater.connectors.base import Offset, WorkUnit
from headwater.connectors.common.messages import InTxn, Layouts, Message, Segment
from headwater.connectors.common.planner import pack, unpack
from headwater.connectors.common.records import TxnCounters, table_records
from headwater.connectors.common.txbuffer import StreamBuffer, Txn
from headwater.events.batch import Events
from tests.connectors.changelog.records import ChangelogContext, ChangelogMaker, Table

OPS = {"I": "c", "U": "u", "D": "d"}
POLL_S = 0.05


@dataclass(frozen=True)
class LogPosition:
    """Every log row before `seq` is delivered, and with `n`, the first `n` rows of transaction `txid`."""

    seq: int
    txid: int | None = None
    n: int = 0
    commit: int | None = None  # the last seq of `txid`
    heartbeat_ms: int | None = None

    def to_offset(self) -> Offset:
        off: Offset = {"seq": self.seq}
        if self.n:
            off.update(txId=self.txid, n=self.n, commit_seq=self.commit)
        if self.heartbeat_ms is not None:
            off["heartbeat_ms"] = self.heartbeat_ms
        return off

    @classmethod
    def from_offset(cls, off: Offset) -> LogPosition:
        return cls(int(off["seq"]), off.get("txId"), int(off.get("n", 0)), off.get("commit_seq"),
                   off.get("heartbeat_ms"))


CHANGE = ord("C")  # the kind byte the reader puts before each log row's bytes


class LogKinds:
    """Every log row is a change (kind `C`); the log has no layout messages."""

    data_kinds = frozenset((CHANGE,))
    layout_kind = ord("L")  # never sent

    def layout_id(self, payload: bytes) -> int:
        raise AssertionError("the change log has no layout messages")


class LogReader:
    """Polls the log table for committed rows from a position, and appends them to `buffer` as
    whole transactions (a transaction's rows are consecutive and become visible at once)."""

    def __init__(self, params: dict[str, Any], log_ref: str, buffer_bytes: int):
        self.params = params
        self.log_ref = log_ref  # the log table as an SQL reference
        self.buffer = StreamBuffer(buffer_bytes, LogKinds())
        self.error: BaseException | None = None
        self.next_seq = 0
        self.generation = 0  # moved by `restart`: rows read before it are dropped
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, at: LogPosition) -> None:
        self.restart(at)
        self.thread = threading.Thread(target=self._run, name="changelog-reader", daemon=True)
        self.thread.start()

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def request_position(self) -> None:
        """Nothing to ask: every poll moves `buffer.received` to the end of what the log holds."""

    def restart(self, at: LogPosition) -> None:
        buf = self.buffer
        with buf.cond:
            self.generation += 1
            buf.txns, buf.nbytes, buf.received = [], 0, at.seq
            self.next_seq = at.seq
            buf.cond.notify_all()

    def close(self) -> None:
        self.stopping.set()
        if self.thread is not None:
            self.thread.join()

    def _run(self) -> None:
        try:
            conn = psycopg2.connect(**self.params)
            conn.autocommit = True
            query = (f"SELECT seq, txid, tbl, op, before::text, after::text, (extract(epoch FROM committed_at)"
                     f" * 1000000)::bigint FROM {self.log_ref} WHERE seq >= %s ORDER BY seq")
            with conn, conn.cursor() as cur:
                while not self.stopping.is_set():
                    with self.buffer.cond:
                        if self.buffer.full():
                            self.buffer.cond.wait(POLL_S)
                            continue
                        gen, start = self.generation, self.next_seq
                    cur.execute(query, (start,))
                    self._append(gen, cur.fetchall())
                    self.stopping.wait(POLL_S)
            conn.close()
        except BaseException as exc:
            self.error = exc
            with self.buffer.cond:
                self.buffer.cond.notify_all()

    def _append(self, gen: int, rows: list[tuple]) -> None:
        txns: list[Txn] = []
        for seq, txid, tbl, op, before, after, ts in rows:
            if not txns or txns[-1].xid != txid:
                txns.append(Txn(txid, seq, seq, ts))
            t = txns[-1]
            payload = b"C" + orjson.dumps([tbl, op, before, after])
            t.msgs.append((seq, payload))
            t.commit_pos, t.end_pos = seq, seq + 1
            t.n_data += 1
            t.nbytes += len(payload)
        buf = self.buffer
        with buf.cond:
            if gen != self.generation:
                return
            for t in txns:
                buf.txns.append(t)
                buf.add_bytes(t.nbytes)
            if txns:
                self.next_seq = buf.received = txns[-1].commit_pos + 1
            buf.cond.notify_all()


def decode(payload: bytes) -> tuple[str, str, dict | None, dict | None]:
    """A message's table (`schema.table`), operation and row images (numbers with a fraction exact)."""
    tbl, op, before, after = orjson.loads(payload[1:])
    return tbl, op, _image(before), _image(after)


def _image(text: str | None) -> dict | None:
    return None if text is None else json.loads(text, parse_float=Decimal)


class LogSlice(WorkUnit):
    """Log rows of some transactions, with the captured tables' columns; decodes anywhere."""

    def __init__(self, ctx: ChangelogContext, tables: dict[str, Table], segments: list[Segment], blob: bytes):
        self.ctx, self.tables, self.segments, self.blob = ctx, tables, segments, blob

    def describe(self) -> str:
        return f"change-log slice of {len(self.segments)} transaction segments"

    def read(self) -> Iterator[Events]:
        ctx = self.ctx
        maker = ChangelogMaker(ctx)
        messages = unpack(self.blob)
        for seg in self.segments:
            counters = TxnCounters.from_json(seg.counters) if ctx.transaction_metadata else None
            version, ts, tid = seg.commit_pos, seg.commit_ts, str(seg.xid)
            if seg.begin and counters is not None:
                maker.begin_record(tid, ts, version)
            for _ in range(seg.count):
                seq, payload = next(messages)
                self.change(maker, seq, payload, seg, counters)
                if len(maker.out) >= ctx.batch_rows:
                    yield maker.take()
            if seg.commit and counters is not None:
                maker.end_record(tid, ts, counters, version)
        if len(maker.out):
            yield maker.take()

    def change(self, maker: ChangelogMaker, seq: int, payload: bytes, seg: Segment,
               counters: TxnCounters | None) -> None:
        tbl, op, before, after = decode(payload)
        table = self.tables.get(tbl)
        kind = OPS[op]
        if table is None or kind in self.ctx.skipped:
            return
        te = table_records(self.ctx, table, table.columns, streaming=True)
        old, new = (None if image is None else tuple(image.get(c.name) for c in table.columns)
                    for image in (before, after))
        source_block = maker.source(te, seg.commit_ts, "false", seq, seg.xid)

        def block() -> dict | None:
            return None if counters is None else counters.block(te.collection, str(seg.xid))

        if new is None:
            assert old is not None, f"log row {seq} has no row image"
            maker.delete(te, old, source_block, block(), seg.commit_pos, seg.commit_ts)
        elif kind == "u":
            maker.update(te, old, new, source_block, block, seg.commit_pos, seg.commit_ts)
        else:
            maker.emit(te, "c", te.key(new), None, te.row(new), source_block, block(), seg.commit_pos, seg.commit_ts)


class HeartbeatUnit(WorkUnit):
    def __init__(self, ctx: ChangelogContext, ts_ms: int, version: int):
        self.ctx, self.ts_ms, self.version = ctx, ts_ms, version

    def read(self) -> Iterator[Events]:
        maker = ChangelogMaker(self.ctx)
        maker.heartbeat(self.ts_ms, self.version)
        yield maker.take()


class LogCodec(LogKinds):
    """The shared planner's codec over `LogPosition`s; `tables` gives the captured tables by name."""

    def __init__(self, ctx: ChangelogContext, tables: Callable[[], dict[str, Table]]):
        self.ctx = ctx
        self.tables = tables

    def commit(self, pos: LogPosition) -> int:
        return pos.seq

    def in_txn(self, pos: LogPosition) -> InTxn | None:
        return InTxn(pos.txid, pos.n, pos.commit) if pos.n and pos.txid is not None else None

    def last_commit(self, pos: LogPosition) -> int | None:
        return pos.seq

    def heartbeat_ms(self, pos: LogPosition) -> int | None:
        return pos.heartbeat_ms

    def after(self, txn: Txn) -> LogPosition:
        assert txn.end_pos is not None
        return LogPosition(txn.end_pos)

    def inside(self, before: LogPosition, txn: Txn, n: int) -> LogPosition:
        return LogPosition(before.seq, txn.xid, n, txn.commit_pos)

    def idle(self, start: LogPosition, commit: int) -> LogPosition:
        return LogPosition(commit)

    def with_heartbeat(self, pos: LogPosition, heartbeat_ms: int) -> LogPosition:
        return replace(pos, heartbeat_ms=heartbeat_ms)

    def check_layouts(self, head: Layouts, changed: list[bytes]) -> None:
        """The log has no layouts: a slice carries the captured tables as the catalog has them."""

    def slice(self, layouts: Layouts, segments: list[Segment], msgs: list[Message],
              last_commit: int | None) -> LogSlice:
        return LogSlice(self.ctx, self.tables(), segments, pack(msgs))

    def count(self, counters: dict, txn: Txn, msgs: list[Message], layouts: Layouts) -> dict:
        """The counters after the events of `msgs`, decoded here, on the driver, as a slice decodes them."""
        out = TxnCounters.from_json(counters)
        decoder = LogSlice(self.ctx, self.tables(), [], b"")
        maker = ChangelogMaker(self.ctx)
        seg = Segment(txn.xid, txn.begin_pos, txn.commit_pos, None, txn.commit_ts, True, False, False, len(msgs))
        for seq, payload in msgs:
            decoder.change(maker, seq, payload, seg, out)
        return out.to_json()

    def heartbeat(self, pos: LogPosition) -> HeartbeatUnit:
        assert pos.heartbeat_ms is not None
        return HeartbeatUnit(self.ctx, pos.heartbeat_ms, pos.seq)
