"""The file sinks headwater registers with Spark, and the first of them: `headwater-jsonl`.

`headwater-jsonl` writes Debezium JSON lines (`{"topic", "key", "value"[, "headers"]}`), one file
per partition per batch, with the exactly-once commit of `headwater.spark.filesink`; the final
files end in `.jsonl`. `headwater-parquet` is in `headwater.spark.parquet`. `register_sinks` makes
both known to a Spark session.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.arrays import lit, string_array
from headwater.spark.filesink import TMP, FileCommit, FileSink, FileStreamWriter, partition_id
from headwater.spark.parquet import ParquetSink

JSONL_COLUMNS = ("topic", "key", "value", "headers")  # all the jsonl sink reads of an event


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


class JsonlStreamWriter(FileStreamWriter):
    """Writes Debezium JSON lines, one file per partition per batch."""

    extension = ".jsonl"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FileCommit:
        pid = partition_id()
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

    writer_class = JsonlStreamWriter

    @classmethod
    def name(cls) -> str:
        return "headwater-jsonl"


def register_sinks(spark) -> None:
    """Make the `headwater-jsonl` and `headwater-parquet` sinks known to the session `spark`."""
    spark.dataSource.register(JsonlSink)
    spark.dataSource.register(ParquetSink)
