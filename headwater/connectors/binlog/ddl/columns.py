"""Column definitions (`name type [NOT NULL] [DEFAULT ...] [AUTO_INCREMENT] ...`) as Debezium models them.

`parse_column_definition` reads the part after the column name and returns a `ColumnDefinition`:
the data type, nullability as written, the default as Debezium's `defaultValueExpression` (string
literals without their quotes, numbers and booleans as written, bit literals' digits,
CURRENT_TIMESTAMP/NOW as `1970-01-01 00:00:00`, any other expression as no value), AUTO_INCREMENT,
COMMENT, inline PRIMARY KEY / UNIQUE and a COLLATE or CHARACTER SET given after the type.
`to_column` makes the model's `Column` of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from headwater.connectors.binlog.ddl.datatypes import DataType, charset_of_collation, parse_data_type
from headwater.connectors.binlog.ddl.lexer import Cursor
from headwater.connectors.binlog.schema import Column

_CURRENT_TIMESTAMP = {"CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP", "CURRENT_DATE",
                      "CURRENT_TIME", "CURDATE", "CURTIME", "SYSDATE", "UTC_TIMESTAMP"}
# column attributes that are one word, or one word and a value, and change nothing Debezium models
_IGNORED_FLAGS = {"INVISIBLE", "VISIBLE", "COMPRESSED", "PERSISTENT", "STORED", "VIRTUAL"}


@dataclass
class ColumnDefinition:
    """What a column definition says (None where it says nothing)."""

    data_type: DataType
    optional: bool | None = None
    has_default: bool = False
    default_expression: str | None = None
    auto_increment: bool = False
    comment: str | None = None
    primary: bool = False
    unique: bool = False
    charset: str | None = None

    def to_column(self, name: str, position: int, table_charset: str | None) -> Column:
        t = self.data_type
        optional = self.optional
        if optional is None:
            optional = not (self.primary or t.serial)
        charset = self.charset or t.charset
        if t.uses_charset and charset is None:
            charset = table_charset
        if not t.uses_charset:
            charset = None
        return Column(
            name=name, type_name=t.name, type_expression=t.name, jdbc_type=t.jdbc_type, length=t.length,
            scale=t.scale, position=position, optional=optional,
            auto_incremented=self.auto_increment or t.serial, generated=self.auto_increment or t.serial,
            charset=charset, comment=self.comment, has_default=self.has_default,
            default_expression=self.default_expression, enum_values=t.enum_values,
        )


def _unquote(raw: str) -> str:
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        return raw[1:-1]
    return raw


def parse_default(cur: Cursor) -> tuple[bool, str | None]:
    """The value after DEFAULT: (has a default, Debezium's defaultValueExpression)."""
    if cur.accept("NULL"):
        return True, None
    sign = ""
    if cur.is_kind("-") or cur.is_kind("+"):
        sign = cur.next().raw
        if sign == "+":
            sign = "+"
    t = cur.peek()
    if t is None:
        raise cur.error("expected a default value")
    if t.kind == "string" or (t.kind == "word" and t.text.startswith("_") and cur.is_kind("string", 1)):
        start = cur.i
        if t.kind == "word":
            cur.next()
        first = cur.next()
        while cur.is_kind("string"):
            cur.next()
        if cur.is_word("COLLATE"):
            cur.next()
            cur.name()
            return True, sign + _unquote(first.raw)
        if t.kind == "word":
            return True, sign + "".join(tok.raw for tok in cur.tokens[start:cur.i])
        return True, sign + _unquote("".join(tok.raw for tok in cur.tokens[start:cur.i]))
    if t.kind == "number":
        cur.next()
        return True, sign + t.raw
    if t.kind == "bits":
        cur.next()
        if t.raw[:1] in "bB":
            return True, t.raw[2:-1]
        return True, None
    if t.kind == "word" and t.text.upper() in ("TRUE", "FALSE"):
        cur.next()
        return True, t.raw
    if t.kind == "word" and t.text.upper() in _CURRENT_TIMESTAMP:
        cur.next()
        if cur.is_kind("("):
            cur.skip_parens()
        upper = t.text.upper()
        return True, "1970-01-01 00:00:00" if upper in ("CURRENT_TIMESTAMP", "NOW") else t.raw
    if t.kind == "(":
        cur.skip_parens()
        return True, None
    if t.kind == "word":  # a function call or other expression
        cur.next()
        if cur.is_kind("("):
            cur.skip_parens()
        return True, None
    raise cur.error("unsupported default value")


def _skip_reference(cur: Cursor) -> None:
    cur.name()
    if cur.accept_kind("."):
        cur.name()
    if cur.is_kind("("):
        cur.skip_parens()
    while True:
        if cur.accept("MATCH"):
            cur.next()
        elif cur.accept("ON"):
            cur.next()  # DELETE / UPDATE
            if not (cur.accept("SET", "NULL") or cur.accept("SET", "DEFAULT") or cur.accept("NO", "ACTION")):
                cur.next()
        else:
            return


def parse_column_definition(cur: Cursor) -> ColumnDefinition:
    """The type and attributes of one column, up to the `,` or `)` or FIRST/AFTER that follows."""
    definition = ColumnDefinition(parse_data_type(cur))
    while not cur.at_end() and not cur.is_kind(",") and not cur.is_kind(")") and not cur.is_word("FIRST", "AFTER"):
        if cur.accept("NOT", "NULL"):
            definition.optional = False
        elif cur.accept("NULL"):
            definition.optional = True
        elif cur.accept("DEFAULT"):
            definition.has_default, definition.default_expression = parse_default(cur)
        elif cur.accept("AUTO_INCREMENT"):
            definition.auto_increment = True
        elif cur.accept("SERIAL", "DEFAULT", "VALUE"):
            definition.auto_increment = True
            definition.unique = True
            if definition.optional is None:
                definition.optional = False
        elif cur.accept("PRIMARY", "KEY") or cur.accept("KEY"):
            definition.primary = True
        elif cur.accept("UNIQUE"):
            cur.accept("KEY")
            definition.unique = True
        elif cur.accept("COMMENT"):
            definition.comment = cur.expect_kind("string").text
        elif cur.accept("COLLATE"):
            collation = cur.name()
            definition.charset = definition.charset or charset_of_collation(collation)
        elif cur.accept("CHARACTER", "SET") or cur.accept("CHARSET"):
            definition.charset = cur.name().lower()
        elif cur.accept("ON", "UPDATE"):
            cur.next()
            if cur.is_kind("("):
                cur.skip_parens()
        elif cur.accept("GENERATED", "ALWAYS") or cur.is_word("AS"):
            if cur.accept("AS", "ROW"):
                cur.next()  # START / END (system-versioning period columns)
                continue
            cur.expect("AS")
            cur.skip_parens()
        elif cur.is_word("CHECK"):
            cur.next()
            cur.skip_parens()
        elif cur.accept("CONSTRAINT"):
            if not cur.is_word("CHECK"):
                cur.name()
        elif cur.accept("REFERENCES"):
            _skip_reference(cur)
        elif cur.accept("COLUMN_FORMAT") or cur.accept("STORAGE"):
            cur.next()
        elif cur.accept("WITH", "SYSTEM", "VERSIONING") or cur.accept("WITHOUT", "SYSTEM", "VERSIONING"):
            pass
        elif cur.is_word(*_IGNORED_FLAGS):
            cur.next()
        elif cur.accept("COMPRESSED") or cur.accept_kind("="):
            pass
        else:
            raise cur.error("unsupported column attribute")
    return definition
