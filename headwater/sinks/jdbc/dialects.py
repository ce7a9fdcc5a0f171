"""The SQL of each target database: identifiers, column types, DDL, and the statements that apply
changes (insert, update, upsert, delete, truncate) and record applied batches.

`Dialect` holds what is common; `PostgresDialect` and `MySqlDialect` (MariaDB and MySQL) run here
against real servers; `OracleDialect`, `SqlServerDialect` and `Db2Dialect` generate their SQL
(MERGE for the upsert, as Debezium's dialects do) and are tested without a server: adding one of
them is its driver in `connect`. Upserts per the spec: PostgreSQL `INSERT ... ON CONFLICT ... DO
UPDATE`, MySQL `INSERT ... ON DUPLICATE KEY UPDATE`, the others `MERGE`. A truncate is `TRUNCATE
TABLE` where it is transactional (PostgreSQL, SQL Server) and `DELETE FROM` elsewhere, so that it
commits or rolls back with the batch.

Identifiers are quoted when `quote.identifiers` is on, and always when they are not plain words
(`__connect_*`-like names starting with an underscore, names with dots or spaces); unquoted ones
fold as the database folds them (`fold`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from headwater.sinks.jdbc.types import SqlType

PLAIN = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
APPLIED_TABLE = "headwater_sink_batches"
#: the kinds whose Connect default is the column's value as it is (a timestamp's, date's or decimal's
#: is its encoded number or bytes, which the column's DEFAULT cannot take)
DEFAULT_KINDS = ("tinyint", "smallint", "integer", "bigint", "real", "double", "boolean", "year")


@dataclass(frozen=True)
class Column:
    """A table column: name, type, whether it may be null, and its default (a Python literal)."""

    name: str
    type: SqlType
    nullable: bool = True
    default: Any = None


class Dialect:
    """SQL for one database (see the module's docstring)."""

    name = ""
    quote_chars = ('"', '"')
    placeholder = "%s"
    time_zone_types = True
    #: the type names of a kind without length or precision
    types: dict[str, str] = {}
    key_string = "varchar(255)"
    key_bytes = "varbinary(255)"

    def __init__(self, quote_identifiers: bool = False):
        self.quote_identifiers = quote_identifiers

    # identifiers
    def ident(self, name: str) -> str:
        if not self.quote_identifiers and PLAIN.fullmatch(name):
            return name
        q0, q1 = self.quote_chars
        return q0 + name.replace(q1, q1 + q1) + q1

    def fold(self, name: str) -> str:
        """How the database stores an identifier written the way `ident` writes it."""
        return name if self.quote_identifiers or not PLAIN.fullmatch(name) else name.lower()

    # types
    def type_name(self, t: SqlType, key: bool = False) -> str:
        if t.kind in ("string", "json", "xml", "ltree", "set", "enum") and key:
            return self.key_string
        if t.kind in ("char", "varchar") and t.length:
            return f"{self.varchar if t.kind == 'varchar' else 'char'}({t.length})"
        if t.kind == "bytes" and key:
            return self.key_bytes
        if t.kind == "decimal":
            return self.decimal(t)
        if t.kind == "bits":
            return self.bits(t)
        if t.kind == "array":
            return self.array(t)
        if t.kind == "enum":
            return self.enum(t)
        if t.kind == "set":
            return self.set(t)
        if t.kind == "timestamptz" and not self.time_zone_types:
            return self.types["timestamp"]
        if t.kind == "timetz" and not self.time_zone_types:
            return self.types["time"]
        return self.types[t.kind]

    varchar = "varchar"

    def decimal(self, t: SqlType) -> str:
        return f"decimal({t.precision},{t.scale or 0})" if t.precision else f"decimal(38,{t.scale or 0})"

    def bits(self, t: SqlType) -> str:
        return self.types["bytes"]

    def array(self, t: SqlType) -> str:
        return self.types["json"]

    def enum(self, t: SqlType) -> str:
        return self.types["string"]

    def set(self, t: SqlType) -> str:
        return self.types["string"]

    def literal(self, v: Any) -> str:
        if isinstance(v, bool):
            return "1" if v else "0"
        if isinstance(v, (int, float)):
            return repr(v)
        return "'" + str(v).replace("'", "''") + "'"

    def column_def(self, c: Column, key: bool = False) -> str:
        text = f"{self.ident(c.name)} {self.type_name(c.type, key)}"
        if c.default is not None and not key and c.type.kind in DEFAULT_KINDS:
            text += f" DEFAULT {self.literal(c.default)}"
        return text + ("" if c.nullable and not key else " NOT NULL")

    # DDL
    def create_table(self, table: str, columns: list[Column], key: list[str]) -> str:
        defs = [self.column_def(c, c.name in key) for c in columns]
        if key:
            defs.append("PRIMARY KEY (" + ", ".join(self.ident(k) for k in key) + ")")
        return f"CREATE TABLE {self.ident(table)} (" + ", ".join(defs) + ")"

    def add_column(self, table: str, column: Column) -> str:
        return f"ALTER TABLE {self.ident(table)} ADD COLUMN {self.column_def(column)}"

    # DML
    def params(self, n: int) -> str:
        return ", ".join([self.placeholder] * n)

    def insert(self, table: str, columns: list[str]) -> str:
        cols = ", ".join(self.ident(c) for c in columns)
        return f"INSERT INTO {self.ident(table)} ({cols}) VALUES ({self.params(len(columns))})"

    def update(self, table: str, columns: list[str], key: list[str]) -> str:
        """UPDATE binding the non-key columns, then the key's."""
        sets = ", ".join(f"{self.ident(c)} = {self.placeholder}" for c in columns if c not in key)
        return f"UPDATE {self.ident(table)} SET {sets} WHERE {self._where(key)}"

    def upsert(self, table: str, columns: list[str], key: list[str]) -> str:
        raise NotImplementedError

    def delete(self, table: str, key: list[str]) -> str:
        return f"DELETE FROM {self.ident(table)} WHERE {self._where(key)}"

    def truncate(self, table: str) -> str:
        return f"DELETE FROM {self.ident(table)}"

    def _where(self, key: list[str]) -> str:
        return " AND ".join(f"{self.ident(k)} = {self.placeholder}" for k in key)

    def merge(self, table: str, columns: list[str], key: list[str], source: str) -> str:
        """MERGE INTO table USING (<source selecting the bound values as `columns`>)."""
        t, s = self.ident(table), "s"
        on = " AND ".join(f"t.{self.ident(k)} = {s}.{self.ident(k)}" for k in key)
        sets = ", ".join(f"t.{self.ident(c)} = {s}.{self.ident(c)}" for c in columns if c not in key)
        cols = ", ".join(self.ident(c) for c in columns)
        vals = ", ".join(f"{s}.{self.ident(c)}" for c in columns)
        matched = f" WHEN MATCHED THEN UPDATE SET {sets}" if sets else ""
        return (f"MERGE INTO {t} t USING ({source}) {s} ON ({on}){matched}"
                f" WHEN NOT MATCHED THEN INSERT ({cols}) VALUES ({vals})")

    # the table of applied batches
    def applied_table(self) -> str:
        return (f"CREATE TABLE {APPLIED_TABLE} (pipeline varchar(255) NOT NULL, batch_id {self.types['bigint']} "
                f"NOT NULL, topic varchar(255) NOT NULL, events {self.types['bigint']} NOT NULL, "
                f"PRIMARY KEY (pipeline, batch_id, topic))")

    def applied_select(self) -> str:
        p = self.placeholder
        return f"SELECT 1 FROM {APPLIED_TABLE} WHERE pipeline = {p} AND batch_id = {p} AND topic = {p}"

    def applied_insert(self) -> str:
        return f"INSERT INTO {APPLIED_TABLE} (pipeline, batch_id, topic, events) VALUES ({self.params(4)})"


class PostgresDialect(Dialect):
    name = "postgresql"
    types = {"tinyint": "smallint", "smallint": "smallint", "integer": "integer", "bigint": "bigint",
             "real": "real", "double": "double precision", "boolean": "boolean", "string": "text",
             "bytes": "bytea", "date": "date", "time": "time", "timestamp": "timestamp",
             "timestamptz": "timestamp with time zone", "timetz": "time with time zone", "json": "json",
             "uuid": "uuid", "xml": "xml", "year": "integer", "interval": "interval", "ltree": "text"}
    key_string = "text"
    key_bytes = "bytea"

    def decimal(self, t: SqlType) -> str:
        return f"numeric({t.precision},{t.scale or 0})" if t.precision else "numeric"

    def literal(self, v: Any) -> str:
        return ("true" if v else "false") if isinstance(v, bool) else super().literal(v)

    def bits(self, t: SqlType) -> str:
        """bit(n) when the source says BIT; else bit varying, which takes a bit(n) column's values too."""
        if t.length and (t.source or "").upper() == "BIT":
            return f"bit({t.length})"
        return f"bit varying({t.length})" if t.length and t.length <= 83_886_080 else "bit varying"

    def array(self, t: SqlType) -> str:
        assert t.item is not None
        return self.type_name(t.item) + "[]"

    def upsert(self, table: str, columns: list[str], key: list[str]) -> str:
        conflict = ", ".join(self.ident(k) for k in key)
        sets = ", ".join(f"{self.ident(c)} = EXCLUDED.{self.ident(c)}" for c in columns if c not in key)
        action = f"DO UPDATE SET {sets}" if sets else "DO NOTHING"
        return f"{self.insert(table, columns)} ON CONFLICT ({conflict}) {action}"

    def truncate(self, table: str) -> str:
        return f"TRUNCATE TABLE {self.ident(table)}"

    def create_stage(self, stage: str, table: str, columns: list[str]) -> str:
        """A temporary table with the target's types of `columns` (without its constraints)."""
        cols = ", ".join(self.ident(c) for c in columns)
        return f"CREATE TEMPORARY TABLE {stage} ON COMMIT DROP AS SELECT {cols} FROM {self.ident(table)} WITH NO DATA"

    def from_stage(self, kind: str, table: str, stage: str, columns: list[str], key: list[str]) -> str:
        """The statement applying a staging table's rows: insert, update, upsert or delete by key."""
        t, cols = self.ident(table), ", ".join(self.ident(c) for c in columns)
        on = " AND ".join(f"{t}.{self.ident(k)} = s.{self.ident(k)}" for k in key)
        if kind == "delete":
            return f"DELETE FROM {t} USING {stage} s WHERE {on}"
        if kind == "update":
            sets = ", ".join(f"{self.ident(c)} = s.{self.ident(c)}" for c in columns if c not in key)
            return f"UPDATE {t} SET {sets} FROM {stage} s WHERE {on}"
        insert = f"INSERT INTO {t} ({cols}) SELECT {cols} FROM {stage}"
        if kind == "insert":
            return insert
        return insert + self.upsert(table, columns, key)[len(self.insert(table, columns)):]


class MySqlDialect(Dialect):
    """MySQL and MariaDB."""

    name = "mysql"
    quote_chars = ("`", "`")
    time_zone_types = False
    types = {"tinyint": "tinyint", "smallint": "smallint", "integer": "int", "bigint": "bigint",
             "real": "float", "double": "double", "boolean": "boolean", "string": "longtext",
             "bytes": "longblob", "date": "date", "time": "time(6)", "timestamp": "datetime(6)",
             "json": "json", "uuid": "char(36)", "xml": "longtext", "year": "year", "interval": "bigint",
             "ltree": "longtext"}

    def fold(self, name: str) -> str:
        return name.lower()  # column names compare without case

    def type_name(self, t: SqlType, key: bool = False) -> str:
        if t.kind == "tinyint" and (t.source or "").upper() == "TINYINT" and t.length:
            return f"tinyint({t.length})"
        return super().type_name(t, key)

    def decimal(self, t: SqlType) -> str:
        return f"decimal({t.precision},{t.scale or 0})" if t.precision else f"decimal(65,{min(t.scale or 0, 30)})"

    def bits(self, t: SqlType) -> str:
        return f"bit({t.length})" if t.length and t.length <= 64 else "longblob"

    def enum(self, t: SqlType) -> str:
        return "enum(" + ", ".join(self.literal(v) for v in t.values) + ")" if t.values else "varchar(255)"

    def set(self, t: SqlType) -> str:
        return "set(" + ", ".join(self.literal(v) for v in t.values) + ")" if t.values else "longtext"

    def upsert(self, table: str, columns: list[str], key: list[str]) -> str:
        sets = [f"{self.ident(c)} = VALUES({self.ident(c)})" for c in columns if c not in key]
        if not sets:  # every column is the key: keep the row as it is
            sets = [f"{self.ident(key[0])} = {self.ident(key[0])}"]
        return f"{self.insert(table, columns)} ON DUPLICATE KEY UPDATE " + ", ".join(sets)

    def create_stage(self, stage: str, table: str, columns: list[str]) -> str:
        """A temporary table with the target's types of `columns` (without its keys); MySQL's DDL on
        a temporary table does not commit the transaction."""
        cols = ", ".join(self.ident(c) for c in columns)
        return f"CREATE TEMPORARY TABLE {stage} AS SELECT {cols} FROM {self.ident(table)} LIMIT 0"

    def from_stage(self, kind: str, table: str, stage: str, columns: list[str], key: list[str]) -> str:
        """The statement applying a staging table's rows: insert, update, upsert or delete by key
        (multi-table UPDATE and DELETE joined on the key)."""
        t, cols = self.ident(table), ", ".join(self.ident(c) for c in columns)
        on = " AND ".join(f"t.{self.ident(k)} = s.{self.ident(k)}" for k in key)
        if kind == "delete":
            return f"DELETE t FROM {t} t JOIN {stage} s ON {on}"
        if kind == "update":
            sets = ", ".join(f"t.{self.ident(c)} = s.{self.ident(c)}" for c in columns if c not in key)
            return f"UPDATE {t} t JOIN {stage} s ON {on} SET {sets}"
        insert = f"INSERT INTO {t} ({cols}) SELECT {cols} FROM {stage}"
        if kind == "insert":
            return insert
        return insert + self.upsert(table, columns, key)[len(self.insert(table, columns)):]

    def drop_stage(self, stage: str) -> str:
        return f"DROP TEMPORARY TABLE IF EXISTS {stage}"


class OracleDialect(Dialect):
    name = "oracle"
    placeholder = "?"
    varchar = "varchar2"
    types = {"tinyint": "NUMBER(3)", "smallint": "NUMBER(5)", "integer": "NUMBER(10)", "bigint": "NUMBER(19)",
             "real": "BINARY_FLOAT", "double": "BINARY_DOUBLE", "boolean": "NUMBER(1)", "string": "CLOB",
             "bytes": "BLOB", "date": "DATE", "time": "TIMESTAMP(6)", "timestamp": "TIMESTAMP(6)",
             "timestamptz": "TIMESTAMP(6) WITH TIME ZONE", "timetz": "TIMESTAMP(6) WITH TIME ZONE",
             "json": "CLOB", "uuid": "VARCHAR2(36)", "xml": "XMLTYPE", "year": "NUMBER(4)",
             "interval": "INTERVAL DAY TO SECOND", "ltree": "CLOB"}
    key_string = "VARCHAR2(4000)"
    key_bytes = "RAW(2000)"

    def fold(self, name: str) -> str:
        return name if self.quote_identifiers or not PLAIN.fullmatch(name) else name.upper()

    def decimal(self, t: SqlType) -> str:
        return f"NUMBER({t.precision},{t.scale or 0})" if t.precision else "NUMBER"

    def add_column(self, table: str, column: Column) -> str:
        return f"ALTER TABLE {self.ident(table)} ADD ({self.column_def(column)})"

    def upsert(self, table: str, columns: list[str], key: list[str]) -> str:
        source = "SELECT " + ", ".join(f"{self.placeholder} {self.ident(c)}" for c in columns) + " FROM dual"
        return self.merge(table, columns, key, source)

    def applied_table(self) -> str:
        return (f"CREATE TABLE {APPLIED_TABLE} (pipeline VARCHAR2(255) NOT NULL, batch_id NUMBER(19) NOT NULL, "
                f"topic VARCHAR2(255) NOT NULL, events NUMBER(19) NOT NULL, PRIMARY KEY (pipeline, batch_id, topic))")


class SqlServerDialect(Dialect):
    name = "sqlserver"
    quote_chars = ("[", "]")
    placeholder = "?"
    varchar = "nvarchar"
    types = {"tinyint": "smallint", "smallint": "smallint", "integer": "int", "bigint": "bigint",
             "real": "real", "double": "float", "boolean": "bit", "string": "nvarchar(max)",
             "bytes": "varbinary(max)", "date": "date", "time": "time(6)", "timestamp": "datetime2(6)",
             "timestamptz": "datetimeoffset(6)", "timetz": "time(6)", "json": "nvarchar(max)",
             "uuid": "uniqueidentifier", "xml": "xml", "year": "int", "interval": "bigint",
             "ltree": "nvarchar(max)"}
    key_string = "nvarchar(255)"

    def fold(self, name: str) -> str:
        return name.lower()

    def bits(self, t: SqlType) -> str:
        return f"varbinary({max(1, ((t.length or 8) + 7) // 8)})"

    def add_column(self, table: str, column: Column) -> str:
        return f"ALTER TABLE {self.ident(table)} ADD {self.column_def(column)}"

    def upsert(self, table: str, columns: list[str], key: list[str]) -> str:
        cols = ", ".join(self.ident(c) for c in columns)
        source = f"SELECT * FROM (VALUES ({self.params(len(columns))})) v ({cols})"
        return self.merge(table, columns, key, source) + ";"

    def truncate(self, table: str) -> str:
        return f"TRUNCATE TABLE {self.ident(table)}"


class Db2Dialect(Dialect):
    name = "db2"
    placeholder = "?"
    types = {"tinyint": "smallint", "smallint": "smallint", "integer": "integer", "bigint": "bigint",
             "real": "real", "double": "double", "boolean": "boolean", "string": "clob", "bytes": "blob",
             "date": "date", "time": "time", "timestamp": "timestamp(6)", "timestamptz": "timestamp(6)",
             "timetz": "time", "json": "clob", "uuid": "varchar(36)", "xml": "xml", "year": "integer",
             "interval": "bigint", "ltree": "clob"}

    def fold(self, name: str) -> str:
        return name if self.quote_identifiers or not PLAIN.fullmatch(name) else name.upper()

    def upsert(self, table: str, columns: list[str], key: list[str]) -> str:
        cols = ", ".join(self.ident(c) for c in columns)
        source = f"SELECT * FROM (VALUES ({self.params(len(columns))})) AS v ({cols})"
        return self.merge(table, columns, key, source)


DIALECTS: dict[str, type[Dialect]] = {d.name: d for d in (PostgresDialect, MySqlDialect, OracleDialect,
                                                           SqlServerDialect, Db2Dialect)}


def dialect(name: str, quote_identifiers: bool = False) -> Dialect:
    """The dialect of a target (`config.Target.dialect`)."""
    return DIALECTS[name](quote_identifiers)
