"""Streaming over pgoutput: the codec of the shared planner, and the slices that decode into events.

`StreamPlanner` is the shared `Planner` (connectors/common/planner.py) over a `ReplicationReader`'s
buffer, with `PgoutputCodec` telling it what it needs of pgoutput and of `StreamPosition`s.
`StreamSlice.read()` runs anywhere (a Spark executor): `SliceDecoder` decodes its pgoutput messages
and makes Debezium's records. A slice carries everything it needs: the relation layouts and catalog
metadata in force at its start, the transaction context of each segment, and the commit position
before it (for `source.sequence`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace

import numpy as np
import pyarrow as pa

from headwater.connectors.base import WorkUnit
from headwater.connectors.common.columnar import piece_block, typed_insert_block
from headwater.connectors.common.messages import InTxn, Layouts, Message, Segment, SegmentsByColumn
from headwater.connectors.common.planner import Planner, pack, unpack
from headwater.connectors.common.records import TableRecords, TxnCounters, table_records
from headwater.connectors.common.txbuffer import Txn
from headwater.connectors.postgres import pgoutput
from headwater.connectors.postgres.catalog import CatalogCache, TableSchema
from headwater.connectors.postgres.columnar import stream_sources
from headwater.connectors.postgres.connection import Reconnecting
from headwater.connectors.postgres.insert_runs import decode_inserts
from headwater.connectors.postgres.pgoutput import UNCHANGED_TOAST
from headwater.connectors.postgres.positions import StreamPosition
from headwater.connectors.postgres.records import EventContext, RecordMaker, message_collection
from headwater.connectors.postgres.replication import DATA_KINDS, PgoutputKinds, ReplicationReader
from headwater.events.batch import Events
from headwater.events.typed import TypedEvents

MIN_RUN = 32  # INSERTs; a shorter run costs less row by row than column-wise


def sequence(last_commit: int | None, lsn: int | None) -> str:
    """Debezium's `source.sequence`: a JSON array of the last commit LSN and the event's LSN, as strings."""
    first = "null" if last_commit is None else f'"{last_commit}"'
    return f'[{first},"{lsn}"]' if lsn is not None else f"[{first},null]"


class StreamSlice(SegmentsByColumn, WorkUnit):
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
        self.te: TableRecords | None = None
        self.ncols = 0
        self.payloads: list[bytes] = []
        self.lsns: list[int] = []
        # (first message, segment, its transaction id, last commit)
        self.segments: list[tuple[int, Segment, int, int | None]] = []

    def start(self, oid: bytes, te: TableRecords, ncols: int) -> None:
        self.oid, self.te, self.ncols = oid, te, ncols

    def add(self, payload: bytes, lsn: int, seg: Segment, xid: int, last_commit: int | None) -> None:
        if not self.segments or self.segments[-1][1] is not seg:
            self.segments.append((len(self.payloads), seg, xid, last_commit))
        self.payloads.append(payload)
        self.lsns.append(lsn)

    def encode(self, maker: RecordMaker, te: TableRecords, columns: list) -> Events:
        """The run's create events (of table `te`) from its decoded columns: JSON rows (as `PieceEvents`), or a
        typed block."""
        firsts = [first for first, _, _, _ in self.segments]
        counts = [b - a for a, b in zip(firsts, [*firsts[1:], len(self.payloads)], strict=True)]

        def per_row(values: list[int]) -> np.ndarray:
            return np.repeat(np.array(values, dtype=np.int64), counts)

        segs = [seg for _, seg, _, _ in self.segments]
        ts_us = per_row([seg.commit_ts for seg in segs])
        typed = te.ctx.output != "json"
        source = stream_sources(
            maker, te, ts_us, per_row([xid for _, _, xid, _ in self.segments]),
            per_row([-1 if last is None else last for _, _, _, last in self.segments]),
            np.array(self.lsns, dtype=np.int64), typed)
        versions = per_row([seg.commit_pos for seg in segs])
        if typed:
            return TypedEvents([typed_insert_block(te, columns, source, "c", versions, ts_us)])
        return piece_block(te, columns, source, "c", versions, ts_us)  # (joined where they are written)


class SliceDecoder:
    """Turns pgoutput messages into records (also used on the driver to count events)."""

    def __init__(self, ctx: EventContext, tables: dict[int, TableSchema], relations: Mapping[int, bytes]):
        self.ctx = ctx
        self.tables = tables
        self.relations = {oid: _relation(p) for oid, p in relations.items()}
        self.events: dict[int, TableRecords | None] = {}

    def table(self, oid: int) -> TableRecords | None:
        if oid in self.events:
            return self.events[oid]
        te = None
        schema = self.tables.get(oid)
        rel = self.relations.get(oid)
        if schema is not None and rel is not None:
            te = table_records(self.ctx, schema, schema.layout_for(rel.columns), streaming=True)
        self.events[oid] = te
        return te

    def run(self, segments: list[Segment], messages: Iterator[tuple[int, bytes]],
            last_commit: int | None) -> Iterator[Events]:
        ctx = self.ctx
        maker = RecordMaker(ctx)
        limit = ctx.batch_rows
        # runs of INSERTs are decoded column-wise (the events carry no transaction block)
        runs = not ctx.transaction_metadata and "c" not in ctx.skipped
        run = InsertRun()
        for seg in segments:
            xid = seg.xid
            # transaction metadata: the counters at the segment's start (a transaction has an xid)
            counters = TxnCounters.from_json(seg.counters) \
                if ctx.transaction_metadata and seg.transactional and xid is not None else None
            version, ts = seg.commit_pos, seg.commit_ts
            if seg.begin and counters is not None and xid is not None:
                maker.begin(xid, seg.begin_pos, ts, version)
            if not seg.transactional:
                last_commit = seg.end_pos  # a non-transactional message is its own commit
            for _ in range(seg.count):
                lsn, p = next(messages)
                if runs and p[0] == 0x49 and xid is not None:  # I
                    oid = p[1:5]
                    if oid != run.oid or len(run.payloads) >= limit:
                        yield from self._flush(run, maker)
                        rel_oid = int.from_bytes(oid, "big")
                        te = self.table(rel_oid)
                        if te is None:
                            continue  # a table not captured
                        run.start(oid, te, len(self.relations[rel_oid].columns))
                    run.add(p, lsn, seg, xid, last_commit)
                    continue
                if run.payloads:
                    yield from self._flush(run, maker)
                self.message(maker, p, lsn, seg, last_commit, counters)
                if len(maker.out) >= limit:
                    yield maker.take()
            if seg.commit:
                if counters is not None and xid is not None and seg.end_pos is not None:
                    maker.end(xid, seg.end_pos, ts, counters, version)
                last_commit = seg.end_pos
        yield from self._flush(run, maker)
        if len(maker.out):
            yield maker.take()

    def _flush(self, run: InsertRun, maker: RecordMaker) -> Iterator[Events]:
        """The events of a run of INSERTs: column-wise, or row by row for a short run or messages
        the column-wise decoder does not take (which then get `pgoutput`'s checks)."""
        te = run.te
        if te is None or not run.payloads:
            return
        columns = decode_inserts(run.payloads, run.ncols) if len(run.payloads) >= MIN_RUN else None
        if columns is None:
            rows = iter(zip(run.payloads, run.lsns, strict=True))
            for i, (first, seg, _, last_commit) in enumerate(run.segments):
                upto = run.segments[i + 1][0] if i + 1 < len(run.segments) else len(run.payloads)
                for _ in range(upto - first):
                    p, lsn = next(rows)
                    self.message(maker, p, lsn, seg, last_commit, None)
            if len(maker.out) >= self.ctx.batch_rows:
                yield maker.take()
        else:
            if len(maker.out):
                yield maker.take()
            yield run.encode(maker, te, columns)
            # hand the block's intermediate buffers back to the system: mimalloc, Arrow's default
            # pool, keeps freed pages, which doubled the engine's resident growth on a large transaction
            pa.default_memory_pool().release_unused()
        run.clear()

    def message(self, maker: RecordMaker, p: bytes, lsn: int, seg: Segment, last_commit: int | None,
                counters: TxnCounters | None) -> None:
        kind = p[0]
        if kind == 0x52:  # R
            rel = _relation(p)
            self.relations[rel.oid] = rel
            self.events.pop(rel.oid, None)
            return
        if kind not in DATA_KINDS:
            return  # Type and Origin messages carry nothing an event needs
        msg = pgoutput.decode(p)
        ctx = self.ctx
        ts, version, xid = seg.commit_ts, seg.commit_pos, seg.xid
        seq = sequence(last_commit, lsn)
        if isinstance(msg, pgoutput.LogicalMessage):
            if ctx.message_included(msg.prefix):
                transactional = seg.transactional and xid is not None
                block = counters.block(message_collection(lsn), f"{xid}:{lsn}") \
                    if counters is not None and transactional else None
                emit_message(maker, msg, lsn, xid if transactional else None, ts, seq, version, block)
            return
        if isinstance(msg, pgoutput.Truncate):
            if "t" in ctx.skipped:
                return
            for oid in msg.relation_oids:
                te = self.table(oid)
                if te is None:
                    continue
                source_block = maker.source(te, ts, "false", seq, xid, lsn)
                block = _txn_block(counters, te, xid, lsn)
                maker.truncate(te, source_block, block, version, ts)
            return
        if not isinstance(msg, (pgoutput.Insert, pgoutput.Update, pgoutput.Delete)):
            return
        te = self.table(msg.relation_oid)
        if te is None:
            return
        skipped = ctx.skipped
        if isinstance(msg, pgoutput.Insert):
            if "c" in skipped:
                return
            source_block = maker.source(te, ts, "false", seq, xid, lsn)
            maker.emit(te, "c", te.key(msg.new), None, te.row(msg.new), source_block, _txn_block(counters, te, xid, lsn),
                       version, ts)
        elif isinstance(msg, pgoutput.Update):
            if "u" in skipped:
                return
            new, old = msg.new, msg.old
            if old is not None and UNCHANGED_TOAST in new:
                # REPLICA IDENTITY FULL sends the old row de-TOASTed: the unchanged value is there
                new = tuple(o if v is UNCHANGED_TOAST and o is not None and o is not UNCHANGED_TOAST else v
                            for v, o in zip(new, old, strict=True))
            maker.update(te, old, new, maker.source(te, ts, "false", seq, xid, lsn),
                         lambda: _txn_block(counters, te, xid, lsn), version, ts)
        else:
            if "d" in skipped:
                return
            maker.delete(te, msg.old, maker.source(te, ts, "false", seq, xid, lsn), _txn_block(counters, te, xid, lsn),
                         version, ts)


def _relation(payload: bytes) -> pgoutput.Relation:
    rel = pgoutput.decode(payload)
    if not isinstance(rel, pgoutput.Relation):
        raise pgoutput.ProtocolError(f"pgoutput: expected a RELATION, got {rel.kind!r}", None, "type", 0)
    return rel


def _txn_block(counters: TxnCounters | None, te: TableRecords, xid: int | None, lsn: int):
    if counters is None:
        return None
    return counters.block(te.collection, f"{xid}:{lsn}")


def emit_message(maker: RecordMaker, msg: pgoutput.LogicalMessage, lsn: int, xid: int | None, ts: int, seq: str,
                 version: int, transaction: dict | None) -> None:
    """A logical decoding message's record (`transaction`: its block with transaction metadata)."""
    from headwater.connectors.postgres.records import MESSAGE_KEY, message_value_schema

    ctx = maker.ctx
    source_block = maker.source(None, ts, "false", seq, xid, lsn, schema="", table="")
    ms, _, _ = maker.clock()
    maker.out.record(f"{ctx.prefix}{ctx.delimiter}message", MESSAGE_KEY, {"prefix": msg.prefix},
                     message_value_schema(ctx), {"op": "m", "ts_ms": ms, "source": source_block, "transaction": transaction,
                                                 "message": {"prefix": msg.prefix,
                                                             "content": ctx.encode_bytes(msg.content)}},
                     "m", version, ts)


class PgoutputCodec(PgoutputKinds):
    """The shared planner's codec for pgoutput messages and `StreamPosition`s; driver-side."""

    def __init__(self, ctx: EventContext, catalog: CatalogCache):
        self.ctx = ctx
        self.catalog = catalog

    # ---- positions
    def commit(self, pos: StreamPosition) -> int:
        return pos.lsn_commit

    def in_txn(self, pos: StreamPosition) -> InTxn | None:
        return InTxn(pos.txid, pos.msg, pos.lsn) if pos.txid is not None and pos.msg else None

    def last_commit(self, pos: StreamPosition) -> int | None:
        return pos.last_commit_lsn

    def heartbeat_ms(self, pos: StreamPosition) -> int | None:
        return pos.heartbeat_ms

    def after(self, txn: Txn) -> StreamPosition:
        end = _end(txn)
        return StreamPosition(end, lsn=txn.commit_pos, ts_usec=txn.commit_ts, last_commit_lsn=end,
                              last_commit_ts=txn.commit_ts)

    def inside(self, before: StreamPosition, txn: Txn, n: int) -> StreamPosition:
        return StreamPosition(before.lsn_commit, txid=txn.xid, msg=n, lsn=txn.commit_pos, ts_usec=txn.commit_ts,
                              last_commit_lsn=before.last_commit_lsn, last_commit_ts=before.last_commit_ts)

    def idle(self, start: StreamPosition, commit: int) -> StreamPosition:
        return StreamPosition(commit, last_commit_lsn=start.last_commit_lsn, last_commit_ts=start.last_commit_ts)

    def with_heartbeat(self, pos: StreamPosition, heartbeat_ms: int) -> StreamPosition:
        return replace(pos, heartbeat_ms=heartbeat_ms)

    # ---- driver-side work
    def check_layouts(self, head: Layouts, changed: list[bytes]) -> None:
        relations = dict(head)
        for p in changed:
            rel = _relation(p)
            relations[rel.oid] = p
            self.catalog.check(rel)
        for oid, p in relations.items():
            if not self.catalog.known(oid):
                self.catalog.check(_relation(p))

    def _tables(self, layouts: Layouts, msgs: list[Message]) -> dict[int, TableSchema]:
        """The catalog's tables of the relations in `layouts` and of those `msgs` describe."""
        oids, kind = set(layouts), self.layout_kind
        oids.update(self.layout_id(p) for _, p in msgs if p[0] == kind)
        tables = {oid: self.catalog.get(oid) for oid in oids}
        return {oid: t for oid, t in tables.items() if t is not None}

    def slice(self, layouts: Layouts, segments: list[Segment], msgs: list[Message],
              last_commit: int | None) -> StreamSlice:
        return StreamSlice(self.ctx, self._tables(layouts, msgs), dict(layouts), segments, pack(msgs), last_commit)

    def count(self, counters: dict, txn: Txn, msgs: list[Message], layouts: Layouts) -> dict:
        """The counters after `msgs`, decoded here, on the driver, to count their events exactly."""
        out = TxnCounters.from_json(counters)
        dec = SliceDecoder(self.ctx, self._tables(layouts, msgs), layouts)
        seg = Segment(txn.xid, txn.begin_pos, txn.commit_pos, None, txn.commit_ts, True, False, False, len(msgs))
        maker = RecordMaker(self.ctx)
        for pos, p in msgs:
            dec.message(maker, p, pos, seg, None, out)
        return out.to_json()

    def heartbeat(self, pos: StreamPosition) -> HeartbeatUnit:
        if pos.heartbeat_ms is None:
            raise ValueError(f"{pos} carries no heartbeat")
        return HeartbeatUnit(self.ctx, pos.heartbeat_ms, pos.lsn_commit)


def _end(txn: Txn) -> int:
    if txn.end_pos is None:
        raise ValueError(f"transaction {txn.xid} has not committed")
    return txn.end_pos


class StreamPlanner(Planner[StreamPosition]):
    """The shared planner over a `ReplicationReader`'s buffer; `connection` opens the catalog's
    connection (also the heartbeat.action.query's), and `db` runs what uses it again after it was lost."""

    def __init__(self, reader: ReplicationReader, ctx: EventContext, connection: Callable,
                 db: Reconnecting | None = None):
        catalog = CatalogCache(connection, ctx.filters)
        query = ctx.heartbeat_query

        def action() -> None:
            with catalog.connection().cursor() as cur:
                cur.execute(query)

        super().__init__(reader, PgoutputCodec(ctx, catalog), db or Reconnecting(lambda: None, max_retries=0),
                         transaction_metadata=ctx.transaction_metadata,
                         heartbeat_interval_ms=ctx.heartbeat_interval_ms,
                         heartbeat_action=action if query else None)


class HeartbeatUnit(WorkUnit):
    """A batch that only moves the position forward: one heartbeat record."""

    def __init__(self, ctx: EventContext, ts_ms: int, lsn: int):
        self.ctx, self.ts_ms, self.lsn = ctx, ts_ms, lsn

    def read(self) -> Iterator[Events]:
        maker = RecordMaker(self.ctx)
        maker.heartbeat(self.ts_ms, self.lsn)
        yield maker.take()
