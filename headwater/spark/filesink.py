"""headwater's file sinks: their exactly-once commit, and where they run.

**The commit.** Each task of a micro-batch writes its partition's events to temporary files under
`<path>/_tmp/` and reports them in a `FileCommit`; the driver's commit of the batch then removes
whatever an earlier attempt of the same batch left and moves the new files to their final names,
`[<topic dir>/]batch-<id>-part-<n><ext>` (so the names sort in event order; a task's several files
for one directory get `-<k>` after the part number, in the order the task listed them), and clears
`_tmp`. A batch replayed after a crash therefore replaces its own earlier output: with a source that
yields the same events for a replayed batch, each change is written once; and a reader that takes
only the files with the final extension outside `_tmp` never sees an aborted attempt's files.

**Where the files are written.** `FileStreamWriter` writes one task's events: typed blocks
(`write_blocks`) or the JSON rows of the source's `json` layout (`write_rows`). It runs either

- in the source's own tasks (`headwater run`: the source's `files` layout, `headwater.output=files`
  with the sink in `headwater.sink`): the Python worker that reads a partition's events writes them
  (`written_rows`), so no event crosses Spark's JVM or meets a second Python worker. Spark gets one
  row per event (`WRITTEN_SCHEMA_DDL`, so its progress still counts events), null but on the task's
  last event, whose `written` holds the task's `FileCommit` as JSON; the query's `foreachBatch`
  function (`FileBatches`) collects those few rows on the driver and commits the batch. An observed
  stream's task then adds its facts row (`written` null, `facts` its JSON: `headwater.spark.observing`),
  which Spark's observed metrics collect; or
- as a Spark sink (`FileSink`: `df.writeStream.format("headwater-jsonl")`, ...) after any query on
  the source's `json` or `blocks` rows: Spark hands each task's rows to `write()` and calls
  `commit()` on the driver.

`headwater-jsonl` is in `headwater.spark.sinks`, `headwater-parquet` in `headwater.spark.parquet`,
`headwater-avro` in `headwater.spark.avro`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

from headwater.events.arrays import string_array
from headwater.events.batch import Events, PieceEvents
from headwater.events.typed import TypedBlock, TypedEvents, from_ipc, order_moved
from headwater.spark.workergc import settle

TMP = "_tmp"
SINK_OPTION = "headwater.sink"  # the source's option naming the sink its `files` layout writes (JSON)
WRITTEN = "written"
FACTS = "facts"  # the observer's facts row of the task (`headwater.spark.observing`), null on the other rows
WRITTEN_SCHEMA_DDL = f"{WRITTEN} STRING, {FACTS} STRING"
RECEIPTS_PER_BATCH = 65536  # rows of nulls per Arrow batch handed to Spark


@dataclass
class FileCommit(WriterCommitMessage):
    """What a task wrote: its partition index and temporary files (and rows, for progress)."""

    partition: int
    files: list[tuple[str, str]]  # (temporary path, subdirectory of the final file: "" or a topic)
    rows: int

    def to_json(self) -> str:
        return json.dumps({"partition": self.partition, "files": self.files, "rows": self.rows})

    @classmethod
    def from_json(cls, text: str) -> FileCommit:
        d = json.loads(text)
        return cls(int(d["partition"]), [(str(t), str(s)) for t, s in d["files"]], int(d["rows"]))


def partition_id() -> int:
    """The index of the partition the running task writes (0 outside a task)."""
    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


def batch_prefix(batch_id: int) -> str:
    """The start of the final names of batch `batch_id`'s files."""
    return f"batch-{batch_id:012d}-"


def commit_files(root: Path, batch_id: int, messages: list, ext: str, replace: bool = True) -> int:
    """Replace batch `batch_id`'s output under `root`: delete what any earlier attempt of the batch
    left (in `root` and its topic directories; `replace=False` when no earlier attempt can have
    committed any), move the new temporary files to their final names
    `[<topic dir>/]batch-<id>-part-<n><ext>`, and clear the temporary directory."""
    prefix = batch_prefix(batch_id)
    for dirpath, dirnames, files in os.walk(root) if replace else ():
        dirnames[:] = [d for d in dirnames if d != TMP]
        for f in files:
            if f.startswith(prefix) and f.endswith(ext):
                os.unlink(os.path.join(dirpath, f))
    rows = 0
    for msg in sorted((m for m in messages if m is not None), key=lambda m: m.partition):
        rows += msg.rows
        per_dir = Counter(subdir for _, subdir in msg.files)
        taken: Counter[str] = Counter()
        for tmp, subdir in msg.files:
            target = root / subdir if subdir else root
            target.mkdir(parents=True, exist_ok=True)
            name = f"{prefix}part-{msg.partition:05d}"
            if per_dir[subdir] > 1:
                name += f"-{taken[subdir]:03d}"
                taken[subdir] += 1
            os.replace(tmp, target / f"{name}{ext}")
    shutil.rmtree(root / TMP, ignore_errors=True)
    return rows


def partition_blocks(batches: Iterable[Events]) -> Iterator[TypedBlock]:
    """The typed blocks of a partition's batches, `_order` counted across the batches."""
    seen = 0
    for batch in batches:
        assert isinstance(batch, TypedEvents)
        for block in batch:
            yield order_moved(block, seen)
        seen += len(batch)


class FileStreamWriter(DataSourceStreamArrowWriter):
    """A writer whose tasks leave temporary files and whose batch commit moves them into place."""

    extension = ""
    sink = ""  # the sink's name, for errors

    def __init__(self, path: str, options: dict[str, str] | None = None):
        self.root = Path(path)
        self.options = options or {}  # the sink's options

    @property
    def takes_blocks(self) -> bool:
        """Whether this sink writes typed blocks (else the JSON rows of the source's `json` layout)."""
        return True

    @property
    def takes_pieces(self) -> bool:
        """Whether this sink's `write_rows` also takes `PieceEvents` as they are (JSON events whose key and
        value are not joined yet), else their JSON rows."""
        return False

    def write_blocks(self, blocks: Iterator[TypedBlock]) -> FileCommit:
        """Write a task's typed blocks (`_order` counted across the task) to temporary files."""
        raise NotImplementedError

    def write_rows(self, batches: Iterator[pa.RecordBatch]) -> FileCommit:
        """Write a task's JSON rows (`topic`, `key`, `value`, `headers`) to temporary files."""
        raise ValueError(f"the {self.sink} sink needs the source's typed blocks: "
                         "set the source's option headwater.output=blocks")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FileCommit:
        """Spark's call for a task of the sink: rows of the source's `blocks` or `json` layout."""
        first = next(iterator, None)
        if first is None:
            return FileCommit(partition_id(), [], 0)
        rest = _chain(first, iterator)
        if "block" in first.schema.names:
            commit = self.write_blocks(from_ipc(data) for b in rest for data in b.column("block").to_pylist())
        else:
            commit = self.write_rows(rest)
        settle()  # (Spark's worker collects garbage after each task: see headwater.spark.workergc)
        return commit

    def commit(self, messages, batchId: int) -> None:
        commit_files(self.root, batchId, messages, self.extension)

    def abort(self, messages, batchId: int) -> None:
        for m in messages:
            for tmp, _ in (m.files if m else []):
                Path(tmp).unlink(missing_ok=True)


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


class FileSink(DataSource):
    """A file sink: `df.writeStream.format(<name>).option("path", ...)`."""

    writer_class: type[FileStreamWriter]  # set by each sink (`writer` is DataSource's batch writer)

    def streamWriter(self, schema, overwrite: bool) -> FileStreamWriter:
        path = self.options.get("path")
        if not path:
            raise ValueError(f"the {self.name()} sink needs option path")
        return self.writer_class(path, dict(self.options))


def written_rows(writer: FileStreamWriter,
                 events: Iterator[pa.RecordBatch | PieceEvents] | Iterator[TypedBlock]) -> Iterator[pa.RecordBatch]:
    """A task of the source's `files` layout: `writer` writes the events (the partition's JSON rows, or
    `PieceEvents` as they are where `writer.takes_pieces`, or its typed blocks, as `writer.takes_blocks` says), then Spark gets a row per event, null but the
    last, which holds the task's `FileCommit`."""
    count = 0

    def counted(items: Iterator[Any]) -> Iterator[Any]:
        nonlocal count
        for item in items:
            count += len(item)
            yield item

    commit = (writer.write_blocks(counted(events)) if writer.takes_blocks  # type: ignore[arg-type]
              else writer.write_rows(counted(events)))  # type: ignore[arg-type]
    if count == 0 and not commit.files:
        return
    nulls = max(count - 1, 0)
    for start in range(0, nulls, RECEIPTS_PER_BATCH):
        n = min(RECEIPTS_PER_BATCH, nulls - start)
        yield pa.RecordBatch.from_arrays([pa.nulls(n, pa.string()), pa.nulls(n, pa.string())], names=[WRITTEN, FACTS])
    # (not pa.array: pyarrow's first pa.array of Python values imports pandas, ~45 MB and ~1 s of CPU in
    # each task worker: see headwater.events.arrays)
    yield pa.RecordBatch.from_arrays([string_array([commit.to_json()]), pa.nulls(1, pa.string())],
                                     names=[WRITTEN, FACTS])


class FileBatches:
    """The `foreachBatch` function of a query whose source writes a file sink (the `files` layout):
    the `FileCommit`s of the batch's tasks, collected on the driver, committed with `commit_files`.
    Only the first batch a process commits can be a replay (Spark runs the batch a crash
    interrupted again when it starts); the later ones have ids it has not seen, so their commit does
    not look through the sink for an earlier attempt's files (a listing of every file, each batch)."""

    def __init__(self, path: str, extension: str):
        self.root = Path(path)
        self.extension = extension
        self.last: int | None = None  # the last batch this process committed

    def __call__(self, df: Any, batch_id: int) -> None:
        from pyspark.sql.functions import col

        written = df.where(col(WRITTEN).isNotNull()).collect()
        replace = self.last is None or batch_id <= self.last
        commit_files(self.root, batch_id, [FileCommit.from_json(r[0]) for r in written], self.extension, replace)
        self.last = batch_id
