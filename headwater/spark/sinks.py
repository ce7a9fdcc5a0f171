"""The file sinks headwater registers with Spark, and the first of them: `headwater-jsonl`.

`headwater-jsonl` writes Debezium JSON lines (`{"topic", "key", "value"[, "headers"]}`), one file
per partition per batch, with the exactly-once commit of `headwater.spark.filesink`; the final
files end in `.jsonl`. From the source's JSON rows it joins the JSON text column-wise (from `PieceEvents`,
their key's and value's parts straight into the lines); with the
option `headwater.converters` (key and value converters other than the source's JSON) it takes the
source's typed blocks and writes them with those converters (`headwater.spark.converted`).
`headwater-parquet` is in `headwater.spark.parquet`, `headwater-avro` in `headwater.spark.avro`.
`register_sinks` makes them known to a Spark session; `FILE_WRITERS`, `sink_spec` and `file_writer`
name them to the source's `files` layout, whose tasks write them (`headwater run`).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.arrays import int32_array, lit, string_layout
from headwater.events.batch import PieceEvents
from headwater.events.headers import first_headers_member, headers_json_members, same_headers
from headwater.events.pieces import check_utf8, join_pieces, slice_parts
from headwater.events.typed import TypedBlock
from headwater.spark.avro import AvroSink, AvroStreamWriter
from headwater.spark.filesink import TMP, FileCommit, FileSink, FileStreamWriter, partition_id
from headwater.spark.parquet import ParquetSink, ParquetStreamWriter

CONVERTERS_OPTION = "headwater.converters"


def jsonl_lines(batch: pa.RecordBatch) -> pa.Array:
    """One line per event, built column-wise in Arrow: {"topic", "key", "value"[, "headers"]} with key
    and value embedded as JSON (they already are JSON text)."""
    return join_line_parts(jsonl_line_parts(batch))


def jsonl_line_parts(batch: pa.RecordBatch) -> list[pa.Array | pa.Scalar]:
    """What `jsonl_lines` joins element-wise (columns of `batch` and scalars), worked out once for a
    batch whose lines are then made a slice at a time (`sliced_parts`)."""
    topics = batch.column("topic")
    if _has_quote_or_backslash(topics):
        topics = pc.replace_substring(pc.replace_substring(topics, "\\", "\\\\"), '"', '\\"')
    # (a block's events are one table's): its text once, in the line's first literal
    topic: pa.Array | str = topics[0].as_py() if _one_value(topics) else topics
    key = batch.column("key")
    key = pc.coalesce(key, lit("null")) if key.null_count else key
    value = batch.column("value")
    value = pc.coalesce(value, lit("null")) if value.null_count else value
    headers = batch.column("headers")
    extra: pa.Array | str
    if headers.null_count == len(headers):
        extra = ""
    elif same_headers(headers):  # (Debezium's context headers): the first row's, once
        extra = first_headers_member(headers)
    else:
        extra = headers_json_members(headers)
    head: list = ['{"topic":"' + topic + '","key":'] if isinstance(topic, str) else ['{"topic":"', topic, '","key":']
    if isinstance(extra, str):  # the constant text between value and the next line's topic, as one scalar
        parts = [*head, key, ',"value":', value, extra + "}\n", ""]
    else:
        parts = [*head, key, ',"value":', value, extra, "}\n", ""]
    return [lit(p) for p in parts]


def sliced_parts(parts: list[pa.Array | pa.Scalar], start: int, rows: int) -> list[pa.Array | pa.Scalar]:
    """`parts` with their columns cut to rows `start`..`start + rows` (zero-copy)."""
    return [p.slice(start, rows) if isinstance(p, pa.Array) else p for p in parts]


def join_line_parts(parts: list[pa.Array | pa.Scalar]) -> pa.Array:
    """The lines `parts` make (the last part is the empty separator)."""
    return pc.binary_join_element_wise(*parts)


def _one_value(texts: pa.Array) -> bool:
    """Whether the strings (no nulls) are all the same, and there is at least one."""
    if not len(texts) or texts.null_count:
        return False
    starts, lengths, data = string_layout(texts)
    width = int(lengths[0])
    if (lengths != width).any():
        return False
    used = data[starts[0]:starts[0] + width * len(texts)]  # (equal lengths: the values follow each other)
    return bool((used.reshape(len(texts), width) == used[:width]).all()) if width else True


def _has_quote_or_backslash(texts: pa.Array) -> bool:
    """Whether any of the strings holds '"' or '\\' (which a JSON string escapes)."""
    if not len(texts):
        return False
    starts, lengths, data = string_layout(texts)
    used = data[starts[0]:starts[-1] + lengths[-1]]
    return bool((used == ord('"')).any() or (used == ord("\\")).any())


# Rows whose lines are made at once: the lines of a larger batch (~600 bytes a row of the benchmark's
# table) were each a fresh allocation the system allocator maps, faults in page by page and unmaps
# again (a 115k-row batch: ~0.5 s of a task's CPU per 1M rows in the kernel); and lines that still sit
# in the CPU's cache when `write` copies them to the page cache cost that copy less: 16k lines
# (~10 MB) at a time, the kernel's copy was ~30 % of a snapshot task's CPU (perf); 2k lines (~1.2 MB)
# took the task's kernel CPU from 0.56-1.27 to 0.36-0.48 us an event (`bench.snapshot_tasks`, 1M rows,
# interleaved rounds on a loaded machine), its user CPU unchanged.
LINES_AT_ONCE = 2048


def sliced_lines(batch: pa.RecordBatch, rows: int) -> Iterator[pa.Array]:
    """`jsonl_lines(batch)` made and handed out `rows` lines at a time."""
    parts = jsonl_line_parts(batch)
    if len(batch) <= rows:
        yield join_line_parts(parts)
        return
    for start in range(0, len(batch), rows):
        yield join_line_parts(sliced_parts(parts, start, rows))


def piece_lines(events: PieceEvents, rows: int) -> Iterator[pa.Array]:
    """`sliced_lines` of `events`' JSON rows, their key's and value's parts joined straight into the lines
    (`events.pieces`: one copy of their bytes), `rows` lines at a time (binary)."""
    headers = events.headers
    extra = ""
    if headers is None and events.shared_headers is not None and len(events.shared_headers):
        shared = events.shared_headers
        extra = first_headers_member(pa.ListArray.from_arrays(int32_array(np.array([0, len(shared)])), shared))
    elif headers is not None and headers.null_count < len(headers):
        if not same_headers(headers):  # (each row's own: as the JSON rows' lines are made)
            yield from sliced_lines(events.to_arrow(), rows)
            return
        extra = first_headers_member(headers)
    topic = events.topic.replace("\\", "\\\\").replace('"', '\\"')
    parts = [('{"topic":"' + topic + '","key":').encode(), *(events.key if events.key is not None else [b"null"]),
             b',"value":', *events.value, (extra + "}\n").encode()]
    n = len(events)
    for start in range(0, n, rows):
        stop = min(start + rows, n)
        lines = join_pieces(slice_parts(parts, start, stop), stop - start)
        if not events.utf8:
            check_utf8(lines)
        yield lines


def write_lines(f, lines: pa.Array) -> None:
    """Write an Arrow string array's characters (each element a line) without making Python strings."""
    if lines.offset == 0 and lines.null_count == 0 and len(lines):
        width = 8 if lines.type in (pa.large_string(), pa.large_binary()) else 4
        end = int.from_bytes(memoryview(lines.buffers()[1])[len(lines) * width:(len(lines) + 1) * width], "little")
        f.write(memoryview(lines.buffers()[2])[:end])
    else:
        for v in lines.to_pylist():
            if v is not None:
                f.write(v.encode() if isinstance(v, str) else v)


class JsonlStreamWriter(FileStreamWriter):
    """Writes Debezium JSON lines, one file per partition per batch."""

    extension = ".jsonl"
    sink = "headwater-jsonl"

    @property
    def takes_blocks(self) -> bool:
        return bool(self.options.get(CONVERTERS_OPTION))

    @property
    def takes_pieces(self) -> bool:
        return not self.takes_blocks

    def write_rows(self, batches: Iterator[pa.RecordBatch | PieceEvents]) -> FileCommit:  # type: ignore[override]
        return self._write(lines for batch in batches
                           for lines in (piece_lines(batch, LINES_AT_ONCE) if isinstance(batch, PieceEvents)
                                         else sliced_lines(batch, LINES_AT_ONCE)))

    def write_blocks(self, blocks: Iterator[TypedBlock]) -> FileCommit:
        converters = self.options.get(CONVERTERS_OPTION)
        if not converters:
            raise ValueError(f"the headwater-jsonl sink writes typed blocks with its option {CONVERTERS_OPTION} only")
        # imported here: the formats (fastavro, ...) cost every Python worker ~0.1 s to import
        from headwater.events.formats.converters import Converters, specs_from_json
        from headwater.spark.converted import converted_lines

        return self._write(iter([converted_lines(list(blocks), Converters(*specs_from_json(converters)))]))

    def _write(self, parts: Iterator[pa.Array]) -> FileCommit:
        pid = partition_id()
        tmpdir = self.root / TMP
        tmpdir.mkdir(parents=True, exist_ok=True)
        tmp = tmpdir / f"{uuid.uuid4().hex}-{pid}.tmp"
        rows = 0
        with open(tmp, "wb", buffering=1 << 20) as f:
            for lines in parts:
                rows += len(lines)
                write_lines(f, lines)
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


FILE_WRITERS: dict[str, type[FileStreamWriter]] = {"jsonl": JsonlStreamWriter, "parquet": ParquetStreamWriter,
                                                   "avro": AvroStreamWriter}


def sink_spec(sink_type: str, path: str, options: dict[str, str]) -> str:
    """The source's `headwater.sink` option: the file sink its `files` layout writes, as JSON."""
    if sink_type not in FILE_WRITERS:
        raise ValueError(f"{sink_type!r} is not a file sink: use one of {', '.join(FILE_WRITERS)}")
    return json.dumps({"type": sink_type, "path": path, "options": options})


def file_writer(spec: str) -> FileStreamWriter:
    """The writer of the file sink `spec` names (`sink_spec`)."""
    d = json.loads(spec)
    return FILE_WRITERS[d["type"]](d["path"], dict(d.get("options") or {}))


def register_sinks(spark) -> None:
    """Make the `headwater-jsonl`, `headwater-parquet` and `headwater-avro` sinks known to the session `spark`."""
    spark.dataSource.register(JsonlSink)
    spark.dataSource.register(ParquetSink)
    spark.dataSource.register(AvroSink)
