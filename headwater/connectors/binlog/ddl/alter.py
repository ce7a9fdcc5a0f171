"""ALTER TABLE: column, key and option changes, RENAME TO, CONVERT TO CHARACTER SET."""

from __future__ import annotations

from dataclasses import replace

from headwater.connectors.binlog.ddl.base import StatementParser
from headwater.connectors.binlog.ddl.columns import ColumnDefinition, parse_column_definition, parse_default
from headwater.connectors.binlog.ddl.state import TableChange, TableId
from headwater.connectors.binlog.ddl.tables import TableEditor


class AlterTable(StatementParser):
    """The ALTER TABLE statement."""

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
            before = cur.i
            new_id = self.alter_specification(editor, table_id)
            if cur.i == before:
                raise cur.error("unsupported ALTER TABLE specification")
            if new_id is not None:
                renamed_from = renamed_from or table_id
                del self.state.tables[table_id]
                table_id = new_id
                editor.database, editor.name = new_id
            if not cur.accept_kind(","):
                if not cur.at_end():
                    continue
                break
        if editor.default_charset != table.default_charset:  # columns added here take the new table charset
            editor.columns = [replace(c, charset=editor.default_charset) if c.name in self.implicit_charset else c
                              for c in editor.columns]
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
            if_exists = cur.accept("IF", "EXISTS")
            name = cur.name()
            self.put_column(editor, name, name, if_exists)
        elif cur.accept("CHANGE"):
            cur.accept("COLUMN")
            if_exists = cur.accept("IF", "EXISTS")
            old = cur.name()
            new = cur.name()
            self.put_column(editor, old, new, if_exists)
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
            editor.convert_to(charset)
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

    def add_column(self, editor: TableEditor, name: str, definition: ColumnDefinition) -> None:
        column = definition.to_column(name, len(editor.columns) + 1, editor.default_charset)
        self.note_charset(column.name, definition)
        editor.put(column)
        if definition.primary:
            editor.set_primary_key([name])
        elif definition.unique or definition.data_type.serial:
            editor.unique_key([name])

    def note_charset(self, name: str, definition: ColumnDefinition) -> None:
        """Remember a column (re)defined by this ALTER that takes the table's charset."""
        if definition.data_type.uses_charset and definition.charset is None and definition.data_type.charset is None:
            self.implicit_charset.add(name)

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

    def put_column(self, editor: TableEditor, old: str, new: str, if_exists: bool) -> None:
        """MODIFY / CHANGE: the column `old` redefined (and renamed to `new`), maybe moved."""
        cur = self.cur
        definition = parse_column_definition(cur)
        first = cur.accept("FIRST")
        after = cur.name() if cur.accept("AFTER") else None
        existing = editor.column(old)
        if existing is None:
            if if_exists:
                return
            raise cur.error(f"column {old} not found in {editor.database}.{editor.name}")
        column = definition.to_column(new, existing.position, editor.default_charset)
        self.note_charset(column.name, definition)
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
