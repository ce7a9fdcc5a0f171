"""PostgreSQL's hooks for signals and incremental snapshots (`connectors.common.incremental`).

- The stream scan decodes, on the driver, only the pgoutput changes of the signalling table and of
  the table whose window is open (by relation oid; other messages are skipped by their first bytes).
- A window opens on the driver: the open watermark, as Debezium writes it (`INSERT INTO <signal
  table> VALUES ('<id>-open', 'snapshot-window-open', '{"openWindowTimestamp": ...}')`, committed),
  then a REPEATABLE READ transaction, held open until the window's batch is over, whose first
  statement takes `pg_current_snapshot()` and exports the snapshot (`pg_export_snapshot()`); under it
  one query reads the keys that cut the window's range (`(key) > (last) AND (key) <= (max) [AND
  (condition)]`, by key, up to the window's rows) into parts of about equal rows, and counts them;
  then the close watermark (`('<id>-close', 'snapshot-window-close', {..., "closeWindowTimestamp"})`
  for `insert_insert`, `DELETE ... WHERE <first column> = '<id>-open'` for `insert_delete`) and the
  WAL insert position after it. The rows are emitted once the stream has passed that position.
- Each part is a unit (`IncrementalChunk`, a Spark partition) that imports the exported snapshot and
  streams `COPY (SELECT ... WHERE (key) > (from) AND (key) <= (to) ... ORDER BY key) TO STDOUT`:
  the rows as PostgreSQL's text, as the initial snapshot reads them, with the same column-wise
  encoder (`op: r`, `source.snapshot: incremental`), the keys the driver found superseded dropped.
  Under the exported snapshot every part reads exactly the rows the driver counted.
- The read-only mode (`headwater.incremental.snapshot.read.only`) writes nothing: no watermarks; a
  streamed change supersedes a row when its transaction is not visible to the window's snapshot (xid
  at or past xmax, or in xip), and the rows are emitted once the stream has passed the WAL insert
  position read after the snapshot (every transaction the snapshot saw committed before it).
  A change delivered in an earlier batch supersedes nothing: its transaction committed before the
  window's snapshot was taken, so that snapshot sees it. On a standby (PostgreSQL 16's logical decoding
  on standbys) the position is the replayed one; that setup is not tested here.
- **A commit in the WAL before it is visible.** A committing backend writes its commit record before it
  leaves the proc array (for microseconds, or as long as `synchronous_commit` waits for a standby): a
  snapshot taken in between misses a transaction the stream may already have delivered (or, with
  watermarks, received before the open watermark, where it supersedes nothing), and the window would
  emit rows as they were before it, after its changes (Debezium's watermarks have the same gap). So
  the window's snapshot is read with the WAL insert position, and once the stream has passed the
  window's position (so it has received every commit before the snapshot) its xip is checked against
  the transactions the reader received (`commits.RecentCommits`): one whose commit came before the
  snapshot's position makes the window stale (`WindowStale`): it is dropped, and the next window over
  the same range is opened once that transaction is visible (waiting up to `STALE_WAIT_S` each time). A
  blocking snapshot's snapshot is checked likewise, and taken again until it sees every delivered
  commit.
- A batch replayed after a restart (the exported snapshot is gone) reads its window's parts as the
  table is then, minus the keys its stream range changes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import psycopg2
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
    BlockingAbandoned,
    Change,
    Collection,
    Key,
    TableSkipped,
    Window,
    WindowStale,
    drop_superseded,
    join_key,
    joined_keys,
    parts_of,
)
from headwater.connectors.common.notifications import NotificationUnit
from headwater.connectors.common.records import table_records
from headwater.connectors.common.signals import read_only, split_table
from headwater.connectors.postgres import catalog, pgoutput
from headwater.connectors.postgres.catalog import TableSchema
from headwater.connectors.postgres.connection import (
    ConnectionParams,
    Reconnecting,
    clean,
    connect,
    query_error,
)
from headwater.connectors.postgres.pgoutput import lsn_to_str, str_to_lsn
from headwater.connectors.postgres.positions import StreamPosition
from headwater.connectors.postgres.records import EventContext, RecordMaker
from headwater.connectors.postgres.replication import ReplicationReader
from headwater.connectors.postgres.snapshot import SnapshotChunk, copy_blocks, import_snapshot, plan_snapshot
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
_WAL_NOW = "(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_insert_lsn() END)::text"
_WAL_POSITION = f"SELECT {_WAL_NOW}"
STALE_WAIT_S = 2.0  # how long opening a window waits for the transactions that made the last one stale
AWAIT_CLOSE_S = 1.0  # how long opening a window waits for the stream to receive its close


@dataclass(frozen=True)
class Visibility:
    """A window's snapshot (`pg_current_snapshot()`, xids modulo 2^32 as pgoutput gives them) and the WAL
    insert position read with it (every transaction committing before it has its commit record there)."""

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


@dataclass(frozen=True)
class PgWindow:
    """What the driver holds of a window: the snapshot its parts are read under (exported by a connection
    held until the window is over), the WAL position the stream must pass before its rows are emitted (after
    the close watermark; read-only: after the snapshot), and the snapshot's visibility."""

    name: str
    lsn: int
    visibility: Visibility


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
        self.holders: dict[str, Any] = {}  # window id -> the connection holding its exported snapshot
        self.stale: list[int] = []  # the xids the last window's snapshot missed (`WindowStale`)

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

    def bounds_query(self, t: TableSchema, key: list[str], after: list[Any] | None, upto: list[Any],
                     condition: str | None, rows: int, parts: int) -> sql.Composable:
        """The keys ending each part of the next `rows` rows (at most) with keys in (after, upto], as text,
        with each one's row number and the rows counted: `parts` parts (fewer when the rows make fewer
        than `parts` chunks) of about equal rows, the last ending at the last row."""
        names = [sql.Identifier(f"_k{i}") for i in range(len(key))]
        listed = sql.SQL(", ").join(names)
        chunk = self.source.config["incremental.snapshot.chunk.size"]
        inner = sql.SQL("SELECT {} FROM {}{} ORDER BY {} LIMIT {}").format(
            sql.SQL(", ").join(sql.SQL("{} AS {}").format(sql.Identifier(k), n) for k, n in zip(key, names, strict=True)),
            sql.Identifier(t.schema, t.name), self._where(t, key, after, upto, condition),
            sql.SQL(", ").join(sql.Identifier(k) for k in key), sql.Literal(rows))
        numbered = sql.SQL("SELECT {keys}, row_number() OVER (ORDER BY {keys}) AS _n, count(*) OVER () AS _total, "
                           "least({parts}, (count(*) OVER () + {chunk} - 1) / {chunk}) AS _parts "
                           "FROM ({inner}) AS w").format(keys=listed, parts=sql.Literal(parts),
                                                         chunk=sql.Literal(chunk), inner=inner)
        return sql.SQL("SELECT {}, _n, _total FROM ({}) AS x WHERE _n * _parts / _total > (_n - 1) * _parts / _total "
                       "ORDER BY _n").format(sql.SQL(", ").join(sql.SQL("{}::text").format(n) for n in names),
                                             numbered)

    def open_window(self, collection: Collection, key_columns: list[str], after: list[Any] | None,
                    upto: list[Any], rows: int, parts: int, window_id: str, delivered: Offset) -> Window | None:
        """The open watermark (committed), then a REPEATABLE READ transaction on a connection held until the
        window is over: `pg_current_snapshot()` and `pg_export_snapshot()` in its first statement, the
        parts' bounds read under that snapshot (so each part reads exactly the rows counted), then the
        close watermark, and the WAL insert position after it (read-only: after the snapshot)."""
        t = self._table(collection.id)
        q = self.bounds_query(t, key_columns, after, upto, collection.condition, rows, parts)
        self._await_stale()

        def read() -> tuple[Any, PgWindow, list[tuple[Any, ...]]]:
            marks = None if self.read_only else connect(self.source.params, autocommit=True)
            holder = connect(self.source.params, autocommit=True)
            try:
                opened: dict[str, str] = {}
                if marks is not None:
                    opened = open_data()
                    with marks.cursor() as cur:
                        self._watermark(cur, f"{window_id}-open", "snapshot-window-open", opened)
                with holder.cursor() as cur:
                    cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    cur.execute(f"SELECT pg_current_snapshot()::text, pg_export_snapshot(), {_WAL_NOW}")
                    snap, name, taken_at = cur.fetchone()
                    cur.execute(q)
                    found = [tuple(r) for r in cur.fetchall()]
                    if marks is None:
                        cur.execute(_WAL_POSITION)
                        lsn = str_to_lsn(cur.fetchone()[0])
                if marks is not None:
                    with marks.cursor() as cur:
                        if self.strategy == "insert_delete":
                            s_schema, s_table = split_table(self.signal_table or "")
                            first = self._table(self.signal_table or "").columns[0].name
                            cur.execute(sql.SQL("DELETE FROM {} WHERE {} = %s").format(
                                sql.Identifier(s_schema, s_table), sql.Identifier(first)), (f"{window_id}-open",))
                        else:
                            self._watermark(cur, f"{window_id}-close", "snapshot-window-close", close_data(opened))
                        cur.execute(_WAL_POSITION)
                        lsn = str_to_lsn(cur.fetchone()[0])
                return holder, PgWindow(name, lsn, Visibility.parse(snap, str_to_lsn(taken_at))), found
            except BaseException:
                holder.close()
                raise
            finally:
                if marks is not None:
                    marks.close()

        try:
            holder, held, found = self.source.db(f"opening a window of {collection.id}", read)
        except (psycopg2.ProgrammingError, psycopg2.DataError) as exc:
            raise TableSkipped(f"a chunk cannot be read ({str(exc).strip()})") from None
        if not found:
            holder.close()
            return None
        self.holders[window_id] = holder
        n = len(key_columns)
        keys = [list(r[:n]) for r in found]
        window = Window(window_id, collection, key_columns, after, keys[-1], keys[:-1], int(found[-1][n + 1]),
                        snapshot=held)
        log.info("incremental snapshot window %s of %s: %d rows after %s up to %s in %d parts", window_id,
                 collection.id, window.rows, after, window.to_key, len(keys))
        self._await(held.lsn)
        return window

    def _await(self, lsn: int) -> None:
        """Give the stream a moment to receive up to `lsn` (the window's close), so that the batch being
        planned can emit the window rather than the next one."""
        reader = self.source.reader
        if reader is None:
            return
        buf = reader.buffer
        deadline = time.monotonic() + AWAIT_CLOSE_S
        reader.request_position()
        with buf.cond:
            while buf.received < lsn and time.monotonic() < deadline:
                buf.cond.wait(min(0.05, max(0.0, deadline - time.monotonic())))

    def window_ready(self, window: Window, end: Offset) -> bool:
        """Once the stream has passed the window's position: `WindowStale` when its snapshot does not see a
        transaction whose commit the stream received before the snapshot was taken."""
        held: PgWindow = window.snapshot
        pos = self.source._position(end)
        if pos.lsn_commit >= held.lsn:
            self._check_seen(window)
            return True
        reader = self.source.reader
        if reader is None:
            return False
        buf = reader.buffer
        with buf.cond:
            pending = any(not t.ends_by(pos.lsn_commit) and t.commit_pos < held.lsn for t in buf.txns)
            ready = buf.received >= held.lsn and not pending
        if ready:
            self._check_seen(window)
            return True
        reader.request_position()
        return False

    def _check_seen(self, window: Window) -> None:
        """A transaction the snapshot counts as running although its commit is in the WAL before the snapshot
        (its backend had not left the proc array yet: a synchronous standby's wait, or a descheduled backend)
        makes the window stale: its rows would be the table without that transaction's changes, which the
        stream delivered before them (or, with watermarks, before the open watermark, where they supersede
        nothing). The stream has received every commit before the window's position, which is after the
        snapshot's (`RecentCommits` keeps the latest 65,536 transactions received by this process)."""
        vis: Visibility = window.snapshot.visibility
        reader = self.source.reader
        if reader is None:
            return
        missed = reader.commits.committed_before(vis.xip, vis.lsn)
        if missed:
            self.stale = missed
            raise WindowStale(f"its snapshot does not see transaction(s) {', '.join(map(str, missed))}, whose "
                              f"commit the stream received before {lsn_to_str(vis.lsn)} (the backend had not "
                              "finished committing)")

    def _await_stale(self) -> None:
        """Before a window is opened again after a stale one: wait (a while) until the transactions that made it
        stale are visible to a new snapshot, so that windows are not opened in a loop while one waits."""
        if not self.stale:
            return
        deadline = time.monotonic() + STALE_WAIT_S

        def now() -> Visibility:
            conn = self.source._connection()
            with conn.cursor() as cur:
                cur.execute("SELECT pg_current_snapshot()::text")
                text = cur.fetchone()[0]
            conn.commit()
            return Visibility.parse(text, 0)

        while True:
            snapshot = self.source.db("waiting for the commits a window missed", now)
            if all(snapshot.sees(x) for x in self.stale) or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        self.stale = []

    def visible(self, window: Window, xid: Any) -> bool:
        return xid is None or window.snapshot.visibility.sees(xid)

    def end_window(self, window: Window) -> None:
        holder = self.holders.pop(window.id, None)
        if holder is not None:
            with contextlib.suppress(Exception):
                holder.close()

    def close(self) -> None:
        """Release every window's exported snapshot and a blocking snapshot's."""
        for holder in self.holders.values():
            with contextlib.suppress(Exception):
                holder.close()
        self.holders.clear()
        self.end_blocking()

    def _units(self, c: Collection, parts: list[tuple[list[Any] | None, list[Any]]], snapshot_name: str | None,
               evicted: Iterable[Key], at: Offset) -> list[WorkUnit]:
        t = self._table(c.id)
        key = self.key_columns(c) or []
        names = [col.name for col in t.columns]
        index = [names.index(k) for k in key]
        lsn = self.source._position(at).lsn_commit
        gone = frozenset(join_key(k) for k in evicted)
        conn = self.source._connection()
        return [IncrementalChunk(self.source.context, t, self.source.params,
                                 self.chunk_query(t, key, after, upto, c.condition, None).as_string(conn),
                                 snapshot_name, gone, index, lsn) for after, upto in parts]

    def chunk_units(self, window: Window, at: Offset) -> list[WorkUnit]:
        if window.truncates:  # truncated in the window: its rows are gone
            return []
        return self._units(window.collection, window.parts(), window.snapshot.name, window.evicted, at)

    def reread_units(self, chunk: dict[str, Any], evicted: dict[Key, Any], at: Offset, since: Offset) -> list[WorkUnit]:
        c = Collection(chunk["table"], chunk.get("condition"), chunk.get("surrogate_key"))
        return self._units(c, parts_of(chunk.get("from"), chunk.get("bounds") or [], chunk["to"]), None, evicted, at)

    def notification_unit(self, notifications: list[dict[str, Any]], at: Offset) -> WorkUnit:
        topic = self.source.config["notification.sink.topic.name"]
        return NotificationUnit(topic, notifications, self.source.context, self.source._position(at).lsn_commit)

    def blocking_batch(self, snapshot: dict[str, Any], after: dict[str, Any] | None,
                       max_events: int | None) -> dict[str, Any] | None:
        """One batch: its units read the rows on the executors, under the exported snapshot."""
        return {} if after is None else None

    def blocking_units(self, blocking: dict[str, Any], at: Offset) -> list[WorkUnit]:
        """Debezium's blocking snapshot: a snapshot exported by a connection held until the batch is over
        (`end_blocking`), the tables cut into CTID-range chunks as the initial snapshot cuts them."""
        tables, statements = blocking["tables"], blocking.get("statements") or {}
        src = self.source
        self.end_blocking()
        holder = connect(src.params, autocommit=True)
        try:
            name = self._seeing_delivered(holder)
            found = [t for t in catalog.list_tables(src._connection(), src.context.filters) if str(t) in tables]
            chosen = blocking_config(src.config, [str(t) for t in found], statements)
            try:
                units = plan_snapshot(src.params, name, src._position(at).lsn_commit, found, src.context, chosen,
                                      src.parallelism)
                self._check_queries(name, units)
            except psycopg2.Error as exc:
                if not query_error(exc):
                    raise
                raise BlockingAbandoned(clean(exc, src.params)) from None
        except BaseException:
            holder.close()
            raise
        for unit in units:
            if isinstance(unit, SnapshotChunk):
                unit.blocking = blocking.get("id")
        self.blocking_holder = holder
        log.info("blocking snapshot of %s in %d chunks", ", ".join(str(t) for t in found), len(units))
        return units

    def _seeing_delivered(self, holder: Any) -> str:
        """A REPEATABLE READ transaction on `holder` whose snapshot (exported: its name) sees every transaction
        the stream delivered: one taken while a delivered transaction's backend had not left the proc array
        (`_check_seen`) is let go, and another taken once that transaction is visible."""
        reader = self.source.reader
        while True:
            with holder.cursor() as cur:
                cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                cur.execute(f"SELECT pg_current_snapshot()::text, pg_export_snapshot(), {_WAL_NOW}")
                snap, name, taken_at = cur.fetchone()
                vis = Visibility.parse(snap, str_to_lsn(taken_at))
                missed = [] if reader is None else reader.commits.committed_before(vis.xip, vis.lsn)
                if not missed:
                    return str(name)
                cur.execute("ROLLBACK")
            log.warning("blocking snapshot: the snapshot does not see transaction(s) %s, whose commit the stream "
                        "received (the backend had not finished committing): taken again once they are visible",
                        ", ".join(map(str, missed)))
            self.stale = missed
            self._await_stale()

    def _check_queries(self, snapshot_name: str, units: list[WorkUnit]) -> None:
        """EXPLAIN each table's query (its override, or its SELECT) under the exported snapshot, in a transaction
        of its own (which lets go of the tables' locks at once): a query that cannot run (bad SQL, a table or
        column gone, a missing privilege) abandons the blocking snapshot before it delivers any row."""
        conn = connect(self.source.params, autocommit=True)
        try:
            with conn.cursor() as cur:
                import_snapshot(cur, snapshot_name)
                for unit in units:
                    if isinstance(unit, SnapshotChunk) and unit.first_chunk:
                        try:
                            cur.execute(sql.SQL("EXPLAIN ") + unit.query())
                        except psycopg2.Error as exc:
                            if not query_error(exc):
                                raise
                            table = unit.table
                            raise BlockingAbandoned(clean(exc, self.source.params),
                                                    f"{table.schema}.{table.name}") from None
                cur.execute("COMMIT")
        finally:
            conn.close()

    def end_blocking(self) -> None:
        if self.blocking_holder is not None:
            with contextlib.suppress(Exception):
                self.blocking_holder.close()
            self.blocking_holder = None

    def log_position(self, at: Offset) -> str:
        pos: StreamPosition = self.source._position(at)
        return f"{{lsn={lsn_to_str(pos.lsn_commit)}}}"


class IncrementalChunk(WorkUnit):
    """One part of a window: its key range read (under the window's exported snapshot; a replayed batch's,
    as the table is now), its rows whose keys a streamed change superseded dropped, the others made into
    incremental snapshot events (`op: r`, `source.snapshot: incremental`). Runs where the units run: a
    Spark executor, or the engine."""

    def __init__(self, ctx: EventContext, table: TableSchema, params: ConnectionParams, query: str,
                 snapshot_name: str | None, evicted: frozenset[str], key_index: list[int], lsn: int):
        self.ctx, self.table = ctx, table
        self.params, self.query, self.snapshot_name = params, query, snapshot_name
        self.evicted, self.key_index = evicted, key_index
        self.lsn = lsn

    def describe(self) -> str:
        return f"incremental snapshot chunk of {self.table.schema}.{self.table.name}"

    def read(self) -> Iterator[Events]:
        te = table_records(self.ctx, self.table, self.table.columns, streaming=False)
        # as Debezium writes them: no lsn and no txId; the sequence names the position where the chunk
        # is emitted (Debezium's: the close watermark's), twice
        encoder = SnapshotBlockEncoder(te, RecordMaker(self.ctx), lsn=None, txid=None,
                                       ts_us=time.time_ns() // 1000, sequence=sequence(self.lsn, self.lsn),
                                       version=self.lsn)
        limit = self.ctx.batch_rows
        for columns in copy_blocks(self.params, self.snapshot_name, sql.SQL(self.query), len(self.table.columns),
                                   self.describe()):
            if self.evicted:
                columns = drop_superseded(columns, joined_keys([columns[i] for i in self.key_index]), self.evicted)
            n = len(columns[0])
            for start in range(0, n, limit):
                yield encoder.encode([c.slice(start, limit) for c in columns], {}, default="incremental")
