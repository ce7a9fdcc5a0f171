"""The change-log connector's driver-side half: the shared lifecycle's hooks over plain SQL.

Phases, epochs and `snapshot.mode` are `SnapshotThenStream`'s. A snapshot is taken when it is due
(`snapshot_position`): its transaction is held open until the snapshot batch is over, and the log's
next `seq` read in it goes into the `completed` offset, so streaming starts exactly after the
snapshot. A snapshot batch replayed after a crash cannot see that transaction again: it reads the
tables as they are then, and the changes between the two snapshots are streamed again.
Streaming is the shared `Planner` over a `LogReader` with the `LogCodec`.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg2

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import Offset, WorkUnit
from headwater.connectors.common.phases import SnapshotThenStream
from headwater.connectors.common.planner import Planner
from headwater.connectors.common.records import table_records
from headwater.connectors.errors import SourceError
from tests.connectors.changelog.codec import LogCodec, LogPosition, LogReader
from tests.connectors.changelog.records import ChangelogContext, Table, read_tables
from tests.connectors.changelog.snapshot import DIALECT, HeldSnapshot, plan_chunks

log = logging.getLogger("headwater.changelog")


class ChangelogSource(SnapshotThenStream):
    """Snapshot, then stream, the tables a trigger log records."""

    def __init__(self, config: ConnectorConfig, parallelism: int = 2, schemas_enable: bool = False,
                 replace_null_with_default: bool = True, output: str = "json"):
        super().__init__(config)
        self.params = {"host": config["database.hostname"], "port": config["database.port"],
                       "user": config["database.user"], "password": config.get("database.password"),
                       "dbname": config["database.dbname"]}
        self.context = ChangelogContext.from_config(config, schemas_enable, replace_null_with_default, output)
        self.log_table = config["changelog.table"]
        self.log_ref = DIALECT.table(*self.log_table.split("."))
        self.parallelism = max(1, parallelism)
        self.conn: Any = None
        self.tables: dict[str, Table] = {}
        self.held: HeldSnapshot | None = None
        self.reader: LogReader | None = None
        self.planner: Planner[LogPosition] | None = None
        self.target: int | None = None

    def _connection(self) -> Any:
        if self.conn is None or self.conn.closed:
            self.conn = psycopg2.connect(**self.params)
            self.conn.autocommit = True
        return self.conn

    def _query(self, sql: str, params: tuple = ()) -> list[tuple]:
        with self._connection().cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall()

    def _next_seq(self) -> int:
        return int(self._query(f"SELECT coalesce(max(seq), 0) + 1 FROM {self.log_ref}")[0][0])

    def _read_tables(self) -> dict[str, Table]:
        with self._connection().cursor() as cur:
            self.tables = {t.collection: t for t in read_tables(cur, self.context.filters, self.log_table)}
        return self.tables

    # ------------------------------------------------------------------ the lifecycle's hooks
    def prepare_database(self) -> list[Table]:
        if self._query("SELECT to_regclass(%s)", (self.log_ref,))[0][0] is None:
            raise SourceError(f"the change-log table {self.log_table} does not exist: create it, or set "
                              "changelog.table to the table the triggers write")
        return list(self._read_tables().values())

    def visible_tables(self) -> list[str]:
        return [r[0] for r in self._query("SELECT table_schema || '.' || table_name FROM information_schema.tables"
                                          " WHERE table_schema NOT IN ('pg_catalog', 'information_schema')")]

    def check_position(self, offset: Offset) -> str | None:
        """The log keeps every row: a position is served while the log table exists."""
        if self._query("SELECT to_regclass(%s)", (self.log_ref,))[0][0] is None:
            return f"the change-log table {self.log_table} does not exist any more"
        return None

    def new_stream_offset(self) -> Offset:
        return {"seq": self._next_seq()}

    def snapshot_position(self, epoch: int) -> Offset:
        if self.held is None or self.held.epoch != epoch:
            self.end_snapshot()
            self.held = HeldSnapshot(self.params, self.log_ref, epoch)
        return {"seq": self.held.seq}

    def plan_snapshot(self, epoch: int) -> list[WorkUnit]:
        self._stop_stream()
        self.snapshot_position(epoch)
        assert self.held is not None
        units = plan_chunks(self.held, self.params, list(self.prepare()), self.context, self.config)
        log.info("snapshot of %d tables in %d chunks before seq %d", len(self.tables), len(units), self.held.seq)
        return units

    def end_snapshot(self) -> None:
        if self.held is not None:
            self.held.close()
            self.held = None

    def stream_latest(self, start: Offset, max_events: int) -> Offset | None:
        end = self._planner(start).latest(LogPosition.from_offset(start), max_events, self.target)
        return None if end is None else end.to_offset()

    def stream_plan(self, start: Offset, end: Offset) -> list[WorkUnit]:
        return self._planner(start).plan(LogPosition.from_offset(start), LogPosition.from_offset(end),
                                         self.parallelism)

    def stop_stream(self) -> None:
        self._stop_stream()

    def commit_position(self, end: Offset) -> None:
        """Nothing to release: the log belongs to the writers (Databus's relays do not trim it either)."""

    def prepare_available_now(self) -> None:
        self.target = self._next_seq()

    # ------------------------------------------------------------------ streaming
    def _planner(self, start: Offset) -> Planner[LogPosition]:
        if self.planner is None:
            if "seq" not in start:
                raise SourceError(f"the offset {start} holds no change-log position")
            self.reader = LogReader(self.params, self.log_ref, self.config["headwater.stream.buffer.bytes"])
            self.reader.start(LogPosition.from_offset(start))
            self.planner = Planner(self.reader, LogCodec(self.context, self._captured), _once,
                                   transaction_metadata=self.context.transaction_metadata,
                                   heartbeat_interval_ms=self.context.heartbeat_interval_ms)
        return self.planner

    def _captured(self) -> dict[str, Table]:
        return self.tables or self._read_tables()

    def _stop_stream(self) -> None:
        if self.reader is not None:
            self.reader.close()
        self.reader, self.planner = None, None

    def table_schema(self, table: str) -> tuple[str, dict]:
        found = self._captured().get(table if "." in table else f"public.{table}")
        if found is None:
            raise SourceError(f"{table} is not a captured table")
        records = table_records(self.context, found, found.columns, streaming=True)
        return records.topic, records.value_schema.to_json()

    def close(self) -> None:
        self._stop_stream()
        self.end_snapshot()
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def _once(what: str, fn: Any) -> Any:
    """Run `fn` once: the connector does not reconnect (an error fails the batch, which is retried whole)."""
    return fn()
