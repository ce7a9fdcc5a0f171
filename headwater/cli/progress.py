"""Progress of a running pipeline: a live panel on a terminal, plain log lines otherwise.

Shows the batches done, events per second, snapshot chunks read (Spark tasks done of the
snapshot batch's total), how far the source is ahead (for PostgreSQL, the slot's lag in bytes
and the age of the last change delivered) and, from the pipeline's observer, Debezium's metrics:
the snapshot's state and rows scanned, the change events by operation, the transactions and how
far behind the source the last event was. Events are the change events the observer counted in a
batch (`observedMetrics`), else Spark's input rows.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from headwater.connectors.base import SourceConnector
from headwater.connectors.registry import create_source
from headwater.pipeline_config import PipelineConfig

if TYPE_CHECKING:  # imported before the signal handlers are set: nothing heavy (pyspark) at import
    from headwater.spark.observer import SparkObserver

OBSERVED = "headwater"  # spark.observer.NAME, the observed metrics' name (their facts: spark.observing)


def _events(prog: Any) -> int:
    """The change events of a batch's progress: the observer's count when there is one, else its input rows."""
    observed = (prog.get("observedMetrics") or {}).get(OBSERVED)
    if observed is not None:
        return sum(int(json.loads(f).get("events", 0)) for f in observed["facts"] or [])
    return int(prog.get("numInputRows", 0) or 0)


class Progress:
    def __init__(self, cfg: PipelineConfig, query, interactive: bool, observer: SparkObserver | None = None):
        self.cfg = cfg
        self.query = query
        self.observer = observer
        self.interactive = interactive
        self.console = Console(stderr=True, highlight=False, soft_wrap=True)
        self.live: Live | None = None
        self.last_batch = -1
        self.total_events = 0
        self.started = time.monotonic()
        self.lag: dict[str, Any] = {}
        self.lag_at = 0.0
        self.connector: SourceConnector | None = None
        self.message = ""

    def __enter__(self) -> Progress:
        if self.interactive:
            self.live = Live(self._table(), console=self.console, refresh_per_second=2, transient=False)
            self.live.__enter__()
        else:
            self.console.print(f"headwater: pipeline {self.cfg.name} started")
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)
        if self.connector is not None:
            self.connector.close()

    def note(self, text: str) -> None:
        self.message = text
        if not self.interactive:
            self.console.print(f"headwater: {text}")

    def _lag(self) -> dict[str, Any]:
        if time.monotonic() - self.lag_at < 5:
            return self.lag
        self.lag_at = time.monotonic()
        try:
            if self.connector is None:
                self.connector = create_source(self.cfg.source)
            self.lag = self.connector.status(None)
        except Exception as exc:  # the source may be restarting; show why
            self.lag = {"lag": f"unknown ({type(exc).__name__})"}
        return self.lag

    def _snapshot_tasks(self) -> str | None:
        try:
            tracker = self.query.sparkSession.sparkContext.statusTracker()
            stages = [tracker.getStageInfo(s) for s in tracker.getActiveStageIds()]
            stages = [s for s in stages if s is not None]
            if not stages:
                return None
            done = sum(s.numCompletedTasks for s in stages)
            total = sum(s.numTasks for s in stages)
            return f"{done} of {total} partitions read"
        except Exception:
            return None

    def update(self) -> None:
        prog = self.query.lastProgress
        if prog and prog["batchId"] != self.last_batch:
            self.last_batch = prog["batchId"]
            rows = _events(prog)
            self.total_events += rows
            if not self.interactive:
                rate = prog.get("processedRowsPerSecond") or 0.0
                end = (prog.get("sources") or [{}])[0].get("endOffset")
                self.console.print(f"headwater: batch {prog['batchId']}: {rows} events ({rate:,.0f}/s), "
                                   f"position {end}", markup=False)
        if self.live is not None:
            self.live.update(self._table())

    def _table(self) -> Table:
        t = Table.grid(padding=(0, 2))
        t.add_row("pipeline", f"{self.cfg.name} -> {self.cfg.sink.type}")
        elapsed = time.monotonic() - self.started
        t.add_row("batches", str(self.last_batch + 1))
        t.add_row("events", f"{self.total_events:,} ({self.total_events / max(elapsed, 1e-6):,.0f}/s overall)")
        prog = self.query.lastProgress
        if prog:
            t.add_row("last batch", f"{_events(prog):,} events, {prog.get('processedRowsPerSecond') or 0:,.0f}/s")
        for name, text in self._metrics():
            t.add_row(name, text)
        if self.query.status.get("isTriggerActive"):
            tasks = self._snapshot_tasks()
            if tasks:
                t.add_row("in flight", tasks)
        lag = self._lag()
        if "lag_bytes" in lag:
            t.add_row("behind source", f"{lag['lag_bytes']:,} bytes of WAL (slot {lag.get('slot')})")
        if self.message:
            t.add_row("", self.message)
        return t

    def _metrics(self) -> list[tuple[str, str]]:
        """Rows of Debezium's metrics (none without an observer)."""
        if self.observer is None:
            return []
        m = self.observer.values()
        snap, st = m["snapshot"], m["streaming"]
        rows = []
        if snap["SnapshotRunning"] or snap["SnapshotCompleted"] or snap["SnapshotAborted"]:
            state = ("running" if snap["SnapshotRunning"] else "completed" if snap["SnapshotCompleted"] else "aborted")
            if snap["SnapshotPaused"]:
                state += ", paused"
            scanned = sum(snap["RowsScanned"].values())
            rows.append(("snapshot", f"{state}: {scanned:,} rows scanned, {snap['RemainingTableCount']} of "
                                     f"{snap['TotalTableCount']} tables left, {snap['SnapshotDurationInSeconds']} s"))
        if snap["ChunkId"]:
            rows.append(("incremental", f"chunk {snap['ChunkFrom'] or '[start]'} to {snap['ChunkTo']} of "
                                        f"{snap['TableTo']}"))
        if st["TotalNumberOfEventsSeen"]:
            behind = st["MilliSecondsBehindSource"]
            rows.append(("streamed", f"{st['TotalNumberOfEventsSeen']:,} events "
                                     f"({st['TotalNumberOfCreateEventsSeen']:,} c, {st['TotalNumberOfUpdateEventsSeen']:,} u, "
                                     f"{st['TotalNumberOfDeleteEventsSeen']:,} d), "
                                     f"{st['NumberOfCommittedTransactions']:,} transactions"
                                     + (f", {behind:,} ms behind the source" if behind >= 0 else "")))
        return rows

    def finish(self) -> None:
        self.update()
        self.console.print(f"headwater: done, {self.total_events} events in {self.last_batch + 1} batches")
