"""The `delta` and `iceberg` sinks in a Spark streaming query: `foreachBatch` over the source's typed blocks.

What runs where: the source's tasks read and decode the events into typed blocks on the executors
(`headwater.output=blocks`). In `merge` mode the blocks of a micro-batch (Arrow IPC, a row per
block) come to the driver with `DataFrame.toArrow()`, where the batch is reduced per key and
committed: a MERGE in delta-rs and a pyiceberg transaction each run in one process and commit once,
which is what makes a batch atomic per table. In `changelog` mode with a local path or warehouse and
no `partition.by`, each task writes its part of the batch as parquet files (`_batch_order` from the
partition's number times 2^40, so it still orders the changes) and gives the driver only the files'
names, which it commits in one Delta commit (`DeltaTable.create_write_transaction`) or Iceberg
snapshot (`add_files`) per table; otherwise (a remote store, partitions) the driver writes them.

Exactly once: the sink's application id is `headwater-<the query id in Spark's checkpoint>`, and
Spark's batch id is recorded in the same Delta commit or Iceberg snapshot as the data; a batch Spark
replays after a crash (planned, maybe partly applied, not committed in the checkpoint) is skipped by
every table that already holds it (the files its tasks wrote again are left out of the table). A new checkpoint is a new query id, so its batch ids (from 0
again) are not mistaken for the old ones.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from headwater.events.arrays import int64_array, int64_values
from headwater.events.typed import TypedBlock, from_ipc
from headwater.sinks.lake import DATA_FILES, DataFile
from headwater.sinks.lake_config import DeltaOptions, IcebergOptions

PARTITION_SHIFT = 1 << 40  # a partition's events come after the previous partition's


def query_id(checkpoint: str | Path) -> str:
    """The id of the streaming query whose checkpoint this is (Spark writes it before the first batch)."""
    return json.loads((Path(checkpoint) / "metadata").read_text())["id"]


def batch_blocks(df: Any) -> list[TypedBlock]:
    """The typed blocks of a micro-batch (a DataFrame of the source's blocks layout), their `_order`
    made the events' order across the batch's partitions."""
    from pyspark.sql.functions import spark_partition_id

    rows = df.select(spark_partition_id().alias("partition"), "block").toArrow()
    blocks = []
    for partition, data in zip(rows.column("partition").to_pylist(), rows.column("block").to_pylist(), strict=True):
        block = from_ipc(data)
        b = block.batch
        i = b.schema.get_field_index("_order")
        order = int64_array(int64_values(b.column(i)) + partition * PARTITION_SHIFT)
        blocks.append(TypedBlock(b.set_column(i, b.schema.field(i), order)))
    return blocks


def lake_batch(options: DeltaOptions | IcebergOptions, checkpoint: str) -> Callable[[Any, int], None]:
    """The `foreachBatch` function that applies each micro-batch to the sink's tables."""
    sinks: list[Any] = []

    def apply(df: Any, batch_id: int) -> None:
        if not sinks:
            sinks.append(_sink(options, f"headwater-{query_id(checkpoint)}"))
        if tasks_write(options):
            write = _task_files(options, sinks[0].app_id, batch_id)
            records = df.select("block").mapInArrow(write, _spark_schema(DATA_FILES)).toArrow().to_pylist()
            sinks[0].commit_files([DataFile.of(r) for r in records], batch_id)
        else:
            sinks[0].write(batch_blocks(df), batch_id)

    return apply


def tasks_write(options: DeltaOptions | IcebergOptions) -> bool:
    """Whether the Spark tasks write the batch's files (see the module's docstring)."""
    where = options.path if isinstance(options, DeltaOptions) else options.warehouse
    return options.mode == "changelog" and not options.partition_by and "://" not in where


def _sink(options: DeltaOptions | IcebergOptions, app_id: str) -> Any:
    if isinstance(options, DeltaOptions):
        from headwater.sinks.delta import DeltaSink

        return DeltaSink(options, app_id)
    from headwater.sinks.iceberg import IcebergSink

    return IcebergSink(options, app_id)


def _task_files(options: DeltaOptions | IcebergOptions, app_id: str, batch_id: int
                ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The `mapInArrow` function of a task: its blocks written as files, a row per file."""

    def write(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark import TaskContext

        context = TaskContext.get()
        partition = context.partitionId() if context else 0
        blocks = [from_ipc(data) for b in batches for data in b.column(0).to_pylist()]
        if not blocks:
            return
        name = f"{partition}-{uuid.uuid4().hex}"  # an attempt's files never overwrite another's
        files = _sink(options, app_id).write_files(blocks, batch_id, partition * PARTITION_SHIFT, name)
        yield pa.RecordBatch.from_pylist([f.record() for f in files], schema=DATA_FILES)

    return write


def _spark_schema(schema: Any) -> str:
    """A DDL string for the Spark schema of an Arrow schema of strings, longs and binaries."""
    names = {"string": "string", "int64": "bigint", "binary": "binary"}
    return ", ".join(f"`{f.name}` {names[str(f.type)]}" for f in schema)
