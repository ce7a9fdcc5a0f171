"""The file sinks headwater registers with Spark, and the first of them: `headwater-jsonl`.

`headwater-jsonl` writes Debezium JSON lines (`{"topic", "key", "value"[, "headers"]}`), one file
per partition per batch, with the exactly-once commit of `headwater.spark.filesink`; the final
files end in `.jsonl`. From the source's JSON rows it joins the JSON text column-wise; with the
option `headwater.converters` (key and value converters other than the source's JSON) it takes the
source's typed blocks and writes them with those converters (`headwater.spark.converted`).
`headwater-parquet` is in `headwater.spark.parquet`, `headwater-avro` in `headwater.spark.avro`.
`register_sinks` makes them known to a Spark session.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.arrays import lit
from headwater.events.headers import headers_json_members
from headwater.events.typed import TypedBlock, from_ipc
from headwater.spark.avro import AvroSink
from headwater.spark.filesink import TMP, FileCommit, FileSink, FileStreamWriter, partition_id
from headwater.spark.parquet import ParquetSink

CONVERTERS_OPTION = "headwater.converters"

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
        extra = headers_json_members(headers)
    parts = ['{"topic":"', topic, '","key":', key, ',"value":', value, extra, "}\n", ""]
    return pc.binary_join_element_wise(*(lit(p) for p in parts))


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
        converters = self.options.get(CONVERTERS_OPTION)
        with open(tmp, "wb", buffering=1 << 20) as f:
            if converters:
                # imported here: the formats (fastavro, ...) cost every Python worker ~0.1 s to import
                from headwater.events.formats.converters import Converters, specs_from_json
                from headwater.spark.converted import converted_lines

                lines = converted_lines(typed_blocks(iterator, self.__class__.__name__),
                                        Converters(*specs_from_json(converters)))
                rows = len(lines)
                write_lines(f, lines)
            for batch in iterator:
                rows += batch.num_rows
                write_lines(f, jsonl_lines(batch))
            f.flush()
            os.fsync(f.fileno())
        if rows == 0:
            tmp.unlink()
            return FileCommit(pid, [], 0)
        return FileCommit(pid, [(str(tmp), "")], rows)


def typed_blocks(iterator: Iterator[pa.RecordBatch], sink: str) -> list[TypedBlock]:
    """The typed blocks of a task's rows of the source's `blocks` layout."""
    blocks: list[TypedBlock] = []
    for batch in iterator:
        if "block" not in batch.schema.names:
            raise ValueError(f"{sink} needs the source's typed blocks: set the source's option headwater.output=blocks")
        blocks.extend(from_ipc(data) for data in batch.column("block").to_pylist())
    return blocks


class JsonlSink(FileSink):
    """`df.writeStream.format("headwater-jsonl").option("path", ...)`."""

    writer_class = JsonlStreamWriter

    @classmethod
    def name(cls) -> str:
        return "headwater-jsonl"


def register_sinks(spark) -> None:
    """Make the `headwater-jsonl`, `headwater-parquet` and `headwater-avro` sinks known to the session `spark`."""
    spark.dataSource.register(JsonlSink)
    spark.dataSource.register(ParquetSink)
    spark.dataSource.register(AvroSink)
