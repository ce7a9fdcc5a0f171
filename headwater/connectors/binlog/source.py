"""The binlog connectors' driver-side half: the shared lifecycle's hooks over MySQL's and MariaDB's binlog.

Phases, epochs, `snapshot.mode` and lost positions are `SnapshotThenStream`'s. Before anything is
read the server is checked (`connection.check_server`). A snapshot is taken when its batch is
planned (`snapshot_position`): `HeldSnapshot` takes Debezium's lock, opens the consistent
transaction and reads the binlog position under the lock; the schema history starts from the
tables read there; its rows are read in batches of chunks (`locking.py`: the lifecycle's `chunks`
phase); the `completed` offset keeps that position, where streaming starts. `no_data`
and `recovery` take the same snapshot without reading rows (schema change records only), as does
`configuration_based` without `snapshot.data` (with `snapshot.schema` a restart rebuilds the
history as `recovery` does). `never` streams from the start of the oldest binlog file the server has.

Streaming is the shared `Planner` over a `BinlogReader` with the `BinlogCodec`; the schema at each
position is the `SchemaTracker`'s. A stored position whose binlog file the server no longer has is
a lost position (a new snapshot under `when_needed`, else an error naming the fix).
When `snapshot.locking.mode` is not set, MariaDB's snapshot is the lock-free one instead
(`lockfree.py`: `latest_offset` and `plan` hand its phases to it, the codec gets its stream filter).
`MySqlSource` and `MariaDbSource` (`connectors/mysql`, `connectors/mariadb`) say what differs:
GTIDs, the privilege names, the connector's name.
"""

from __future__ import annotations

import contextlib
import logging
from abc import abstractmethod
from dataclasses import replace
from typing import Any, ClassVar

import pymysql

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import Offset, WorkUnit
from headwater.connectors.binlog.connection import ConnectionParams, check_server, connect
from headwater.connectors.binlog.gtid import GtidFormat
from headwater.connectors.binlog.incremental import BinlogIncremental
from headwater.connectors.binlog.lockfree import ChunkFilter, LockFreeSnapshot, lock_free
from headwater.connectors.binlog.locking import LockingBatches
from headwater.connectors.binlog.positions import BinlogPosition
from headwater.connectors.binlog.reader import BinlogReader, Retry, binlog_files, current_position
from headwater.connectors.binlog.records import BinlogContext, records_of
from headwater.connectors.binlog.snapshot import HeldSnapshot, SchemaSnapshotUnit
from headwater.connectors.binlog.status import binlog_status
from headwater.connectors.binlog.streaming import BinlogCodec, SchemaChange
from headwater.connectors.binlog.tracking import SchemaHistoryTracker
from headwater.connectors.common.incremental import Incremental
from headwater.connectors.common.incremental import status as incremental_status
from headwater.connectors.common.phases import CONFIGURATION_BASED, SNAPSHOT_PENDING, SnapshotThenStream
from headwater.connectors.common.planner import Planner
from headwater.connectors.common.signals import read_only, with_signal_table
from headwater.connectors.errors import SourceError

log = logging.getLogger("headwater.binlog")

SCHEMA_ONLY = ("no_data", "recovery")


class BinlogSource(SnapshotThenStream):
    """Snapshot, then stream, the tables of one MySQL or MariaDB server through its binlog."""

    product: ClassVar[str]  # the server's name in messages
    dbms: ClassVar[str]  # "mysql" or "mariadb" (pymysqlreplication's dialect)
    monitor_privilege: ClassVar[str]  # the privilege for SHOW MASTER STATUS / SHOW BINARY LOGS
    gtid_query: ClassVar[str]  # the server's GTID state, as one value
    context_class: ClassVar[type[BinlogContext]]

    TABLE_FILTERS = ("database.include.list", "database.exclude.list", "table.include.list", "table.exclude.list")

    def __init__(self, config: ConnectorConfig, parallelism: int = 2, schemas_enable: bool = False,
                 replace_null_with_default: bool = True, output: str = "json"):
        config = with_signal_table(config, "database.include.list")
        super().__init__(config)
        self.params = ConnectionParams.from_config(config)
        self.context = self.context_class.from_config(config, schemas_enable, replace_null_with_default, output)
        self.parallelism = max(1, parallelism)
        self.conn: pymysql.Connection | None = None
        self.held: HeldSnapshot | None = None
        self.batches = LockingBatches(self)
        self.snapshot_changes: list[SchemaChange] = []
        self.tracker = SchemaHistoryTracker(config, self.context.filters, config.get("headwater.schema.history.file"))
        self.reader: BinlogReader | None = None
        self.planner: Planner[BinlogPosition] | None = None
        self.target: int | None = None
        self.file_like = ""
        self.lockfree = LockFreeSnapshot(self) if lock_free(config, self.dbms) else None
        # not set: no lock under the lock-free default (its no_data schema snapshot too); MySQL: Debezium's minimal
        self.locking = config.get("snapshot.locking.mode") or ("none" if self.lockfree else "minimal")
        self.stream_filter: ChunkFilter | None = None
        mode = config["snapshot.mode"]
        based = mode == "configuration_based"
        # the snapshot reads no rows (schema change records only); a restart rebuilds the schema history
        self.schema_only = mode in SCHEMA_ONLY or (based and not config[CONFIGURATION_BASED + "snapshot.data"])
        self.recover_schema = mode == "recovery" or (based and self.schema_only and
                                                     config[CONFIGURATION_BASED + "snapshot.schema"])
        self.incremental_hooks = BinlogIncremental(self)
        self.incremental = Incremental(config, self.incremental_hooks, self.parallelism)

    # ------------------------------------------------------------------ what differs per server
    @abstractmethod
    def gtid_format(self) -> GtidFormat:
        """The server's GTIDs."""

    def check_read_only(self, conn: pymysql.Connection) -> None:
        """Refuse to start when read-only incremental snapshots cannot work on this server."""

    # ------------------------------------------------------------------ connections
    def _connection(self) -> pymysql.Connection:
        """The connection for catalog queries, opened again when the server dropped it (a restart)."""
        if self.conn is not None:
            try:
                self.conn.ping(reconnect=False)
            except pymysql.err.MySQLError:
                with contextlib.suppress(Exception):
                    self.conn.close()
                self.conn = None
        if self.conn is None:
            self.conn = connect(self.params)
        return self.conn

    def status(self, offset: Offset | None) -> dict[str, Any]:
        return {**binlog_status(self._connection(), self.gtid_query, offset), **incremental_status(offset)}

    def _query(self, sql: str, args: tuple = ()) -> list[tuple]:
        with self._connection().cursor() as cur:
            cur.execute(sql, args)
            return list(cur.fetchall())

    # ------------------------------------------------------------------ the lifecycle's hooks
    def initial_offset(self) -> Offset:
        if self.config["snapshot.mode"] in SCHEMA_ONLY:
            return {"snapshot": SNAPSHOT_PENDING, "epoch": 0}  # the schema's snapshot, without rows
        return super().initial_offset()

    def prepare_database(self) -> list[str]:
        conn = self._connection()
        check_server(conn, self.product, self.monitor_privilege, self.locking,
                     self.config["snapshot.mode"] != "never")
        if read_only(self.config):
            self.check_read_only(conn)
        return [name for name in self.visible_tables() if self.context.filters.includes(*name.split(".", 1))]

    def visible_tables(self) -> list[str]:
        return [f"{s}.{t}" for s, t in self._query(
            "SELECT table_schema, table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
            "AND table_schema NOT IN ('mysql', 'information_schema', 'performance_schema', 'sys')")]

    def check_position(self, offset: Offset) -> str | None:
        if "file" not in offset:
            return None
        why = self.position_unavailable(offset)
        if why is not None:
            return why
        self.tracker.restore(BinlogPosition.from_offset(offset), self._connection(),
                             recover=self.recover_schema)
        return None

    def position_unavailable(self, offset: Offset) -> str | None:
        """Why the server cannot serve the stored position (None when it can): its binlog file was purged."""
        files = binlog_files(self._connection())
        if str(offset["file"]) not in files:
            oldest = files[0] if files else "none"
            return (f"the server no longer has binlog file {offset['file']} (the oldest it has is {oldest}): the "
                    f"binlog was purged past the stored position {offset['file']}:{offset['pos']}")
        return None

    def new_stream_offset(self) -> Offset:
        """`never`: from the start of the oldest binlog file the server has (Debezium reads the whole binlog)."""
        files = binlog_files(self._connection())
        if not files:
            raise SourceError(f"the {self.product} server has no binlog files: start it with log-bin")
        self.tracker.start_empty(files[0])
        return BinlogPosition(files[0], 4).to_offset()

    def snapshot_position(self, epoch: int) -> Offset:
        if self.held is None or self.held.epoch != epoch:
            self.end_snapshot()
            self._stop_stream()
            held = HeldSnapshot(self.params, epoch, self.locking,
                                self.config["snapshot.lock.timeout.ms"], self.gtid_query)
            try:
                self.snapshot_changes = self.tracker.start_snapshot(held.position, held.conn)
                held.release_lock()
            except BaseException:
                held.close()
                raise
            self.held = held
        return self.held.position.to_offset()

    def latest_offset(self, start: Offset, max_events: int | None = None) -> Offset:
        if self.lockfree is None or self.schema_only:
            return super().latest_offset(start, max_events)
        return self.lockfree.latest_offset(start, max_events, super().latest_offset)

    def plan(self, start: Offset, end: Offset) -> list[WorkUnit]:
        units = None if self.lockfree is None else self.lockfree.plan(start, end)
        return super().plan(start, end) if units is None else units

    def snapshot_batch(self, epoch: int, after: Offset | None, max_events: int | None) -> Offset | None:
        return self.batches.batch(after, max_events)

    def snapshot_scans(self) -> bool:
        return not self.schema_only

    def schema_snapshot_at_open(self, offset: Offset) -> bool:
        """`recovery` (and `configuration_based`'s schema only) at a restart: `check_position` rebuilt the schema
        history from the tables, where Debezium takes its schema-only snapshot (its Snapshotter's
        `shouldSnapshotSchema` is true at every start)."""
        return (self.recover_schema and self.snapshot_mode.streams and "file" in offset
                and not self.snapshot_due(offset))

    def plan_snapshot_batch(self, end: Offset) -> list[WorkUnit]:
        return self.batches.plan(end)

    def holds_snapshot(self, offset: Offset) -> bool:
        # the lock-free snapshot goes on from its offsets; the locking one only in the transaction it holds
        return self.lockfree is not None or self.batches.holds(offset)

    def plan_snapshot(self, epoch: int) -> list[WorkUnit]:
        """The snapshot in one batch: one that reads no rows (schema change records only, or no table); a
        batch planned before the locking snapshot was read in batches, replayed, reads them all."""
        self.snapshot_position(epoch)
        held = self.held
        assert held is not None
        pos = held.position
        chunks: list[WorkUnit] = list(self.batches.chunks(held, None))
        units: list[WorkUnit] = []
        if self.context.include_schema_changes:
            units.append(SchemaSnapshotUnit(self.context, self.snapshot_changes, pos.file, pos.pos, pos.stream,
                                            held.ts_us, last=not chunks))
        units += chunks
        log.info("snapshot at %s:%d: %d work units", pos.file, pos.pos, len(units))
        return units

    def end_snapshot(self) -> None:
        if self.held is not None:
            self.held.close()
            self.held = None

    def stream_latest(self, start: Offset, max_events: int) -> Offset | None:
        end = self._planner(start).latest(BinlogPosition.from_offset(start), max_events, self.target)
        return None if end is None else end.to_offset()

    def stream_plan(self, start: Offset, end: Offset) -> list[WorkUnit]:
        return self._planner(start).plan(BinlogPosition.from_offset(start), BinlogPosition.from_offset(end),
                                         self.parallelism)

    def stop_stream(self) -> None:
        self._stop_stream()

    def commit_position(self, end: Offset) -> None:
        """Nothing to release: the server keeps its binlog by its own expiry settings."""

    def prepare_available_now(self) -> None:
        self.target = current_position(self._connection(), self.gtid_query).stream

    # ------------------------------------------------------------------ streaming
    def _planner(self, start: Offset) -> Planner[BinlogPosition]:
        if self.planner is None:
            if "file" not in start:
                raise SourceError(f"the offset {start} holds no binlog position")
            at = BinlogPosition.from_offset(start)
            try:  # (MySQL: the sources gtid.source.includes/excludes keep)
                at = replace(at, gtids=self.gtid_format().normalise(at.gtids))
            except ValueError as exc:
                raise SourceError(f"the stored offset's GTIDs cannot be read: {exc}") from None
            self.file_like = at.file
            retry = Retry(self.config["errors.max.retries"], self.config["retriable.restart.connector.wait.ms"] / 1000)
            self.reader = BinlogReader(self.params, self.config["database.server.id"], self.gtid_format(),
                                       self.dbms == "mariadb", self.config["headwater.stream.buffer.bytes"], retry,
                                       queries=self.context.include_query)
            self.reader.start(at)
            codec = BinlogCodec(self.context, self.dbms, self.reader, self.tracker, lambda: self.file_like)
            codec.keep = self.stream_filter
            self.planner = Planner(self.reader, codec, _once, transaction_metadata=self.context.transaction_metadata,
                                   heartbeat_interval_ms=self.context.heartbeat_interval_ms,
                                   heartbeat_action=self._heartbeat_action())
        return self.planner

    def _heartbeat_action(self) -> Any:
        query = self.context.heartbeat_query
        if not query:
            return None

        def run() -> None:
            self._query(query)
        return run

    def _stop_stream(self) -> None:
        if self.reader is not None:
            self.reader.close()
        self.reader, self.planner = None, None

    def table_schema(self, table: str) -> tuple[str, dict]:
        database, _, name = table.partition(".")
        found = self.tracker.current().get((database, name))
        if found is None:
            raise SourceError(f"{table} is not a captured table (write it as database.table)")
        records = records_of(self.context, found, streaming=True)
        return records.topic, records.value_schema.to_json()

    def close(self) -> None:
        self._stop_stream()
        self.end_snapshot()
        self.incremental_hooks.close()
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
            self.conn = None


def _once(what: str, fn: Any) -> Any:
    """Run `fn` once: a failed batch is planned again whole."""
    return fn()
