"""The `headwater-avro` sink: Avro container files of the events' values, one per topic and value schema.

Each event's value is written as the Avro record Confluent's AvroConverter would write for it
(`events.formats.avro`: the schema `AvroData` makes from the value's Connect schema, so the whole
Debezium envelope, `before`, `after`, `source`, `op`, ...; encoded column-wise by
`events.formats.avro_columns`), into an Avro object container file that carries that schema, readable by any Avro reader (fastavro, Spark's `avro` format when the
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

import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.typed import TypedBlock
from headwater.spark.filesink import TMP, FileCommit, FileSink, FileStreamWriter, partition_id
from headwater.spark.parquet import safe_dir

CODECS = ("null", "deflate")


class AvroStreamWriter(FileStreamWriter):
    """Writes one Avro container file per topic and value schema per partition per batch."""

    extension = ".avro"
    sink = "headwater-avro"

    def __init__(self, path: str, options: dict[str, str] | None = None):
        super().__init__(path, options)
        self.codec = str(self.options.get("codec", "null"))
        if self.codec not in CODECS:
            raise ValueError(f"the headwater-avro sink's codec {self.codec!r} is not one of {', '.join(CODECS)}")

    def write_blocks(self, blocks: Iterator[TypedBlock]) -> FileCommit:
        # imported here: the Avro formats cost every Python worker of the other sinks ~0.1 s to import
        from headwater.events.formats.avro import AvroBlockWriter
        from headwater.events.formats.avro_columns import container_file, encode_column

        pid = partition_id()
        writer = AvroBlockWriter()
        groups: dict[tuple[str, str], list[tuple[pa.Array, pa.Array]]] = {}  # (orders, records) per file
        for block in blocks:
            schema = block.value_schema
            value = block.batch.column("value")
            if schema is None or value.null_count == len(value):
                continue  # tombstones only
            text, _ = writer.schema(schema)
            present = value.is_valid()
            records = encode_column(value, schema, f"a value of {block.topic}").filter(present)
            groups.setdefault((block.topic, text), []).append((block.batch.column("_order").filter(present),
                                                               records))
        tmpdir = self.root / TMP
        tmpdir.mkdir(parents=True, exist_ok=True)
        files, rows = [], 0
        for (topic, text), parts in sorted(groups.items(), key=lambda g: g[1][0][0][0].as_py()):
            orders = pa.concat_arrays([o for o, _ in parts])
            records = pa.concat_arrays([r for _, r in parts]).take(pc.sort_indices(orders))
            tmp = tmpdir / f"{uuid.uuid4().hex}.avro.tmp"
            with open(tmp, "wb") as f:
                f.write(container_file(text, records, self.codec))
            files.append((str(tmp), safe_dir(topic)))
            rows += len(records)
        return FileCommit(pid, files, rows)


class AvroSink(FileSink):
    """`df.writeStream.format("headwater-avro").option("path", ...)`."""

    writer_class = AvroStreamWriter

    @classmethod
    def name(cls) -> str:
        return "headwater-avro"
