"""Debezium's snapshot and streaming metrics of one connector, counted per batch, and their file.

`ConnectorMetrics` holds the attributes of Debezium's `context=snapshot` and `context=streaming`
MBeans under their names (crosscutting.md §7.2). Counts are taken per batch from its facts
(`observe.facts`): the count per `op`, the distinct commit versions (one per transaction), the
last event; never per event in Python. A change event is one with an `op` (a tombstone is part of the delete
event before it, as in Debezium, and transaction or heartbeat records are not change events).

The incremental-snapshot attributes (`ChunkId`, `ChunkFrom`, `ChunkTo`, `TableFrom`, `TableTo`)
and `SnapshotPaused` are fields the incremental snapshot sets through `incremental_chunk` and
`snapshot_paused`; `NumberOfEventsFiltered` is added to by whatever drops events (`filtered`).

`write_file` replaces the metrics file atomically (JSON: `connector`, `server`, `written_ms`,
`snapshot`, `streaming`, `notifications`); `read_file` reads it back for `headwater status`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from headwater.observe.facts import BatchFacts

SNAPSHOT_ATTRIBUTES: dict[str, Any] = {
    "LastEvent": "", "MilliSecondsSinceLastEvent": -1, "TotalNumberOfEventsSeen": 0, "NumberOfEventsFiltered": 0,
    "CapturedTables": [], "TotalTableCount": 0, "RemainingTableCount": 0,
    "SnapshotRunning": False, "SnapshotPaused": False, "SnapshotAborted": False, "SnapshotCompleted": False,
    "SnapshotDurationInSeconds": 0, "SnapshotPausedDurationInSeconds": 0, "RowsScanned": {},
    "ChunkId": "", "ChunkFrom": "", "ChunkTo": "", "TableFrom": "", "TableTo": "",
}
STREAMING_ATTRIBUTES: dict[str, Any] = {
    "LastEvent": "", "MilliSecondsSinceLastEvent": -1, "TotalNumberOfEventsSeen": 0,
    "TotalNumberOfCreateEventsSeen": 0, "TotalNumberOfUpdateEventsSeen": 0, "TotalNumberOfDeleteEventsSeen": 0,
    "NumberOfEventsFiltered": 0, "CapturedTables": [], "Connected": False, "MilliSecondsBehindSource": -1,
    "NumberOfCommittedTransactions": 0, "SourceEventPosition": {}, "LastTransactionId": "",
}
METRICS_FILE = "headwater.metrics.json"
_OP_COUNTERS = {"c": "TotalNumberOfCreateEventsSeen", "u": "TotalNumberOfUpdateEventsSeen",
                "d": "TotalNumberOfDeleteEventsSeen"}


def _now_ms() -> int:
    return int(time.time() * 1000)


class ConnectorMetrics:
    """The snapshot and streaming metrics of connector `connector` (short name) with `topic.prefix` `server`."""

    def __init__(self, connector: str, server: str):
        self.connector = connector
        self.server = server
        self.snapshot: dict[str, Any] = {**SNAPSHOT_ATTRIBUTES, "RowsScanned": {}, "CapturedTables": []}
        self.streaming: dict[str, Any] = {**STREAMING_ATTRIBUTES, "SourceEventPosition": {}, "CapturedTables": []}
        self._last_event_ms: dict[str, int] = {}  # context -> wall-clock ms of its last event
        self._snapshot_start: float | None = None
        self._snapshot_end: float | None = None
        self._paused_since: float | None = None
        self._paused_seconds = 0.0
        self._last_version: int | None = None  # the commit version of the last streamed transaction

    # ------------------------------------------------------------------ snapshot
    def captured(self, tables: list[str]) -> None:
        """The tables the connector captures (both contexts' `CapturedTables`)."""
        self.snapshot["CapturedTables"] = list(tables)
        self.streaming["CapturedTables"] = list(tables)

    def snapshot_started(self, tables: list[str], more: bool = False) -> None:
        """A snapshot of `tables` started. `more`: a blocking snapshot, which Debezium's meter counts on top of
        what it holds (it is not reset: `TotalTableCount` counts the tables of every snapshot so far, those
        `RowsScanned` holds, whose other tables' counts stay; `CapturedTables` gains the new ones)."""
        s = self.snapshot
        captured = list(dict.fromkeys([*s["CapturedTables"], *tables])) if more else list(tables)
        rows = {**s["RowsScanned"], **{t: 0 for t in tables}} if more else {t: 0 for t in tables}
        s.update(CapturedTables=captured, TotalTableCount=len(rows), RemainingTableCount=len(tables),
                 SnapshotRunning=True, SnapshotCompleted=False, SnapshotAborted=False, SnapshotPaused=False,
                 RowsScanned=rows)
        self._snapshot_start, self._snapshot_end = time.monotonic(), None
        self._paused_seconds, self._paused_since = 0.0, None

    def snapshot_rows(self, facts: BatchFacts) -> None:
        """Count a snapshot batch's events (`RowsScanned` per table)."""
        self._seen("snapshot", facts)
        scanned = self.snapshot["RowsScanned"]
        for _, _, table, n in facts.topics:
            if table is not None:
                scanned[table] = scanned.get(table, 0) + n

    def table_completed(self) -> None:
        self.snapshot["RemainingTableCount"] = max(0, self.snapshot["RemainingTableCount"] - 1)

    def snapshot_ended(self, completed: bool) -> None:
        """The snapshot completed (`completed`) or was aborted."""
        self.snapshot_paused(False)
        self.snapshot.update(SnapshotRunning=False, SnapshotCompleted=completed, SnapshotAborted=not completed)
        self._snapshot_end = time.monotonic()

    def snapshot_paused(self, paused: bool) -> None:
        """The (incremental) snapshot paused or resumed."""
        if paused and self._paused_since is None:
            self._paused_since = time.monotonic()
        elif not paused and self._paused_since is not None:
            self._paused_seconds += time.monotonic() - self._paused_since
            self._paused_since = None
        self.snapshot["SnapshotPaused"] = paused

    def incremental_chunk(self, chunk_id: str, chunk_from: str, chunk_to: str, table_from: str, table_to: str) -> None:
        """The incremental snapshot's current chunk and its table's key bounds."""
        self.snapshot.update(ChunkId=chunk_id, ChunkFrom=chunk_from, ChunkTo=chunk_to, TableFrom=table_from,
                             TableTo=table_to)

    # ------------------------------------------------------------------ streaming
    def streamed(self, facts: BatchFacts) -> None:
        """Count a streaming batch's events."""
        self._seen("streaming", facts)
        st = self.streaming
        for op, n in facts.ops.items():
            if op in _OP_COUNTERS:
                st[_OP_COUNTERS[op]] += n
        if facts.transactions:
            continued = facts.first_version == self._last_version  # the last batch's transaction went on
            st["NumberOfCommittedTransactions"] += facts.transactions - int(continued)
            self._last_version = facts.last_version
        source = facts.last_source
        tx = source.get("txId", source.get("gtid"))
        if tx is not None:
            st["LastTransactionId"] = str(tx)
        if source.get("ts_ms") is not None:
            st["MilliSecondsBehindSource"] = max(0, _now_ms() - int(source["ts_ms"]))

    def position(self, position: dict[str, Any]) -> None:
        """The stream position the last streaming batch ended at."""
        self.streaming["SourceEventPosition"] = {k: str(v) for k, v in position.items()}

    def connected(self, up: bool) -> None:
        self.streaming["Connected"] = up

    def filtered(self, context: str, n: int) -> None:
        """`n` events of `context` (snapshot or streaming) were dropped by a filter."""
        (self.snapshot if context == "snapshot" else self.streaming)["NumberOfEventsFiltered"] += n

    def _seen(self, context: str, facts: BatchFacts) -> None:
        """Add the batch's change events to `context`'s totals and last event."""
        values = self.snapshot if context == "snapshot" else self.streaming
        if facts.events:
            values["TotalNumberOfEventsSeen"] += facts.events
            values["LastEvent"] = f"{facts.last_topic} op={facts.last_op}"
            self._last_event_ms[context] = _now_ms()

    # ------------------------------------------------------------------ reading them
    def values(self) -> dict[str, dict[str, Any]]:
        """Both contexts' attributes now (the time-based ones computed at the call)."""
        now = _now_ms()
        snap, stream = dict(self.snapshot), dict(self.streaming)
        for context, values in (("snapshot", snap), ("streaming", stream)):
            last = self._last_event_ms.get(context)
            values["MilliSecondsSinceLastEvent"] = -1 if last is None else now - last
        if self._snapshot_start is not None:
            end = self._snapshot_end if self._snapshot_end is not None else time.monotonic()
            paused = self._paused_seconds + (time.monotonic() - self._paused_since if self._paused_since else 0.0)
            snap["SnapshotDurationInSeconds"] = int(end - self._snapshot_start)
            snap["SnapshotPausedDurationInSeconds"] = int(paused)
        return {"snapshot": snap, "streaming": stream}

    # ------------------------------------------------------------------ kept across runs (Spark)
    def state(self) -> dict[str, Any]:
        """What `restore` needs besides the values: the times of the last events, the last transaction."""
        return {"last_event_ms": dict(self._last_event_ms), "last_version": self._last_version}

    def restore(self, values: dict[str, dict[str, Any]], state: dict[str, Any]) -> None:
        """Carry on from the values and state a metrics file holds (a snapshot's duration as it was)."""
        self.snapshot.update(values.get("snapshot") or {})
        self.streaming.update(values.get("streaming") or {})
        self._last_event_ms = {k: int(v) for k, v in (state.get("last_event_ms") or {}).items()}
        self._last_version = state.get("last_version")

    def write_file(self, path: Path, notifications: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> None:
        """Replace the metrics file at `path` atomically with the values now, `notifications` and `extra`
        (more top-level fields)."""
        doc = {"connector": self.connector, "server": self.server, "written_ms": _now_ms(), **self.values(),
               "notifications": notifications, **(extra or {})}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(doc, sort_keys=True, default=str))
        os.replace(tmp, path)


def metrics_path(checkpoint: Path) -> Path:
    """Where a pipeline with checkpoint directory `checkpoint` keeps its metrics file."""
    return checkpoint / METRICS_FILE


def read_file(path: Path) -> dict[str, Any] | None:
    """The metrics file at `path`, or None when there is none."""
    try:
        doc: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    return doc
