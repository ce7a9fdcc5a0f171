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
snapshot due.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from headwater.config.properties import ConnectorConfig
from headwater.events.batch import Events
from headwater.events.typed import TypedEvents
from headwater.observe.facts import batch_facts
from headwater.observe.metrics import ConnectorMetrics
from headwater.observe.notifications import Notifier
from headwater.observe.prometheus import Endpoint

WRITE_EVERY_S = 2.0  # the metrics file is written at each commit, and at most this often in between


class Observer:
    """Metrics and notifications of one connector (see the module's docstring)."""

    def __init__(self, config: ConnectorConfig, metrics_file: Path | None = None):
        self.metrics = ConnectorMetrics(config.connector, config["topic.prefix"])
        self.notifier = Notifier(config)
        self.metrics_file = metrics_file
        port = config["headwater.metrics.port"]
        self.endpoint = Endpoint(self.metrics, port, config["headwater.metrics.host"]) if port else None
        self._tables: list[str] = []
        self._started: list[str] = []  # tables whose scan was announced (IN_PROGRESS)
        self._scanned: list[str] = []  # tables whose scan completed
        self._written = 0.0

    def opened(self, tables: list[str], snapshot_due: bool) -> None:
        """The connector is open, capturing `tables`; `snapshot_due`: its first batch is a snapshot."""
        self.metrics.captured(tables)
        self.metrics.connected(True)
        if not snapshot_due:
            self.notifier.initial_snapshot("SKIPPED")
        self.write()

    # ------------------------------------------------------------------ the initial snapshot
    @property
    def snapshot_running(self) -> bool:
        return bool(self.metrics.snapshot["SnapshotRunning"])

    def snapshot_started(self, tables: list[str]) -> None:
        self._tables, self._started, self._scanned = list(tables), [], []
        self.metrics.snapshot_started(tables)
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
        for table in self._started + self._tables:  # tables whose last row was not marked, or with no rows
            self._table_done(table)
        self.metrics.snapshot_ended(completed=True)
        self.notifier.initial_snapshot("COMPLETED")
        self.write()

    def snapshot_aborted(self) -> None:
        self.metrics.snapshot_ended(completed=False)
        self.notifier.initial_snapshot("ABORTED")
        self.write()

    # ------------------------------------------------------------------ events
    def seen(self, batch: Events | TypedEvents, snapshot: bool) -> None:
        """Count a batch of events (`snapshot`: read by the snapshot)."""
        facts = batch_facts(batch)
        if snapshot:
            self.metrics.snapshot_rows(facts)
            # in the events' order: a table's first row announces it, its marked last row completes it
            steps = [(place, 0, table) for place, _, table, _ in facts.topics if table is not None]
            steps += [(place, 1, table) for place, table in facts.table_ends]
            for _, done, table in sorted(steps):
                (self._table_done if done else self._in_progress)(table)
        else:
            self.metrics.streamed(facts)
        if time.monotonic() - self._written >= WRITE_EVERY_S:
            self.write()

    def take_records(self) -> TypedEvents | None:
        """The notification records of the `sink` channel since the last call (None: none)."""
        return self.notifier.take_records()

    def committed(self, position: dict[str, Any] | None) -> None:
        """A batch was committed; `position`: the stream position it ended at (None after a snapshot)."""
        if position is not None:
            self.metrics.position(position)
        self.write()

    def write(self) -> None:
        """Replace the metrics file (when there is one) with the values now."""
        self._written = time.monotonic()
        if self.metrics_file is not None:
            self.metrics.write_file(self.metrics_file, [n.to_dict() for n in self.notifier.recent])

    def close(self) -> None:
        if self.snapshot_running:  # stopped between two batches of a snapshot
            self.snapshot_aborted()
        self.metrics.connected(False)
        self.write()
        if self.endpoint is not None:
            self.endpoint.close()
