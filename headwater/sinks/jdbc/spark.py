"""The `jdbc` sink in a Spark streaming query: each micro-batch applied by Spark's tasks.

`jdbc_batches` is the query's `foreachBatch` function. The source gives typed blocks
(`headwater.output=blocks`, one row per block). Each micro-batch is repartitioned by topic, so all
of one table's events of the batch meet in one task (the reduction to the last change per key
needs them together), and each task applies its tables with a `JdbcWriter` in one transaction that
records `(pipeline, batch id, topic)`: the writes run where Spark runs its tasks, in parallel
across tables, and nothing is collected on the driver.

Why `foreachBatch` rather than a DataSource writer: the writer of a Python data source sees the
source's partitions as they come (a table's events may be spread over several), and the batch id
reaches its tasks only at the driver's commit; `foreachBatch` gives the batch id first, so each
task's transaction can carry it, and lets the batch be repartitioned by topic. A replayed batch
(Spark runs the last planned batch again after a crash) finds its topics recorded and changes
nothing. When one task fails, the batch fails: that task's transaction is rolled back, tables
other tasks committed stay applied and recorded, and the batch run again applies the rest. With
`batch.atomic: true` the batch goes to one partition: one task applies every table in one
transaction, so a reader sees all of a batch's changes or none of them.

A Python worker runs one task at a time and Spark reuses it for the next batches, so each worker
process keeps its `JdbcWriter` (its connection, its knowledge of the target's tables) in `WRITERS`,
keyed by the pipeline and the whole configuration, and hands it to the next task that writes to the
same target: opening a connection and checking the table of applied batches cost ~0.1 s a task
on the loaded test machine, more than applying a small batch. A writer whose apply failed is
closed and dropped (its connection may be broken), so the batch run again starts afresh.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from headwater.events.typed import from_ipc
from headwater.sinks.jdbc.config import JdbcSinkConfig
from headwater.sinks.jdbc.connection import DatabaseError
from headwater.sinks.jdbc.writer import JdbcWriter

WRITERS: dict[tuple[str, str, str], JdbcWriter] = {}  # this worker process's writers (see the docstring)


def apply_partition(cfg: JdbcSinkConfig, pipeline: str, batch_id: int, rows: Iterator[Any]) -> None:
    """One task's part of a batch: its blocks applied in one transaction, by this process's writer
    for the target."""
    blocks = [from_ipc(bytes(row["block"])) for row in rows]
    if not blocks:
        return
    secret = cfg.password.get_secret_value() if cfg.password is not None else ""
    key = (pipeline, repr(cfg), secret)  # repr shows no password: a changed one is a new writer
    writer = _reused(key) or JdbcWriter(cfg, pipeline)
    try:
        writer.apply(batch_id, blocks)
    except BaseException:
        with contextlib.suppress(Exception):  # its connection may be the failure
            writer.close()
        raise
    WRITERS[key] = writer


def _reused(key: tuple[str, str, str]) -> JdbcWriter | None:
    """This process's writer for `key` if its connection still answers (a server restarted or an
    idle connection closed by the server since the last batch: None, a new one is made)."""
    writer = WRITERS.pop(key, None)
    if writer is None:
        return None
    try:
        writer.conn.query("SELECT 1")
        return writer
    except DatabaseError:
        with contextlib.suppress(Exception):
            writer.close()
        return None


def jdbc_batches(cfg: JdbcSinkConfig, pipeline: str, parallelism: int) -> Callable[[Any, int], None]:
    """The `foreachBatch` function of a query writing to the target of `cfg`; a target that cannot be
    reached fails here, before the query starts (`DatabaseError`)."""
    from headwater.sinks.jdbc.connection import connect

    connect(cfg).close()

    partitions = 1 if cfg.batch_atomic else max(1, parallelism)

    def write(df, batch_id: int) -> None:
        df.repartition(partitions, "topic").foreachPartition(
            lambda rows: apply_partition(cfg, pipeline, batch_id, rows))

    return write
