"""The current schema of tables on a live MySQL/MariaDB server (PyMySQL connections).

`snapshot_statements` gives the schema part of a snapshot as Debezium's binlog connectors record it:
`SET character_set_server=...`, `DROP TABLE IF EXISTS` for every table, then per database
`DROP DATABASE IF EXISTS`, `CREATE DATABASE ... CHARSET ... COLLATE ...`, `USE` and each table's
`SHOW CREATE TABLE` text; applied to a `SchemaHistory` they give the snapshot's schema change events
and tables. `read_tables` reads tables the same way (SHOW CREATE TABLE through the DDL parser).
`information_schema_tables` describes tables from information_schema instead, independently of the
parser, for tests that compare the two.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from headwater.connectors.binlog.ddl import SchemaState, TableId, apply_statement
from headwater.connectors.binlog.schema import Table

SYSTEM_DATABASES = frozenset({"mysql", "information_schema", "performance_schema", "sys"})


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _rows(conn: Any, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall())


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def list_databases(conn: Any, database_filter: Callable[[str], bool] | None = None) -> list[str]:
    """Non-system databases (that the filter accepts), sorted."""
    names = sorted(_text(r[0]) for r in _rows(conn, "SHOW DATABASES"))
    return [n for n in names if n not in SYSTEM_DATABASES and (database_filter is None or database_filter(n))]


def list_tables(conn: Any, database: str) -> list[str]:
    """The base tables (not views) of a database, sorted."""
    rows = _rows(conn, f"SHOW FULL TABLES IN {_quote(database)} WHERE Table_type = 'BASE TABLE'")
    return sorted(_text(r[0]) for r in rows)


def show_create_table(conn: Any, table_id: TableId) -> str:
    return _text(_rows(conn, f"SHOW CREATE TABLE {_quote(table_id[0])}.{_quote(table_id[1])}")[0][1])


@dataclass(frozen=True)
class SnapshotStatement:
    """One statement of the snapshot's schema phase and the database it is applied in."""

    ddl: str
    database: str


def snapshot_statements(conn: Any, database_filter: Callable[[str], bool] | None = None,
                        table_filter: Callable[[str, str], bool] | None = None) -> list[SnapshotStatement]:
    """The schema statements Debezium's snapshot records, for the databases and tables the filters accept.

    Call it under the snapshot's lock (or consistent view) so that it matches the binlog position read there.
    """
    server = dict((_text(k), _text(v)) for k, v in _rows(
        conn, "SHOW VARIABLES WHERE Variable_name IN ('character_set_server', 'collation_server')"))
    out = [SnapshotStatement(f"SET character_set_server={server['character_set_server']}, "
                             f"collation_server={server['collation_server']}", "")]
    databases = list_databases(conn, database_filter)
    tables = {db: [t for t in list_tables(conn, db) if table_filter is None or table_filter(db, t)]
              for db in databases}
    for db in databases:
        out += [SnapshotStatement(f"DROP TABLE IF EXISTS {_quote(db)}.{_quote(t)}", db) for t in tables[db]]
    for db in databases:
        charset, collation = _rows(conn, "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME "
                                   "FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = %s", (db,))[0]
        out.append(SnapshotStatement(f"DROP DATABASE IF EXISTS {_quote(db)}", db))
        out.append(SnapshotStatement(
            f"CREATE DATABASE {_quote(db)} CHARSET {_text(charset)} COLLATE {_text(collation)}", db))
        out.append(SnapshotStatement(f"USE {_quote(db)}", db))
        out += [SnapshotStatement(show_create_table(conn, (db, t)), db) for t in tables[db]]
    return out


def read_tables(conn: Any, table_ids: Iterable[TableId]) -> dict[TableId, Table]:
    """Tables as the DDL parser reads their SHOW CREATE TABLE (with their databases' charsets)."""
    state = SchemaState()
    out = {}
    for table_id in table_ids:
        (charset,) = _rows(conn, "SELECT DEFAULT_CHARACTER_SET_NAME FROM information_schema.SCHEMATA "
                                 "WHERE SCHEMA_NAME = %s", (table_id[0],))[0]
        state.database_charsets[table_id[0]] = _text(charset)
        state.tables.pop(table_id, None)
        apply_statement(state, show_create_table(conn, table_id), table_id[0])
        out[table_id] = state.tables[table_id]
    return out


@dataclass(frozen=True)
class ServerColumn:
    """A column as information_schema.COLUMNS describes it."""

    name: str
    position: int
    data_type: str  # DATA_TYPE, upper case: INT, VARCHAR, ENUM, ...
    column_type: str  # COLUMN_TYPE as the server writes it: int(10) unsigned, enum('a','b'), ...
    nullable: bool
    default: str | None  # COLUMN_DEFAULT as MariaDB writes it: NULL, 'text', 0, current_timestamp(), ...
    charset: str | None
    char_length: int | None
    numeric_precision: int | None
    numeric_scale: int | None
    datetime_precision: int | None
    auto_increment: bool
    comment: str


@dataclass(frozen=True)
class ServerTable:
    """A table as information_schema describes it."""

    database: str
    name: str
    columns: tuple[ServerColumn, ...]
    primary_key: tuple[str, ...]  # the PRIMARY KEY, else the first UNIQUE index over NOT NULL columns
    default_charset: str | None
    comment: str


def information_schema_tables(conn: Any, database: str) -> dict[str, ServerTable]:
    """Every base table of `database` as information_schema describes it."""
    tables = {_text(name): (_text(collation or ""), _text(comment or "")) for name, collation, comment in _rows(
        conn, "SELECT TABLE_NAME, TABLE_COLLATION, TABLE_COMMENT FROM information_schema.TABLES "
              "WHERE TABLE_SCHEMA = %s AND TABLE_TYPE = 'BASE TABLE'", (database,))}
    collations = {_text(c): _text(s) for c, s in _rows(
        conn, "SELECT COLLATION_NAME, CHARACTER_SET_NAME FROM information_schema.COLLATIONS")}
    columns: dict[str, list[ServerColumn]] = {name: [] for name in tables}
    for row in _rows(conn, (
            "SELECT TABLE_NAME, COLUMN_NAME, ORDINAL_POSITION, DATA_TYPE, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, "
            "CHARACTER_SET_NAME, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION, "
            "EXTRA, COLUMN_COMMENT FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
            "ORDER BY TABLE_NAME, ORDINAL_POSITION"), (database,)):
        table = _text(row[0])
        if table not in columns:
            continue
        columns[table].append(ServerColumn(
            name=_text(row[1]), position=int(row[2]), data_type=_text(row[3]).upper(), column_type=_text(row[4]),
            nullable=_text(row[5]) == "YES", default=None if row[6] is None else _text(row[6]),
            charset=None if row[7] is None else _text(row[7]),
            char_length=None if row[8] is None else int(row[8]),
            numeric_precision=None if row[9] is None else int(row[9]),
            numeric_scale=None if row[10] is None else int(row[10]),
            datetime_precision=None if row[11] is None else int(row[11]),
            auto_increment="auto_increment" in _text(row[12]).lower(), comment=_text(row[13])))
    keys: dict[str, dict[str, list[tuple[int, str]]]] = {}
    non_unique: dict[tuple[str, str], int] = {}
    for table, index, seq, column, nu in _rows(conn, (
            "SELECT TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS "
            "WHERE TABLE_SCHEMA = %s ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX"), (database,)):
        t, i = _text(table), _text(index)
        keys.setdefault(t, {}).setdefault(i, []).append((int(seq), _text(column)))
        non_unique[(t, i)] = int(nu)
    out = {}
    for name, (collation, comment) in tables.items():
        cols = columns[name]
        nullable = {c.name.lower(): c.nullable for c in cols}
        indexes = keys.get(name, {})
        primary: tuple[str, ...] = ()
        if "PRIMARY" in indexes:
            primary = tuple(c for _, c in sorted(indexes["PRIMARY"]))
        else:
            order = [i for i in _index_order(conn, database, name) if i in indexes]
            for index in order:
                members = [c for _, c in sorted(indexes[index])]
                if non_unique[(name, index)] == 0 and all(not nullable.get(c.lower(), True) for c in members):
                    primary = tuple(members)
                    break
        out[name] = ServerTable(database, name, tuple(cols), primary, collations.get(collation), comment)
    return out


def _index_order(conn: Any, database: str, table: str) -> list[str]:
    """Index names in the order SHOW INDEX lists them (the server's own order of keys)."""
    seen: dict[str, None] = {}
    for row in _rows(conn, f"SHOW INDEX FROM {_quote(table)} IN {_quote(database)}"):
        seen.setdefault(_text(row[2]), None)
    return list(seen)
