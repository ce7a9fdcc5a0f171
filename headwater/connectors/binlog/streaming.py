"""Streaming the binlog: the shared planner's codec, the slices that decode rows events, heartbeats.

The reader (`reader.py`) keeps events raw; `BinlogCodec` gives the shared `Planner` what it needs:
positions (`BinlogPosition`), the position after a transaction (with the GTID state after it),
slices. A slice carries its raw events, the TABLE_MAPs in force at its start, the tables as the
schema history knows them where the slice starts, and what each DDL statement inside it changes
(`SchemaStep`, worked out on the driver, in stream order, by the `SchemaTracker`), so it decodes
anywhere: a run of WRITE_ROWS events of one table (across transactions, at least `MIN_RUN_BYTES`,
without transaction metadata or the lock-free snapshot's filter) column-wise into one block
(`insert_runs.py`; JSON events as `PieceEvents`, joined once where they are written), other rows events through `rows.py` (pymysqlreplication's decoders for the column
types it leaves to them), each row into a Debezium record of the table as it stood at that
position. A rows event's columns are matched by position to the tracked table's; the source block
is the binlog's (`server_id`, `gtid`, `file`, `pos`, `row`, `thread`, and with `include.query` the
statement of the preceding annotate / rows-query event).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pymysql.protocol import MysqlPacket
from pymysqlreplication import event as rep_event
from pymysqlreplication import row_event
from pymysqlreplication.packet import BinLogPacketWrapper

from headwater.connectors.base import WorkUnit
from headwater.connectors.binlog import framing as fr
from headwater.connectors.binlog.images import ImageCheck
from headwater.connectors.binlog.insert_runs import RunRows, decode_writes, header_fields, run_columns
from headwater.connectors.binlog.positions import FILE_SHIFT, BinlogPosition, split_pos
from headwater.connectors.binlog.records import BinlogContext, BinlogMaker, records_of
from headwater.connectors.binlog.rows import plan_of, rows_of
from headwater.connectors.binlog.schema import Table
from headwater.connectors.binlog.values import replication_values
from headwater.connectors.common.columnar import (
    decimal_text,
    piece_block,
    source_parts,
    text_json,
    typed_insert_block,
    typed_source_column,
)
from headwater.connectors.common.messages import InTxn, Layouts, Message, Segment, SegmentsByColumn
from headwater.connectors.common.planner import pack, unpack
from headwater.connectors.common.records import TableRecords, TxnCounters
from headwater.connectors.common.txbuffer import Txn
from headwater.connectors.errors import SourceError
from headwater.events.arrays import binary_array, int64_array, lit, string_array
from headwater.events.batch import Events
from headwater.events.typed import TypedEvents

if TYPE_CHECKING:  # (the reader runs on the driver: a task worker does not import it)
    from headwater.connectors.binlog.reader import BinlogReader

TableKey = tuple[str, str]  # (database, table)


@dataclass(frozen=True)
class SchemaChange:
    """One schema change record: the database it is about, its DDL text and `tableChanges`, its `source.table`."""

    database: str
    ddl: str
    table_changes: tuple[dict[str, Any], ...]
    table: str | None = None


@dataclass(frozen=True)
class SchemaStep:
    """What one QUERY event did: its schema change records, the tables it created, changed (a Table)
    or dropped (None), and the tables a TRUNCATE emptied."""

    changes: tuple[SchemaChange, ...] = ()
    tables: Mapping[TableKey, Table | None] = field(default_factory=dict)
    truncated: tuple[TableKey, ...] = ()


class SchemaTracker(Protocol):
    """The schema history as streaming needs it (positions are stream integers)."""

    def tables_at(self, pos: int) -> dict[TableKey, Table]:
        """The tables in force before the event at `pos`."""
        ...

    def apply(self, pos: int, database: str, sql: str) -> SchemaStep:
        """The QUERY event at `pos` (statement `sql`, current database `database`): what it did (applied
        once, in stream order; asked again for a position already applied, the same step)."""
        ...


class RowFilter(Protocol):
    """Whether a row change is new to the snapshot's records (the lock-free snapshot's `ChunkFilter`)."""

    def keep(self, table: TableKey, image: tuple[Any, ...], commit_pos: int) -> bool:
        ...


class DecodeControl:
    """What pymysqlreplication's decoders ask of their control connection (no queries are made:
    column names come from the schema history)."""

    charset = "utf8mb4"

    def __init__(self, dbms: str):
        self.dbms = dbms

    def _get_dbms(self) -> str:
        return self.dbms


_ALL_EVENTS = frozenset((row_event.TableMapEvent, row_event.WriteRowsEvent, row_event.UpdateRowsEvent,
                         row_event.DeleteRowsEvent, rep_event.NotImplementedEvent))


def decode_event(payload: bytes, table_map: dict[int, Any], ctl: DecodeControl) -> Any:
    """A framed event (type byte + raw event without checksum) decoded by pymysqlreplication."""
    wrapper = BinLogPacketWrapper(MysqlPacket(b"\x00" + payload[1:], "utf8"), table_map, ctl, (8, 0, 0), False,
                                  _ALL_EVENTS, None, None, None, None, False, False, False, True, False)
    return wrapper.event


_TABLE_MAPS: dict[bytes, Any] = {}  # decoded TABLE_MAP events by their body (the same for every transaction)


def map_table(payload: bytes, table_map: dict[int, Any], ctl: DecodeControl) -> None:
    """Decode a TABLE_MAP event into `table_map`, its columns named by position ("0", "1", ...); a TABLE_MAP
    seen before in this process (its body, which names the table id, after the header) is not decoded again."""
    body = payload[1 + fr.HEADER_SIZE:]
    known = _TABLE_MAPS.get(body)
    if known is not None:
        table_map[known.table_id] = known
        return
    tm = decode_event(payload, table_map, ctl)
    if tm is not None:
        for i, c in enumerate(tm.table_obj.columns):
            c.name = str(i)
        if len(_TABLE_MAPS) > 4096:
            _TABLE_MAPS.clear()
        _TABLE_MAPS[body] = tm.table_obj


def transaction_id(gtid: str | None, file: str, pos: int) -> str:
    """Debezium's transaction id: the GTID, or the file and position of the transaction's start."""
    return gtid if gtid else f"file={file},pos={pos}"


_TRUNCATE = re.compile(r"^\s*TRUNCATE\s+(?:TABLE\s+)?(.+?)\s*;?\s*$", re.IGNORECASE | re.DOTALL)


class BinlogSlice(SegmentsByColumn, WorkUnit):
    """Raw binlog events of some transactions, decoded into Debezium records anywhere."""

    def __init__(self, ctx: BinlogContext, dbms: str, file_like: str, layouts: Layouts,
                 tables: dict[TableKey, Table], steps: dict[int, SchemaStep],
                 txn_info: dict[int, tuple[str | None, int | None]], segments: list[Segment], blob: bytes,
                 keep: RowFilter | None = None):
        self.ctx, self.dbms, self.file_like = ctx, dbms, file_like
        self.layouts, self.tables, self.steps, self.txn_info = dict(layouts), tables, steps, txn_info
        self.segments, self.blob = segments, blob
        self.keep = keep  # the lock-free snapshot's stream filter (lockfree.py)

    def describe(self) -> str:
        return f"binlog slice of {len(self.segments)} transaction segments"

    def read(self) -> Iterator[Events]:
        maker = BinlogMaker(self.ctx)
        decoder = _Decoder(self, maker)
        messages = unpack(self.blob)
        out, batch_rows = maker.out, self.ctx.batch_rows
        check = 0  # messages until the next look at the records' count
        message = decoder.message
        for seg in self.segments:
            decoder.segment(seg)
            for _ in range(seg.count):
                pos, payload = next(messages)
                message(pos, payload)
                if decoder.ready:
                    yield from decoder.drain()
                check -= 1
                if check <= 0:
                    check = 64
                    if len(out) >= batch_rows:
                        yield maker.take()
                        out = maker.out
            decoder.end_segment()
        decoder.flush()
        yield from decoder.drain()
        if len(maker.out):
            yield maker.take()
        # hand the blocks' buffers back to the system once the slice is decoded (Arrow's pool keeps freed
        # pages; trimming after every block made the next one fault its pages in again)
        pa.default_memory_pool().release_unused()


MIN_RUN_BYTES = 2048  # a shorter run of WRITE_ROWS events costs less row by row
# The events of one column-wise block: ~14k rows of the benchmark's table, whose JSON values are ~8 MB.
# A block's arrays are allocated afresh by Arrow (the system allocator) and freed once written: blocks
# of 8 MB of events (~115k rows, ~70 MB of JSON values) were each mapped and faulted in page by page
# and unmapped again, ~40% of a task's CPU in the kernel; blocks this size reuse the heap's memory.
MAX_RUN_BYTES = 1 << 20
# The events of a run whose rows are found at once (`decode_writes` takes a step per row position, over
# every event of the run: the more events, the fewer steps per row); its blocks are then made one after
# the other, MAX_RUN_BYTES of events each, each as the slice hands the one before on. (The 1M-row
# transaction's task CPU per row, `bench.binlog_tasks`: the same at 4 and 8 MB, ~10 % more at 2 MB, ~15 %
# more at 1 MB; a window holds a few times its size while its blocks are made: the events, one copy of
# them end to end, the offsets.)
MAX_DECODE_BYTES = 4 << 20


_TABLE_ID_AT = 1 + fr.HEADER_SIZE  # where a framed rows event's table id is
_new_tuple = tuple.__new__


class _RunEvent(NamedTuple):
    """A WRITE_ROWS event of a run, with the decoder's state where it was read (for its `source`)."""

    pos: int
    payload: bytes
    seg: Segment
    gtid: str | None
    thread: int | None
    query: str | None


class _WriteRun:
    """Consecutive WRITE_ROWS events of one table (across transactions), decoded column-wise together."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.table_id = -1
        self.id_bytes = b""  # the table id as its rows events' bytes hold it
        self.tm: Any = None
        self.table: Table | None = None
        self.te: TableRecords | None = None
        self.events: list[_RunEvent] = []
        self.nbytes = 0


_ESCAPED = re.compile(r'["\\\x00-\x1f]')  # what JSON escapes in an ASCII text


def _ascii_json(values: list[str]) -> pa.Array | None:
    """The JSON strings of ASCII texts that JSON need not escape (as `orjson.dumps` writes them: the text
    between quotes), made from one join of the texts; None if any text is not such."""
    plain = "".join(values)
    if not plain.isascii() or _ESCAPED.search(plain):
        return None
    joined = '""'.join(values)
    offsets = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, values), dtype=np.int64, count=len(values)) + 2, out=offsets[1:])
    data = f'"{joined}"'.encode()
    return pa.Array.from_buffers(pa.binary(), len(values), [None, pa.py_buffer(offsets.astype(np.int32)),
                                                            pa.py_buffer(data)])


def _json_per_row(values: list[Any], per_row: pa.Array | None) -> pa.Array | bytes:
    """Each row's JSON of its event's value (`per_row`: each row's event; None: a row an event), or the
    JSON all share. Texts (or None) that JSON need not escape are quoted column-wise."""
    distinct = set(values)
    if len(distinct) == 1:
        return orjson.dumps(values[0])
    out = None
    if len(distinct) > 64 and None not in distinct and all(v.__class__ is str for v in distinct):
        out = _ascii_json(values)
    if out is None and len(distinct) > 64 and all(v is None or v.__class__ is str for v in distinct):
        quoted, escapes = text_json(string_array(values), 0)
        if escapes is None:
            out = pc.coalesce(quoted, lit(b"null"))
    if out is None:
        known = {v: orjson.dumps(v) for v in distinct}
        out = binary_array([known[v] for v in values])
    return out if per_row is None else out.take(per_row)


def _ints_json_per_row(values: np.ndarray, event: np.ndarray | None) -> pa.Array | bytes:
    """Each row's JSON of its event's integer (`event`: each row's event; None: a row an event), or the
    JSON all share."""
    if len(values) and (values == values[0]).all():
        return b"%d" % values[0]
    text = decimal_text(values)
    return text if event is None else text.take(int64_array(event))  # (an event's text once)


def _optional_int64(values: list[int | None]) -> pa.Array:
    """An int64 array; None is null."""
    valid = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    data = np.fromiter((v or 0 for v in values), dtype=np.int64, count=len(values))
    validity = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(pa.int64(), len(values), [validity, pa.py_buffer(data)])


class _Decoder:
    """Decodes one slice's messages in order, appending records to `maker`."""

    def __init__(self, unit: BinlogSlice, maker: BinlogMaker, counters: TxnCounters | None = None):
        self.unit, self.maker, self.ctx = unit, maker, unit.ctx
        self.ctl = DecodeControl(unit.dbms)
        self.table_map: dict[int, Any] = {}
        for payload in unit.layouts.values():
            map_table(payload, self.table_map, self.ctl)
        self.tables = dict(unit.tables)
        self.query: str | None = None
        self.fixed_counters = counters
        self.counters: TxnCounters | None = counters
        self.seg: Segment | None = None
        self.gtid: str | None = None
        self.thread: int | None = None
        self.tid = ""
        self.row = 0  # Debezium's source.row: left over from the last rows event
        self.included: dict[TableKey, bool] = {}  # the table filters' answers, asked once per table
        self.records: dict[int, tuple[Table, TableRecords]] = {}  # records_of by id(table)
        self.checks: dict[int, tuple[Table, ImageCheck]] = {}  # which columns a partial image may lack
        # runs of WRITE_ROWS are decoded column-wise (their events carry no transaction block)
        self.runs = counters is None and not self.ctx.transaction_metadata and unit.keep is None \
            and "c" not in self.ctx.skipped
        self.run = _WriteRun()
        self.batch_rows = self.ctx.batch_rows
        self.ready: list[Events | Iterator[Events]] = []  # batches made by a run, for the slice to hand on
        self.last_map, self.last_map_size = b"", 0  # the body (after the header) of the TABLE_MAP mapped last

    def segment(self, seg: Segment) -> None:
        self.seg = seg
        self.gtid, self.thread = self.unit.txn_info.get(seg.xid or 0, (None, None))
        if self.ctx.transaction_metadata:  # (the id is only in transaction blocks and records)
            file, pos = split_pos(self.unit.file_like, seg.begin_pos)
            self.tid = transaction_id(self.gtid, file, pos)
        if self.fixed_counters is None:
            self.counters = TxnCounters.from_json(seg.counters) if self.ctx.transaction_metadata and \
                seg.transactional else None
        if seg.begin and self.counters is not None and self.fixed_counters is None:
            self.maker.begin_record(self.tid, seg.commit_ts, seg.commit_pos)

    def end_segment(self) -> None:
        seg = self.seg
        assert seg is not None
        if seg.commit and self.counters is not None and self.fixed_counters is None:
            self.maker.end_record(self.tid, seg.commit_ts, self.counters, seg.commit_pos)
        self.query = None

    def _source(self, te: Any, h: fr.Header, pos: int, row: int, query: str | None,
                database: str | None = None, table: str | None = None) -> bytes:
        file, at = split_pos(self.unit.file_like, pos)
        return self.maker.source_bytes(te, "false", h.timestamp * 1_000_000, server_id=h.server_id, gtid=self.gtid,
                                       file=file, pos=at, row=row, thread=self.thread, query=query,
                                       database=database, table=table)

    def message(self, pos: int, payload: bytes) -> None:
        kind = payload[0]
        if kind == fr.TABLE_MAP and len(payload) == self.last_map_size and payload.endswith(self.last_map):
            return  # the TABLE_MAP mapped last again (every transaction repeats its tables'): nothing changes
        if self.runs and kind in fr.WRITES and self._collect(pos, payload):
            return
        if self.run.events and self._breaks_run(pos, payload):
            self.flush()
        if kind == fr.TABLE_MAP:
            map_table(payload, self.table_map, self.ctl)
            self.last_map, self.last_map_size = payload[1 + fr.HEADER_SIZE:], len(payload)
        elif kind in (fr.MARIADB_ANNOTATE_ROWS, fr.ROWS_QUERY):
            if self.ctx.include_query:
                self.query = fr.annotate(payload[1:])
        elif kind == fr.QUERY:
            self._query(pos, payload)
        elif kind in fr.ROWS_EVENTS:
            self._rows(pos, payload)

    def _query(self, pos: int, payload: bytes) -> None:
        step = self.unit.steps.get(pos)
        if step is None:
            return
        raw = payload[1:]
        h = fr.header(raw)
        seg = self.seg
        assert seg is not None
        if self.ctx.include_schema_changes and self.fixed_counters is None:
            for change in step.changes:
                src = self._source(None, h, pos, self.row, None, change.database, change.table)
                self.maker.schema_change(change.database, change.ddl, list(change.table_changes), src,
                                         seg.commit_pos, h.timestamp * 1_000_000)
        if "t" not in self.ctx.skipped:
            for key in step.truncated:
                table = self.tables.get(key)
                if table is None or not self.ctx.filters.includes(*key):
                    continue
                te = records_of(self.ctx, table, streaming=True)
                block = orjson.Fragment(self._source(te, h, pos, self.row, None))
                self.maker.truncate(te, block, self._block(te.collection), seg.commit_pos, h.timestamp * 1_000_000)
        for key, table in step.tables.items():
            if table is None:
                self.tables.pop(key, None)
            else:
                self.tables[key] = table

    def _block(self, collection: str) -> dict | None:
        return None if self.counters is None else self.counters.block(collection, self.tid)

    def _includes(self, key: TableKey) -> bool:
        included = self.included.get(key)
        if included is None:
            included = self.included[key] = self.ctx.filters.includes(*key)
        return included

    def _records(self, table: Table) -> TableRecords:
        known = self.records.get(id(table))
        if known is None or known[0] is not table:
            known = self.records[id(table)] = (table, records_of(self.ctx, table, streaming=True))
        return known[1]

    def _collect(self, pos: int, payload: bytes) -> bool:
        """Add a WRITE_ROWS event to the run (flushing a run of another table first); False for an event
        the row-wise path must take (a table not captured or not known, a column type `rows.py` leaves
        to the library)."""
        run = self.run
        # the run's table as before (a DDL ends a run; a TABLE_MAP mapping its table id anew too): the id's
        # bytes compared in place, the event kept as a tuple made without NamedTuple's Python-level __new__
        if run.events and payload.startswith(run.id_bytes, _TABLE_ID_AT) and run.nbytes < MAX_DECODE_BYTES \
                and len(run.events) < self.batch_rows and self.table_map.get(run.table_id) is run.tm:
            run.events.append(_new_tuple(_RunEvent, (pos, payload, self.seg, self.gtid, self.thread, self.query)))
            run.nbytes += len(payload)
            return True
        table_id = fr.framed_table_id(payload)
        tm = self.table_map.get(table_id)
        if tm is None or plan_of(tm) is None:
            return False
        key = (tm.schema, tm.table)
        table = self.tables.get(key)
        if table is None or len(tm.columns) != len(table.columns) or not self._includes(key):
            return False
        if run.events and (table_id != run.table_id or tm is not run.tm or table is not run.table
                           or run.nbytes >= MAX_DECODE_BYTES or len(run.events) >= self.ctx.batch_rows):
            self.flush()
        if not run.events:
            run.table_id, run.tm, run.table, run.te = table_id, tm, table, self._records(table)
            run.id_bytes = payload[_TABLE_ID_AT:_TABLE_ID_AT + 6]
        seg = self.seg
        assert seg is not None
        run.events.append(_RunEvent(pos, payload, seg, self.gtid, self.thread, self.query))
        run.nbytes += len(payload)
        return True

    def _breaks_run(self, pos: int, payload: bytes) -> bool:
        """Whether a message ends the run: a rows event the run does not take, a DDL or TRUNCATE, a
        TABLE_MAP that maps the run's table id differently."""
        kind = payload[0]
        if kind == fr.TABLE_MAP:
            return fr.framed_table_id(payload) == self.run.table_id and \
                _TABLE_MAPS.get(payload[1 + fr.HEADER_SIZE:]) is not self.run.tm
        if kind == fr.QUERY:
            return pos in self.unit.steps
        return kind in fr.ROWS_EVENTS

    def drain(self) -> Iterator[Events]:
        """The batches in `ready` (a run's blocks made as they are asked for), in order; then none."""
        for item in self.ready:
            if isinstance(item, Iterator):
                yield from item
            else:
                yield item
        self.ready.clear()

    def flush(self) -> None:
        """The run's events: column-wise into `ready`, or row by row when it is short or the column-wise
        decoder does not take it (which then gets `rows.py`'s and the library's checks)."""
        run = self.run
        if not run.events:
            return
        rows = None
        if run.nbytes >= MIN_RUN_BYTES:
            try:
                rows = decode_writes([e.payload for e in run.events], run.tm)
            except (ValueError, IndexError):
                rows = None
        if rows is None or not len(rows.event):
            self.ready.extend(self._row_by_row(run.events))
        else:
            if len(self.maker.out):
                self.ready.append(self.maker.take())
            taken = _WriteRun()
            taken.__dict__.update(run.__dict__)  # (the run is cleared below; the blocks are made later)
            self.ready.append(self._run_blocks(taken, rows))
            nonempty = np.nonzero(rows.counts)[0]
            self.row = int(rows.counts[nonempty[-1]]) - 1
        run.clear()

    def _row_by_row(self, events: list[_RunEvent]) -> list[Events]:
        """A run's events decoded one by one (as any rows event), into the maker; the batches it filled."""
        out = []
        state = (self.seg, self.gtid, self.thread, self.query)
        for e in events:
            self.seg, self.gtid, self.thread, self.query = e.seg, e.gtid, e.thread, e.query
            self._rows(e.pos, e.payload)
            if len(self.maker.out) >= self.ctx.batch_rows:
                out.append(self.maker.take())
        self.seg, self.gtid, self.thread, self.query = state
        return out

    def _run_blocks(self, run: _WriteRun, rows: RunRows) -> Iterator[Events]:
        """The blocks of a decoded run, MAX_RUN_BYTES of its events each, made as they are asked for (the
        decoder has moved on: a block the column-wise encoder does not take is decoded row by row with
        the run's table and a maker of its own, as the run's events were when they came)."""
        begin = np.concatenate([[0], np.cumsum(rows.counts)])
        sizes = np.fromiter((len(e.payload) for e in run.events), dtype=np.int64, count=len(run.events))
        cuts = np.searchsorted(np.cumsum(sizes), np.arange(MAX_RUN_BYTES, int(sizes.sum()), MAX_RUN_BYTES),
                               side="left") + 1
        bounds = [0, *sorted(set(cuts.tolist()) - {0, len(run.events)}), len(run.events)]
        for e0, e1 in zip(bounds, bounds[1:], strict=False):
            r0, r1 = int(begin[e0]), int(begin[e1])
            if r0 == r1:
                continue  # (events without rows)
            part = replace(rows, event=rows.event[r0:r1] - e0, row=rows.row[r0:r1], offsets=rows.offsets[r0:r1],
                           nulls=rows.nulls[r0:r1], counts=rows.counts[e0:e1], begins=rows.begins[e0:e1])
            events = run.events[e0:e1]
            try:
                block = self._run_block(run, events, part)
            except (ValueError, IndexError, UnicodeDecodeError):
                yield from self._aside(run, events)
                continue
            yield block

    def _aside(self, run: _WriteRun, events: list[_RunEvent]) -> Iterator[Events]:
        """`_row_by_row` of a run's events after the decoder has moved on: with the run's table map and
        table, into a maker of its own (the decoder's holds the records of later events)."""
        assert run.table is not None
        saved = (self.maker, self.table_map, self.tables, self.row)
        self.maker = BinlogMaker(self.ctx)
        self.table_map = {run.table_id: run.tm}
        self.tables = {(run.tm.schema, run.tm.table): run.table}
        try:
            batches = self._row_by_row(events)
            if len(self.maker.out):
                batches.append(self.maker.take())
        finally:
            self.maker, self.table_map, self.tables, self.row = saved
        yield from batches

    def _run_block(self, run: _WriteRun, run_events: list[_RunEvent], rows: RunRows) -> Events:
        """The create events of `run_events` (of `run`; their rows decoded: `rows`) as one block (JSON
        rows or typed)."""
        te, table = run.te, run.table
        assert te is not None and table is not None
        columns = run_columns(rows, run.tm, table, self.ctx.type_settings)
        timestamps, server_ids = header_fields(rows)
        per_row = int64_array(rows.event)
        ts_us = timestamps[rows.event] * 1_000_000
        versions = np.fromiter((e.seg.commit_pos for e in run_events), dtype=np.int64, count=len(run_events))[rows.event]
        stream = np.fromiter((e.pos for e in run_events), dtype=np.int64, count=len(run_events))
        file_ids = stream >> FILE_SHIFT
        files = {i: split_pos(self.unit.file_like, i << FILE_SHIFT)[0] for i in set(file_ids.tolist())}
        texts: dict[str, list[Any]] = {"gtid": [e.gtid for e in run_events],
                                       "file": [files[i] for i in file_ids.tolist()] if len(files) > 1
                                       else [next(iter(files.values()))],
                                       "query": [e.query for e in run_events]}
        pos = stream & ((1 << FILE_SHIFT) - 1)
        threads = [e.thread for e in run_events]
        if self.ctx.output != "json":
            fields = {k: (string_array(v).take(per_row) if len(v) > 1 else pa.repeat(string_array(v)[0], len(per_row)))
                      for k, v in texts.items()}
            fields["server_id"] = int64_array(server_ids[rows.event])
            fields["pos"] = int64_array(pos[rows.event])
            fields["thread"] = _optional_int64(threads).take(per_row)
            fields["row"] = int64_array(rows.row)
            source = typed_source_column(self.maker, te, ts_us, fields)
            events: Events = TypedEvents([typed_insert_block(te, [], source, "c", versions, ts_us,
                                                             typed_of=lambda c, s: columns[c.index].typed(c, s))])
        else:
            each = len(rows.event) == len(run_events) and bool((rows.counts == 1).all())  # a row an event
            fields = {k: _json_per_row(vs, None if each else per_row) for k, vs in texts.items()}
            fields["thread"] = _json_per_row(threads, None if each else per_row)
            fields["server_id"] = _ints_json_per_row(server_ids, None if each else rows.event)
            fields["pos"] = _ints_json_per_row(pos, None if each else rows.event)
            fields["row"] = _ints_json_per_row(np.arange(int(rows.row.max()) + 1), rows.row)  # (each number once)
            # (the source blocks as parts: joined once, with the rest of each event; the columns' JSON is
            # valid UTF-8: text is checked where it is read, the rest is ASCII or orjson's)
            source = source_parts(self.maker, te, ts_us, {"sequence": b"null", **fields})
            events = piece_block(te, [], source, "c", versions, ts_us, json_of=lambda c: columns[c.index].json(c),
                                 utf8_json=True, rows=len(rows.event))  # (joined where they are written)
        return events

    def _rows(self, pos: int, payload: bytes) -> None:
        tm = self.table_map.get(fr.framed_table_id(payload))
        if tm is None:
            return
        key = (tm.schema, tm.table)
        if not self._includes(key):
            return
        kind = payload[0]
        op = "c" if kind in fr.WRITES else "u" if kind in fr.UPDATES else "d"
        if op in self.ctx.skipped:
            return
        table = self.tables.get(key)
        if table is None:
            raise SourceError(f"a rows event at {split_pos(self.unit.file_like, pos)} is for {key[0]}.{key[1]}, "
                              "a table the schema history does not know")
        n = len(table.columns)
        if len(tm.columns) != n:
            raise SourceError(f"a rows event at {split_pos(self.unit.file_like, pos)} has {len(tm.columns)} columns "
                              f"for {key[0]}.{key[1]}, the schema history {n}")
        images = row_images(payload, self.table_map, self.ctl, n)
        te = self._records(table)
        if fr.partial_image(payload):
            file, at = split_pos(self.unit.file_like, pos)
            self._image_check(table, te).check(images, f"at {file}:{at} for {key[0]}.{key[1]}")
        h = fr.header(payload[1:])
        seg = self.seg
        assert seg is not None
        ts = h.timestamp * 1_000_000
        query = self.query if self.ctx.include_query else None
        first, _, rest = self._source(te, h, pos, 0, query).partition(b',"row":0,')
        keep = self.unit.keep
        for i, r in enumerate(images):
            self.row = i
            src = orjson.Fragment(b"%s,\"row\":%d,%s" % (first, i, rest))
            if op == "c":
                new = r[0]
                if keep is None or keep.keep(key, new, seg.commit_pos):
                    self.maker.emit(te, "c", te.key(new), None, te.row(new), src, self._block(te.collection),
                                    seg.commit_pos, ts)
            elif op == "d":
                old = r[0]
                if keep is None or keep.keep(key, old, seg.commit_pos):
                    self.maker.delete(te, old, src, self._block(te.collection), seg.commit_pos, ts)
            else:
                old, new = r[0], r[1]
                old_new = (True, True) if keep is None else (keep.keep(key, old, seg.commit_pos),
                                                             keep.keep(key, new, seg.commit_pos))
                if old_new == (True, True):
                    self.maker.update(te, old, new, src, partial(self._block, te.collection), seg.commit_pos, ts)
                elif old_new[0]:  # a key change whose new key's chunk holds its row already
                    self.maker.delete(te, old, src, self._block(te.collection), seg.commit_pos, ts)
                elif old_new[1]:  # a key change whose old key's chunk lacks the row already
                    self.maker.emit(te, "c", te.key(new), None, te.row(new), src, self._block(te.collection),
                                    seg.commit_pos, ts)


    def _image_check(self, table: Table, te: TableRecords) -> ImageCheck:
        known = self.checks.get(id(table))
        if known is None or known[0] is not table:
            known = self.checks[id(table)] = (table, ImageCheck(table, [c.name for c in te.key_columns]))
        return known[1]


def image(values: dict[str, Any], none_sources: dict[str, str], names: list[str]) -> tuple[Any, ...]:
    """A row image as the type converters take it (`values.replication_values`), in column order."""
    fixed = replication_values(values, none_sources)
    return tuple(fixed[c] for c in names)


class HeartbeatUnit(WorkUnit):
    def __init__(self, ctx: BinlogContext, ts_ms: int, version: int):
        self.ctx, self.ts_ms, self.version = ctx, ts_ms, version

    def read(self) -> Iterator[Events]:
        maker = BinlogMaker(self.ctx)
        maker.heartbeat(self.ts_ms, self.version)
        yield maker.take()


class BinlogCodec(fr.BinlogKinds):
    """The shared planner's codec over `BinlogPosition`s."""

    def __init__(self, ctx: BinlogContext, dbms: str, reader: BinlogReader, tracker: SchemaTracker,
                 file_like: Callable[[], str]):
        self.ctx, self.dbms, self.reader, self.tracker = ctx, dbms, reader, tracker
        self.file_like = file_like
        self.keep: RowFilter | None = None  # the lock-free snapshot's stream filter, while it has one

    def commit(self, pos: BinlogPosition) -> int:
        return pos.stream

    def in_txn(self, pos: BinlogPosition) -> InTxn | None:
        return InTxn(pos.txn, pos.event, pos.commit) if pos.event and pos.txn is not None else None

    def last_commit(self, pos: BinlogPosition) -> int | None:
        return pos.stream

    def heartbeat_ms(self, pos: BinlogPosition) -> int | None:
        return pos.heartbeat_ms

    def after(self, txn: Txn) -> BinlogPosition:
        assert txn.end_pos is not None and txn.xid is not None
        file, pos = split_pos(self.file_like(), txn.end_pos)
        return BinlogPosition(file, pos, self.reader.gtid_text(txn.xid))

    def inside(self, before: BinlogPosition, txn: Txn, n: int) -> BinlogPosition:
        return BinlogPosition(before.file, before.pos, before.gtids, n, txn.xid, txn.commit_pos)

    def idle(self, start: BinlogPosition, commit: int) -> BinlogPosition:
        file, pos = split_pos(start.file, commit)
        return BinlogPosition(file, pos, start.gtids)

    def with_heartbeat(self, pos: BinlogPosition, heartbeat_ms: int) -> BinlogPosition:
        return replace(pos, heartbeat_ms=heartbeat_ms)

    def check_layouts(self, head: Layouts, changed: list[bytes]) -> None:
        """Nothing to check: a TABLE_MAP names its table, whose columns the schema history holds."""

    def _steps(self, msgs: list[Message]) -> dict[int, SchemaStep]:
        steps = {}
        for pos, payload in msgs:
            if payload[0] == fr.QUERY:
                q = fr.query(payload[1:])
                steps[pos] = self.tracker.apply(pos, q.database, q.sql)
        return steps

    def slice(self, layouts: Layouts, segments: list[Segment], msgs: list[Message],
              last_commit: int | None) -> BinlogSlice:
        tables = self.tracker.tables_at(msgs[0][0]) if msgs else {}
        steps = self._steps(msgs)
        info = {s.xid: self.reader.txn_info.get(s.xid, (None, None)) for s in segments if s.xid is not None}
        return BinlogSlice(self.ctx, self.dbms, self.file_like(), layouts, tables, steps, info, segments,
                           pack(msgs), self.keep)

    def count(self, counters: dict, txn: Txn, msgs: list[Message], layouts: Layouts) -> dict:
        """The counters after the events of `msgs`, decoded here as a slice decodes them."""
        out = TxnCounters.from_json(counters)
        tables = self.tracker.tables_at(msgs[0][0]) if msgs else {}
        unit = BinlogSlice(self.ctx, self.dbms, self.file_like(), layouts, tables, self._steps(msgs),
                           {txn.xid or 0: self.reader.txn_info.get(txn.xid or 0, (None, None))}, [], b"", self.keep)
        decoder = _Decoder(unit, BinlogMaker(self.ctx), out)
        decoder.segment(Segment(txn.xid, txn.begin_pos, txn.commit_pos, None, txn.commit_ts, True, False, False,
                                len(msgs)))
        for pos, payload in msgs:
            decoder.message(pos, payload)
        return out.to_json()

    def heartbeat(self, pos: BinlogPosition) -> HeartbeatUnit:
        assert pos.heartbeat_ms is not None
        return HeartbeatUnit(self.ctx, pos.heartbeat_ms, pos.stream)


def truncated_tables(sql: str, database: str) -> tuple[TableKey, ...]:
    """The tables a TRUNCATE statement names (`db.table` or `table` in the current database)."""
    m = _TRUNCATE.match(sql)
    if m is None:
        return ()
    out = []
    for part in m.group(1).split(","):
        names = [n.strip().strip("`") for n in part.strip().split(".")]
        out.append((names[0], names[1]) if len(names) == 2 else (database, names[0]))
    return tuple(out)


def row_images(payload: bytes, table_map: dict[int, Any], ctl: DecodeControl, n: int) -> list[tuple[tuple[Any, ...], ...]]:
    """The images of a rows event (one per row, two for an update: before and after) of a table of `n`
    columns, as the type converters take them: read by `rows.py`, or by pymysqlreplication for the column
    types `rows.py` leaves to it; the columns a partial image leaves out are ABSENT."""
    images = rows_of(payload, table_map)
    if images is not None:
        return images
    ev = decode_event(payload, table_map, ctl)
    names = [str(i) for i in range(n)]
    if payload[0] in fr.UPDATES:
        return [(image(r["before_values"], r.get("before_none_sources") or {}, names),
                 image(r["after_values"], r.get("after_none_sources") or {}, names)) for r in ev.rows]
    return [(image(r["values"], r.get("none_sources") or {}, names),) for r in ev.rows]
