"""One SQL statement applied to the tracked schema, giving Debezium's schema change events.

`apply_statement(state, sql, database)` parses `sql` (one statement or several separated by `;`,
as a binlog QUERY event or the snapshot gives them) with `database` as the current database, changes
`state` and returns the events: one per table for DROP TABLE and RENAME TABLE, one per statement
otherwise, grouped by database as Debezium's binlog connector groups them. A statement that changes
no table (GRANT, a view, ALTER of an unknown table, ...) gives one event without `tableChanges`.
TRUNCATE changes nothing and gives no event; the tables it empties are returned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from headwater.connectors.binlog.ddl.alter import AlterTable
from headwater.connectors.binlog.ddl.base import Event
from headwater.connectors.binlog.ddl.columns import ColumnDefinition, parse_column_definition
from headwater.connectors.binlog.ddl.datatypes import charset_of_collation
from headwater.connectors.binlog.ddl.lexer import Cursor
from headwater.connectors.binlog.ddl.state import SchemaChange, SchemaState, TableChange, TableId
from headwater.connectors.binlog.ddl.tables import TableEditor

# Statements that change no table: they are recorded and emitted without tableChanges.
_NO_SCHEMA_EFFECT = {
    "GRANT", "REVOKE", "FLUSH", "ANALYZE", "OPTIMIZE", "REPAIR", "CHECK", "CHECKSUM", "LOCK", "UNLOCK",
    "INSTALL", "UNINSTALL", "RESET", "PURGE", "KILL", "DO", "CALL", "HANDLER", "LOAD", "SAVEPOINT", "RELEASE",
    "XA", "SHUTDOWN", "BINLOG", "CHANGE", "START", "STOP", "PREPARE", "EXECUTE", "DEALLOCATE", "SIGNAL",
    "RESIGNAL", "SHOW", "SELECT", "BACKUP",
}
# Words that begin a data type (to tell a column named `key` or `index` from an index definition).
_TYPE_WORDS = {
    "INT", "INTEGER", "TINYINT", "SMALLINT", "MEDIUMINT", "BIGINT", "DECIMAL", "NUMERIC", "FLOAT", "DOUBLE",
    "REAL", "BIT", "BOOL", "BOOLEAN", "CHAR", "VARCHAR", "TEXT", "TINYTEXT", "MEDIUMTEXT", "LONGTEXT", "BLOB",
    "TINYBLOB", "MEDIUMBLOB", "LONGBLOB", "BINARY", "VARBINARY", "DATE", "TIME", "DATETIME", "TIMESTAMP",
    "YEAR", "ENUM", "SET", "JSON", "SERIAL", "NCHAR", "NVARCHAR", "NATIONAL", "CHARACTER", "DEC", "FIXED",
    "GEOMETRY", "POINT", "UUID", "INET4", "INET6",
}


@dataclass
class StatementResult:
    """The events of one `apply_statement` call, and the tables a TRUNCATE emptied."""

    events: list[SchemaChange] = field(default_factory=list)
    truncated: list[TableId] = field(default_factory=list)


_COMPOUND = re.compile(
    r"^\s*CREATE\s+(OR\s+REPLACE\s+)?(DEFINER\s*=\s*\S+\s+)?(AGGREGATE\s+)?"
    r"(PROCEDURE|FUNCTION|TRIGGER|EVENT|PACKAGE)\b", re.IGNORECASE)


def _split(cur: Cursor) -> list[tuple[int, int]]:
    """Token ranges of the statements in the cursor's text (split at `;`, except in a routine's body)."""
    if _COMPOUND.match(cur.sql):
        return [(0, len(cur.tokens))]
    ranges = []
    start = 0
    for i, t in enumerate(cur.tokens):
        if t.kind == ";":
            if i > start:
                ranges.append((start, i))
            start = i + 1
    if start < len(cur.tokens):
        ranges.append((start, len(cur.tokens)))
    return ranges


def apply_statement(state: SchemaState, sql: str, database: str | None) -> StatementResult:
    """Apply `sql` to `state` with `database` current; raises DdlParseError (state unchanged then)."""
    cur = Cursor(sql)
    result = StatementResult()
    work = state.copy()
    events: list[Event] = []
    current = database
    for start, end in _split(cur):
        sub = Cursor.__new__(Cursor)
        sub.sql, sub.tokens, sub.i = sql, cur.tokens[:end], start
        parser = _Statement(work, sub, current, start)
        parser.run()
        events.extend(parser.events)
        result.truncated.extend(parser.truncated)
        current = parser.database
    state.tables, state.database_charsets, state.server_charset = (
        work.tables, work.database_charsets, work.server_charset)
    result.events = _group(events)
    return result


def _group(events: list[Event]) -> list[SchemaChange]:
    """Debezium's order: events grouped by database (first appearance first), each with the group's tables."""
    if not events:
        return []
    order: dict[str, list[Event]] = {}
    for e in events:
        order.setdefault(e.database, []).append(e)
    out = []
    for db, group in order.items():
        names = list(dict.fromkeys(e.table_name for e in group if e.table_name is not None))
        source_table = ",".join(names) if names else None
        for e in group:
            changes = (e.change,) if e.change is not None else ()
            out.append(SchemaChange(db, e.ddl, changes, source_table if e.table_name is not None else None))
    return out


class _Statement(AlterTable):
    """The parser of one statement: which statement it is, and all but ALTER TABLE."""

    def run(self) -> None:
        cur = self.cur
        first = cur.peek()
        if first is None:
            return
        word = first.upper
        if word == "CREATE":
            self.create()
        elif word == "ALTER":
            self.alter()
        elif word == "DROP":
            self.drop()
        elif word == "RENAME":
            cur.next()
            if cur.accept("TABLE") or cur.accept("TABLES"):
                self.rename_tables()
            else:
                self.database_event()
        elif word == "TRUNCATE":
            cur.next()
            cur.accept("TABLE")
            self.truncated.append(self.table_id())
        elif word == "USE":
            cur.next()
            self.database_event()  # in the database the statement came with, as Debezium's
            self.database = cur.name()
        elif word == "SET":
            self.set_statement()
        elif word in _NO_SCHEMA_EFFECT:
            self.database_event()
        else:
            raise cur.error("unsupported statement")

    def set_statement(self) -> None:
        cur = self.cur
        cur.next()
        while not cur.at_end():
            start = cur.i
            cur.skip_to_comma()
            words = [t for t in cur.tokens[start:cur.i]]
            names = [t.text.lower() for t in words if t.kind in ("word", "ident")]
            if names and "=" in [t.kind for t in words]:
                value_start = [t.kind for t in words].index("=") + 1
                value = words[value_start].text if value_start < len(words) else ""
                key = names[-2] if names[0] in ("global", "session", "local") and len(names) > 2 else names[0]
                key = key.split(".")[-1]
                if key == "character_set_server":
                    self.state.server_charset = value.lower()
                elif key == "collation_server" and self.state.server_charset is None:
                    self.state.server_charset = charset_of_collation(value)
                elif key == "character_set_database" and self.database:
                    self.state.database_charsets[self.database] = value.lower()
            if not cur.accept_kind(","):
                break
        self.database_event()

    def create(self) -> None:
        cur = self.cur
        cur.next()
        replace_existing = cur.accept("OR", "REPLACE")
        if cur.accept("TEMPORARY"):  # not in a row-based binlog, and never a captured table
            self.database_event()
        elif cur.accept("TABLE"):
            self.create_table(replace_existing)
        elif cur.accept("DATABASE") or cur.accept("SCHEMA"):
            self.create_database()
        elif cur.is_word("UNIQUE", "FULLTEXT", "SPATIAL", "INDEX") or cur.is_word("ONLINE", "OFFLINE"):
            self.create_index()
        else:
            self.database_event()

    def create_database(self) -> None:
        cur = self.cur
        cur.accept("IF", "NOT", "EXISTS")
        name = cur.name()
        if name in self.state.database_charsets and self.state.database_charsets[name] is not None:
            pass
        charset = self.database_options()
        self.state.database_charsets[name] = charset or self.state.server_charset or ""
        if not self.state.database_charsets[name]:
            del self.state.database_charsets[name]
        self.database_event(name)

    def create_index(self) -> None:
        cur = self.cur
        cur.accept("ONLINE") or cur.accept("OFFLINE")
        unique = cur.accept("UNIQUE")
        cur.accept("FULLTEXT") or cur.accept("SPATIAL")
        cur.expect("INDEX")
        cur.accept("IF", "NOT", "EXISTS")
        cur.name()
        if cur.accept("USING"):
            cur.next()
        cur.expect("ON")
        table_id = self.table_id()
        names = self.index_columns()
        table = self.state.tables.get(table_id)
        if unique and table is not None and not table.primary_key:
            editor = TableEditor.of(table)
            editor.unique_key(names)
            if editor.primary_key:
                new = editor.table()
                self.state.tables[table_id] = new
                self.emit(TableChange("ALTER", table_id, new))
                return
        self.emit(None, database=table_id[0], table_name="")

    def create_table(self, replace_existing: bool) -> None:
        cur = self.cur
        cur.accept("IF", "NOT", "EXISTS")
        table_id = self.table_id()
        if table_id in self.state.tables and not replace_existing:  # as Debezium: the known table stays
            self.database_event()
            return
        like = cur.accept("LIKE") or (cur.is_kind("(") and cur.is_word("LIKE", offset=1))
        if like:
            if cur.accept_kind("("):
                cur.expect("LIKE")
            source = self.state.tables.get(self.table_id())
            if source is None:
                self.database_event()
                return
            new = replace(source, database=table_id[0], name=table_id[1], comment=None)
            self.state.tables[table_id] = new
            self.emit(TableChange("CREATE", table_id, new))
            return
        editor = TableEditor(table_id[0], table_id[1])
        columns: list[tuple[str, ColumnDefinition]] = []
        keys: list[tuple[str, list[str]]] = []
        if cur.is_kind("(") and not cur.is_word("SELECT", offset=1):
            cur.next()
            while True:
                self.table_element(columns, keys)
                if not cur.accept_kind(","):
                    break
            cur.expect_kind(")")
        self.table_options(editor, creating=True)
        if editor.default_charset is None:
            editor.default_charset = self.state.charset_for_database(table_id[0])
        self.finish_columns(editor, columns, keys)
        new = editor.table()
        self.state.tables[table_id] = new
        self.emit(TableChange("CREATE", table_id, new))

    @staticmethod
    def finish_columns(editor: TableEditor, columns: list[tuple[str, ColumnDefinition]],
                       table_keys: list[tuple[str, list[str]]]) -> None:
        """Build the CREATE TABLE's columns now that the table charset is known, then apply its keys."""
        keys: list[tuple[str, list[str]]] = []
        for name, definition in columns:
            editor.columns.append(definition.to_column(name, len(editor.columns) + 1, editor.default_charset))
            if definition.primary:
                editor.set_primary_key([name])
            elif definition.unique or definition.data_type.serial:
                keys.append(("unique", [name]))
        keys += table_keys
        for kind, names in keys:
            if kind == "primary":
                editor.set_primary_key(names)
        for kind, names in keys:
            if kind == "unique":
                editor.unique_key(names)

    def table_element(self, columns: list[tuple[str, ColumnDefinition]], keys: list[tuple[str, list[str]]]) -> None:
        """One item of CREATE TABLE's list: a column, or a key or constraint (only keys that matter are kept)."""
        cur = self.cur
        if cur.accept("CONSTRAINT") and not cur.is_word("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            cur.name()
        if cur.accept("PRIMARY", "KEY"):
            self.skip_index_name_and_type()
            keys.append(("primary", self.index_columns()))
            cur.skip_to_comma()
        elif cur.accept("UNIQUE"):
            cur.accept("KEY") or cur.accept("INDEX")
            self.skip_index_name_and_type()
            keys.append(("unique", self.index_columns()))
            cur.skip_to_comma()
        elif cur.is_word("KEY", "INDEX", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK", "PERIOD") and not self.column_named_like_keyword():
            cur.skip_to_comma()
        else:
            name = cur.name()
            columns.append((name, parse_column_definition(cur)))

    def column_named_like_keyword(self) -> bool:
        """`key INT`, `index VARCHAR(3)`: a column whose name is a key word (a data type follows it)."""
        after = self.cur.peek(1)
        return after is not None and after.kind == "word" and after.upper in _TYPE_WORDS

    def alter(self) -> None:
        cur = self.cur
        cur.next()
        cur.accept("ONLINE") or cur.accept("OFFLINE")
        cur.accept("IGNORE")
        if cur.accept("TABLE"):
            self.alter_table()
        elif cur.accept("DATABASE") or cur.accept("SCHEMA"):
            name = self.database
            if not cur.is_word("DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "COMMENT", "UPGRADE"):
                name = cur.name()
            charset = self.database_options()
            if name is not None and charset is not None:
                self.state.database_charsets[name] = charset
            self.database_event(name)
        else:
            self.database_event()

    def drop(self) -> None:
        cur = self.cur
        cur.next()
        cur.accept("TEMPORARY")
        if cur.accept("TABLE") or cur.accept("TABLES"):
            cur.accept("IF", "EXISTS")
            prefix = self.raw_prefix()
            table_ids = [self.table_id()]
            while cur.accept_kind(","):
                table_ids.append(self.table_id())
            drop_type = " " + cur.next().raw if cur.is_word("RESTRICT", "CASCADE") else ""
            for table_id in table_ids:  # one event per table, its text rebuilt as Debezium does
                self.state.tables.pop(table_id, None)
                self.emit(TableChange("DROP", table_id, None),
                          ddl=f"{prefix}`{table_id[0]}`.`{table_id[1]}`{drop_type}")
        elif cur.accept("DATABASE") or cur.accept("SCHEMA"):
            cur.accept("IF", "EXISTS")
            name = cur.name()
            for table_id in [t for t in self.state.tables if t[0] == name]:
                del self.state.tables[table_id]
            self.state.database_charsets.pop(name, None)
            self.database_event(name)
        elif cur.is_word("INDEX") or cur.is_word("ONLINE", "OFFLINE"):
            cur.accept("ONLINE") or cur.accept("OFFLINE")
            cur.expect("INDEX")
            cur.accept("IF", "EXISTS")
            cur.name()
            cur.expect("ON")
            table_id = self.table_id()
            self.emit(None, database=table_id[0], table_name="")
        else:
            self.database_event()

    def rename_tables(self) -> None:
        cur = self.cur
        cur.accept("IF", "EXISTS")
        if (cur.accept("WAIT") or cur.accept("NOWAIT")) and cur.is_kind("number"):
            cur.next()
        prefix = self.raw_prefix()
        while True:
            clause_start = cur.i
            old = self.table_id()
            cur.expect("TO")
            new = self.table_id()
            table = self.state.tables.pop(old, None)
            if table is not None:
                moved = replace(table, database=new[0], name=new[1])
                self.state.tables[new] = moved
                self.emit(TableChange("ALTER", new, moved, old), ddl=prefix + cur.text(clause_start))
            if not cur.accept_kind(","):
                break
        if not self.events:
            self.database_event()
