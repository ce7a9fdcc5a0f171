"""The PostgreSQL connector's driver-side half: slot control, the exported snapshot, PostgreSQL's positions.

The phases (`pending`, `completed`, `streaming`), epochs, `snapshot.mode` and the "position lost"
rule are the shared lifecycle's (`common.phases.SnapshotThenStream`); this module fills in its
hooks. Streaming positions are absolute LSNs: the slot's own position, the snapshot's consistent
point, is read once when streaming begins after a snapshot.

A slot that cannot serve the stored position -- dropped, invalidated (`wal_status = lost`), or
confirmed past it (dropped and re-created by someone else) -- is a lost position: it fails loudly
before streaming, or mid-stream when it goes while the connector runs; with
`snapshot.mode=when_needed` (or `always`) it is a new snapshot instead. Debezium silently skips
the lost changes here.

A snapshot batch creates the slot with an exported snapshot and keeps the replication connection
that exported it open and idle until the batch is over, so every chunk, in any process, reads under
that one snapshot; streaming then starts exactly at the slot's consistent point. A snapshot batch
replayed after a crash cannot see the old snapshot again, so it drops and re-creates the slot and
snapshots again; the sinks replace a replayed batch's output, so the result stays exact.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
from dataclasses import replace
from typing import Any

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import Offset, WorkUnit
from headwater.connectors.common.incremental import Incremental
from headwater.connectors.common.incremental import status as incremental_status
from headwater.connectors.common.phases import STREAMING, SnapshotThenStream, phase
from headwater.connectors.common.records import table_records
from headwater.connectors.common.signals import split_table, with_signal_table
from headwater.connectors.postgres import catalog, slots
from headwater.connectors.postgres.connection import (
    ConnectionParams,
    Reconnecting,
    SlotLost,
    SourceError,
    connect,
    connect_replication,
)
from headwater.connectors.postgres.incremental import PostgresIncremental
from headwater.connectors.postgres.pgoutput import lsn_to_str, str_to_lsn
from headwater.connectors.postgres.positions import StreamPosition
from headwater.connectors.postgres.records import EventContext
from headwater.connectors.postgres.replication import ReplicationReader
from headwater.connectors.postgres.snapshot import plan_snapshot
from headwater.connectors.postgres.streaming import StreamPlanner

log = logging.getLogger("headwater.postgres")


class PostgresSource(SnapshotThenStream):
    """Snapshot, then stream, one PostgreSQL database through one replication slot."""

    def __init__(self, config: ConnectorConfig, parallelism: int = 2, schemas_enable: bool = False,
                 replace_null_with_default: bool = True, output: str = "json"):
        config = with_signal_table(config)
        super().__init__(config)
        self.params = ConnectionParams.from_config(config)
        self.context = EventContext.from_config(config, schemas_enable, replace_null_with_default, output)
        self.slot = config["slot.name"]
        self.publication = config["publication.name"]
        self.parallelism = max(1, parallelism)
        self.conn = None
        self.reader: ReplicationReader | None = None
        self.planner: StreamPlanner | None = None
        self.snapshot_holder = None  # replication connection keeping the exported snapshot alive
        self.snapshot_plan: tuple[int, list[WorkUnit]] | None = None
        self.target_lsn: int | None = None
        self.server_version = 0
        self.base_lsn: int | None = None  # where streaming after a snapshot starts: the slot's consistent point
        self.db = Reconnecting(self._reset_connection, config["errors.max.retries"],
                               config["retriable.restart.connector.wait.ms"] / 1000)
        self.incremental_hooks = PostgresIncremental(self)
        self.incremental = Incremental(config, self.incremental_hooks, self.parallelism)

    # ------------------------------------------------------------------ connections
    def _connection(self):
        if self.conn is None or self.conn.closed:
            self.conn = connect(self.params)
        return self.conn

    def _reset_connection(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()

    # ------------------------------------------------------------------ the lifecycle's hooks
    def prepare_database(self) -> list[catalog.TableId]:
        conn = self._connection()
        slots.check_server(conn)
        with conn.cursor() as cur:
            cur.execute("SHOW server_version_num")
            self.server_version = int(cur.fetchone()[0])
        tables = catalog.list_tables(conn, self.context.filters)
        signal_like = [(t.schema, t.name) for t in tables]
        signal_table = self.config.get("signal.data.collection")
        if signal_table:  # its inserts (signals, watermarks) must reach the stream
            signal_like.append(split_table(signal_table))
        slots.ensure_publication(conn, self.publication, self.config["publication.autocreate.mode"], signal_like)
        autoset = self.config.get("replica.identity.autoset.values")
        if autoset:
            slots.apply_replica_identity(conn, autoset, signal_like)
        return tables

    def visible_tables(self) -> list[str]:
        no_filters: dict[str, Any] = {}  # every table but the system's
        return [str(t) for t in catalog.list_tables(self._connection(), no_filters)]

    def new_stream_offset(self) -> Offset:
        return {"lsn_commit": 0}  # the slot's position, once it exists

    def check_position(self, offset: Offset) -> str | None:
        state = slots.get_slot(self._connection(), self.slot)
        pos = StreamPosition.from_offset(offset) if phase(offset) == STREAMING else StreamPosition(0)
        if state is None:
            if phase(offset) == STREAMING and pos.lsn_commit == 0 and not self.snapshot_mode.snapshot_first:
                self._create_slot(export=False)  # streaming without a snapshot begins here
                return None
            return f"replication slot {self.slot!r} does not exist any more"
        slots.validate_slot(state, self.params.dbname)
        if state.wal_status == "lost":
            return (f"replication slot {self.slot!r} is invalidated (wal_status = lost): the WAL it needed "
                    "was removed (max_slot_wal_keep_size)")
        if pos.lsn_commit and state.confirmed_flush_lsn and state.confirmed_flush_lsn > pos.lsn_commit:
            return (f"replication slot {self.slot!r} has confirmed {lsn_to_str(state.confirmed_flush_lsn)}, "
                    f"past the last position headwater processed ({lsn_to_str(pos.lsn_commit)})")
        return None

    def end_snapshot(self) -> None:
        self._release_snapshot()

    def stream_latest(self, start: Offset, max_events: int) -> Offset | None:
        end = self._stream_planner(start).latest(self._position(start), max_events, self.target_lsn)
        return None if end is None else end.to_offset()

    def stream_plan(self, start: Offset, end: Offset) -> list[WorkUnit]:
        return self._stream_planner(start).plan(self._position(start), StreamPosition.from_offset(end),
                                                self.parallelism)

    def stop_stream(self) -> None:
        self._stop_streaming()

    def commit_position(self, end: Offset) -> None:
        pos = StreamPosition.from_offset(end)
        if self.reader is not None and pos.lsn_commit:
            self.reader.confirm(pos.lsn_commit)

    def _position(self, start: Offset) -> StreamPosition:
        """The streaming position of a stream offset (`{}` right after a snapshot). Streaming after a
        snapshot (or from a new slot) starts at the slot's confirmed position, its consistent point:
        read once, it makes every later position an absolute LSN, which a slot that moved past it
        can be checked against."""
        pos = StreamPosition.from_offset(start)
        if pos.lsn_commit:
            return pos
        if self.base_lsn is None:
            state = slots.get_slot(self._connection(), self.slot)
            if state is None or state.confirmed_flush_lsn is None:
                raise SlotLost(f"replication slot {self.slot!r} does not exist any more")
            self.base_lsn = state.confirmed_flush_lsn
        return replace(pos, lsn_commit=self.base_lsn)

    def _stop_streaming(self) -> None:
        """Stop the reader, and wait until its walsender has exited and let go of the slot."""
        if self.reader is not None:
            self.reader.close()
            pids = self.reader.backend_pids[-1:]
            if pids and self.conn is not None and not self.conn.closed:
                with contextlib.suppress(Exception):
                    slots.wait_for_exit(self.conn, pids[0])
        self.reader, self.planner = None, None
        self.base_lsn = None

    def close(self) -> None:
        self._stop_streaming()
        self._release_snapshot()
        self.incremental_hooks.close()
        if self.config["slot.drop.on.stop"] and self.opened:
            try:
                slots.drop_slot_when_inactive(self._connection(), self.slot)
            except Exception as exc:
                log.warning("could not drop slot %s: %s", self.slot, exc)
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _release_snapshot(self) -> None:
        if self.snapshot_holder is not None:
            with contextlib.suppress(Exception):
                self.snapshot_holder.close()
            self.snapshot_holder = None
        self.snapshot_plan = None

    def prepare_available_now(self) -> None:
        def current() -> int | None:
            with self._connection().cursor() as cur:
                cur.execute("SELECT pg_current_wal_flush_lsn()::text")
                return str_to_lsn(cur.fetchone()[0])

        self.target_lsn = self.db("reading the server's WAL position", current)

    # ------------------------------------------------------------------ snapshot
    def _create_slot(self, export: bool):
        """Create the slot; with `export`, return (holder connection, consistent point, snapshot name)."""
        holder = connect_replication(self.params)
        cur = holder.cursor()
        kw = "EXPORT_SNAPSHOT" if export else "NOEXPORT_SNAPSHOT"
        try:
            cur.execute(f'CREATE_REPLICATION_SLOT "{self.slot}" LOGICAL pgoutput {kw}')
        except Exception as exc:
            holder.close()
            raise SourceError(f"cannot create replication slot {self.slot!r}: {str(exc).strip()}") from None
        _, consistent_point, snapshot_name, _ = cur.fetchone()
        if not export:
            holder.close()
            return None
        return holder, str_to_lsn(consistent_point), snapshot_name

    def plan_snapshot(self, epoch: int) -> list[WorkUnit]:
        if self.snapshot_plan is not None and self.snapshot_plan[0] == epoch and self.snapshot_holder is not None:
            return self.snapshot_plan[1]
        self._stop_streaming()
        self._release_snapshot()
        tables = list(self.prepare())
        conn = self._connection()
        state = slots.get_slot(conn, self.slot)
        if state is not None:
            log.info("dropping replication slot %s to take a consistent snapshot", self.slot)
            slots.terminate_slot_holder(conn, state)
            slots.drop_slot_when_inactive(conn, self.slot)
        holder, consistent_point, snapshot_name = self._create_slot(export=True)
        self.snapshot_holder = holder
        units = plan_snapshot(self.params, snapshot_name, consistent_point, tables, self.context, self.config,
                              self.parallelism)
        self.snapshot_plan = (epoch, units)
        log.info("snapshot of %d tables in %d chunks at LSN %s", len(tables), len(units), lsn_to_str(consistent_point))
        return units

    # ------------------------------------------------------------------ streaming
    def _stream_planner(self, start: Offset) -> StreamPlanner:
        if self.planner is not None:
            return self.planner
        pos = self._position(start)
        cfg = self.config
        self.reader = ReplicationReader(
            self.params, self.slot, self.publication,
            proto_version=cfg["headwater.pgoutput.protocol.version"],
            buffer_bytes=cfg["headwater.stream.buffer.bytes"],
            status_interval_s=max(0.5, cfg["status.update.interval.ms"] / 1000),
            max_retries=cfg["errors.max.retries"],
            retry_wait_s=cfg["retriable.restart.connector.wait.ms"] / 1000,
            flush_enabled=cfg["flush.lsn.source"],
            extra_options=_stream_params(cfg.get("slot.stream.params")),
            server_version=self.server_version or 150000,
            slot_retries=cfg["slot.max.retries"],
            slot_retry_delay_s=cfg["slot.retry.delay.ms"] / 1000,
            decoding_work_mem_kb=self._decoding_work_mem_kb(),
        )
        self.reader.start(pos.lsn_commit, pos.last_commit_ts)
        self.planner = StreamPlanner(self.reader, self.context, self._connection, self.db)
        return self.planner

    def _decoding_work_mem_kb(self) -> int:
        """`headwater.pgoutput.decoding.work.mem.kb` when it is below what a session of this user in this
        database gets (the server's, database's or role's logical_decoding_work_mem), else 0: the
        replication session only ever lowers it."""
        wanted = self.config["headwater.pgoutput.decoding.work.mem.kb"]
        if not wanted:
            return 0
        with self._connection().cursor() as cur:
            cur.execute("SELECT setting::int FROM pg_settings WHERE name = 'logical_decoding_work_mem'")
            row = cur.fetchone()
        return wanted if row is None or wanted < row[0] else 0

    def table_schema(self, table: str) -> tuple[str, dict]:
        schema, _, name = table.rpartition(".")
        found = catalog.read_table(self._connection(), schema or "public", name)
        events = table_records(self.context, found, found.columns, streaming=True)
        return events.topic, events.value_schema.to_json()

    def status(self, offset: Offset | None) -> dict[str, Any]:
        conn = self._connection()
        state = slots.get_slot(conn, self.slot)
        with conn.cursor() as cur:
            cur.execute("SELECT pg_current_wal_lsn()::text")
            current = str_to_lsn(cur.fetchone()[0])
        out: dict[str, Any] = {"slot": self.slot, "server_lsn": lsn_to_str(current), **incremental_status(offset)}
        if state is None:
            out["slot_exists"] = False
            return out
        out.update(slot_exists=True, slot_active=state.active_pid is not None,
                   confirmed_flush_lsn=lsn_to_str(state.confirmed_flush_lsn),
                   restart_lsn=lsn_to_str(state.restart_lsn), wal_status=state.wal_status)
        if state.confirmed_flush_lsn is not None:
            out["lag_bytes"] = max(0, current - state.confirmed_flush_lsn)
        ts_usec = offset.get("ts_usec") if isinstance(offset, dict) else None
        if ts_usec:
            out["last_delivered_commit"] = dt.datetime.fromtimestamp(ts_usec / 1e6, dt.UTC).isoformat()
            if out.get("lag_bytes"):
                # WAL is pending past what was delivered: its first commit came after this one
                out["lag_seconds_at_most"] = round(max(0.0, time.time() - ts_usec / 1e6), 1)
        return out


def _stream_params(value: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in (value or "").split(";"):
        if "=" in item:
            k, v = item.split("=", 1)
            out[k.strip()] = v.strip()
    return out
