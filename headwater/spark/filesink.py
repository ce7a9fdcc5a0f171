"""The exactly-once commit of Spark file sinks: temporary files per task, moved into place per batch.

Each task of a streaming batch writes its partition to temporary files under `<path>/_tmp/` and
reports them in a `FileCommit`; the driver's `commit(batchId)` then removes whatever an earlier
attempt of the same batch left and moves the new files to their final names,
`[<topic dir>/]batch-<id>-part-<n><ext>` (so the names sort in event order; a task's several files
for one directory get `-<k>` after the part number, in the order the task listed them). A batch replayed after
a crash therefore replaces its own earlier output: with a source that yields the same events for a
replayed batch, each change is written once. Readers should take only files with the final
extension. `FileSink` and `FileStreamWriter` are the base of the `headwater-jsonl` and
`headwater-parquet` sinks.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pyspark import TaskContext
from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

TMP = "_tmp"


@dataclass
class FileCommit(WriterCommitMessage):
    """What a task wrote: its partition index and temporary files (and rows, for progress)."""

    partition: int
    files: list[tuple[str, str]]  # (temporary path, subdirectory of the final file: "" or a topic)
    rows: int


def partition_id() -> int:
    """The index of the partition the running task writes (0 outside a task)."""
    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


def batch_prefix(batch_id: int) -> str:
    """The start of the final names of batch `batch_id`'s files."""
    return f"batch-{batch_id:012d}-"


def commit_files(root: Path, batch_id: int, messages: list, ext: str) -> int:
    """Replace batch `batch_id`'s output under `root`: delete what any earlier attempt of the batch
    left (in `root` and its topic directories), move the new temporary files to their final names
    `[<topic dir>/]batch-<id>-part-<n><ext>`, and clear the temporary directory."""
    prefix = batch_prefix(batch_id)
    for dirpath, dirnames, files in os.walk(root):
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


class FileStreamWriter(DataSourceStreamArrowWriter):
    """A writer whose tasks leave temporary files and whose batch commit moves them into place."""

    extension = ""

    def __init__(self, path: str, options: dict[str, str] | None = None):
        self.root = Path(path)
        self.options = options or {}  # the sink's options

    def commit(self, messages, batchId: int) -> None:
        commit_files(self.root, batchId, messages, self.extension)

    def abort(self, messages, batchId: int) -> None:
        for m in messages:
            for tmp, _ in (m.files if m else []):
                Path(tmp).unlink(missing_ok=True)


class FileSink(DataSource):
    """A file sink: `df.writeStream.format(<name>).option("path", ...)`."""

    writer_class: type[FileStreamWriter]  # set by each sink (`writer` is DataSource's batch writer)

    def streamWriter(self, schema, overwrite: bool) -> FileStreamWriter:
        path = self.options.get("path")
        if not path:
            raise ValueError(f"the {self.name()} sink needs option path")
        return self.writer_class(path, dict(self.options))
