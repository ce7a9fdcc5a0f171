"""What a running connector reports: its metrics, the initial snapshot's notifications, the metrics
file and the Prometheus endpoint, fed by whatever runs the connector (the engine).

The runner calls `opened` once the connector is open, `snapshot_started` before the first batch of a
snapshot (a snapshot is one batch, or several: the binlog connectors' lock-free chunks), `seen` with
each batch of events, `snapshot_finished` after the snapshot's last batch (`snapshot_aborted` when a
snapshot batch did not finish), `committed` after each batch, and `close` (a snapshot still running
then is aborted). Between them it hands `take_records` (the
notification records of the `sink` channel) on with the events.

The initial snapshot's notifications follow Debezium's: `STARTED`; per table `IN_PROGRESS` when its
first row arrives and `TABLE_SCAN_COMPLETED` (`total_rows_scanned`, `status` `SUCCEEDED`) with its
row marked the last of the table (`source.snapshot`), or when the snapshot ends (a table with no
rows gets both then);
then `COMPLETED`, or `ABORTED` when the snapshot batch did not finish; `SKIPPED` at an open with no
snapshot due. A snapshot that reads no rows (`snapshot_started` with `scans` False: the binlog connectors'
schema-only snapshot, `no_data`, `recovery`) has no table's notifications: `STARTED` then `COMPLETED`, as
Debezium's RelationalSnapshotChangeEventSource sends them only from the tables' data scans (its metrics
count each table done, with no rows); an open that
read the tables' schema again instead of a snapshot (`opened` with `schema_snapshot`: `recovery` at a
restart, where Debezium takes its schema-only snapshot at every start) sends those two instead of `SKIPPED`.

A blocking snapshot (`execute-snapshot` with `type: blocking`) gets the same notifications, as Debezium 3.6
sends them (it runs one through its snapshot source): the runner calls `blocking` with the end offset of
each streaming batch before its events, and counts the events of a batch that reads a blocking snapshot
as a snapshot's (`seen` with `snapshot`: True). `STARTED` comes with its first batch (`data_collections`:
the signal's tables), `COMPLETED` with the batch after its last (before that batch's streamed events); when
it was abandoned for a query error (the offset's `blocking_snapshot_abandoned`, or a unit's
`WorkUnit.abandoned`, which the runner hands to `scan_failed`, or the facts carry), the table whose query
failed gets `IN_PROGRESS` and `TABLE_SCAN_COMPLETED` with `status` `SQL_EXCEPTION` (and, as Debezium's,
no `data_collections` nor `total_rows_scanned`), then `ABORTED`. Debezium's snapshot metrics follow it as
they follow the initial snapshot (`SnapshotRunning`, `RowsScanned`, ...).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from headwater.config.properties import ConnectorConfig
from headwater.connectors.common.incremental import BLOCKING, BLOCKING_ABANDONED, CHUNK, NOTIFICATIONS, State
from headwater.connectors.common.notifications import Notification
from headwater.events.batch import Events
from headwater.events.typed import TypedEvents
from headwater.observe.facts import BatchFacts, batch_facts
from headwater.observe.metrics import ConnectorMetrics
from headwater.observe.notifications import Notifier

if TYPE_CHECKING:
    from headwater.observe.prometheus import Endpoint

WRITE_EVERY_S = 2.0  # the metrics file is written at each commit, and at most this often in between


class Observer:
    """Metrics and notifications of one connector (see the module's docstring)."""

    def __init__(self, config: ConnectorConfig, metrics_file: Path | None = None):
        self.metrics = ConnectorMetrics(config.connector, config["topic.prefix"])
        self.notifier = Notifier(config)
        self.metrics_file = metrics_file
        port = config["headwater.metrics.port"]
        self.endpoint: Endpoint | None = None
        if port:  # prometheus_client (and http.server, ssl: ~0.08 s of CPU) only where it serves
            from headwater.observe.prometheus import Endpoint

            self.endpoint = Endpoint(self.metrics, port, config["headwater.metrics.host"])
        self._tables: list[str] = []
        self._started: list[str] = []  # tables whose scan was announced (IN_PROGRESS)
        self._scanned: list[str] = []  # tables whose scan completed
        self._written = 0.0
        self.file_extra: Callable[[], dict[str, Any]] | None = None  # more fields for the metrics file
        self._initial = False  # the initial snapshot is running
        self._scans = True  # the running snapshot reads the tables' rows (not the schema only)
        self._incremental = False  # an incremental snapshot is running
        self._blocking: str | None = None  # the signal id of the blocking snapshot running
        self._failed = False  # a table of it met a query error: it ends ABORTED

    def opened(self, tables: list[str], snapshot_due: bool, schema_snapshot: bool = False) -> None:
        """The connector is open, capturing `tables`; `snapshot_due`: its first batch is a snapshot;
        `schema_snapshot`: opening it read the tables' schema again (a schema-only snapshot, no batch)."""
        self.metrics.captured(tables)
        self.metrics.connected(True)
        if schema_snapshot and not snapshot_due:
            self.snapshot_started(tables, scans=False)
            self.snapshot_finished()
        elif not snapshot_due:
            self.notifier.initial_snapshot("SKIPPED")
        self.write()

    # ------------------------------------------------------------------ the initial snapshot
    @property
    def snapshot_running(self) -> bool:
        """The initial snapshot is running (not an incremental one)."""
        return self._initial

    def snapshot_started(self, tables: list[str], blocking: bool = False, scans: bool = True) -> None:
        """The initial snapshot of `tables` started, or (`blocking`) a blocking snapshot of them; `scans`
        False: it reads no rows (the schema only)."""
        self._initial, self._incremental, self._scans = True, False, scans
        self._tables, self._started, self._scanned = list(tables), [], []
        self.metrics.snapshot_started(tables, more=blocking)
        self.notifier.initial_snapshot("STARTED")

    def _collections(self) -> str:
        return ",".join(self._tables)

    def _in_progress(self, table: str) -> None:
        if table in self._started:
            return
        self._started.append(table)
        self.notifier.initial_snapshot("IN_PROGRESS", {"current_collection_in_progress": table,
                                                       "data_collections": self._collections()})

    def _table_done(self, table: str) -> None:
        if table in self._scanned:
            return
        self._in_progress(table)
        self._scanned.append(table)
        self.metrics.table_completed()
        rows = self.metrics.snapshot["RowsScanned"].get(table, 0)
        self.notifier.initial_snapshot("TABLE_SCAN_COMPLETED", {
            "data_collections": self._collections(), "scanned_collection": table, "status": "SUCCEEDED",
            "total_rows_scanned": str(rows)})

    def snapshot_finished(self) -> None:
        self._initial = False
        for table in self._started + self._tables:  # tables whose last row was not marked, or with no rows
            if self._scans:
                self._table_done(table)
            elif table not in self._scanned:  # counted done with no rows, without notifications (as Debezium's)
                self._scanned.append(table)
                self.metrics.table_completed()
        self.metrics.snapshot_ended(completed=True)
        self.notifier.initial_snapshot("COMPLETED")
        self.write()

    def snapshot_aborted(self) -> None:
        self._initial, self._blocking = False, None
        self.metrics.snapshot_ended(completed=False)
        self.notifier.initial_snapshot("ABORTED")
        self.write()

    # ------------------------------------------------------------------ a blocking snapshot
    def blocking(self, end: dict[str, Any]) -> bool:
        """Before the events of the streaming batch ending at `end`: the notifications of a blocking snapshot
        that ends with the batch before it (COMPLETED, or ABORTED) and of one it starts (STARTED). True when
        the batch reads a blocking snapshot (its events are a snapshot's)."""
        running = end.get(BLOCKING) or None
        abandoned = end.get(BLOCKING_ABANDONED) or None
        running_id = None if running is None else str(running.get("id"))
        if self._blocking is not None and running_id != self._blocking:
            ours = abandoned is not None and str(abandoned.get("id")) == self._blocking
            self._blocking_ended(abandoned if ours else None)
            abandoned = None if ours else abandoned
        if abandoned is not None and str(abandoned.get("id")) != running_id:  # abandoned before its first batch
            self.snapshot_started(list(abandoned.get("tables") or []), blocking=True)
            self._blocking_ended(abandoned)
        if running_id is not None and self._blocking is None:
            self._blocking, self._failed = running_id, False
            self.snapshot_started(list((running or {}).get("tables") or []), blocking=True)
        return running_id is not None

    def _blocking_ended(self, abandoned: dict[str, Any] | None) -> None:
        self._blocking = None
        if abandoned is None and not self._failed:
            self.snapshot_finished()
            return
        table = (abandoned or {}).get("table")
        if table:
            self._scan_failed(table)
        self.snapshot_aborted()

    def scan_failed(self, table: str) -> None:
        """A unit of the running blocking snapshot met a query error reading `table` and ended
        (`WorkUnit.abandoned`): its TABLE_SCAN_COMPLETED with `status` `SQL_EXCEPTION` now, ABORTED when the
        snapshot's batches are over."""
        if self._blocking is not None:
            self._failed = True
            self._scan_failed(table)

    def _scan_failed(self, table: str) -> None:
        if table in self._scanned:
            return
        self._in_progress(table)
        self._scanned.append(table)
        self.notifier.initial_snapshot("TABLE_SCAN_COMPLETED", {"scanned_collection": table, "status": "SQL_EXCEPTION"})

    # ------------------------------------------------------------------ events
    def seen(self, batch: Events | TypedEvents, snapshot: bool) -> None:
        """Count a batch of events (`snapshot`: read by the snapshot)."""
        self.seen_facts(batch_facts(batch), snapshot)

    def seen_facts(self, facts: BatchFacts, snapshot: bool) -> None:
        """Count a batch of events by its facts (`snapshot`: read by the snapshot)."""
        if snapshot:
            self.metrics.snapshot_rows(facts)
            # in the events' order: a table's first row announces it, its marked last row completes it
            steps = [(place, 0, table) for place, _, table, _ in facts.topics if table is not None]
            steps += [(place, 1, table) for place, table in facts.table_ends]
            for _, done, table in sorted(steps):
                (self._table_done if done else self._in_progress)(table)
            for table in facts.abandoned:
                self.scan_failed(table)
        else:
            self.metrics.streamed(facts)
        if time.monotonic() - self._written >= WRITE_EVERY_S:
            self.write()

    def take_records(self) -> TypedEvents | None:
        """The notification records of the `sink` channel since the last call (None: none)."""
        return self.notifier.take_records()

    def incremental(self, offset: dict[str, Any]) -> None:
        """The incremental snapshot's state in a committed streaming batch's offset, as Debezium's snapshot
        metrics show one: `SnapshotRunning` from the batch that finds it running to the one that finds it
        over (`SnapshotCompleted`, or `SnapshotAborted` when the batch carries its ABORTED notification:
        with the `sink` channel only), `TotalTableCount`, `RemainingTableCount`, `RowsScanned` of the table
        being read (rows read so far), `SnapshotPaused`, and the chunk the batch emitted (`ChunkId`,
        `ChunkFrom`, `ChunkTo`, `TableTo`: the table's maximum key; headwater reads no lowest key, so
        `TableFrom` is the first chunk's lower bound, empty)."""
        state = State.from_offset(offset)
        m = self.metrics
        if state.active:
            tables = [c.id for c in state.collections]
            if not self._incremental:
                self._incremental = True
                m.snapshot_started(tables)  # (Debezium's snapshot metrics are those of either snapshot)
            m.snapshot["TotalTableCount"] = max(m.snapshot["TotalTableCount"], len(tables))
            m.snapshot["RemainingTableCount"] = len(tables)
            if state.rows:
                m.snapshot["RowsScanned"][tables[0]] = state.rows
        elif self._incremental:
            self._incremental = False
            aborted = any(n.get("type") == "ABORTED" for n in offset.get(NOTIFICATIONS) or [])
            m.snapshot_ended(completed=not aborted)
            if not aborted:
                m.snapshot["RemainingTableCount"] = 0
        m.snapshot_paused(state.active and state.paused)
        chunk = offset.get(CHUNK)
        if chunk:
            m.incremental_chunk(str(chunk["id"]), _keys(chunk.get("from")), _keys(chunk.get("to")), "",
                                _keys(state.max_key))

    def committed(self, position: dict[str, Any] | None) -> None:
        """A batch was committed; `position`: the stream position it ended at (None after a snapshot)."""
        if position is not None:
            self.metrics.position(position)
        self.write()

    def write(self) -> None:
        """Replace the metrics file (when there is one) with the values now (and `file_extra`'s fields)."""
        self._written = time.monotonic()
        if self.metrics_file is not None:
            self.metrics.write_file(self.metrics_file, [n.to_dict() for n in self.notifier.recent],
                                    self.file_extra() if self.file_extra is not None else None)

    # ------------------------------------------------------------------ kept across runs (Spark)
    def state(self) -> dict[str, Any]:
        """What `restore` needs besides the metrics' values."""
        return {"metrics": self.metrics.state(), "tables": self._tables, "started": self._started,
                "scanned": self._scanned, "initial": self._initial, "incremental": self._incremental,
                "blocking": self._blocking, "failed": self._failed, "scans": self._scans}

    def restore(self, doc: dict[str, Any], state: dict[str, Any]) -> None:
        """Carry on from a metrics file `doc` and the `state` kept in it."""
        self.metrics.restore(doc, state.get("metrics") or {})
        self._tables, self._started, self._scanned = (list(state.get(k) or []) for k in ("tables", "started", "scanned"))
        self._initial, self._incremental = bool(state.get("initial")), bool(state.get("incremental"))
        self._blocking, self._failed = state.get("blocking"), bool(state.get("failed"))
        self._scans = bool(state.get("scans", True))
        for n in doc.get("notifications") or []:
            self.notifier.recent.append(Notification(**n))

    def close(self) -> None:
        if self.snapshot_running:  # stopped between two batches of a snapshot
            self.snapshot_aborted()
        self.metrics.connected(False)
        self.write()
        if self.endpoint is not None:
            self.endpoint.close()


def _keys(key: list[Any] | None) -> str:
    """A key as Debezium's metrics show one (Java's `Arrays.toString`): `[1]`, `[a, 2]`; empty for none."""
    return "" if key is None else "[" + ", ".join(str(v) for v in key) + "]"
