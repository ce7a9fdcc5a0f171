"""One SQL statement applied to the tracked schema, giving Debezium's schema change events.

`apply_statement(state, sql, database)` parses `sql` (one statement or several separated by `;`,
as a binlog QUERY event or the snapshot gives them) with `database` as the current database, changes
`state` and returns the events: one per table for DROP TABLE and RENAME TABLE, one per statement
otherwise, grouped by database as Debezium's binlog connector groups them. A statement that changes
no table (GRANT, a view, ALTER of an unknown table, ...) gives one event without `tableChanges`.
TRUNCATE changes nothing and gives no event; the tables it empties are returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from headwater.connectors.binlog.ddl.columns import ColumnDefinition, parse_column_definition, parse_default
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


@dataclass
class _Event:
    database: str
    ddl: str
    change: TableChange | None
    table_name: str | None  # for the source block's `table`; None for a database-level event


def _split(cur: Cursor) -> list[tuple[int, int]]:
    """Token ranges of the statements in the cursor's text (split at top-level `;`)."""
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
    events: list[_Event] = []
    current = database
    for start, end in _split(cur):
        sub = Cursor.__new__(Cursor)
        sub.sql, sub.tokens, sub.i = sql, cur.tokens[:end], start
        parser = _Statement(work, sub, current, start, result)
        parser.run()
        events.extend(parser.events)
        current = parser.database
    state.tables, state.database_charsets, state.server_charset = (
        work.tables, work.database_charsets, work.server_charset)
    result.events = _group(events, sql, database)
    return result


def _group(events: list[_Event], sql: str, database: str | None) -> list[SchemaChange]:
    """Debezium's order: events grouped by database (first appearance first), each with the group's tables."""
    if not events:
        return []
    order: dict[str, list[_Event]] = {}
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


class _Statement:
    """The parser of one statement."""

    def __init__(self, state: SchemaState, cur: Cursor, database: str | None, start: int,
                 result: StatementResult) -> None:
        self.state = state
        self.cur = cur
        self.database = database
        self.start = start
        self.result = result
        self.events: list[_Event] = []
        self.whole = cur.text(start, len(cur.tokens))

    # -- helpers -----------------------------------------------------------------------------
    def table_id(self) -> TableId:
        db, name = self.cur.qualified_name(self.database)
        if db is None:
            raise self.cur.error("no database selected for table " + name)
        return db, name

    def emit(self, change: TableChange | None, ddl: str | None = None, database: str | None = None,
             table_name: str | None = None) -> None:
        db = database if database is not None else (change.id[0] if change is not None else self.database or "")
        if change is not None and table_name is None:
            table_name = change.id[1]
        self.events.append(_Event(db, ddl if ddl is not None else self.whole, change, table_name))

    def database_event(self, database: str | None = None) -> None:
        self.emit(None, database=database if database is not None else (self.database or ""))

    # -- dispatch ----------------------------------------------------------------------------
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
            self.result.truncated.append(self.table_id())
        elif word == "USE":
            cur.next()
            self.database = cur.name()
            self.database_event()
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

    # -- CREATE ------------------------------------------------------------------------------
    def create(self) -> None:
        cur = self.cur
        cur.next()
        replace_existing = cur.accept("OR", "REPLACE")
        cur.accept("TEMPORARY")
        if cur.accept("TABLE"):
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

    def database_options(self) -> str | None:
        cur = self.cur
        charset = None
        while not cur.at_end():
            cur.accept("DEFAULT")
            if cur.accept("CHARACTER", "SET") or cur.accept("CHARSET"):
                cur.accept_kind("=")
                charset = cur.name().lower()
            elif cur.accept("COLLATE"):
                cur.accept_kind("=")
                collation = cur.name()
                charset = charset or charset_of_collation(collation)
            else:
                cur.next()
        return charset

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

    def index_columns(self) -> list[str]:
        """`(a, b(10) DESC, ...)`: the column names."""
        cur = self.cur
        cur.expect_kind("(")
        names = []
        while True:
            if cur.is_kind("("):
                cur.skip_parens()  # an expression part
            else:
                names.append(cur.name())
                if cur.is_kind("("):
                    cur.skip_parens()
                cur.accept("ASC") or cur.accept("DESC")
            if not cur.accept_kind(","):
                break
        cur.expect_kind(")")
        return names

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

    def skip_index_name_and_type(self) -> None:
        cur = self.cur
        while not cur.is_kind("("):
            cur.next()

    def table_options(self, editor: TableEditor, creating: bool) -> bool:
        """Table options (until the end, a SELECT or, in ALTER, a `,`); True if any option was read."""
        cur = self.cur
        read = False
        while not cur.at_end() and not cur.is_kind(","):
            if cur.is_word("AS", "SELECT", "IGNORE", "REPLACE", "WITH") and not cur.is_word("SYSTEM", offset=1):
                if creating:
                    while not cur.at_end():
                        cur.next()
                return read
            if cur.is_kind("("):
                if creating:
                    while not cur.at_end():
                        cur.next()
                    return read
                return read
            read = True
            cur.accept("DEFAULT")
            if cur.accept("CHARACTER", "SET") or cur.accept("CHARSET") or cur.accept("CHAR", "SET"):
                cur.accept_kind("=")
                editor.default_charset = cur.name().lower()
            elif cur.accept("COLLATE"):
                cur.accept_kind("=")
                collation = cur.name()
                editor.default_charset = charset_of_collation(collation)
            elif cur.accept("COMMENT"):
                cur.accept_kind("=")
                editor.comment = cur.expect_kind("string").text
            elif cur.accept("WITH", "SYSTEM", "VERSIONING"):
                pass
            elif cur.accept("PARTITION", "BY") or cur.accept("PARTITION", "BY") or cur.is_word("PARTITION", "PARTITIONS"):
                while not cur.at_end() and not (creating and cur.is_word("AS", "SELECT")):
                    cur.next()
            elif cur.accept("UNION"):
                cur.accept_kind("=")
                cur.skip_parens()
            elif cur.accept("DATA", "DIRECTORY") or cur.accept("INDEX", "DIRECTORY"):
                cur.accept_kind("=")
                cur.next()
            elif cur.is_kind("word"):
                cur.next()
                cur.accept_kind("=")
                if not cur.at_end() and not cur.is_kind(","):
                    cur.next()
            else:
                raise cur.error("unsupported table option")
            cur.accept_kind(",") if creating else None
        return read

    # -- ALTER -------------------------------------------------------------------------------
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

    def alter_table(self) -> None:
        cur = self.cur
        cur.accept("IF", "EXISTS")
        table_id = self.table_id()
        if (cur.accept("WAIT") or cur.accept("NOWAIT")) and cur.is_kind("number"):
            cur.next()
        table = self.state.tables.get(table_id)
        if table is None:
            self.database_event()
            return
        editor = TableEditor.of(table)
        renamed_from: TableId | None = None
        while not cur.at_end():
            new_id = self.alter_specification(editor, table_id)
            if new_id is not None:
                renamed_from = renamed_from or table_id
                del self.state.tables[table_id]
                table_id = new_id
                editor.database, editor.name = new_id
            if not cur.accept_kind(","):
                if not cur.at_end():
                    continue
                break
        new = editor.table()
        self.state.tables[table_id] = new
        self.emit(TableChange("ALTER", table_id, new, renamed_from))

    def alter_specification(self, editor: TableEditor, table_id: TableId) -> TableId | None:
        """One ALTER TABLE specification; the new id for RENAME TO."""
        cur = self.cur
        if cur.accept("ADD"):
            self.alter_add(editor)
        elif cur.accept("DROP"):
            self.alter_drop(editor)
        elif cur.accept("MODIFY"):
            cur.accept("COLUMN")
            cur.accept("IF", "EXISTS")
            name = cur.name()
            self.put_column(editor, name, name)
        elif cur.accept("CHANGE"):
            cur.accept("COLUMN")
            cur.accept("IF", "EXISTS")
            old = cur.name()
            new = cur.name()
            self.put_column(editor, old, new)
        elif cur.accept("RENAME"):
            if cur.accept("COLUMN"):
                cur.accept("IF", "EXISTS")
                old = cur.name()
                cur.expect("TO")
                editor.rename_column(old, cur.name())
            elif cur.accept("INDEX") or cur.accept("KEY"):
                cur.skip_to_comma()
            else:
                cur.accept("TO") or cur.accept("AS")
                return self.table_id()
        elif cur.is_word("ALTER"):
            cur.next()
            if cur.accept("INDEX") or cur.accept("KEY"):
                cur.skip_to_comma()
                return None
            cur.accept("COLUMN")
            cur.accept("IF", "EXISTS")
            name = cur.name()
            i = editor.index(name)
            if cur.accept("SET", "DEFAULT"):
                has_default, expression = parse_default(cur)
                if i >= 0:
                    editor.columns[i] = replace(editor.columns[i], has_default=has_default,
                                                default_expression=expression)
            elif cur.accept("DROP", "DEFAULT"):
                if i >= 0:
                    editor.columns[i] = replace(editor.columns[i], has_default=False, default_expression=None)
            else:
                cur.skip_to_comma()
        elif cur.accept("CONVERT", "TO"):
            cur.accept("CHARACTER", "SET") or cur.accept("CHARSET")
            charset = cur.name().lower()
            if cur.accept("COLLATE"):
                cur.name()
            if charset == "default":
                charset = self.state.charset_for_database(table_id[0]) or charset
            editor.default_charset = charset
            editor.columns = [replace(c, charset=charset) if c.charset is not None else c for c in editor.columns]
        elif (cur.is_word("ALGORITHM", "LOCK") and cur.is_kind("=", 1)) or cur.is_word("FORCE", "ENABLE", "DISABLE", "DISCARD", "IMPORT", "ORDER", "ANALYZE", "CHECK",
                         "COALESCE", "REORGANIZE", "EXCHANGE", "OPTIMIZE", "REBUILD", "REPAIR", "REMOVE",
                         "TRUNCATE", "UPGRADE", "CONVERT"):
            cur.skip_to_comma()
        elif cur.is_word("PARTITION"):
            while not cur.at_end():
                cur.next()
        else:
            self.table_options(editor, creating=False)
        return None

    def alter_add(self, editor: TableEditor) -> None:
        cur = self.cur
        if cur.accept("CONSTRAINT") and not cur.is_word("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
            cur.accept("IF", "NOT", "EXISTS")
            cur.name()
        if cur.accept("PRIMARY", "KEY"):
            self.skip_index_name_and_type()
            editor.set_primary_key(self.index_columns())
            cur.skip_to_comma()
        elif cur.accept("UNIQUE"):
            cur.accept("KEY") or cur.accept("INDEX")
            self.skip_index_name_and_type()
            editor.unique_key(self.index_columns())
            cur.skip_to_comma()
        elif cur.is_word("INDEX", "KEY", "FULLTEXT", "SPATIAL", "FOREIGN", "CHECK", "PARTITION", "PERIOD",
                         "SYSTEM"):
            cur.skip_to_comma()
        else:
            cur.accept("COLUMN")
            cur.accept("IF", "NOT", "EXISTS")
            if cur.accept_kind("("):
                while True:
                    name = cur.name()
                    definition = parse_column_definition(cur)
                    self.add_column(editor, name, definition)
                    if not cur.accept_kind(","):
                        break
                cur.expect_kind(")")
                return
            name = cur.name()
            if editor.index(name) >= 0:  # ADD COLUMN IF NOT EXISTS of an existing column
                parse_column_definition(cur)
                self.position(editor, name, skip=True)
                return
            self.add_column(editor, name, parse_column_definition(cur))
            self.position(editor, name)

    def add_column(self, editor: TableEditor, name: str, definition) -> None:  # type: ignore[no-untyped-def]
        column = definition.to_column(name, len(editor.columns) + 1, editor.default_charset)
        editor.put(column)
        if definition.primary:
            editor.set_primary_key([name])
        elif definition.unique or definition.data_type.serial:
            editor.unique_key([name])

    def position(self, editor: TableEditor, name: str, skip: bool = False) -> None:
        cur = self.cur
        if cur.accept("FIRST"):
            if not skip:
                column = editor.column(name)
                assert column is not None
                editor.put(column, first=True)
        elif cur.accept("AFTER"):
            after = cur.name()
            if not skip:
                column = editor.column(name)
                assert column is not None
                editor.put(column, after=after)

    def put_column(self, editor: TableEditor, old: str, new: str) -> None:
        cur = self.cur
        definition = parse_column_definition(cur)
        existing = editor.column(old)
        if existing is None:
            raise cur.error(f"column {old} not found in {editor.database}.{editor.name}")
        column = definition.to_column(new, existing.position, editor.default_charset)
        first = cur.accept("FIRST")
        after = cur.name() if cur.accept("AFTER") else None
        editor.put(column, first=first, after=after, replacing=old)
        if definition.primary:
            editor.set_primary_key([new])
        elif definition.unique:
            editor.unique_key([new])

    def alter_drop(self, editor: TableEditor) -> None:
        cur = self.cur
        if cur.accept("PRIMARY", "KEY"):
            editor.primary_key = []
        elif cur.is_word("INDEX", "KEY", "FOREIGN", "CHECK", "CONSTRAINT", "PARTITION", "PERIOD", "SYSTEM"):
            cur.skip_to_comma()
        else:
            cur.accept("COLUMN")
            cur.accept("IF", "EXISTS")
            editor.drop(cur.name())
            cur.accept("RESTRICT") or cur.accept("CASCADE")

    # -- DROP, RENAME ------------------------------------------------------------------------
    def drop(self) -> None:
        cur = self.cur
        cur.next()
        cur.accept("TEMPORARY")
        if cur.accept("TABLE") or cur.accept("TABLES"):
            cur.accept("IF", "EXISTS")
            prefix = cur.text(self.start)
            suffix = ""
            while True:
                table_id = self.table_id()
                self.state.tables.pop(table_id, None)
                drop_type = ""
                if cur.is_word("RESTRICT", "CASCADE"):
                    drop_type = " " + cur.peek().raw  # type: ignore[union-attr]
                self.emit(TableChange("DROP", table_id, None),
                          ddl=f"{prefix} `{table_id[0]}`.`{table_id[1]}`{drop_type}{suffix}")
                if not cur.accept_kind(","):
                    break
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
        prefix = cur.text(self.start)
        while True:
            clause_start = cur.i
            old = self.table_id()
            if (cur.accept("WAIT") or cur.accept("NOWAIT")) and cur.is_kind("number"):
                cur.next()
            cur.expect("TO")
            new = self.table_id()
            table = self.state.tables.pop(old, None)
            if table is not None:
                moved = replace(table, database=new[0], name=new[1])
                self.state.tables[new] = moved
                self.emit(TableChange("ALTER", new, moved, old), ddl=f"{prefix} {cur.text(clause_start)}")
            if not cur.accept_kind(","):
                break
        if not self.events:
            self.database_event()
