"""The `delta` and `iceberg` sinks in a Spark streaming query: `foreachBatch` over the source's typed blocks.

What runs where: the source's tasks read and decode the events into typed blocks on the executors
(`headwater.output=blocks`); the blocks of a micro-batch (Arrow IPC, a row per block) come to the
driver with `DataFrame.toArrow()`, where the batch is reduced per key and committed. A MERGE in
delta-rs and a pyiceberg transaction each run in one process and commit once, which is what makes
a batch atomic per table, so the commit is not split over tasks.

Exactly once: the sink's application id is `headwater-<the query id in Spark's checkpoint>`, and
Spark's batch id is recorded in the same Delta commit or Iceberg snapshot as the data; a batch Spark
replays after a crash (planned, maybe partly applied, not committed in the checkpoint) is skipped by
every table that already holds it. A new checkpoint is a new query id, so its batch ids (from 0
again) are not mistaken for the old ones.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from headwater.events.arrays import int64_array, int64_values
from headwater.events.typed import TypedBlock, from_ipc
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
            app_id = f"headwater-{query_id(checkpoint)}"
            if isinstance(options, DeltaOptions):
                from headwater.sinks.delta import DeltaSink

                sinks.append(DeltaSink(options, app_id))
            else:
                from headwater.sinks.iceberg import IcebergSink

                sinks.append(IcebergSink(options, app_id))
        sinks[0].write(batch_blocks(df), batch_id)

    return apply
