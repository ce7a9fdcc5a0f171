"""The binlog connectors' locking snapshot (`snapshot.locking.mode`) read in batches of chunks.

`snapshot.py` holds the snapshot (`HeldSnapshot`: Debezium's lock, one consistent transaction, the binlog
position) and cuts the tables into chunks (`SnapshotChunk`). MySQL cannot share the transaction's view
with another connection, so a chunk shipped to a Spark executor carries its rows, read on the driver.
Read in one batch, the driver would hold every row of the snapshot at once; `LockingBatches` reads it in
batches of `chunks_per_batch` chunks instead, through the shared lifecycle's `chunks` phase:

- `pending` -> `chunks`: the snapshot is taken (`snapshot_position`), its chunks are planned (kept on
  the driver for the snapshot's life, without rows: key ranges at once, the chunks of a table read
  with one streamed SELECT as its rows are read, `HeldSnapshot.planned`), and the first batch's
  offset names the chunk numbers it covers (`chunk_range`, [from, to)) and the held snapshot
  (`token`), beside the snapshot's binlog position and epoch; the first batch also holds the
  snapshot's schema change records (`include.schema.changes`);
- `chunks` -> `chunks`: the next chunk numbers (planned as far as the batch needs: a chunk number
  names one chunk for the snapshot's life, whether planned at once or as its table is read);
- `chunks` -> `completed`: no chunk is left; that last batch is empty, the held snapshot is let go, and
  streaming starts at the snapshot's binlog position.

While a batch's chunks are shipped, the driver reads the next batch's rows in the transaction
(`HeldSnapshot.read_ahead`, after the shipped ones, planning the chunks of a streamed table as it
reads them): the driver holds two batches' rows at most (and a socket read of a streamed SELECT),
whatever the size of the tables, with or without keys. Records and their `source.snapshot` markers
are those of the snapshot read in one batch: the chunks are the same, in the same order.

A snapshot's transaction does not outlive the process: a `chunks` offset whose token is not the held
snapshot's (a restart) is a snapshot to take again from the start (`holds`: the snapshot is due), and a
batch replayed from such an offset reads nothing. A schema-only snapshot, or one with no rows to read
(no table), stays one batch (`pending` -> `completed`).

The blocking ad-hoc snapshot (`binlog.incremental`) is read in batches by the same class, over its own
snapshot, tables and first units (`held`, `plan_tables`, `first_units`); after a restart it goes on from where
its last batch left it (`resume_at`) rather than from the start.
"""

from __future__ import annotations

import logging
from typing import Any

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import Offset, WorkUnit
from headwater.connectors.binlog.schema import Table
from headwater.connectors.binlog.snapshot import HeldSnapshot, SchemaSnapshotUnit, SnapshotChunk
from headwater.connectors.common.snapshot import chunks_per_batch

log = logging.getLogger("headwater.binlog")

TOKEN = "token"  # the held snapshot a `chunks` offset's batch is read in
RANGE = "chunk_range"  # the chunk numbers of the batch: [from, to)


class LockingBatches:
    """The driver's side of the locking snapshot's batches (for a `BinlogSource`). The blocking ad-hoc snapshot
    reads its batches the same way (`binlog.incremental.BlockingBatches` names its own snapshot, tables and first
    units: `held`, `plan_tables`, `first_units`)."""

    def __init__(self, source: Any):
        self.source = source  # the BinlogSource
        self.resume_at: dict[str, Any] | None = None  # where a snapshot taken again goes on (`HeldSnapshot.plan`)

    def held(self) -> HeldSnapshot | None:
        """The snapshot the batches are read in: the locking snapshot's."""
        held: HeldSnapshot | None = self.source.held
        return held

    def plan_tables(self, held: HeldSnapshot) -> tuple[list[Table], ConnectorConfig]:
        """The tables the snapshot `held` reads, and the configuration they are read with: the captured tables
        as they are at its position (none when the snapshot reads no rows)."""
        src = self.source
        captured = [] if src.schema_only else [
            t for t in src.tracker.tables_at(held.position.stream).values()
            if src.context.filters.includes(t.database, t.name)]
        return captured, src.config

    def first_units(self, held: HeldSnapshot) -> list[WorkUnit]:
        """The units before the first batch's chunks: the snapshot's schema change records (when included)."""
        src = self.source
        if not src.context.include_schema_changes:
            return []
        pos = held.position
        return [SchemaSnapshotUnit(src.context, src.snapshot_changes, pos.file, pos.pos, pos.stream, held.ts_us,
                                   last=False)]

    def chunks(self, held: HeldSnapshot, n: int | None) -> list[SnapshotChunk]:
        """The chunks of the snapshot `held` in Debezium's order, at least `n` of them (None: all) when it has as
        many (planned once per snapshot; none when the snapshot reads no rows)."""
        if held.todo is None:
            tables, config = self.plan_tables(held)
            held.plan(tables, self.source.context, config, self.resume_at)
        return held.planned(n)

    def batch(self, after: Offset | None, max_events: int | None) -> Offset | None:
        """The fields of the batch after the `chunks` offset `after` (None: the first); None when no chunk
        is left (or none was: the snapshot is one batch)."""
        src = self.source
        held = self.held()
        assert held is not None, "the snapshot is taken (snapshot_position) before its batches"
        lo = 0 if after is None else int(after[RANGE][1])
        hi = lo + chunks_per_batch(src.config, src.parallelism, max_events)
        chunks = self.chunks(held, hi)
        if lo >= len(chunks):
            return None
        return {TOKEN: held.token, RANGE: [lo, min(len(chunks), hi)]}

    def holds(self, offset: Offset) -> bool:
        """Whether the snapshot of the `chunks` offset `offset` is the one held here."""
        held = self.held()
        return held is not None and held.token == offset.get(TOKEN)

    def plan(self, end: Offset) -> list[WorkUnit]:
        """The units of the batch ending at the `chunks` offset `end`: its chunks (after the snapshot's schema
        change records in the first batch); none when its snapshot is not held here (a replay after a
        restart: the snapshot is taken again)."""
        held = self.held()
        if held is None or not self.holds(end):
            log.info("the snapshot batch of chunks %s was planned before a restart: its transaction is gone, "
                     "it reads nothing (the snapshot is taken again from the start)", end[RANGE])
            return []
        lo, hi = (int(n) for n in end[RANGE])
        chunks = self.chunks(held, hi)
        units: list[WorkUnit] = self.first_units(held) if lo == 0 else []
        units += chunks[lo:hi]
        held.read_ahead(range(lo, hi), hi + (hi - lo))
        log.info("snapshot at %s:%d: chunks %d..%d of %d%s", held.position.file, held.position.pos, lo, hi - 1,
                 len(chunks), "" if not held.todo else " planned so far")
        return units
