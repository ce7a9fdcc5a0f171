"""PostgreSQL's hooks for signals and incremental snapshots (`connectors.common.incremental`).

- The stream scan decodes, on the driver, only the pgoutput changes of the signalling table and of
  the table whose chunk is open (by relation oid; other messages are skipped by their first bytes).
- A chunk is read with `COPY (SELECT ... WHERE (key) > (last) AND (key) <= (max) [AND (condition)]
  ORDER BY key LIMIT n) TO STDOUT (FORMAT csv)`: the rows as PostgreSQL's text, as the initial
  snapshot reads them, so the same column-wise encoder makes their events (`op: r`,
  `source.snapshot: incremental`).
- Watermarks, as Debezium writes them: `INSERT INTO <signal table> VALUES ('<id>-open',
  'snapshot-window-open', '{"openWindowTimestamp": ...}')` before the chunk's SELECT, and after it
  `('<id>-close', 'snapshot-window-close', '{"openWindowTimestamp": ..., "closeWindowTimestamp": ...}')`
  (`insert_insert`) or `DELETE ... WHERE <first column> = '<id>-open'` (`insert_delete`).
- The read-only mode (`headwater.incremental.snapshot.read.only`) writes nothing: the chunk's SELECT
  runs in a REPEATABLE READ transaction whose first statement takes `pg_current_snapshot()`; a
  streamed change supersedes a chunk row when its transaction is not visible to that snapshot (xid
  at or past xmax, or in xip), and the chunk is emitted once the stream has passed the WAL insert
  position read after the snapshot (every transaction the snapshot saw committed before it).
  A change delivered in an earlier batch supersedes nothing: its transaction committed before the
  chunk's snapshot was taken, so that snapshot sees it, unless the committing backend had not yet
  left PostgreSQL's proc array when the snapshot was taken although walsender had already sent its
  commit and headwater delivered it (a window of microseconds; Debezium's watermarks have the same
  one). On a standby (PostgreSQL 16's logical decoding on standbys) the position is the replayed
  one; that setup is not tested here.
"""


from __future__ import annotations

import contextlib
import io
import json
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg2
import pyarrow as pa
import pyarrow.compute as pc
from psycopg2 import sql

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import Offset, WorkUnit
from headwater.connectors.common.adhoc import (
    blocking_config,
    choose_collections,
    chunk_key,
    close_data,
    open_data,
)
from headwater.connectors.common.columnar import SnapshotBlockEncoder
from headwater.connectors.common.incremental import (
    Change,
    Collection,
    Key,
    TableSkipped,
    Window,
    _join,
    _joined,
)
from headwater.connectors.common.notifications import NotificationUnit
from headwater.connectors.common.records import table_records
from headwater.connectors.common.signals import read_only, split_table
from headwater.connectors.postgres import catalog, pgoutput
from headwater.connectors.postgres.catalog import TableSchema
from headwater.connectors.postgres.columnar import read_csv_blocks
from headwater.connectors.postgres.connection import ConnectionParams, Reconnecting, connect
from headwater.connectors.postgres.pgoutput import lsn_to_str, str_to_lsn
from headwater.connectors.postgres.positions import StreamPosition
from headwater.connectors.postgres.records import EventContext, RecordMaker
from headwater.connectors.postgres.replication import ReplicationReader
from headwater.connectors.postgres.snapshot import plan_snapshot
from headwater.connectors.postgres.streaming import StreamPlanner, sequence
from headwater.events.batch import Events


class PostgresSource(Protocol):
    """What these hooks use of `connectors.postgres.source.PostgresSource` (which imports this module)."""

    config: ConnectorConfig
    context: EventContext
    params: ConnectionParams
    db: Reconnecting
    incremental: Any
    reader: ReplicationReader | None
    parallelism: int

    def _connection(self) -> Any: ...

    def _reset_connection(self) -> None: ...

    def _position(self, start: Offset) -> StreamPosition: ...

    def _stream_planner(self, start: Offset) -> StreamPlanner: ...

log = logging.getLogger("headwater.postgres.incremental")

_CHANGES = frozenset(b"IUDT")
_XID_MOD = 1 << 32


@dataclass(frozen=True)
class Visibility:
    """A chunk's snapshot (`pg_current_snapshot()`, xids modulo 2^32 as pgoutput gives them) and the WAL
    insert position read after it."""

    xmin: int
    xmax: int
    xip: frozenset[int]
    lsn: int

    def sees(self, xid: int) -> bool:
        ahead = (xid - self.xmin) % _XID_MOD
        if ahead >= _XID_MOD // 2:
            return True  # before xmin: committed (or aborted) before the snapshot
        return ahead < (self.xmax - self.xmin) % _XID_MOD and xid not in self.xip

    @classmethod
    def parse(cls, text: str, lsn: int) -> Visibility:
        xmin, xmax, xip = text.split(":")
        return cls(int(xmin) % _XID_MOD, int(xmax) % _XID_MOD,
                   frozenset(int(x) % _XID_MOD for x in xip.split(",") if x), lsn)


class PostgresIncremental:
    """`IncrementalHooks` for a `PostgresSource`."""

    def __init__(self, source: PostgresSource):
        self.source = source
        cfg = source.config
        self.signal_table: str | None = cfg.get("signal.data.collection")
        self.strategy = cfg["incremental.snapshot.watermarking.strategy"]
        self.read_only = read_only(cfg)
        self.tables: dict[str, TableSchema] = {}
        self.warned_no_signal_table = False
        self.blocking_holder: Any = None  # the connection holding a blocking snapshot's exported snapshot

    # ---- catalog
    def _table(self, name: str) -> TableSchema:
        if name not in self.tables:
            schema, table = split_table(name) if '"' in name else name.split(".", 1)
            self.tables[name] = catalog.read_table(self.source._connection(), schema, table)
        return self.tables[name]

    def resolve_collections(self, patterns: Sequence[str]) -> list[str]:
        self.tables.clear()  # a new snapshot reads the tables as they are now
        names = [str(t) for t in catalog.list_tables(self.source._connection(), self.source.context.filters)]
        return choose_collections(names, patterns, self.signal_table, self.source.config.get("table.include.list"))

    def key_columns(self, collection: Collection) -> list[str] | None:
        try:
            t = self._table(collection.id)
        except Exception as exc:
            raise TableSkipped(f"it cannot be read: {str(exc).strip()}") from None
        return chunk_key(collection, t.column_names(), t.primary_key)

    # ---- the stream scan
    def scan_stream(self, start: Offset, end: Offset, watched: Mapping[str, list[str]]) -> Iterator[Change]:
        src = self.source
        planner = src._stream_planner(start)
        by_oid: dict[bytes, tuple[str, list[int]]] = {}
        for name, key in watched.items():
            t = self._table(name)
            cols = [c.name for c in t.columns]
            by_oid[t.oid.to_bytes(4, "big")] = (name, [cols.index(k) for k in key])
        if self.signal_table:
            try:
                t = self._table(self.signal_table)
                by_oid[t.oid.to_bytes(4, "big")] = (self.signal_table, list(range(len(t.columns))))
            except Exception as exc:
                if not self.warned_no_signal_table:
                    self.warned_no_signal_table = True
                    log.warning("the signalling table %s cannot be read (%s): its signals are not seen",
                                self.signal_table, str(exc).strip())
        if not by_oid:
            return
        first = src._position(start)
        last = src._position(end)
        for txn, (_, p) in planner.batch_messages(first, last):
            kind = p[0]
            if kind not in _CHANGES:
                continue
            if kind == 0x54:  # T
                msg = pgoutput.decode(p)
                assert isinstance(msg, pgoutput.Truncate)
                for oid in msg.relation_oids:
                    hit = by_oid.get(oid.to_bytes(4, "big"))
                    if hit is not None and hit[0] != self.signal_table:
                        yield Change(hit[0], "t", txn.xid)
                continue
            hit = by_oid.get(p[1:5])
            if hit is None:
                continue
            name, idx = hit
            msg = pgoutput.decode(p)
            if name == self.signal_table:
                if isinstance(msg, pgoutput.Insert):
                    yield Change(name, "c", txn.xid, row=tuple(msg.new))
                continue
            keys: list[Key] = []
            if isinstance(msg, pgoutput.Insert):
                keys.append(tuple(msg.new[i] for i in idx))
                op = "c"
            elif isinstance(msg, pgoutput.Update):
                keys.append(tuple(msg.new[i] for i in idx))
                if msg.old is not None:
                    keys.append(tuple(msg.old[i] for i in idx))
                op = "u"
            elif isinstance(msg, pgoutput.Delete):
                keys.append(tuple(msg.old[i] for i in idx))
                op = "d"
            else:
                continue
            yield Change(name, op, txn.xid, keys)

    # ---- chunks
    def _where(self, t: TableSchema, key: list[str], after: list[Any] | None, upto: list[Any] | None,
               condition: str | None) -> sql.Composable:
        cols = sql.SQL(", ").join(sql.Identifier(k) for k in key)
        parts: list[sql.Composable] = []
        if after is not None:
            parts.append(sql.SQL("({}) > ({})").format(cols, sql.SQL(", ").join(sql.Literal(v) for v in after)))
        if upto is not None:
            parts.append(sql.SQL("({}) <= ({})").format(cols, sql.SQL(", ").join(sql.Literal(v) for v in upto)))
        if condition:
            parts.append(sql.SQL("({})").format(sql.SQL(condition)))
        return sql.SQL(" WHERE ") + sql.SQL(" AND ").join(parts) if parts else sql.SQL("")

    def max_key(self, collection: Collection, key_columns: list[str]) -> list[Any] | None:
        t = self._table(collection.id)
        q = sql.SQL("SELECT {} FROM {}{} ORDER BY {} LIMIT 1").format(
            # (aliased: ORDER BY would take an output column named as the key column, its text)
            sql.SQL(", ").join(sql.SQL("{}::text AS {}").format(sql.Identifier(k), sql.Identifier(f"_k{i}"))
                               for i, k in enumerate(key_columns)),
            sql.Identifier(t.schema, t.name), self._where(t, key_columns, None, None, collection.condition),
            sql.SQL(", ").join(sql.SQL("{} DESC").format(sql.Identifier(k)) for k in key_columns))

        def read() -> Any:
            conn = self.source._connection()
            with conn.cursor() as cur:
                cur.execute(q)
                row = cur.fetchone()
            conn.commit()
            return row

        try:
            row = self.source.db(f"reading the largest key of {collection.id}", read)
        except (psycopg2.ProgrammingError, psycopg2.DataError) as exc:
            self.source._reset_connection()
            raise TableSkipped(f"its largest key cannot be read ({str(exc).strip()}); check the "
                               "signal's additional-conditions") from None
        return None if row is None else list(row)

    def chunk_query(self, t: TableSchema, key: list[str], after: list[Any] | None, upto: list[Any] | None,
                    condition: str | None, size: int | None) -> sql.Composable:
        q = sql.SQL("SELECT {} FROM {}{} ORDER BY {}").format(
            sql.SQL(", ").join(sql.Identifier(c.name) for c in t.columns), sql.Identifier(t.schema, t.name),
            self._where(t, key, after, upto, condition), sql.SQL(", ").join(sql.Identifier(k) for k in key))
        if size is not None:
            q = q + sql.SQL(" LIMIT {}").format(sql.Literal(size))
        return q

    def _watermark(self, cur: Any, id_: str, kind: str, data: dict[str, str]) -> None:
        assert self.signal_table is not None
        schema, table = split_table(self.signal_table)
        cur.execute(sql.SQL("INSERT INTO {} VALUES (%s, %s, %s)").format(sql.Identifier(schema, table)),
                    (id_, kind, json.dumps(data)))

    def open_window(self, collection: Collection, key_columns: list[str], after: list[Any] | None,
                    upto: list[Any], size: int, window_id: str, delivered: Offset) -> Window | None:
        t = self._table(collection.id)
        q = self.chunk_query(t, key_columns, after, upto, collection.condition, size)

        def read() -> tuple[list[pa.Array], Visibility | None]:
            conn = connect(self.source.params, autocommit=True)
            try:
                with conn.cursor() as cur:
                    vis = None
                    opened: dict[str, str] = {}
                    if self.read_only:
                        cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                        cur.execute("SELECT pg_current_snapshot()::text")
                        snap = cur.fetchone()[0]
                    else:
                        opened = open_data()
                        self._watermark(cur, f"{window_id}-open", "snapshot-window-open", opened)
                    columns = copy_rows(cur, conn, q, len(t.columns))
                    if self.read_only:
                        cur.execute("SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() "
                                    "ELSE pg_current_wal_insert_lsn() END)::text")
                        vis = Visibility.parse(snap, str_to_lsn(cur.fetchone()[0]))
                        cur.execute("COMMIT")
                    elif self.strategy == "insert_delete":
                        s_schema, s_table = split_table(self.signal_table or "")
                        first = self._table(self.signal_table or "").columns[0].name
                        cur.execute(sql.SQL("DELETE FROM {} WHERE {} = %s").format(
                            sql.Identifier(s_schema, s_table), sql.Identifier(first)), (f"{window_id}-open",))
                    else:
                        self._watermark(cur, f"{window_id}-close", "snapshot-window-close", close_data(opened))
                    return columns, vis
            finally:
                conn.close()

        try:
            columns, vis = self.source.db(f"reading a chunk of {collection.id}", read)
        except (psycopg2.ProgrammingError, psycopg2.DataError) as exc:
            raise TableSkipped(f"a chunk cannot be read ({str(exc).strip()})") from None
        if not columns or len(columns[0]) == 0:
            return None
        names = [c.name for c in t.columns]
        idx = [names.index(k) for k in key_columns]
        last = len(columns[0]) - 1
        to_key = [columns[i][last].as_py() for i in idx]
        log.info("incremental snapshot chunk %s of %s: %d rows after %s up to %s", window_id, collection.id,
                 len(columns[0]), after, to_key)
        return Window(window_id, collection, key_columns, after, to_key, columns, idx, snapshot=vis)

    def window_ready(self, window: Window, end: Offset) -> bool:
        vis = window.snapshot
        if vis is None:
            return True
        pos = self.source._position(end)
        if pos.lsn_commit >= vis.lsn:
            return True
        reader = self.source.reader
        if reader is None:
            return False
        buf = reader.buffer
        with buf.cond:
            pending = any(not t.ends_by(pos.lsn_commit) and t.commit_pos < vis.lsn for t in buf.txns)
            if buf.received >= vis.lsn and not pending:
                return True
        reader.request_position()
        return False

    def visible(self, window: Window, xid: int | None) -> bool:
        vis = window.snapshot
        return vis is None or xid is None or vis.sees(xid)

    def _unit(self, collection_id: str, columns: list[pa.Array] | None, query: sql.Composable | None,
              evicted: set[Key], key_index: list[int], at: Offset) -> IncrementalChunk:
        pos = self.source._position(at)
        t = self._table(collection_id)
        q = None if query is None else query.as_string(self.source._connection())
        return IncrementalChunk(self.source.context, t, columns, self.source.params, q, evicted, key_index,
                                pos.lsn_commit)

    def chunk_unit(self, window: Window, columns: list[pa.Array], at: Offset) -> WorkUnit:
        return self._unit(window.collection.id, columns, None, set(), window.key_index, at)

    def reread_unit(self, chunk: dict[str, Any], evicted: set[Key], at: Offset) -> WorkUnit:
        c = Collection(chunk["table"], chunk.get("condition"), chunk.get("surrogate_key"))
        t = self._table(c.id)
        key = self.key_columns(c) or []
        q = self.chunk_query(t, key, chunk.get("from"), chunk["to"], c.condition, None)
        names = [col.name for col in t.columns]
        return self._unit(c.id, None, q, evicted, [names.index(k) for k in key], at)

    def notification_unit(self, notifications: list[dict[str, Any]], at: Offset) -> WorkUnit:
        topic = self.source.config["notification.sink.topic.name"]
        return NotificationUnit(topic, notifications, self.source.context, self.source._position(at).lsn_commit)

    def blocking_units(self, tables: list[str], statements: dict[str, str], at: Offset) -> list[WorkUnit]:
        """Debezium's blocking snapshot: a snapshot exported by a connection held until the batch is over
        (`end_blocking`), the tables cut into CTID-range chunks as the initial snapshot cuts them."""
        src = self.source
        self.end_blocking()
        holder = connect(src.params, autocommit=True)
        try:
            with holder.cursor() as cur:
                cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                cur.execute("SELECT pg_export_snapshot()")
                name = cur.fetchone()[0]
            found = [t for t in catalog.list_tables(src._connection(), src.context.filters) if str(t) in tables]
            chosen = blocking_config(src.config, [str(t) for t in found], statements)
            units = plan_snapshot(src.params, name, src._position(at).lsn_commit, found, src.context, chosen,
                                  src.parallelism)
        except BaseException:
            holder.close()
            raise
        self.blocking_holder = holder
        log.info("blocking snapshot of %s in %d chunks", ", ".join(str(t) for t in found), len(units))
        return units

    def end_blocking(self) -> None:
        if self.blocking_holder is not None:
            with contextlib.suppress(Exception):
                self.blocking_holder.close()
            self.blocking_holder = None

    def log_position(self, at: Offset) -> str:
        pos: StreamPosition = self.source._position(at)
        return f"{{lsn={lsn_to_str(pos.lsn_commit)}}}"


def copy_rows(cur: Any, conn: Any, query: sql.Composable, ncols: int) -> list[pa.Array]:
    """The rows of `query` as PostgreSQL's text, one string column per column ([] for no rows)."""
    buf = io.BytesIO()
    cur.copy_expert(sql.SQL("COPY ({}) TO STDOUT WITH (FORMAT csv)").format(query).as_string(conn), buf)
    if not buf.tell():
        return []
    buf.seek(0)
    blocks = list(read_csv_blocks(buf, ncols))
    if not blocks:
        return []
    return [pa.concat_arrays([b[i] for b in blocks]) for i in range(ncols)]


class IncrementalChunk(WorkUnit):
    """A chunk's rows as incremental snapshot events (`op: r`, `source.snapshot: incremental`): the rows
    read in the window, or (a replayed batch) its key range read again minus the keys superseded."""

    def __init__(self, ctx: EventContext, table: TableSchema, columns: list[pa.Array] | None,
                 params: ConnectionParams, query: str | None, evicted: set[Key], key_index: list[int],
                 lsn: int):
        self.ctx, self.table, self.columns = ctx, table, columns
        self.params, self.query = params, query
        self.evicted, self.key_index = evicted, key_index
        self.lsn = lsn

    def describe(self) -> str:
        return f"incremental snapshot chunk of {self.table.schema}.{self.table.name}"

    def _rows(self) -> list[pa.Array]:
        if self.columns is not None:
            return self.columns
        assert self.query is not None
        conn = connect(self.params, autocommit=True)
        try:
            with conn.cursor() as cur:
                columns = copy_rows(cur, conn, sql.SQL(self.query), len(self.table.columns))
        finally:
            conn.close()
        if not columns or not self.evicted:
            return columns
        mask = pc.invert(pc.is_in(_joined([columns[i] for i in self.key_index]),
                                  value_set=pa.array([_join(k) for k in self.evicted], pa.string())))
        return [c.filter(mask) for c in columns]

    def read(self) -> Iterator[Events]:
        columns = self._rows()
        if not columns or len(columns[0]) == 0:
            return
        te = table_records(self.ctx, self.table, self.table.columns, streaming=False)
        # as Debezium writes them: no lsn and no txId; the sequence names the position where the chunk
        # is emitted (Debezium's: the close watermark's), twice
        encoder = SnapshotBlockEncoder(te, RecordMaker(self.ctx), lsn=None, txid=None,
                                       ts_us=time.time_ns() // 1000, sequence=sequence(self.lsn, self.lsn),
                                       version=self.lsn)
        n = len(columns[0])
        limit = self.ctx.batch_rows
        for start in range(0, n, limit):
            part = [c.slice(start, limit) for c in columns]
            yield encoder.encode(part, {}, default="incremental")
