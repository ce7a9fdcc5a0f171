"""What every statement parser shares: the statement's cursor and database, its events, and the clauses
several statements have (a table name, index columns, table and database options)."""

from __future__ import annotations

from dataclasses import dataclass

from headwater.connectors.binlog.ddl.datatypes import charset_of_collation
from headwater.connectors.binlog.ddl.lexer import Cursor
from headwater.connectors.binlog.ddl.state import SchemaState, TableChange, TableId
from headwater.connectors.binlog.ddl.tables import TableEditor


@dataclass
class Event:
    """One schema change event before grouping by database."""

    database: str
    ddl: str
    change: TableChange | None
    table_name: str | None  # for the source block's `table`; None for a database-level event


class StatementParser:
    """The state of parsing one statement, and the clauses shared by statements."""

    def __init__(self, state: SchemaState, cur: Cursor, database: str | None, start: int) -> None:
        self.state = state
        self.cur = cur
        self.database = database
        self.start = start
        self.events: list[Event] = []
        self.truncated: list[TableId] = []
        self.whole = cur.text(start, len(cur.tokens))
        self.implicit_charset: set[str] = set()  # columns an ALTER TABLE gave the table's charset

    def raw_prefix(self) -> str:
        """The statement's text from its start up to the next token, as written (spacing included)."""
        t = self.cur.peek()
        end = t.start if t is not None else len(self.cur.sql)
        return self.cur.sql[self.cur.tokens[self.start].start:end]

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
        self.events.append(Event(db, ddl if ddl is not None else self.whole, change, table_name))

    def database_event(self, database: str | None = None) -> None:
        self.emit(None, database=database if database is not None else (self.database or ""))

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
            elif cur.is_kind("word") or cur.is_kind("ident"):  # SHOW CREATE TABLE quotes engine-defined options
                cur.next()
                cur.accept_kind("=")
                if not cur.at_end() and not cur.is_kind(","):
                    cur.next()
            else:
                raise cur.error("unsupported table option")
            cur.accept_kind(",") if creating else None
        return read
