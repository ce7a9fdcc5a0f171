"""The `headwater-parquet` sink: one Parquet dataset per topic, the row image as typed columns.

Each data event becomes one row: the `after` image (the `before` image for deletes) as columns
typed from the event's Kafka Connect schema by `headwater.events.arrow` (Decimal -> decimal128,
MicroTimestamp -> timestamp, Date -> date32, ...), plus `_op`, `_change_type`, `_commit_version`,
`_commit_timestamp` and `_source_ts_ms`. Tombstones are skipped (the delete before them carries
the key). Events of other topics (transaction metadata, heartbeats, logical messages) keep their
payload's fields. Files go to `<path>/<topic>/batch-<id>-part-<n>.parquet` with the exactly-once
commit of `headwater.spark.filesink`. The source must write schemas (`schemas.enable`), which
`headwater run` sets.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from headwater.events.arrow import RowImages, row_schema
from headwater.spark.filesink import TMP, FileCommit, FileSink, FileStreamWriter, partition_id


def safe_dir(topic: str) -> str:
    """A topic name as a directory name: characters other than letters, digits and ._- become _."""
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in topic)


class ParquetStreamWriter(FileStreamWriter):
    """Writes one Parquet file per topic per partition per batch."""

    extension = ".parquet"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FileCommit:
        pid = partition_id()
        tables: dict[str, RowImages] = {}
        rows = 0
        for batch in iterator:
            cols = batch.to_pydict()
            for topic, value, op, change, version, ts in zip(
                    cols["topic"], cols["value"], cols["op"], cols["_change_type"], cols["_commit_version"],
                    cols["_commit_timestamp"], strict=True):
                if value is None:
                    continue
                record = orjson.loads(value)
                if "schema" not in record:
                    raise ValueError("the headwater-parquet sink needs events written with schemas.enable=true")
                t = tables.get(topic)
                if t is None:
                    t = tables[topic] = RowImages(*row_schema(record["schema"]))
                t.add(record["payload"], op, change, version, ts)
                rows += 1
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
