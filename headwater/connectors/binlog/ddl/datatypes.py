"""Column data types as Debezium's MySQL/MariaDB DDL parser resolves them.

`parse_data_type` reads a type (`INT(11) UNSIGNED`, `VARCHAR(32) CHARACTER SET latin1`,
`ENUM('a','b')`, ...) from a cursor and returns Debezium's `typeName` (the type's words as written,
upper case, with SIGNED/UNSIGNED/ZEROFILL/PRECISION/BINARY where given), the java.sql.Types constant
Debezium's resolver assigns, the length and scale (with its defaults: DECIMAL 10,0; BIT 1; NCHAR 1;
ENUM 1; SET 2n-1), an explicit charset or collation, and ENUM/SET members as written (quoted).
"""

from __future__ import annotations

from dataclasses import dataclass

from headwater.connectors.binlog.ddl.lexer import Cursor

# java.sql.Types
CHAR, VARCHAR, NCHAR, NVARCHAR = 1, 12, -15, -9
SMALLINT, INTEGER, BIGINT, REAL, DOUBLE, FLOAT, DECIMAL, NUMERIC = 5, 4, -5, 7, 8, 6, 3, 2
BIT, TIME, TIMESTAMP_WITH_TIMEZONE, TIMESTAMP, DATE = -7, 92, 2014, 93, 91
BINARY, VARBINARY, BLOB, BOOLEAN, OTHER = -2, -3, 2004, 16, 1111

_NUMERIC = ("SIGNED", "UNSIGNED", "ZEROFILL")
# word -> (jdbc type, suffix words that join the name, default (length, scale))
_DIMENSION: dict[str, tuple[int, tuple[str, ...], tuple[int | None, int | None]]] = {
    "TINYINT": (SMALLINT, _NUMERIC, (None, None)), "INT1": (SMALLINT, _NUMERIC, (None, None)),
    "SMALLINT": (SMALLINT, _NUMERIC, (None, None)), "INT2": (SMALLINT, _NUMERIC, (None, None)),
    "MEDIUMINT": (INTEGER, _NUMERIC, (None, None)), "INT3": (INTEGER, _NUMERIC, (None, None)),
    "MIDDLEINT": (INTEGER, _NUMERIC, (None, None)), "INT": (INTEGER, _NUMERIC, (None, None)),
    "INTEGER": (INTEGER, _NUMERIC, (None, None)), "INT4": (INTEGER, _NUMERIC, (None, None)),
    "BIGINT": (BIGINT, _NUMERIC, (None, None)), "INT8": (BIGINT, _NUMERIC, (None, None)),
    "REAL": (REAL, _NUMERIC, (None, None)),
    "DOUBLE": (DOUBLE, ("PRECISION", *_NUMERIC), (None, None)),
    "FLOAT8": (DOUBLE, ("PRECISION", *_NUMERIC), (None, None)),
    "FLOAT": (FLOAT, _NUMERIC, (None, None)), "FLOAT4": (FLOAT, _NUMERIC, (None, None)),
    "DECIMAL": (DECIMAL, _NUMERIC, (10, 0)), "DEC": (DECIMAL, _NUMERIC, (10, 0)),
    "FIXED": (DECIMAL, _NUMERIC, (10, 0)), "NUMERIC": (NUMERIC, _NUMERIC, (10, 0)),
    "BIT": (BIT, (), (1, None)), "TIME": (TIME, (), (None, None)),
    "TIMESTAMP": (TIMESTAMP_WITH_TIMEZONE, (), (None, None)), "DATETIME": (TIMESTAMP, (), (None, None)),
    "BINARY": (BINARY, (), (None, None)), "VARBINARY": (VARBINARY, (), (None, None)),
    "BLOB": (BLOB, (), (None, None)), "YEAR": (INTEGER, (), (None, None)),
}
_SIMPLE = {
    "DATE": DATE, "TINYBLOB": BLOB, "MEDIUMBLOB": BLOB, "LONGBLOB": BLOB, "BOOL": BOOLEAN, "BOOLEAN": BOOLEAN,
    # MariaDB's own types (Debezium 3.6 accepts UUID; INET4/INET6 are headwater's extension)
    "UUID": OTHER, "INET4": OTHER, "INET6": OTHER,
}
_SPATIAL = {"GEOMETRYCOLLECTION", "GEOMCOLLECTION", "LINESTRING", "MULTILINESTRING", "MULTIPOINT",
            "MULTIPOLYGON", "POINT", "POLYGON", "JSON", "GEOMETRY"}
# string types: words -> jdbc type (the longest match wins, as in Debezium's resolver)
_STRING = {
    ("CHAR",): CHAR, ("CHARACTER",): CHAR, ("CHAR", "VARYING"): VARCHAR, ("CHARACTER", "VARYING"): VARCHAR,
    ("VARCHAR",): VARCHAR, ("TINYTEXT",): VARCHAR, ("TEXT",): VARCHAR, ("MEDIUMTEXT",): VARCHAR,
    ("LONGTEXT",): VARCHAR, ("LONG",): VARCHAR, ("LONG", "VARCHAR"): VARCHAR, ("NCHAR",): NCHAR,
    ("NCHAR", "VARYING"): NVARCHAR, ("NVARCHAR",): NVARCHAR, ("NCHAR", "VARCHAR"): NVARCHAR,
    ("NATIONAL", "VARCHAR"): NVARCHAR, ("NATIONAL", "CHARACTER"): NCHAR, ("NATIONAL", "CHAR"): NCHAR,
    ("NATIONAL", "CHAR", "VARYING"): NVARCHAR, ("NATIONAL", "CHARACTER", "VARYING"): NVARCHAR,
}
_BINARY_NAMED = {"CHAR", "VARCHAR", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "NCHAR", "NVARCHAR"}
_CHARSET_TYPES = {CHAR, VARCHAR, NCHAR, NVARCHAR}


@dataclass(frozen=True)
class DataType:
    """A parsed column type."""

    name: str
    jdbc_type: int
    length: int | None = None
    scale: int | None = None
    charset: str | None = None  # explicit CHARACTER SET (or implied by COLLATE, ASCII, UNICODE)
    enum_values: tuple[str, ...] | None = None
    serial: bool = False

    @property
    def uses_charset(self) -> bool:
        return self.jdbc_type in _CHARSET_TYPES


def charset_of_collation(collation: str) -> str:
    """The character set a collation belongs to (`utf8mb4_general_ci` -> `utf8mb4`, `binary` -> `binary`)."""
    name = collation.lower()
    if name.startswith("utf8_"):
        return "utf8mb3"
    return name.split("_", 1)[0]


def _dimensions(cur: Cursor) -> tuple[int | None, int | None]:
    if not cur.is_kind("("):
        return None, None
    cur.next()
    first = cur.expect_kind("number").raw
    second = None
    if cur.accept_kind(","):
        second = int(cur.expect_kind("number").raw)
    cur.expect_kind(")")
    if "." in first:  # DECIMAL(10.2): Debezium keeps the integer part, 10 when empty or 0
        whole = first.split(".", 1)[0]
        return (int(whole) if whole and int(whole) else 10), second
    return min(int(first), 2**31 - 1), second


def _charset_options(cur: Cursor) -> tuple[str | None, bool]:
    """Charset options after a string type: (charset, BINARY given)."""
    charset: str | None = None
    binary = False
    while True:
        if cur.accept("CHARACTER", "SET") or cur.accept("CHARSET") or cur.accept("CHAR", "SET"):
            charset = cur.name().lower()
            if charset == "binary":
                binary = True
        elif cur.is_word("COLLATE"):
            cur.next()
            collation = cur.name()
            charset = charset or charset_of_collation(collation)
        elif cur.accept("BINARY"):
            binary = True
        elif cur.accept("ASCII"):
            charset = "latin1"
        elif cur.accept("UNICODE"):
            charset = "ucs2"
        elif cur.accept("BYTE"):
            binary = True
        else:
            return charset, binary


def _numeric_suffix(cur: Cursor, allowed: tuple[str, ...]) -> list[str]:
    seen = set()
    while cur.is_word(*allowed):
        seen.add(cur.next().text.upper())
    return [w for w in allowed if w in seen]


def parse_data_type(cur: Cursor) -> DataType:
    """Read one column type at the cursor."""
    word = cur.next()
    if word.kind != "word":
        raise cur.error("expected a data type")
    first = word.text.upper()
    if first in _DIMENSION or (first == "DOUBLE" and cur.is_word("PRECISION")):
        jdbc, suffixes, (default_length, default_scale) = _DIMENSION[first]
        words = [first]
        if first in ("DOUBLE", "FLOAT8") and cur.accept("PRECISION"):
            words.append("PRECISION")
        length, scale = _dimensions(cur)
        words += [w for w in _numeric_suffix(cur, suffixes) if w != "PRECISION"]
        if first == "BINARY" and cur.is_word("CHARACTER", "CHARSET", "COLLATE"):
            _charset_options(cur)
        if length is None:
            length = default_length
        if scale is None and default_scale is not None:
            scale = default_scale
        return DataType(" ".join(words), jdbc, length, scale)
    if first in _SIMPLE:
        return DataType(first, _SIMPLE[first])
    if first == "SERIAL":
        return DataType("BIGINT UNSIGNED", BIGINT, serial=True)
    if first in _SPATIAL:
        if cur.is_word("REF_SYSTEM_ID"):
            cur.next()
            cur.accept_kind("=")
            cur.next()
        return DataType(first, OTHER)
    if first in ("ENUM", "SET"):
        cur.expect_kind("(")
        members: list[str] = []
        while True:
            t = cur.next()
            if t.kind not in ("string", "word"):
                raise cur.error("expected an ENUM/SET member")
            raw = t.raw
            while cur.is_kind("string"):  # adjacent literals concatenate
                raw += cur.next().raw
            members.append(raw)
            if not cur.accept_kind(","):
                break
        cur.expect_kind(")")
        charset, binary = _charset_options(cur)
        length = max(0, 2 * len(members) - 1) if first == "SET" else 1
        name = first + (" BINARY" if binary else "")
        return DataType(name, CHAR, length, None, charset, tuple(members) if not binary else None)
    if first == "LONG" and cur.is_word("VARBINARY"):
        cur.next()
        return DataType("LONG VARBINARY", BLOB)
    words = [first]
    while (following := cur.peek()) is not None and following.kind == "word" \
            and (*words, following.text.upper()) in _STRING:
        words.append(cur.next().text.upper())
    key = tuple(words)
    if key not in _STRING:
        raise cur.error(f"unknown data type {word.text}")
    jdbc = _STRING[key]
    length, _ = _dimensions(cur)
    if key[0] == "NATIONAL" or key == ("NCHAR", "VARCHAR"):
        _, binary = _charset_options(cur)
        name = " ".join(words) + (" BINARY" if binary else "")
        if jdbc == NCHAR and length is None:
            length = 1
        return DataType(name, jdbc, length, None, "utf8")
    charset, binary = _charset_options(cur)
    name = " ".join(words)
    if binary and len(words) == 1 and words[0] in _BINARY_NAMED:
        name += " BINARY"
    if jdbc in (NCHAR, NVARCHAR):
        charset = "utf8"
        if jdbc == NCHAR and length is None:
            length = 1
    return DataType(name, jdbc, length, None, charset)
