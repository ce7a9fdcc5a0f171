"""The `headwater-parquet` sink: one Parquet dataset per topic, the row image as typed columns.

Each data event becomes one row: the `after` image (the `before` image for deletes) as columns
typed from the event's Kafka Connect schema by `headwater.events.arrow` (Decimal -> decimal128,
MicroTimestamp -> timestamp, Date -> date32, ...), plus `_op`, `_change_type`, `_commit_version`,
`_commit_timestamp` and `_source_ts_ms`. Tombstones are skipped (the delete before them carries
the key). Events of other topics (transaction metadata, heartbeats, logical messages) keep their
payload's fields. A topic's columns in a file are those of its first event there. Files go to
`<path>/<topic>/batch-<id>-part-<n>.parquet` with the exactly-once commit of
`headwater.spark.filesink`. The sink reads the source's typed blocks (`headwater.output=blocks`,
which `headwater run` sets), never JSON; option `replace.null.with.default` (default true) writes
a null whose field has a default as the default, as the JSON events would hold it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pyarrow.parquet as pq

from headwater.events.arrow import RowImages, row_schema
from headwater.events.typed import TypedBlock
from headwater.spark.filesink import TMP, FileCommit, FileSink, FileStreamWriter, partition_id


def safe_dir(topic: str) -> str:
    """A topic name as a directory name: characters other than letters, digits and ._- become _."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in topic)


class ParquetStreamWriter(FileStreamWriter):
    """Writes one Parquet file per topic per partition per batch."""

    extension = ".parquet"
    sink = "headwater-parquet"

    def __init__(self, path: str, options: dict[str, str] | None = None):
        super().__init__(path, options)
        self.replace_null = str(self.options.get("replace.null.with.default", "true")).lower() == "true"

    def write_blocks(self, blocks: Iterator[TypedBlock]) -> FileCommit:
        pid = partition_id()
        tables: dict[str, RowImages] = {}
        rows = 0
        for block in blocks:
            present = len(block) - block.batch.column("value").null_count
            if not present:
                continue  # tombstones only
            t = tables.get(block.topic)
            if t is None:
                t = tables[block.topic] = RowImages(*row_schema(block.value_schema or {}),
                                                    replace_null=self.replace_null)
            t.add(block)
            rows += present
        files = []
        tmpdir = self.root / TMP
        tmpdir.mkdir(parents=True, exist_ok=True)
        for topic, t in tables.items():
            tmp = tmpdir / f"{uuid.uuid4().hex}.parquet.tmp"
            pq.write_table(t.table(), tmp)
            files.append((str(tmp), safe_dir(topic)))
        return FileCommit(pid, files, rows)


class ParquetSink(FileSink):
    """`df.writeStream.format("headwater-parquet").option("path", ...)`."""

    writer_class = ParquetStreamWriter

    @classmethod
    def name(cls) -> str:
        return "headwater-parquet"
