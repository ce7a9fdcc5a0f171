"""Schema history: every table's columns at every binlog position, kept as append-only entries.

`SchemaHistory.apply(statement, database, position)` parses a DDL statement (from a binlog QUERY
event or the snapshot), changes the tracked tables and records an entry: position, database, DDL
and the resulting `tableChanges` (JSON-serializable). It returns the schema change events to emit
(Debezium's `databaseName`, `ddl`, `tableChanges`, one per table for `DROP TABLE a, b`) and the
tables a TRUNCATE emptied.
`SchemaHistory.restore(entries, upto=...)` replays the entries recorded up to a position and gives
the same tables. The rules of Debezium's `schema.history.internal.*` properties live here:
store only captured tables' (or databases') DDL, skip unparseable DDL, the DDL filter, and the
decision `inconsistent.schema.handling.mode` makes for rows of a table with no known schema.
`HistoryFile` keeps the entries durably in a JSON-lines file beside the offsets.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwater.connectors.binlog.ddl import (
    DdlParseError,
    SchemaChange,
    SchemaState,
    StatementResult,
    TableId,
    apply_statement,
)
from headwater.connectors.binlog.history_properties import DEFAULT_DDL_FILTER
from headwater.connectors.binlog.schema import Table

log = logging.getLogger(__name__)

# QUERY events the streaming reader never treats as DDL (transaction control, statement-based DML).
_NOT_DDL = re.compile(
    r"^\s*(BEGIN|END|COMMIT|ROLLBACK|XA\s|INSERT\s|UPDATE\s|DELETE\s|REPLACE\s|FLUSH\s+PRIVILEGES\s*$)",
    re.IGNORECASE)
_GLOBAL_SET = re.compile(r"^\s*SET\s+(GLOBAL\s+|@@GLOBAL\.)?character_set_server", re.IGNORECASE)


class InconsistentSchemaError(RuntimeError):
    """A row event for a table whose schema the history does not know (inconsistent.schema.handling.mode=fail)."""


def inconsistent_schema_action(mode: str, table_id: TableId, position: dict[str, Any]) -> bool:
    """What to do with a row event of a table with no known schema: False = skip it; raises for `fail`.

    Debezium's `inconsistent.schema.handling.mode`: `fail` stops with the table and position named,
    `warn` logs them and skips the event, `skip` skips it silently.
    """
    where = f"table {table_id[0]}.{table_id[1]} at binlog position {json.dumps(position, sort_keys=True)}"
    if mode == "fail":
        raise InconsistentSchemaError(
            f"no schema is known for {where}; the schema history misses its DDL. Rebuild it with "
            "snapshot.mode=recovery, or set inconsistent.schema.handling.mode to warn or skip")
    if mode == "warn":
        log.warning("skipping a row event: no schema is known for %s", where)
    return False


def is_ddl_candidate(statement: str, ddl_filter: Sequence[str] = DEFAULT_DDL_FILTER) -> bool:
    """True if a QUERY event's statement goes to the schema history (not BEGIN, DML, nor filtered)."""
    if _NOT_DDL.match(statement):
        return False
    return not any(re.match(pattern, statement.strip(), re.IGNORECASE | re.DOTALL) for pattern in ddl_filter)


@dataclass(frozen=True)
class HistoryEntry:
    """One recorded statement: where it was, in which database, its text and the tables it left."""

    position: dict[str, Any]
    database: str | None
    ddl: str
    table_changes: tuple[dict[str, Any], ...] = ()  # {"type", "id": [db, table], "table": Table.to_json() | None}

    def to_json(self) -> dict[str, Any]:
        return {"position": self.position, "databaseName": self.database, "ddl": self.ddl,
                "tableChanges": list(self.table_changes)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> HistoryEntry:
        return cls(data["position"], data["databaseName"], data["ddl"], tuple(data["tableChanges"]))


class Applied(list[SchemaChange]):
    """What `SchemaHistory.apply` gives: the schema change events to emit (a list), and `truncated`."""

    def __init__(self, events: Iterable[SchemaChange] = (), truncated: Iterable[TableId] = ()) -> None:
        super().__init__(events)
        self.truncated: list[TableId] = list(truncated)


def _everything(*_: str) -> bool:
    return True


@dataclass
class SchemaHistory:
    """The tracked tables and the entries that built them.

    `table_filter(db, table)` says which tables are captured and `database_filter(db)` which
    databases (the connector's include/exclude lists); they matter only for the
    store-only-captured rules and for which events `apply` returns.
    """

    skip_unparseable_ddl: bool = False
    store_only_captured_tables_ddl: bool = False
    store_only_captured_databases_ddl: bool = False
    table_filter: Callable[[str, str], bool] = _everything
    database_filter: Callable[[str], bool] = _everything
    ddl_filter: Sequence[str] = DEFAULT_DDL_FILTER
    state: SchemaState = field(default_factory=SchemaState)
    entries: list[HistoryEntry] = field(default_factory=list)

    def table(self, database: str, name: str) -> Table | None:
        """The table's schema now (after the last applied statement), or None if unknown."""
        return self.state.tables.get((database, name))

    def tables(self) -> dict[TableId, Table]:
        return dict(self.state.tables)

    def apply(self, statement: str, database: str | None, position: dict[str, Any]) -> Applied:
        """Apply one QUERY event's (or the snapshot's) statement and record it.

        Returns the schema change events to emit, with the tables a TRUNCATE emptied (for truncate
        events). A statement that cannot be parsed raises DdlParseError, or with
        `skip_unparseable_ddl` is recorded and emitted as Debezium does: without table changes.
        """
        if not is_ddl_candidate(statement, self.ddl_filter):
            return Applied()
        work = self.state.copy()
        try:
            result = apply_statement(work, statement, database)
        except DdlParseError as exc:
            if not self.skip_unparseable_ddl:
                raise DdlParseError(
                    f"{exc} (at binlog position {json.dumps(position, sort_keys=True)}; set "
                    "schema.history.internal.skip.unparseable.ddl=true to skip statements that cannot be parsed)"
                ) from exc
            log.warning("DDL that cannot be parsed, recorded without table changes: %s", exc)
            work = self.state.copy()
            result = StatementResult([SchemaChange(database or "", statement)])
        events = result.events
        if not self._stored(statement, database, events):
            return Applied(truncated=result.truncated)
        self.state = work
        self.entries.append(HistoryEntry(position, database, statement, _changes_json(events)))
        return Applied([e for e in events if not e.database or self.database_filter(e.database)], result.truncated)

    def _stored(self, statement: str, database: str | None, events: list[SchemaChange]) -> bool:
        if not events:
            return False  # TRUNCATE: no event, nothing to record
        if self.store_only_captured_databases_ddl and not any(
                (e.database or database or "") and self.database_filter(e.database or database or "")
                for e in events) and not _GLOBAL_SET.match(statement):
            return False
        if not self.store_only_captured_tables_ddl or _GLOBAL_SET.match(statement):
            return True
        ids = [i for e in events for c in e.table_changes for i in (c.id, c.previous) if i is not None]
        return any(self.table_filter(db, name) for db, name in ids)

    @classmethod
    def restore(cls, entries: Iterable[HistoryEntry], upto: Callable[[dict[str, Any]], bool] | None = None,
                **settings: Any) -> SchemaHistory:
        """A history rebuilt from recorded entries (those whose position `upto` accepts, in order).

        The DDL is parsed again (database charsets are not in `tableChanges`), then each table the
        entry recorded is set to the recorded table, so the result equals what was recorded even if
        the parser has changed since.
        """
        history = cls(**settings)
        for entry in entries:
            if upto is not None and not upto(entry.position):
                break
            try:
                apply_statement(history.state, entry.ddl, entry.database)
            except DdlParseError:
                if not history.skip_unparseable_ddl:
                    raise
            for change in entry.table_changes:
                table_id = (change["id"][0], change["id"][1])
                if change["type"] == "DROP":
                    history.state.tables.pop(table_id, None)
                else:
                    if change.get("previous"):
                        history.state.tables.pop((change["previous"][0], change["previous"][1]), None)
                    history.state.tables[table_id] = Table.from_json(change["table"])
            history.entries.append(entry)
        return history


def _changes_json(events: list[SchemaChange]) -> tuple[dict[str, Any], ...]:
    return tuple(
        {"type": c.type, "id": list(c.id), "previous": list(c.previous) if c.previous else None,
         "table": c.table.to_json() if c.table is not None else None}
        for e in events for c in e.table_changes)


def binlog_position_key(position: dict[str, Any]) -> tuple[int, int, int]:
    """Order of binlog positions: file sequence number, position, event index within the position."""
    file_name = str(position.get("file", ""))
    suffix = file_name.rsplit(".", 1)[-1]
    return (int(suffix) if suffix.isdigit() else 0, int(position.get("pos", 0)), int(position.get("event", 0)))


def at_or_before(offset: dict[str, Any]) -> Callable[[dict[str, Any]], bool]:
    """An `upto` for `restore`: entries at positions up to `offset` (by file and position)."""
    limit = binlog_position_key(offset)
    return lambda position: binlog_position_key(position) <= limit


class HistoryFile:
    """Entries in a JSON-lines file, appended and fsync'ed before the offset that covers them is committed.

    On restart, `recover(upto)` keeps only the entries up to the committed offset (a crash may have
    left entries of a batch whose offset was never committed; the binlog is read again from the
    committed offset and records them again), rewriting the file atomically.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def load(self) -> list[HistoryEntry]:
        if not self.path.exists():
            return []
        entries = []
        for line in self.path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                try:
                    entries.append(HistoryEntry.from_json(json.loads(line)))
                except json.JSONDecodeError:
                    break  # a torn last line from a crash while appending
        return entries

    def append(self, entries: Iterable[HistoryEntry]) -> None:
        lines = "".join(json.dumps(e.to_json(), sort_keys=True) + "\n" for e in entries)
        if not lines:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(lines)
            f.flush()
            os.fsync(f.fileno())

    def recover(self, upto: Callable[[dict[str, Any]], bool] | None) -> list[HistoryEntry]:
        """The entries up to the committed offset; later ones are removed from the file."""
        entries = self.load()
        kept = entries if upto is None else [e for e in entries if upto(e.position)]
        if len(kept) != len(entries) or (self.path.exists() and not self.path.read_text().endswith("\n")
                                         and self.path.stat().st_size):
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                f.write("".join(json.dumps(e.to_json(), sort_keys=True) + "\n" for e in kept))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        return kept
