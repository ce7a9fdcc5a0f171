"""What DDL changes: the tracked tables, each database's default charset, the server's charset.

`SchemaState` is the parser's working set; `SchemaChange` and `TableChange` are what one statement
did, in the form of Debezium's schema change events (`databaseName`, `ddl`, `tableChanges`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from headwater.connectors.binlog.schema import Table

TableId = tuple[str, str]  # (database, table)


def quoted_id(table_id: TableId) -> str:
    """Debezium's `id` in `tableChanges`: `"db"."table"`."""
    return f'"{table_id[0]}"."{table_id[1]}"'


@dataclass
class SchemaState:
    """Tables by (database, name), default charsets by database, and `character_set_server`."""

    tables: dict[TableId, Table] = field(default_factory=dict)
    database_charsets: dict[str, str] = field(default_factory=dict)
    server_charset: str | None = None

    def copy(self) -> SchemaState:
        return SchemaState(dict(self.tables), dict(self.database_charsets), self.server_charset)

    def charset_for_database(self, database: str | None) -> str | None:
        if database is not None and database in self.database_charsets:
            return self.database_charsets[database]
        return self.server_charset


@dataclass(frozen=True)
class TableChange:
    """One entry of `tableChanges`: CREATE, ALTER (also a rename: `previous` is the old id) or DROP."""

    type: str
    id: TableId
    table: Table | None
    previous: TableId | None = None

    def to_debezium(self) -> dict[str, Any]:
        return {"type": self.type, "id": quoted_id(self.id),
                "table": self.table.to_debezium() if self.table is not None else None}


@dataclass(frozen=True)
class SchemaChange:
    """One schema change event: `databaseName`, `ddl`, `tableChanges`, and the source block's `table`."""

    database: str
    ddl: str
    table_changes: tuple[TableChange, ...] = ()
    source_table: str | None = None

    def to_debezium(self) -> dict[str, Any]:
        """The event's `databaseName`, `schemaName`, `ddl` and `tableChanges` (the binlog helper adds source, ts_ms)."""
        return {"databaseName": self.database, "schemaName": None, "ddl": self.ddl,
                "tableChanges": [c.to_debezium() for c in self.table_changes]}
