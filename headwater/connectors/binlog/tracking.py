"""The schema history as streaming and the snapshot use it: tables at a stream position, DDL applied once.

`SchemaHistoryTracker` wraps the schema history (`history.SchemaHistory`, the DDL parser's tables)
for the binlog connector: the snapshot starts it from the statements read under the snapshot's
lock (`catalog.snapshot_statements`); streaming applies each QUERY event once, in stream order,
keyed by its stream position (a batch planned again gets the same `SchemaStep`), and keeps the
tables in force after each statement, so a slice planned again after a restart of the batch
starts from the tables of its own position. Entries go to a `history.HistoryFile` when the
connector is given one (`headwater.schema.history.file`), appended before the offsets that cover
them are stored; a restart replays the entries up to the stored offset. Without a file, a
restart reads the tables as the server has them now (as `snapshot.mode=recovery` does).

Where the offsets are kept, the file is kept beside them by default: `connectors/history_file.py`'s `with_history_file` names
`<checkpointLocation>/schema_history.jsonl` for Spark, `<offset file>.schema_history.jsonl` for the engine;
`require_history_file` refuses a bare Spark source (which knows no checkpoint) without one.
"""

from __future__ import annotations

import bisect
import logging
from typing import Any

import pymysql

from headwater.config.properties import ConnectorConfig
from headwater.connectors.binlog import catalog
from headwater.connectors.binlog.history import HistoryFile, SchemaHistory, at_or_before
from headwater.connectors.binlog.history_properties import history_settings
from headwater.connectors.binlog.positions import BinlogPosition, split_pos
from headwater.connectors.binlog.schema import Table
from headwater.connectors.binlog.streaming import SchemaChange, SchemaStep, TableKey, truncated_tables
from headwater.connectors.common.filters import TableFilters

log = logging.getLogger("headwater.binlog")

def _database_filter(filters: TableFilters) -> Any:
    def accepts(database: str) -> bool:
        if filters.system.holds(database, ""):
            return False
        if filters.schema_include is not None and not any(p.fullmatch(database) for p in filters.schema_include):
            return False
        return not (filters.schema_exclude is not None and any(p.fullmatch(database) for p in filters.schema_exclude))
    return accepts


def changes_of(events: list[Any]) -> list[SchemaChange]:
    """The history's schema change events as streaming's `SchemaChange`s."""
    out = []
    for e in events:
        body = e.to_debezium()
        out.append(SchemaChange(body["databaseName"], body["ddl"], tuple(body["tableChanges"]), e.source_table))
    return out


class SchemaHistoryTracker:
    """The `SchemaTracker` of the binlog source."""

    def __init__(self, config: ConnectorConfig, filters: TableFilters, path: str | None = None):
        self.settings = {**history_settings(config), "table_filter": filters.includes,
                         "database_filter": _database_filter(filters)}
        self.filters = filters
        self.file = HistoryFile(path) if path else None
        self.history = SchemaHistory(**self.settings)
        self.versions: list[tuple[int, dict[TableKey, Table]]] = []  # (stream position, tables after it)
        self.steps: dict[int, SchemaStep] = {}
        self.last = -1  # the stream position of the last statement applied
        self.file_like = "binlog.000001"  # a binlog file name of the server (names positions of entries)

    # ---- starting points
    def _reset(self, history: SchemaHistory, pos: int) -> None:
        self.history = history
        self.versions = [(pos, history.tables())]
        self.steps = {}
        self.last = pos

    def start_empty(self, file: str) -> None:
        """Streaming from the start of the binlog (`snapshot.mode=never`): every table comes from its DDL."""
        self.file_like = file
        self._reset(SchemaHistory(**self.settings), -1)

    def start_snapshot(self, position: BinlogPosition, conn: pymysql.Connection) -> list[SchemaChange]:
        """The snapshot's statements, read through `conn` (under the snapshot's lock), applied at `position`;
        its schema change records."""
        self.file_like = position.file
        history = SchemaHistory(**self.settings)
        table_filter = self.filters.includes if self.settings["store_only_captured_tables_ddl"] else None
        changes: list[SchemaChange] = []
        for i, stmt in enumerate(catalog.snapshot_statements(conn, self.settings["database_filter"], table_filter)):
            # (every statement at the snapshot's position: a restart there replays them all)
            where = {"file": position.file, "pos": position.pos, "snapshot": True, "statement": i}
            changes += changes_of(history.apply(stmt.ddl, stmt.database, where))
        if self.file is not None:
            self.file.recover(lambda _: False)  # a new snapshot starts a new history
            self.file.append(history.entries)
        self._reset(history, position.stream - 1)
        return changes

    def restore(self, position: BinlogPosition, conn: pymysql.Connection, recover: bool) -> None:
        """The tables at a stored `position`: the entries recorded up to it, or (without a history file, or
        with `recover`) the tables as the server has them now."""
        self.file_like = position.file
        if self.file is not None and not recover:
            entries = self.file.recover(at_or_before(position.to_offset()))
            if entries:
                self._reset(SchemaHistory.restore(entries, **self.settings), position.stream - 1)
                return
        log.warning("the schema history is rebuilt from the tables as they are now (binlog position %s:%d)",
                    position.file, position.pos)
        self.start_snapshot(position, conn)

    def resume_snapshot(self, position: BinlogPosition, conn: pymysql.Connection) -> list[SchemaChange]:
        """A snapshot at `position` planned before a restart (its schema statements recorded there): the
        tables from the recorded statements and its schema change records again, as `start_snapshot`
        gave them. Without recorded statements, a new start at `position` from the tables as they are."""
        self.file_like = position.file
        entries = self.file.recover(at_or_before(position.to_offset())) if self.file is not None else []
        here = [e for e in entries if e.position.get("snapshot") and
                (e.position.get("file"), e.position.get("pos")) == (position.file, position.pos)]
        if not here:
            log.warning("the snapshot's schema at binlog position %s:%d was not recorded: it is read again from "
                        "the tables as they are now", position.file, position.pos)
            return self.start_snapshot(position, conn)
        history = SchemaHistory(**self.settings)
        changes: list[SchemaChange] = []
        for entry in here:
            changes += changes_of(history.apply(entry.ddl, entry.database, entry.position))
        self._reset(history, position.stream - 1)
        return changes

    # ---- streaming
    def current(self) -> dict[TableKey, Table]:
        return self.history.tables()

    def tables_at(self, pos: int) -> dict[TableKey, Table]:
        i = bisect.bisect_left(self.versions, pos, key=lambda v: v[0]) - 1
        return dict(self.versions[max(i, 0)][1])

    def apply(self, pos: int, database: str, sql: str) -> SchemaStep:
        if pos <= self.last:
            return self.steps.get(pos, SchemaStep())
        before = self.history.tables()
        file, at = split_pos(self.file_like, pos)
        recorded = len(self.history.entries)
        changes = changes_of(self.history.apply(sql, database or None, {"file": file, "pos": at}))
        after = self.history.tables()
        diff: dict[TableKey, Table | None] = {k: v for k, v in after.items() if before.get(k) is not v}
        diff.update({k: None for k in before if k not in after})
        step = SchemaStep(tuple(changes), diff, truncated_tables(sql, database))
        if self.file is not None and len(self.history.entries) > recorded:
            self.file.append(self.history.entries[recorded:])
        self.steps[pos] = step
        self.last = pos
        if diff:
            self.versions.append((pos, after))
        return step
