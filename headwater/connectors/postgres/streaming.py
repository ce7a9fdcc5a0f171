"""Streaming: plans batches over the replication buffer and decodes slices of it into events.

`StreamPlanner` runs on the driver: it finds where the next batch ends (`latest`), cuts the
batch into `StreamSlice`s of raw pgoutput messages (`plan`), and trims the buffer behind it.
`StreamSlice.read()` runs anywhere (a Spark executor): it decodes its messages and makes
Debezium's records. A slice carries everything it needs: the relation layouts and catalog
metadata in force at its start, the transaction context of each segment, and the commit position
before it (for `source.sequence`).
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa

from headwater.connectors.base import WorkUnit
from headwater.connectors.common.columnar import encode_block
from headwater.connectors.common.records import TableRecords as TableEvents
from headwater.connectors.common.records import TxnCounters
from headwater.connectors.common.records import table_records as table_events
from headwater.connectors.errors import SourceError
from headwater.connectors.postgres import pgoutput
from headwater.connectors.postgres.catalog import CatalogCache, TableSchema
from headwater.connectors.postgres.columnar import stream_sources
from headwater.connectors.postgres.connection import ConnectionParams, Reconnecting
from headwater.connectors.postgres.insert_runs import decode_inserts
from headwater.connectors.postgres.pgoutput import UNCHANGED_TOAST
from headwater.connectors.postgres.positions import StreamPosition, lsn_text
from headwater.connectors.postgres.records import EventContext, RecordMaker
from headwater.connectors.postgres.replication import DATA_KINDS, ReplicationReader, Txn
from headwater.events.batch import ArrowEvents, EventBatch, Events

log = logging.getLogger("headwater.postgres")

_FRAME = struct.Struct(">QI")
MIN_RUN = 32  # INSERTs; a shorter run costs less row by row than column-wise
MIN_SLICE = 5_000  # data messages; smaller batches are not worth another partition
POLL_S = 0.25
GATHER_S = 0.5  # how long a batch may wait for more of a transaction that is still arriving
REPLAY_WAIT_S = 600.0


@dataclass
class Segment:
    """A run of one transaction's messages inside a slice."""

    xid: int | None
    begin_lsn: int
    commit_lsn: int
    end_lsn: int | None
    commit_ts: int
    transactional: bool
    begin: bool  # the transaction starts in this segment
    commit: bool  # the transaction ends in this segment
    count: int  # messages (data and relation) in the blob
    counters: dict | None = None  # transaction metadata counters at the segment's start


@dataclass
class Piece:
    """One transaction's part of a batch, as the planner collects it."""

    txn: Txn
    skip: int  # data messages of the transaction before this piece
    upto: int  # data messages of the transaction up to the end of this piece
    commit: bool  # the piece reaches the commit
    msgs: list[tuple[int, bytes]]
    relations: dict[int, bytes]  # RELATION payloads in force where the piece starts


def pack(msgs: list[tuple[int, bytes]]) -> bytes:
    parts = []
    for lsn, p in msgs:
        parts.append(_FRAME.pack(lsn, len(p)))
        parts.append(p)
    return b"".join(parts)


def unpack(blob: bytes) -> Iterator[tuple[int, bytes]]:
    pos, n = 0, len(blob)
    view = memoryview(blob)
    while pos < n:
        lsn, size = _FRAME.unpack_from(blob, pos)
        pos += _FRAME.size
        yield lsn, bytes(view[pos:pos + size])
        pos += size


def sequence(last_commit: int | None, lsn: int | None) -> str:
    """Debezium's `source.sequence`: a JSON array of the last commit LSN and the event's LSN, as strings."""
    first = "null" if last_commit is None else f'"{last_commit}"'
    return f'[{first},"{lsn}"]' if lsn is not None else f"[{first},null]"


class StreamSlice(WorkUnit):
    """A slice of the change stream: raw messages plus the context to decode them."""

    def __init__(self, ctx: EventContext, tables: dict[int, TableSchema], relations: dict[int, bytes],
                 segments: list[Segment], blob: bytes, last_commit: int | None):
        self.ctx = ctx
        self.tables = tables
        self.relations = relations
        self.segments = segments
        self.blob = blob
        self.last_commit = last_commit

    def describe(self) -> str:
        return f"stream slice of {len(self.segments)} transaction segments ({len(self.blob)} bytes)"

    def read(self) -> Iterator[Events]:
        decoder = SliceDecoder(self.ctx, self.tables, self.relations)
        yield from decoder.run(self.segments, unpack(self.blob), self.last_commit)


class InsertRun:
    """Consecutive INSERT messages of one relation, collected to be decoded column-wise."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.oid: bytes | None = None
        self.te: TableEvents | None = None
        self.ncols = 0
        self.payloads: list[bytes] = []
        self.lsns: list[int] = []
        self.segments: list[tuple[int, Segment, int | None]] = []  # (first message, segment, last commit)

    def start(self, oid: bytes, te: TableEvents, ncols: int) -> None:
        self.oid, self.te, self.ncols = oid, te, ncols

    def add(self, payload: bytes, lsn: int, seg: Segment, last_commit: int | None) -> None:
        if not self.segments or self.segments[-1][1] is not seg:
            self.segments.append((len(self.payloads), seg, last_commit))
        self.payloads.append(payload)
        self.lsns.append(lsn)

    def encode(self, maker: RecordMaker, columns: list) -> pa.RecordBatch:
        """The run's create events from its decoded columns."""
        firsts = [first for first, _, _ in self.segments]
        counts = np.diff(np.array([*firsts, len(self.payloads)], dtype=np.int64))

        def per_row(values: list[int]) -> np.ndarray:
            return np.repeat(np.array(values, dtype=np.int64), counts)

        segs = [seg for _, seg, _ in self.segments]
        ts_us = per_row([seg.commit_ts for seg in segs])
        source = stream_sources(
            maker, self.te, ts_us, per_row([seg.xid for seg in segs]),
            per_row([-1 if last is None else last for _, _, last in self.segments]),
            np.array(self.lsns, dtype=np.int64))
        return encode_block(self.te, columns, source, "c", per_row([seg.commit_lsn for seg in segs]), ts_us)


class SliceDecoder:
    """Turns pgoutput messages into records (also used on the driver to count events)."""

    def __init__(self, ctx: EventContext, tables: dict[int, TableSchema], relations: dict[int, bytes]):
        self.ctx = ctx
        self.tables = tables
        self.relations = {oid: pgoutput.decode(p) for oid, p in relations.items()}
        self.events: dict[int, TableEvents | None] = {}

    def table(self, oid: int) -> TableEvents | None:
        if oid in self.events:
            return self.events[oid]
        te = None
        schema = self.tables.get(oid)
        rel = self.relations.get(oid)
        if schema is not None and rel is not None:
            te = table_events(self.ctx, schema, schema.layout_for(rel.columns), streaming=True)
        self.events[oid] = te
        return te

    def run(self, segments: list[Segment], messages: Iterator[tuple[int, bytes]],
            last_commit: int | None) -> Iterator[Events]:
        ctx = self.ctx
        maker = RecordMaker(ctx, EventBatch())
        limit = ctx.batch_rows
        # runs of INSERTs are decoded column-wise (the events carry no transaction block)
        runs = not ctx.transaction_metadata and "c" not in ctx.skipped
        run = InsertRun()
        for seg in segments:
            meta = ctx.transaction_metadata and seg.transactional
            counters = TxnCounters.from_json(seg.counters) if meta else None
            version, ts = seg.commit_lsn, seg.commit_ts
            if seg.begin and meta:
                maker.begin(seg.xid, seg.begin_lsn, ts, version)
            if not seg.transactional:
                last_commit = seg.end_lsn  # a non-transactional message is its own commit
            for _ in range(seg.count):
                lsn, p = next(messages)
                if runs and p[0] == 0x49 and seg.xid is not None:  # I
                    oid = p[1:5]
                    if oid != run.oid or len(run.payloads) >= limit:
                        yield from self._flush(run, maker)
                        rel_oid = int.from_bytes(oid, "big")
                        te = self.table(rel_oid)
                        if te is None:
                            continue  # a table not captured
                        run.start(oid, te, len(self.relations[rel_oid].columns))
                    run.add(p, lsn, seg, last_commit)
                    continue
                if run.payloads:
                    yield from self._flush(run, maker)
                self.message(maker, p, lsn, seg, last_commit, counters)
                if len(maker.out) >= limit:
                    yield maker.out
                    maker.out = EventBatch()
            if seg.commit:
                if meta:
                    maker.end(seg.xid, seg.end_lsn, ts, counters, version)
                last_commit = seg.end_lsn
        yield from self._flush(run, maker)
        if len(maker.out):
            yield maker.out

    def _flush(self, run: InsertRun, maker: RecordMaker) -> Iterator[Events]:
        """The events of a run of INSERTs: column-wise, or row by row for a short run or messages
        the column-wise decoder does not take (which then get `pgoutput`'s checks)."""
        if not run.payloads:
            return
        columns = decode_inserts(run.payloads, run.ncols) if len(run.payloads) >= MIN_RUN else None
        if columns is None:
            rows = iter(zip(run.payloads, run.lsns, strict=True))
            for i, (first, seg, last_commit) in enumerate(run.segments):
                upto = run.segments[i + 1][0] if i + 1 < len(run.segments) else len(run.payloads)
                for _ in range(upto - first):
                    p, lsn = next(rows)
                    self.message(maker, p, lsn, seg, last_commit, None)
            if len(maker.out) >= self.ctx.batch_rows:
                yield maker.out
                maker.out = EventBatch()
        else:
            if len(maker.out):
                yield maker.out
                maker.out = EventBatch()
            yield ArrowEvents(run.encode(maker, columns))
            # hand the block's intermediate buffers back to the system: mimalloc, Arrow's default
            # pool, keeps freed pages, which doubled the engine's resident growth on a large transaction
            pa.default_memory_pool().release_unused()
        run.clear()

    def message(self, maker: RecordMaker, p: bytes, lsn: int, seg: Segment, last_commit: int | None,
                counters: TxnCounters | None) -> None:
        kind = p[0]
        if kind == 0x52:  # R
            rel = pgoutput.decode(p)
            self.relations[rel.oid] = rel
            self.events.pop(rel.oid, None)
            return
        if kind not in DATA_KINDS:
            return  # Type and Origin messages carry nothing an event needs
        msg = pgoutput.decode(p)
        ctx = self.ctx
        ts, version, xid = seg.commit_ts, seg.commit_lsn, seg.xid
        seq = sequence(last_commit, lsn)
        if kind == 0x4D:  # M
            if ctx.message_included(msg.prefix):
                emit_message(maker, msg, lsn, xid if seg.transactional else None, ts, seq, version)
            return
        if kind == 0x54:  # T
            if "t" in ctx.skipped:
                return
            for oid in msg.relation_oids:
                te = self.table(oid)
                if te is None:
                    continue
                src = maker.source(te, ts, "false", seq, xid, lsn)
                block = _txn_block(counters, te, xid, lsn)
                maker.truncate(te, src, block, version, ts)
            return
        te = self.table(msg.relation_oid)
        if te is None:
            return
        skipped = ctx.skipped
        if kind == 0x49:  # I
            if "c" in skipped:
                return
            src = maker.source(te, ts, "false", seq, xid, lsn)
            maker.emit(te, "c", te.key(msg.new), None, te.row(msg.new), src, _txn_block(counters, te, xid, lsn),
                       version, ts)
        elif kind == 0x55:  # U
            if "u" in skipped:
                return
            new, old = msg.new, msg.old
            if old is not None and UNCHANGED_TOAST in new:
                # REPLICA IDENTITY FULL sends the old row de-TOASTed: the unchanged value is there
                new = tuple(o if v is UNCHANGED_TOAST and o is not None and o is not UNCHANGED_TOAST else v
                            for v, o in zip(new, old, strict=True))
            key_new = te.key(new)
            key_old = te.key(old) if old is not None else key_new
            src = maker.source(te, ts, "false", seq, xid, lsn)
            if te.key_schema is not None and key_old != key_new:
                newkey, oldkey = te.key_text(key_new), te.key_text(key_old)
                maker.emit(te, "d", key_old, te.row(old), None, src, _txn_block(counters, te, xid, lsn),
                           version, ts, headers=[("__debezium.newkey", newkey)])
                if ctx.tombstones:
                    maker.tombstone(te, key_old, version, ts)
                src = maker.source(te, ts, "false", seq, xid, lsn)
                maker.emit(te, "c", key_new, None, te.row(new), src, _txn_block(counters, te, xid, lsn),
                           version, ts, headers=[("__debezium.oldkey", oldkey)])
                return
            before = te.row(old) if old is not None else None
            after = te.row(new)
            if ctx.skip_unchanged and before is not None and before == after:
                return
            maker.emit(te, "u", key_new, before, after, src, _txn_block(counters, te, xid, lsn), version, ts)
        elif kind == 0x44:  # D
            if "d" in skipped:
                return
            old = msg.old
            key = te.key(old)
            src = maker.source(te, ts, "false", seq, xid, lsn)
            maker.emit(te, "d", key, te.row(old), None, src, _txn_block(counters, te, xid, lsn), version, ts)
            if ctx.tombstones:
                maker.tombstone(te, key, version, ts)


def _txn_block(counters: TxnCounters | None, te: TableEvents, xid: int | None, lsn: int):
    if counters is None:
        return None
    total, per = counters.next(te.collection)
    return {"id": f"{xid}:{lsn}", "total_order": total, "data_collection_order": per}


def emit_message(maker: RecordMaker, msg, lsn: int, xid: int | None, ts: int, seq: str, version: int) -> None:
    from headwater.connectors.postgres.records import MESSAGE_KEY, message_value_schema
    from headwater.events.envelope import Serializer

    ctx = maker.ctx
    src = maker.source(None, ts, "false", seq, xid, lsn, schema="", table="")
    ms, _, _ = maker.clock()
    key = Serializer(MESSAGE_KEY, ctx.schemas_enable).dumps({"prefix": msg.prefix})
    value = Serializer(message_value_schema(ctx), ctx.schemas_enable).dumps({
        "op": "m", "ts_ms": ms, "source": src, "transaction": None,
        "message": {"prefix": msg.prefix, "content": ctx.encode_bytes(msg.content)}})
    maker.out.append(f"{ctx.prefix}{ctx.delimiter}message", key, value, "m", version, ts)


class StreamPlanner:
    """Driver-side planning over a `ReplicationReader`'s buffer."""

    def __init__(self, reader: ReplicationReader, params: ConnectionParams, ctx: EventContext,
                 connection: Callable, db: Reconnecting | None = None):
        self.reader = reader
        self.db = db or Reconnecting(lambda: None, max_retries=0)
        self.params = params
        self.ctx = ctx
        self.catalog = CatalogCache(connection, ctx.filters)
        self.cached: tuple[tuple, list[WorkUnit]] | None = None
        self.partial_counters: dict[tuple[int, int], dict] = {}
        self.position: StreamPosition | None = None  # where the buffer's head is
        self.last_heartbeat = 0.0  # the first heartbeat is due at once (Debezium sends one after the snapshot)
        self.last_action = time.monotonic()

    # ---- end of the next batch
    def latest(self, start: StreamPosition, max_events: int | None, target: int | None) -> StreamPosition | None:
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
                if target is not None and buf.received_lsn >= target:
                    return self._idle_heartbeat(start)
                if target is None:
                    hb = self._idle_heartbeat(start)
                    if hb is not None:
                        return hb
                left = deadline - time.monotonic()
                if left <= 0:
                    if target is not None:
                        raise SourceError("timed out waiting for the replication stream to reach the end "
                                          "position fixed at the start of the run")
                    return None
                if target is not None:
                    self.reader.request_position()
                buf.cond.wait(min(left, 1.0))

    def _growing_tail(self, end: StreamPosition, max_events: int | None) -> bool:
        """Whether `end` stops at the last message received of a transaction still arriving, with
        fewer messages than a batch may hold."""
        if end.txid is None:
            return False
        for t in self.reader.buffer.txns:
            if t.xid == end.txid and not t.complete:
                return end.msg >= t.n_data and (max_events is None or end.msg < max_events)
        return False

    def _heartbeat_due(self) -> bool:
        interval = self.ctx.heartbeat_interval_ms
        return interval > 0 and (time.monotonic() - self.last_heartbeat) * 1000 >= interval

    def _with_heartbeat(self, end: StreamPosition) -> StreamPosition:
        """A batch with changes also carries a heartbeat when one is due (Debezium's are timed)."""
        if not self._heartbeat_due():
            return end
        self.last_heartbeat = time.monotonic()
        return replace(end, heartbeat_ms=time.time_ns() // 1_000_000)

    def _idle_heartbeat(self, start: StreamPosition) -> StreamPosition | None:
        """With nothing to deliver, a due heartbeat is a batch of its own; it moves the position to what
        the server says it has sent (every transaction committing before it was received)."""
        if not self._heartbeat_due():
            return None
        buf = self.reader.buffer
        self.reader.request_position()
        self.last_heartbeat = time.monotonic()
        lsn = start.lsn_commit
        if not buf.txns and buf.received_lsn > lsn:
            lsn = buf.received_lsn
        return StreamPosition(lsn, last_commit_lsn=_last_commit(start), last_commit_ts=start.last_commit_ts,
                              heartbeat_ms=time.time_ns() // 1_000_000)

    def _heartbeat_action(self) -> None:
        ctx = self.ctx
        if ctx.heartbeat_interval_ms <= 0 or not ctx.heartbeat_query:
            return
        if (time.monotonic() - self.last_action) * 1000 < ctx.heartbeat_interval_ms:
            return
        self.last_action = time.monotonic()

        def action() -> None:
            with self.catalog.connection().cursor() as cur:
                cur.execute(ctx.heartbeat_query)

        self.db("running heartbeat.action.query", action)

    def _walk(self, start: StreamPosition, max_events: int | None, target: int | None) -> StreamPosition | None:
        left = max_events if max_events else None
        last: Txn | None = None  # the last whole transaction the batch takes
        first = True
        for t in self.reader.buffer.txns:
            if t.complete and t.end_lsn <= start.lsn_commit:
                continue
            if target is not None and t.commit_lsn >= target:
                break
            skip = start.msg if (first and start.txid is not None and t.xid == start.txid) else 0
            first = False
            avail = t.n_data - skip
            if t.complete and (left is None or avail <= left):
                if left is not None:
                    left -= avail
                last = t
                continue
            take = avail if left is None else min(avail, left)
            if take > 0:
                if last is None:
                    prev_end, last_commit, last_ts = start.lsn_commit, _last_commit(start), start.last_commit_ts
                else:
                    prev_end, last_commit, last_ts = last.end_lsn, last.end_lsn, last.commit_ts
                return StreamPosition(prev_end, txid=t.xid, msg=skip + take, lsn=t.commit_lsn,
                                      ts_usec=t.commit_ts, last_commit_lsn=last_commit, last_commit_ts=last_ts)
            break
        if last is None:
            return None
        return StreamPosition(last.end_lsn, lsn=last.commit_lsn, ts_usec=last.commit_ts, last_commit_lsn=last.end_lsn,
                              last_commit_ts=last.commit_ts)

    # ---- work units for (start, end]
    def plan(self, start: StreamPosition, end: StreamPosition, parallelism: int) -> list[WorkUnit]:
        key = (start, end)
        if self.cached is not None and self.cached[0] == key:
            return self.cached[1]
        self._align(start)
        units: list[WorkUnit] = []
        if end.txid is not None or self._has_txns(start, end) or end.heartbeat_ms is None:
            self._wait_for(end)
            units = self.db("reading table metadata", lambda: self._slices(start, end, parallelism))
            self.db("reading table metadata", lambda: self._keep_partial_counters(start, end))
        if end.heartbeat_ms is not None:
            units.append(HeartbeatUnit(self.ctx, end.heartbeat_ms, end.lsn_commit))
        self.reader.buffer.trim(end)
        self.position = end
        self.cached = (key, units)
        return units

    def _has_txns(self, start: StreamPosition, end: StreamPosition) -> bool:
        return any(not (t.complete and t.end_lsn <= start.lsn_commit) and t.commit_lsn < end.lsn_commit
                   for t in self.reader.buffer.txns)

    def _align(self, start: StreamPosition) -> None:
        """Make the buffer begin at `start` (restart the stream there if it does not)."""
        if self.position is None:
            self.position = start
            return
        if _same_place(self.position, start):
            return
        log.info("restarting the replication stream at %s", start)
        self.reader.restart(start.lsn_commit, start.last_commit_ts)
        self.position = start

    def _wait_for(self, end: StreamPosition) -> None:
        buf = self.reader.buffer
        deadline = time.monotonic() + REPLAY_WAIT_S
        with buf.cond:
            while not self._covers(end):
                self.reader.check()
                if time.monotonic() > deadline:
                    raise SourceError(f"the replication stream did not deliver up to {end} in time")
                buf.cond.wait(1.0)

    def _covers(self, end: StreamPosition) -> bool:
        buf = self.reader.buffer
        if end.txid is not None:
            for t in buf.txns:
                if t.xid == end.txid and not (t.complete and t.end_lsn <= end.lsn_commit):
                    return t.n_data >= end.msg
            if end.lsn is not None and buf.received_lsn > end.lsn:
                # everything committing before the transaction's commit has been received: it will not come
                raise SourceError(f"the replication slot no longer serves {end}: transaction {end.txid} is not "
                                  f"in the stream read from LSN {lsn_text(self.position.lsn_commit if self.position else 0)}"
                                  "; the slot has moved past the start of this batch")
            return False
        return buf.received_lsn >= end.lsn_commit

    def _pieces(self, start: StreamPosition, end: StreamPosition) -> list[Piece]:
        """Each transaction's messages in (start, end], with the relations in force where it starts."""
        buf = self.reader.buffer
        relations = dict(buf.head_relations)
        pieces: list[Piece] = []
        first = True
        for t in buf.txns:
            if t.complete and t.end_lsn <= start.lsn_commit:
                continue
            skip = start.msg if (first and start.txid is not None and t.xid == start.txid) else 0
            first = False
            if end.txid is not None and t.xid == end.txid and not (t.complete and t.end_lsn <= end.lsn_commit):
                upto, commit = end.msg, False
            elif t.complete and t.end_lsn <= end.lsn_commit:
                upto, commit = t.n_data, True
            else:
                break
            msgs: list[tuple[int, bytes]] = []
            di = t.first_index  # data messages already trimmed off this transaction's front
            messages = t.messages()
            if t.spill is not None and skip:
                di, sent, messages = t.spill.read_from(skip)  # seek near the piece's start
                relations = {**relations, **sent}
            at_start = relations  # (the relation maps are never changed in place: no copies)
            for lsn, p in messages:
                k = p[0]
                if k in DATA_KINDS:
                    if di < skip:
                        di += 1
                        continue
                    if di >= upto:
                        break
                    di += 1
                    msgs.append((lsn, p))
                elif di < skip:
                    if k == 0x52:
                        relations = at_start = {**relations, pgoutput.peek(p)[1]: p}
                else:
                    msgs.append((lsn, p))
                    if k == 0x52:
                        relations = {**relations, pgoutput.peek(p)[1]: p}
            pieces.append(Piece(t, skip, upto, commit, msgs, at_start))
            if end.txid is not None and t.xid == end.txid:
                break
        return pieces

    def _slices(self, start: StreamPosition, end: StreamPosition, parallelism: int) -> list[WorkUnit]:
        """Cut (start, end] into slices of about equal numbers of data messages, one per partition;
        a large transaction is cut too (its transaction-metadata counters travel with each part)."""
        pieces = self._pieces(start, end)
        self._refresh_catalog(self.reader.buffer.head_relations, pieces)
        meta = self.ctx.transaction_metadata
        total = sum(pc.upto - pc.skip for pc in pieces)
        target = max(MIN_SLICE, -(-total // max(1, parallelism)))
        units: list[WorkUnit] = []
        cur_segs: list[Segment] = []
        cur_msgs: list[tuple[int, bytes]] = []
        cur_rel: dict[int, bytes] = {}
        cur_last_commit: int | None = None
        size = 0
        last_commit = _last_commit(start)

        def flush() -> None:
            nonlocal cur_segs, cur_msgs, cur_rel, size
            if cur_segs:
                oids = set(cur_rel) | {pgoutput.peek(p)[1] for _, p in cur_msgs if p[0] == 0x52}
                tables = {o: self.catalog.get(o) for o in oids}
                units.append(StreamSlice(self.ctx, {o: t for o, t in tables.items() if t is not None}, cur_rel,
                                         cur_segs, pack(cur_msgs), cur_last_commit))
            cur_segs, cur_msgs, cur_rel, size = [], [], {}, 0

        def add(pc: Piece, msgs: list, ndata: int, rel: dict, begin: bool, commit: bool,
                counters: TxnCounters | None) -> None:
            nonlocal cur_rel, cur_last_commit, size
            t = pc.txn
            if not cur_segs:
                cur_rel, cur_last_commit = rel, last_commit
            cur_segs.append(Segment(t.xid, t.begin_lsn, t.commit_lsn, t.end_lsn if commit else None, t.commit_ts,
                                    t.transactional, begin, commit, len(msgs),
                                    counters.to_json() if counters is not None else None))
            cur_msgs.extend(msgs)
            size += ndata

        for pc in pieces:
            t = pc.txn
            counters = None
            if meta and t.transactional:
                counters = self._start_counters(t, pc.skip) if pc.skip else TxnCounters()
            rel = part_rel = pc.relations  # (never changed in place)
            part: list[tuple[int, bytes]] = []
            part_data, begin = 0, pc.skip == 0
            remaining = pc.upto - pc.skip
            for lsn, p in pc.msgs:
                part.append((lsn, p))
                if p[0] == 0x52:
                    rel = {**rel, pgoutput.peek(p)[1]: p}
                elif p[0] in DATA_KINDS:
                    part_data += 1
                    remaining -= 1
                    if size + part_data >= target and remaining > 0:
                        add(pc, part, part_data, part_rel, begin, False, counters)
                        flush()
                        if counters is not None:
                            counters = self._advance(counters, t, part, part_rel)
                        part, part_rel, part_data, begin = [], rel, 0, False
            add(pc, part, part_data, part_rel, begin, pc.commit, counters)
            if pc.commit:
                last_commit = t.end_lsn
            if size >= target:
                flush()
        flush()
        return units

    def _start_counters(self, t: Txn, n: int) -> TxnCounters:
        """Counters after the first `n` data messages of `t`: kept from when they were planned, or
        counted again from the buffer (after a restart, the transaction is received whole again)."""
        kept = self.partial_counters.get((t.xid, n))
        if kept is not None:
            return TxnCounters.from_json(kept)
        if t.first_index:
            raise SourceError(f"transaction {t.xid}: the counts of its first {n} events are no longer buffered")
        msgs: list[tuple[int, bytes]] = []
        di = 0
        for lsn, p in t.messages():
            if p[0] in DATA_KINDS:
                if di >= n:
                    break
                di += 1
            msgs.append((lsn, p))
        return self._advance(TxnCounters(), t, msgs, dict(self.reader.buffer.head_relations))

    def _advance(self, counters: TxnCounters, t: Txn, msgs: list, relations: dict[int, bytes]) -> TxnCounters:
        """`counters` after the events of `msgs` (decoded here, on the driver, to count them exactly)."""
        out = TxnCounters.from_json(counters.to_json())
        oids = set(relations) | {pgoutput.peek(p)[1] for _, p in msgs if p[0] == 0x52}
        tables = {o: self.catalog.get(o) for o in oids}
        dec = SliceDecoder(self.ctx, {o: s for o, s in tables.items() if s is not None}, relations)
        seg = Segment(t.xid, t.begin_lsn, t.commit_lsn, None, t.commit_ts, True, False, False, len(msgs))
        maker = RecordMaker(self.ctx, EventBatch())
        for lsn, p in msgs:
            dec.message(maker, p, lsn, seg, None, out)
        return out

    def _keep_partial_counters(self, start: StreamPosition, end: StreamPosition) -> None:
        """A batch ending inside a transaction: count its events so far now, while they are buffered."""
        if not self.ctx.transaction_metadata or end.txid is None:
            return
        for pc in self._pieces(start, end):
            t = pc.txn
            if t.xid == end.txid and t.transactional:
                before = self._start_counters(t, pc.skip) if pc.skip else TxnCounters()
                after = self._advance(before, t, pc.msgs, pc.relations)
                self.partial_counters = {(t.xid, end.msg): after.to_json()}
                return

    def _refresh_catalog(self, relations: dict[int, bytes], pieces: list[Piece]) -> None:
        rels = dict(relations)
        for pc in pieces:
            for _, p in pc.msgs:
                if p[0] == 0x52:
                    rel = pgoutput.decode(p)
                    rels[rel.oid] = p
                    self.catalog.check(rel)
        for oid, p in rels.items():
            if not self.catalog.known(oid):
                self.catalog.check(pgoutput.decode(p))


def _last_commit(pos: StreamPosition) -> int | None:
    return pos.last_commit_lsn


def _same_place(a: StreamPosition, b: StreamPosition) -> bool:
    return (a.lsn_commit, a.txid if a.msg else None, a.msg) == (b.lsn_commit, b.txid if b.msg else None, b.msg)


class HeartbeatUnit(WorkUnit):
    """A batch that only moves the position forward: one heartbeat record."""

    def __init__(self, ctx: EventContext, ts_ms: int, lsn: int):
        self.ctx, self.ts_ms, self.lsn = ctx, ts_ms, lsn

    def read(self) -> Iterator[Events]:
        out = EventBatch()
        RecordMaker(self.ctx, out).heartbeat(self.ts_ms, self.lsn)
        yield out
