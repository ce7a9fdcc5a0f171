"""The workload whose classes go into the driver JVM's class archive (`headwater.spark.classcache`).

`python -m headwater.spark.warmup ARCHIVE` runs a small streaming query shaped like headwater's
(a Python streaming source whose tasks write change-event-shaped rows to jsonl files, as the
source's `files` layout does, committed by `FileBatches` in `foreachBatch`; a checkpoint)
in a Spark session made by `spark_session`, stops Spark, and waits for its JVM to exit: the JVM
writes the classes it loaded to ARCHIVE as it exits (`-XX:ArchiveClassesAtExit`).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator

import pyarrow as pa
from pyspark import SparkContext
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition, ReadLimit

from headwater.events.batch import ARROW_SCHEMA
from headwater.pipeline_config import parse_config
from headwater.spark.filesink import WRITTEN_SCHEMA_DDL, FileBatches, written_rows
from headwater.spark.pipeline import spark_session
from headwater.spark.sinks import JsonlStreamWriter


class _WarmupReader(DataSourceStreamReader):
    """Two micro-batches of a few change-event-shaped rows, written to jsonl files by the tasks."""

    def __init__(self, sink: str):
        self.sink = sink

    def initialOffset(self) -> dict:
        return {"n": 0}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        return {"n": 2}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return [InputPartition(i) for i in range(start["n"], end["n"])]

    def read(self, partition) -> Iterator[pa.RecordBatch]:
        writer = JsonlStreamWriter(self.sink)
        yield from written_rows(writer, iter([self._rows()]))

    def _rows(self) -> pa.RecordBatch:
        n = 100
        cols = {
            "topic": ["warmup.public.t"] * n,
            "key": [f'{{"id":{i}}}' for i in range(n)],
            "value": [f'{{"after":{{"id":{i}}},"op":"c"}}' for i in range(n)],
            "op": ["c"] * n,
            "headers": [[{"key": "k", "value": "v"}]] * n,
            "_change_type": ["insert"] * n,
            "_commit_version": list(range(n)),
            "_commit_timestamp": [0] * n,
        }
        return pa.RecordBatch.from_pydict(cols, schema=ARROW_SCHEMA)

    def commit(self, end: dict) -> None:
        pass


class _WarmupSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "headwater-classcache-warmup"

    def schema(self) -> str:
        return WRITTEN_SCHEMA_DDL

    def streamReader(self, schema) -> _WarmupReader:
        return _WarmupReader(self.options["path"])


def dump(archive: str) -> None:
    """Run the warm-up query in a Spark whose JVM writes its loaded classes to `archive` at exit."""
    work = tempfile.mkdtemp(prefix="headwater-classcache-")
    try:
        cfg = parse_config({
            "name": "classcache", "source": {"connector.class": "postgres", "topic.prefix": "warmup",
                                             "database.hostname": "localhost", "database.user": "warmup",
                                             "database.dbname": "warmup"},
            "sink": {"type": "jsonl", "path": f"{work}/sink"},
            "spark": {"master": "local[2]", "checkpoint": f"{work}/checkpoint"},
        })
        spark = spark_session(cfg, dump_classes_to=archive)
        spark.dataSource.register(_WarmupSource)
        query = (spark.readStream.format(_WarmupSource.name()).option("path", f"{work}/sink").load()  # as start_query
                 .writeStream.foreachBatch(FileBatches(f"{work}/sink", JsonlStreamWriter.extension))
                 .option("checkpointLocation", f"{work}/checkpoint").trigger(availableNow=True).start())
        query.awaitTermination()
        spark.stop()
        gateway = SparkContext._gateway
        proc = getattr(gateway, "proc", None) if gateway is not None else None
        if gateway is not None:
            gateway.shutdown()
        if proc is not None:  # the JVM exits once its stdin closes, and writes the archive as it exits
            proc.stdin.close()
            proc.wait(timeout=300)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m headwater.spark.warmup ARCHIVE", file=sys.stderr)
        return 2
    dump(argv[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
