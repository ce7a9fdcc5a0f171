"""The change-log connector's snapshot: the captured tables in primary-key chunks, under one snapshot.

`HeldSnapshot` is a REPEATABLE READ transaction kept open on the driver: it exports its snapshot
(`pg_export_snapshot()`, plain SQL) and reads the log's next `seq` in the same transaction, where
streaming after the snapshot starts. `plan_chunks` orders the tables and cuts each by its primary
key with the shared `key_ranges`; each `SnapshotChunk` reads its range in any process under the
exported snapshot and marks the rows with the shared `marker`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import psycopg2

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import WorkUnit
from headwater.connectors.common.records import table_records
from headwater.connectors.common.snapshot import (
    ChunkKey,
    KeyDialect,
    KeyRange,
    key_ranges,
    marker,
    snapshot_tables,
)
from headwater.events.batch import Events
from tests.connectors.changelog.records import ChangelogContext, ChangelogMaker, Table

DIALECT = KeyDialect()


def begin_snapshot(cur: Any, name: str | None = None) -> None:
    """Begin a read-only REPEATABLE READ transaction (under the exported snapshot `name`, if given)."""
    cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
    if name is not None:
        cur.execute("SET TRANSACTION SNAPSHOT %s", (name,))


class HeldSnapshot:
    """Snapshot number `epoch`: a transaction held open on the driver, its exported name, the log's next
    `seq` it does not see, and its time."""

    def __init__(self, params: dict[str, Any], log_ref: str, epoch: int):
        self.epoch = epoch
        self.conn = psycopg2.connect(**params)
        self.conn.autocommit = True
        self.cur = self.conn.cursor()
        begin_snapshot(self.cur)
        self.cur.execute(f"SELECT pg_export_snapshot(), (SELECT coalesce(max(seq), 0) + 1 FROM {log_ref})")
        self.name, self.seq = self.cur.fetchone()
        self.ts_us = time.time_ns() // 1000

    def close(self) -> None:
        self.conn.close()


def plan_chunks(snap: HeldSnapshot, params: dict[str, Any], tables: list[Table], ctx: ChangelogContext,
                cfg: ConnectorConfig) -> list[WorkUnit]:
    """The chunks of every captured table that has rows, in the snapshot's table order."""
    cur = snap.cur
    planned: list[tuple[Table, ChunkKey | None, list[KeyRange]]] = []
    for t in snapshot_tables(tables, lambda t: t.collection, cfg):
        ref = DIALECT.table(t.schema, t.name)
        cur.execute(f"SELECT EXISTS (SELECT 1 FROM {ref})")
        if not cur.fetchone()[0]:
            continue  # an empty table: no events, no markers
        if not t.key_columns:
            planned.append((t, None, [KeyRange(None, None)]))
            continue
        nullable = {c.name: c.nullable for c in t.columns}
        key = ChunkKey(t.key_columns, tuple(nullable[c] for c in t.key_columns))
        planned.append((t, key, key_ranges(cur, DIALECT, ref, key, cfg["headwater.snapshot.chunk.rows"])))
    return [SnapshotChunk(params, snap.name, snap.seq, snap.ts_us, ctx, t, key, r,
                          (i == 0, i == len(planned) - 1, j == 0, j == len(ranges) - 1))
            for i, (t, key, ranges) in enumerate(planned) for j, r in enumerate(ranges)]


@dataclass
class SnapshotChunk(WorkUnit):
    """One key range of one table, read under the exported snapshot `name`."""

    params: dict[str, Any]
    name: str
    seq: int  # the log's next seq: the snapshot holds every row before it
    ts_us: int
    ctx: ChangelogContext
    table: Table
    key: ChunkKey | None
    range: KeyRange
    ends: tuple[bool, bool, bool, bool]  # first table, last table, first chunk, last chunk

    def describe(self) -> str:
        return f"snapshot of {self.table.collection} keys [{self.range.lo}, {self.range.hi})"

    def read(self) -> Iterator[Events]:
        t, ctx = self.table, self.ctx
        first_table, last_table, first_chunk, last_chunk = self.ends
        te = table_records(ctx, t, t.columns, streaming=False)
        maker = ChangelogMaker(ctx)
        ref = DIALECT.table(t.schema, t.name)
        names = [c.name for c in t.columns]
        args: list[Any] = []
        if self.key is None:
            query = f"SELECT {', '.join(DIALECT.quote(c) for c in names)} FROM {ref}"
        else:
            query, args = self.range.select(ref, names, self.key, DIALECT)
        conn = psycopg2.connect(**self.params)
        try:
            conn.autocommit = True
            with conn.cursor() as cur:
                begin_snapshot(cur, self.name)
                cur.execute(query, args)
                rows = cur.fetchall()
                cur.execute("COMMIT")
        finally:
            conn.close()
        for i, values in enumerate(rows):
            mark = marker(first_table, last_table, first_chunk and i == 0, last_chunk and i == len(rows) - 1)
            src = orjson.Fragment(maker.snapshot_source(te, self.ts_us, mark, {"seq": self.seq - 1}))
            maker.emit(te, "r", te.key(values), None, te.row(values), src, None, self.seq - 1, self.ts_us)
            if len(maker.out) >= ctx.batch_rows:
                yield maker.take()
        if len(maker.out):
            yield maker.take()
