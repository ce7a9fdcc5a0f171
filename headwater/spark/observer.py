"""The driver's observer of a `headwater` stream on Spark: Debezium's metrics and the initial
snapshot's notifications, counted from Spark's observed metrics once per committed batch.

`observed_stream(spark, options, directory)` makes the stream (`spark.readStream.format("headwater")`
with the reader option `headwater.observe.dir`; the source's side is `spark.observing`), adds
Spark's observed metrics `headwater` over the facts rows the source's partitions end with, drops
those rows, and registers a `StreamingQueryListener` that hands each batch's progress to a
`SparkObserver`. So every batch's `StreamingQueryProgress.observedMetrics["headwater"]` holds `facts`,
the facts rows' JSON (one per partition: `events`, `ops` per operation, the topics and tables, ...);
`batch_counts` reads from them what the batch adds to Debezium's counters (`TotalNumberOfEventsSeen`,
`TotalNumberOfCreate/Update/DeleteEventsSeen`, and `RowsScanned`: the snapshot's reads).

`SparkObserver` keeps an `observe.observer.Observer` (the engine's: the same metrics,
notifications, metrics file and Prometheus endpoint) in step with the committed batches:

- a batch counts once: the id of the last one counted is kept in the metrics file with the values
  and the observer's state (`spark`), so the counts go on across restarts of the query, and a batch
  Spark runs again after a crash is not counted twice (its progress is reported only after Spark
  committed it, and an id not above the last counted is skipped);
- the batch's offsets (in its progress) tell a snapshot batch from a streaming one, the snapshot's
  last batch, the stream position (`SourceEventPosition`), the incremental snapshot's chunk, and a
  blocking snapshot's batches, end and abandonment (its notifications, `Observer.blocking`: COMPLETED
  or ABORTED once the batch after its last is counted, carried with those before by the batch after
  that);
- the reader's state file tells when the connector opened (the captured tables; STARTED and a
  running snapshot when one is due, whether it reads rows; else SKIPPED, or STARTED and COMPLETED
  when the opening read the tables' schema again: `Observer.opened`), polled every `POLL_S` and before
  each batch;
- the `sink` channel's notifications wait in the file's outbox (`spark.outbox`) until a batch
  carries them (`spark.observing`); the `log` channel logs them when they are made.

Not exact: a `kill -9` in the moment between Spark's commit of a batch and the listener's call loses
that batch's counts; the next start logs which batches were not counted.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

from headwater.config.properties import ConnectorConfig
from headwater.connectors.common.phases import SNAPSHOT_COMPLETED, STREAMING, phase, position
from headwater.observe.facts import BatchFacts
from headwater.observe.metrics import metrics_path, read_file
from headwater.observe.observer import Observer
from headwater.spark.filesink import FACTS, WRITTEN
from headwater.spark.listener import json_listener
from headwater.spark.observing import OBSERVE_OPTION, facts_of, read_reader_state, split

log = logging.getLogger("headwater.spark")

NAME = "headwater"  # the observed metrics' name in StreamingQueryProgress.observedMetrics
POLL_S = 0.1
PER_BATCH_OPS = {"c": "TotalNumberOfCreateEventsSeen", "u": "TotalNumberOfUpdateEventsSeen",
                 "d": "TotalNumberOfDeleteEventsSeen", "r": "RowsScanned"}
PER_BATCH = ("TotalNumberOfEventsSeen", *PER_BATCH_OPS.values())


def _offset(text: str | None) -> dict[str, Any] | None:
    """An offset as a progress reports it (JSON; the first batch's start is none: `None` or `null`)."""
    try:
        value = json.loads(text) if text else None
    except ValueError:
        return None
    value = json.loads(value) if isinstance(value, str) else value
    return value if isinstance(value, dict) else None


def _offset_of(checkpoint: Path, batch: int) -> dict[str, Any] | None:
    """The source offset Spark's offset log holds for `batch` (None when it has none)."""
    try:
        lines = (checkpoint / "offsets" / str(batch)).read_text().splitlines()
    except FileNotFoundError:
        return None
    return _offset(lines[2]) if len(lines) > 2 and lines[2] != "-" else None


def _last_committed(checkpoint: Path) -> int | None:
    commits = checkpoint / "commits"
    ids = [int(p.name) for p in commits.iterdir() if p.name.isdigit()] if commits.is_dir() else []
    return max(ids) if ids else None


class SparkObserver:
    """Metrics and notifications of one `headwater` stream, fed by its progress (see the module's docstring)."""

    def __init__(self, config: ConnectorConfig, directory: Path):
        self.directory = directory
        self.observer = Observer(config, metrics_path(directory))
        self.observer.file_extra = self._state
        self.lock = threading.RLock()
        self.batch = -1  # the last batch counted
        self.end: dict[str, Any] | None = None  # its end offset (without the notifications it carried)
        self.outbox: list[dict[str, Any]] = []  # sink notifications no batch carried yet
        self.reader_opened: int | None = None  # the reader's open acted on (its opened_ms)
        self.captured: list[str] = []
        self.scans = True  # the reader's snapshots read rows (not the schema only)
        self.run_id: str | None = None  # the run of the query whose progress counts (None: any)
        self._restore()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="headwater-observer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ the state kept in the metrics file
    def _state(self) -> dict[str, Any]:
        return {"spark": {"batch": self.batch, "end": self.end, "outbox": self.outbox,
                          "reader_opened": self.reader_opened, "captured": self.captured, "scans": self.scans,
                          "state": self.observer.state()}}

    def _restore(self) -> None:
        doc = read_file(metrics_path(self.directory))
        committed = _last_committed(self.directory)
        spark = (doc or {}).get("spark")
        if doc is None or not spark or committed is None:
            return  # nothing kept, or a checkpoint with nothing committed (a new one): start afresh
        # (a checkpoint whose commits end before the last batch counted: Spark runs that batch again, and
        # it is not counted again)
        self.observer.restore(doc, spark.get("state") or {})
        self.batch, self.end = int(spark["batch"]), spark.get("end")
        self.outbox, self.captured = list(spark.get("outbox") or []), list(spark.get("captured") or [])
        self.reader_opened, self.scans = spark.get("reader_opened"), bool(spark.get("scans", True))
        if committed > self.batch:  # committed while no observer counted them (a kill -9, a crash)
            log.warning("the metrics of batches %d to %d were not counted: the pipeline stopped before Spark "
                        "reported them", self.batch + 1, committed)
            for n in range(self.batch + 1, committed + 1):
                offset = _offset_of(self.directory, n)
                if offset is not None:
                    self._carried(offset)
            self.batch, self.end = committed, split(_offset_of(self.directory, committed) or {})[0]

    def _carried(self, end: dict[str, Any]) -> dict[str, Any]:
        """`end` without the notifications it carried, which leave the outbox."""
        inner, notes = split(end)
        if notes:
            ids = {n["id"] for n in notes}
            self.outbox = [n for n in self.outbox if n["id"] not in ids]
        return inner

    def _take_notes(self) -> None:
        self.outbox += [n.to_dict() for n in self.observer.notifier.take_notifications()]

    # ------------------------------------------------------------------ what happens
    def _poll(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self.reader()
            except Exception:  # keep polling; a broken file is written again
                log.debug("reading the reader's state failed", exc_info=True)

    def reader(self) -> None:
        """Act on the reader's opening its connector, once per opening."""
        with self.lock:
            if self._stop.is_set():  # closed: the metrics file's last write (`Connected` false) stays the last
                return
            st = read_reader_state(self.directory)
            if st is None or st.get("opened_ms") == self.reader_opened:
                return
            self.reader_opened = st["opened_ms"]
            self.captured = list(st.get("captured") or [])
            due, self.scans = bool(st.get("snapshot_due")), bool(st.get("snapshot_scans", True))
            obs = self.observer
            if due and obs.snapshot_running:  # a snapshot the last run did not finish starts again
                obs.snapshot_aborted()
            obs.opened(self.captured, due, bool(st.get("schema_snapshot")))
            if due:
                obs.snapshot_started(self.captured, scans=self.scans)
            self._take_notes()
            obs.write()

    def progress(self, p: Any) -> None:
        """Count a batch from its `StreamingQueryProgress` (once; a batch with no offsets is not one)."""
        if self._stop.is_set() or (self.run_id is not None and str(p.runId) != self.run_id):
            return
        source = p.sources[0] if p.sources else None
        if source is None or not source.endOffset:
            return
        with self.lock:
            if self._stop.is_set() or p.batchId <= self.batch:  # (closed while this waited for the lock)
                return
            self.reader()  # the open comes before the first batch
            end = self._carried(_offset(source.endOffset) or {})
            start = split(_offset(source.startOffset) or {})[0]
            row = p.observedMetrics.get(NAME)
            facts = facts_of(row["facts"]) if row is not None and row["facts"] else BatchFacts()
            obs = self.observer
            snapshot = phase(end) != STREAMING
            if end == start:  # the batch only wrote notifications
                pass
            elif snapshot:
                if not obs.snapshot_running:
                    obs.snapshot_started(self.captured, scans=self.scans)
                obs.seen_facts(facts, snapshot=True)
                if phase(end) == SNAPSHOT_COMPLETED:
                    obs.snapshot_finished()
            else:  # (a blocking snapshot's batch counts as a snapshot's)
                obs.seen_facts(facts, snapshot=obs.blocking(end))
                obs.incremental(end)
            self._take_notes()
            self.batch, self.end = int(p.batchId), end
            obs.committed(None if snapshot else position(end))

    def values(self) -> dict[str, dict[str, Any]]:
        with self.lock:
            return self.observer.metrics.values()

    def close(self) -> None:
        """Stop polling, write the metrics file a last time (`Connected` false; a snapshot still running is
        aborted), close the Prometheus endpoint. Once; later calls do nothing."""
        with self.lock:
            if self._stop.is_set():
                return
            self._stop.set()
        if self._thread is not threading.current_thread():
            self._thread.join(5)
        with self.lock:
            if self.observer.snapshot_running:  # stopped between two batches of a snapshot
                self.observer.snapshot_aborted()
                self._take_notes()  # its ABORTED waits for the next run's first batch
            self.observer.close()


def observed(df: Any, layout: str) -> Any:
    """`df` (a `headwater` stream whose reader has `headwater.observe.dir`) with Spark's observed
    metrics `NAME` over its facts rows (`facts`: their JSON, a list), and without them (but in the files
    layout, where they stay: their `written` is null, as on every row but a task's commit; there the
    null row of each event is dropped before the metric, which then sees the few rows that are not null:
    ~7 % more rows a second in a 3M-row MariaDB snapshot on local[2], and the source's `numInputRows`
    still counts every row). One aggregate
    only: Spark evaluates an observed metric's aggregates on every row (the five sums of the per-batch
    counts cost ~0.5 µs of JVM CPU a row in a measurement, the list alone no more than the noise), so the
    counts are read from the facts (`batch_counts`)."""
    from pyspark.sql import functions as F

    if layout == "files":  # the facts rows' own column, null on the others; `FileBatches` takes no facts row
        return (df.where(F.col(WRITTEN).isNotNull() | F.col(FACTS).isNotNull())
                .observe(NAME, F.collect_list(F.col(FACTS)).alias("facts")))
    text = F.col("value") if layout == "json" else F.col("block").cast("string")
    facts = F.when(F.col("topic").isNull(), text)
    return df.observe(NAME, F.collect_list(facts).alias("facts")).where(F.col("topic").isNotNull())


def batch_counts(progress: Any) -> dict[str, int] | None:
    """What a batch added to Debezium's counters (`TotalNumberOfEventsSeen`, `TotalNumberOf...EventsSeen`
    per operation, `RowsScanned`: the snapshot's reads), from its progress's observed facts; None for a
    batch with no observed metrics."""
    row = (progress.get("observedMetrics") or {}).get(NAME)
    if row is None:
        return None
    out = dict.fromkeys(PER_BATCH, 0)
    for text in row["facts"] or []:
        f = json.loads(text)
        out["TotalNumberOfEventsSeen"] += int(f.get("events", 0))
        for op, name in PER_BATCH_OPS.items():
            out[name] += int(f["ops"].get(op, 0))
    return out


class _Listener:
    """Hands each progress of the stream's query to its observer (a StreamingQueryListener)."""

    def __init__(self, observer: SparkObserver):
        self.observer = observer

    def onQueryStarted(self, event: Any) -> None:
        pass

    def onQueryProgress(self, event: Any) -> None:
        try:
            self.observer.progress(event.progress)
        except Exception:
            log.exception("counting the metrics of batch %s failed", getattr(event.progress, "batchId", "?"))

    def onQueryIdle(self, event: Any) -> None:
        pass

    def onQueryTerminated(self, event: Any) -> None:
        # the query's last progress came before this: a query started without `close` closes it
        if self.observer.run_id is not None and str(event.runId) == self.observer.run_id:
            self.observer.close()


def listener_for(observer: SparkObserver) -> Any:
    """A `StreamingQueryListener` feeding `observer` (its progress read as JSON: `spark.listener`)."""
    return json_listener(_Listener)(observer)


class ObservedStream:
    """A `headwater` stream with its observer and listener (`observed_stream`)."""

    def __init__(self, spark: Any, df: Any, observer: SparkObserver, listener: Any):
        self.spark, self.df, self.observer, self.listener = spark, df, observer, listener

    def attach(self, query: Any) -> None:
        """Count only the progress of this run of `query` (several headwater streams in one session, or a
        query started again), and close the observer when it terminates (`close` still removes the listener)."""
        self.observer.run_id = str(query.runId)

    def wait_counted(self, timeout: float = 10.0) -> bool:
        """Wait until the last batch Spark committed is counted (the listener is called after the commit)."""
        batch = _last_committed(self.observer.directory)
        deadline = time.monotonic() + timeout
        while batch is not None and self.observer.batch < batch and time.monotonic() < deadline:
            time.sleep(0.05)
        return batch is None or self.observer.batch >= batch

    def close(self) -> None:
        """Stop listening; write the metrics file a last time; close the Prometheus endpoint."""
        try:
            self.spark.streams.removeListener(self.listener)
        finally:
            self.observer.close()


def observed_stream(spark: Any, options: dict[str, str], directory: str | Path) -> ObservedStream:
    """The `headwater` stream of reader `options`, observed (see the module's docstring); `directory`
    (the query's checkpoint) keeps the metrics file. `.df` is the stream; `close()` it after the query."""
    from headwater.spark.source import connector_config, output_layout

    where = Path(directory).expanduser()
    opts = {**options, OBSERVE_OPTION: str(where)}
    layout = output_layout({k.lower(): v for k, v in opts.items()})
    if layout == "table":
        raise ValueError("headwater.output=table (table_changes) is not observed: its rows are one table's images")
    config = connector_config({k.lower(): v for k, v in opts.items()})  # as the reader sees them
    df = spark.readStream.format("headwater").options(**opts).load()
    observer = SparkObserver(config, where)
    listener = listener_for(observer)
    spark.streams.addListener(listener)
    return ObservedStream(spark, observed(df, layout), observer, listener)
