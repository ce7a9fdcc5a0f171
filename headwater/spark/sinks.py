"""Exactly-once file sinks for change events: `headwater-jsonl` and `headwater-parquet`.

Both are Spark Python streaming writers. Each task writes its partition to a temporary file under
`<path>/_tmp/`; the driver's `commit(batchId)` then removes whatever an earlier attempt of the
same batch left and moves the new files to their final names, `batch-<id>-part-<n>` (so the names
sort in event order). A batch replayed after a crash therefore replaces its own earlier output:
with a source that yields the same events for a replayed batch, each change is written once.
Readers should take only files with the final extension (`.jsonl`, `.parquet`).
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

from headwater.events.arrays import lit, string_array

TMP = "_tmp"
JSONL_COLUMNS = ("topic", "key", "value", "headers")  # all the jsonl sink reads of an event


@dataclass
class FileCommit(WriterCommitMessage):
    """What a task wrote: its partition index and temporary files (and rows, for progress)."""

    partition: int
    files: list[tuple[str, str]]  # (temporary path, subdirectory of the final file: "" or a topic)
    rows: int


def _partition_id() -> int:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


def batch_prefix(batch_id: int) -> str:
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
        for tmp, subdir in msg.files:
            target = root / subdir if subdir else root
            target.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, target / f"{prefix}part-{msg.partition:05d}{ext}")
    shutil.rmtree(root / TMP, ignore_errors=True)
    return rows


def jsonl_lines(batch: pa.RecordBatch) -> pa.Array:
    """One line per event, built column-wise in Arrow: {"topic", "key", "value"[, "headers"]} with key
    and value embedded as JSON (they already are JSON text)."""
    topic = pc.replace_substring(pc.replace_substring(batch.column("topic"), "\\", "\\\\"), '"', '\\"')
    key = pc.coalesce(batch.column("key"), lit("null"))
    value = pc.coalesce(batch.column("value"), lit("null"))
    headers = batch.column("headers")
    if headers.null_count == len(headers):
        extra = pa.nulls(len(headers), pa.string()).fill_null(lit(""))
    else:
        extra = string_array([_headers_json(h) for h in headers.to_pylist()])
    parts = ['{"topic":"', topic, '","key":', key, ',"value":', value, extra, "}\n", ""]
    return pc.binary_join_element_wise(*(lit(p) for p in parts))


def _headers_json(entries) -> str:
    if not entries:
        return ""
    parts = [orjson.dumps(e["key"]).decode() + ":" + (e["value"] if e["value"] is not None else "null")
             for e in entries]
    return ',"headers":{' + ",".join(parts) + "}"


def write_lines(f, lines: pa.Array) -> None:
    """Write an Arrow string array's characters (each element a line) without making Python strings."""
    lines = pc.cast(lines, pa.large_string()) if lines.type == pa.string() else lines
    if lines.offset == 0 and lines.null_count == 0:
        offsets = lines.buffers()[1]
        data = lines.buffers()[2]
        end = int.from_bytes(memoryview(offsets)[-8:], "little")
        f.write(memoryview(data)[:end])
    else:
        for v in lines.to_pylist():
            f.write(v.encode())


class FileStreamWriter(DataSourceStreamArrowWriter):
    """A writer whose tasks leave temporary files and whose batch commit moves them into place."""

    extension = ""

    def __init__(self, path: str):
        self.root = Path(path)

    def commit(self, messages, batchId: int) -> None:
        commit_files(self.root, batchId, messages, self.extension)

    def abort(self, messages, batchId: int) -> None:
        for m in messages:
            for tmp, _ in (m.files if m else []):
                Path(tmp).unlink(missing_ok=True)


class FileSink(DataSource):
    """A file sink: `df.writeStream.format(<name>).option("path", ...)`."""

    writer: type[FileStreamWriter] = FileStreamWriter

    def streamWriter(self, schema, overwrite: bool) -> FileStreamWriter:
        path = self.options.get("path")
        if not path:
            raise ValueError(f"the {self.name()} sink needs option path")
        return self.writer(path)


class JsonlStreamWriter(FileStreamWriter):
    """Writes Debezium JSON lines, one file per partition per batch."""

    extension = ".jsonl"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FileCommit:
        pid = _partition_id()
        tmpdir = self.root / TMP
        tmpdir.mkdir(parents=True, exist_ok=True)
        tmp = tmpdir / f"{uuid.uuid4().hex}-{pid}.tmp"
        rows = 0
        with open(tmp, "wb", buffering=1 << 20) as f:
            for batch in iterator:
                rows += batch.num_rows
                write_lines(f, jsonl_lines(batch))
            f.flush()
            os.fsync(f.fileno())
        if rows == 0:
            tmp.unlink()
            return FileCommit(pid, [], 0)
        return FileCommit(pid, [(str(tmp), "")], rows)


class JsonlSink(FileSink):
    """`df.writeStream.format("headwater-jsonl").option("path", ...)`."""

    writer = JsonlStreamWriter

    @classmethod
    def name(cls) -> str:
        return "headwater-jsonl"


def register_sinks(spark) -> None:
    from headwater.spark.parquet import ParquetSink

    spark.dataSource.register(JsonlSink)
    spark.dataSource.register(ParquetSink)
