"""Changes to one tracked table: the edits CREATE TABLE and ALTER TABLE make.

`TableEditor` holds a table's columns, key and options while a statement changes them, with the
rules the server applies (positions renumbered, key columns NOT NULL, dropped columns leaving the
key) and Debezium's (a UNIQUE index over NOT NULL columns stands in for a missing primary key).
"""

from __future__ import annotations

from dataclasses import replace

from headwater.connectors.binlog.schema import Column, Table


class TableEditor:
    """A mutable copy of a table."""

    def __init__(self, database: str, name: str, columns: list[Column] | None = None,
                 primary_key: list[str] | None = None, default_charset: str | None = None,
                 comment: str | None = None) -> None:
        self.database = database
        self.name = name
        self.columns: list[Column] = list(columns or [])
        self.primary_key: list[str] = list(primary_key or [])
        self.default_charset = default_charset
        self.comment = comment

    @classmethod
    def of(cls, table: Table) -> TableEditor:
        return cls(table.database, table.name, list(table.columns), list(table.primary_key),
                   table.default_charset, table.comment)

    def index(self, name: str) -> int:
        lowered = name.lower()
        for i, c in enumerate(self.columns):
            if c.name.lower() == lowered:
                return i
        return -1

    def column(self, name: str) -> Column | None:
        i = self.index(name)
        return self.columns[i] if i >= 0 else None

    def in_key(self, name: str) -> bool:
        return name.lower() in (k.lower() for k in self.primary_key)

    def put(self, column: Column, *, first: bool = False, after: str | None = None, replacing: str | None = None) -> None:
        """Add `column`, or replace the column named `replacing` (in place unless FIRST/AFTER moves it)."""
        old = self.index(replacing) if replacing is not None else self.index(column.name)
        if old >= 0:
            if replacing is not None and replacing.lower() != column.name.lower():
                self.primary_key = [column.name if k.lower() == replacing.lower() else k for k in self.primary_key]
            if self.in_key(column.name) and column.optional:
                column = replace(column, optional=False)
            if first or after is not None:
                del self.columns[old]
            else:
                self.columns[old] = column
                return
        if first:
            self.columns.insert(0, column)
        elif after is not None:
            i = self.index(after)
            self.columns.insert(i + 1 if i >= 0 else len(self.columns), column)
        else:
            self.columns.append(column)

    def drop(self, name: str) -> None:
        i = self.index(name)
        if i >= 0:
            del self.columns[i]
        self.primary_key = [k for k in self.primary_key if k.lower() != name.lower()]

    def rename_column(self, old: str, new: str) -> None:
        i = self.index(old)
        if i < 0:
            return
        self.columns[i] = replace(self.columns[i], name=new)
        self.primary_key = [new if k.lower() == old.lower() else k for k in self.primary_key]

    def set_primary_key(self, names: list[str]) -> None:
        """PRIMARY KEY (names): the columns become NOT NULL (a NULL default is dropped)."""
        key = []
        for name in names:
            i = self.index(name)
            if i >= 0:
                c = self.columns[i]
                if c.optional:
                    has_default = c.has_default and c.default_expression is not None
                    c = replace(c, optional=False, has_default=has_default)
                    self.columns[i] = c
                key.append(c.name)
            else:
                key.append(name)
        self.primary_key = key

    def unique_key(self, names: list[str]) -> None:
        """A UNIQUE index: the key when the table has none and its columns are all NOT NULL."""
        if self.primary_key:
            return
        columns = [self.column(n) for n in names]
        if columns and all(c is not None and not c.optional for c in columns):
            self.primary_key = [c.name for c in columns if c is not None]

    def table(self) -> Table:
        columns = tuple(replace(c, position=i + 1) for i, c in enumerate(self.columns))
        return Table(self.database, self.name, columns, tuple(self.primary_key), self.default_charset, self.comment)
