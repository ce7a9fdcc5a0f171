"""The `headwater-avro` sink: Avro container files of the events' values, one per topic and value schema.

Each event's value is written as the Avro record Confluent's AvroConverter would write for it
(`events.formats.avro`: the schema `AvroData` makes from the value's Connect schema, so the whole
Debezium envelope, `before`, `after`, `source`, `op`, ...), into an Avro object container file
that carries that schema, readable by any Avro reader (fastavro, Spark's `avro` format when the
spark-avro package is on its class path). Tombstones are skipped (the delete before them carries the
key); keys are not written (the envelope's images hold the key columns), as the Avro formats of
Kafka Connect's file sinks write values. Files go to `<path>/<topic>/batch-<id>-part-<n>.avro`
(`-<k>` after the part number when a topic's events of one task have several value schemas), in the
order the source made the events, with the exactly-once commit of `headwater.spark.filesink`. Option
`codec`: `null` (default) or `deflate`. The sink reads the source's typed blocks
(`headwater.output=blocks`, which `headwater run` sets).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from headwater.events.typed import from_ipc
from headwater.spark.filesink import TMP, FileCommit, FileSink, FileStreamWriter, partition_id
from headwater.spark.parquet import safe_dir

CODECS = ("null", "deflate")


class AvroStreamWriter(FileStreamWriter):
    """Writes one Avro container file per topic and value schema per partition per batch."""

    extension = ".avro"

    def __init__(self, path: str, options: dict[str, str] | None = None):
        super().__init__(path, options)
        self.codec = str(self.options.get("codec", "null"))
        if self.codec not in CODECS:
            raise ValueError(f"the headwater-avro sink's codec {self.codec!r} is not one of {', '.join(CODECS)}")

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FileCommit:
        # imported here: fastavro costs every Python worker of the other sinks ~0.1 s to import
        import fastavro

        from headwater.events.formats.avro import AvroBlockWriter, avro_datums

        pid = partition_id()
        writer = AvroBlockWriter()
        groups: dict[tuple[str, str], tuple[Any, list[tuple[int, Any]]]] = {}
        for batch in iterator:
            if "block" not in batch.schema.names:
                raise ValueError("the headwater-avro sink needs the source's typed blocks: "
                                 "set the source's option headwater.output=blocks")
            for data in batch.column("block").to_pylist():
                block = from_ipc(data)
                schema = block.value_schema
                value = block.batch.column("value")
                if schema is None or value.null_count == len(value):
                    continue  # tombstones only
                text, parsed = writer.schema(schema)
                _, records = groups.setdefault((block.topic, text), (parsed, []))
                valid = value.is_valid().to_pylist()
                orders = block.batch.column("_order").to_pylist()
                records.extend((o, d) for o, d, ok in zip(orders, avro_datums(value, schema), valid, strict=True) if ok)
        tmpdir = self.root / TMP
        tmpdir.mkdir(parents=True, exist_ok=True)
        files, rows = [], 0
        for (topic, _), (parsed, records) in sorted(groups.items(), key=lambda g: g[1][1][0][0]):
            records.sort(key=lambda r: r[0])
            tmp = tmpdir / f"{uuid.uuid4().hex}.avro.tmp"
            with open(tmp, "wb") as f:
                fastavro.writer(f, parsed, (d for _, d in records), codec=self.codec)
            files.append((str(tmp), safe_dir(topic)))
            rows += len(records)
        return FileCommit(pid, files, rows)


class AvroSink(FileSink):
    """`df.writeStream.format("headwater-avro").option("path", ...)`."""

    writer_class = AvroStreamWriter

    @classmethod
    def name(cls) -> str:
        return "headwater-avro"
