"""The `headwater` source's side of the driver's observer (`spark.observer`): facts rows, the
reader's state file, and sink notifications carried in offsets.

All of it is on when the reader option `headwater.observe.dir` names a directory (the checkpoint;
`spark.observer.observed_stream` sets it):

- each partition's `read()` ends with one *facts row*: `topic` null and the facts
  (`observe.facts`) of the partition's change events as JSON, in `value` (the json layout) or
  `block` (the blocks layout); in the files layout, whose tasks write the sink's files themselves,
  `written` null and the JSON in `facts` (`spark.filesink`). Counting them there costs a few column-wise kernels per Arrow batch
  the connector yields; the observer sums them in Spark's observed metrics and drops the row before
  the sink.
- when it opens its connector, the reader writes `headwater.reader.json` there: the captured tables
  and whether a snapshot comes first, which the observer turns into the snapshot's metrics and its
  STARTED or SKIPPED notification; the reader waits (at most `OUTBOX_WAIT_S`, normally a fraction
  of a second) until the observer has, so that notification comes with the first batch.
- the observer's `sink`-channel notifications (the initial snapshot's) wait in the metrics file's
  outbox; the reader puts those no batch has carried yet into the next batch's offset (`NOTES_KEY`),
  and that batch's first partition writes them, so a batch Spark replays from its offset log writes
  the same ones. Right after the snapshot's last batch the reader waits (at most `OUTBOX_WAIT_S`)
  until the observer has counted that batch, so that its TABLE_SCAN_COMPLETED and COMPLETED come in
  the very next batch (also at the end of a `--once` run); so it does after the batch that follows a
  blocking snapshot's last (`spark.source`: that batch's count makes its COMPLETED or ABORTED).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from headwater.connectors.common.notifications import Notification
from headwater.events.arrays import binary_array, string_array
from headwater.events.batch import ARROW_SCHEMA, Events
from headwater.events.typed import TypedEvents
from headwater.observe.facts import BatchFacts, batch_facts, merge
from headwater.observe.metrics import METRICS_FILE
from headwater.observe.notifications import records
from headwater.spark.filesink import FACTS, WRITTEN

OBSERVE_OPTION = "headwater.observe.dir"
NOTES_KEY = "headwater_notifications"  # the observer's notifications a batch carries (its offset's field)
READER_FILE = "headwater.reader.json"
OUTBOX_WAIT_S = 30.0


# ---------------------------------------------------------------------- facts rows (executors)


class PartitionFacts:
    """The facts of the batches one partition's connector units yield, in order."""

    def __init__(self) -> None:
        self.parts: list[BatchFacts] = []

    def count(self, batches: Iterable[Events]) -> Iterator[Events]:
        """`batches`, unchanged, noting the facts of each."""
        for batch in batches:
            self.parts.append(batch_facts(batch))
            yield batch

    def abandoned(self, table: str) -> None:
        """The partition's unit met a query error reading `table` for a blocking snapshot (`WorkUnit.abandoned`)."""
        self.parts.append(BatchFacts(abandoned=[table]))

    def row(self, layout: str, index: int) -> pa.RecordBatch | None:
        """The facts row of partition number `index` (None when it delivered no change event and abandoned
        nothing)."""
        facts = merge(self.parts)
        if not facts.events and not facts.abandoned:
            return None
        text = json.dumps({**facts.to_json(), "events": facts.events, "partition": index}, separators=(",", ":"),
                          default=str)
        if layout == "blocks":
            return pa.RecordBatch.from_arrays([pa.nulls(1, pa.string()), binary_array([text.encode()])],
                                              names=["topic", "block"])
        if layout == "files":
            return pa.RecordBatch.from_arrays([pa.nulls(1, pa.string()), string_array([text])], names=[WRITTEN, FACTS])
        columns = [string_array([text]) if f.name == "value" else pa.nulls(1, f.type) for f in ARROW_SCHEMA]
        return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)


def facts_of(texts: Iterable[str | bytes]) -> BatchFacts:
    """The facts of a batch from its facts rows' JSON, in partition order."""
    parts = [json.loads(t) for t in texts]
    parts.sort(key=lambda d: d.get("partition", 0))
    return merge([BatchFacts.from_json(d) for d in parts])


# ---------------------------------------------------------------------- notifications in offsets


class NotesPartition(InputPartition):
    """The partition writing the observer's notifications a batch carries."""

    def __init__(self, index: int, topic: str, notes: list[dict[str, Any]]):
        super().__init__(index)
        self.topic, self.notes = topic, notes

    def read(self) -> TypedEvents:
        return records(self.topic, [Notification(**n) for n in self.notes])


def split(offset: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The connector's offset and the notifications it carries."""
    if NOTES_KEY not in offset:
        return offset, []
    inner = {k: v for k, v in offset.items() if k != NOTES_KEY}
    return inner, list(offset[NOTES_KEY])


class Carrier:
    """Puts the observer's waiting notifications into batches' offsets, each into one batch (the driver's
    reader)."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.carried: set[str] = set()  # ids this reader put into a batch

    def _spark(self) -> dict[str, Any]:
        """The observer's state in its metrics file (empty when there is none yet)."""
        try:
            doc = json.loads((self.directory / METRICS_FILE).read_text())
        except (FileNotFoundError, ValueError):
            return {}
        return doc.get("spark") or {}

    def outbox(self) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The end offset of the last batch the observer counted, and its waiting notifications."""
        spark = self._spark()
        return spark.get("end"), list(spark.get("outbox") or [])

    def acknowledged(self, opened_ms: int) -> bool:
        """Wait (at most `OUTBOX_WAIT_S`) until the observer has acted on the reader's opening at
        `opened_ms`, so that the notification it makes then (STARTED, SKIPPED) comes with the first batch."""
        deadline = time.monotonic() + OUTBOX_WAIT_S
        while self._spark().get("reader_opened") != opened_ms:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
        return True

    def attach(self, start: dict[str, Any], end: dict[str, Any], wait: bool) -> dict[str, Any]:
        """`end` (the connector's end after `start`) with the notifications no batch carried yet; `start`
        itself when there are none and the connector has nothing new. `wait`: the batch that ended at
        `start` was the snapshot's last; wait until the observer has counted it."""
        inner_start, carried = split(start)
        counted, notes = self.outbox()
        deadline = time.monotonic() + OUTBOX_WAIT_S
        while wait and counted != inner_start and time.monotonic() < deadline:
            time.sleep(0.05)
            counted, notes = self.outbox()
        taken = self.carried | {n["id"] for n in carried}
        new = [n for n in notes if n["id"] not in taken]
        if not new:
            return start if end == inner_start else end
        self.carried.update(n["id"] for n in new)
        return {**end, NOTES_KEY: new}


# ---------------------------------------------------------------------- the reader's state


def write_reader_state(directory: Path, captured: list[str], snapshot_due: bool, snapshot_scans: bool = True,
                       schema_snapshot: bool = False) -> int:
    """Tell the observer the reader opened its connector (atomically replaced); the opening's time (ms).
    `snapshot_scans`: its snapshots read rows (not the schema only); `schema_snapshot`: the opening read the
    tables' schema again (`Observer.opened`)."""
    directory.mkdir(parents=True, exist_ok=True)
    opened = time.time_ns() // 1_000_000
    doc = {"opened_ms": opened, "pid": os.getpid(), "captured": captured, "snapshot_due": snapshot_due,
           "snapshot_scans": snapshot_scans, "schema_snapshot": schema_snapshot}
    path = directory / READER_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc))
    os.replace(tmp, path)
    return opened


def read_reader_state(directory: Path) -> dict[str, Any] | None:
    try:
        doc: dict[str, Any] = json.loads((directory / READER_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return None
    return doc
