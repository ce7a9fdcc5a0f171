"""The DDL parser against a real MariaDB: a corpus applied statement by statement.

Each statement of tests/data/ddl/*.sql (paragraphs separated by blank lines) and of the generated
type corpus runs on the server, then through `SchemaHistory`; after each, every table of the test
databases as tracked must equal what information_schema says: columns and their order, types,
unsigned, lengths, scale, fraction digits, nullability, defaults, charsets, ENUM/SET members,
AUTO_INCREMENT, comments, primary key, table charset and comment.

A paragraph may start with directives: `-- divergent: why` marks a statement whose tracked schema is
known to differ (the test requires it to differ, so the list stays true; the tracked tables are then
re-read from the server so that later statements start right); `-- as-logged` applies the created
table's SHOW CREATE TABLE instead (what the binlog holds for CREATE TABLE ... SELECT in row format).
The fraction handled is printed and is the one the README gives.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

import pymysql
import pytest

from headwater.connectors.binlog.catalog import (
    ServerColumn,
    ServerTable,
    information_schema_tables,
    read_tables,
    snapshot_statements,
)
from headwater.connectors.binlog.history import SchemaHistory
from headwater.connectors.binlog.schema import Column, Table

CORPUS = Path(__file__).parents[2] / "data" / "ddl"
DATABASES = ("hw_ddl", "hw_ddl_other")  # every corpus statement works in these two databases


@dataclass
class Statement:
    source: str
    sql: str
    divergent: str | None = None
    as_logged: bool = False


def corpus_files() -> list[Statement]:
    out = []
    for path in sorted(CORPUS.glob("*.sql")):
        for n, block in enumerate(re.split(r"\n\s*\n", path.read_text())):
            lines = block.strip().splitlines()
            directives = [line[2:].strip() for line in lines if line.startswith("--")]
            sql = "\n".join(line for line in lines if not line.startswith("--")).strip().rstrip(";")
            if not sql:
                continue
            divergent = next((d.split(":", 1)[1].strip() for d in directives if d.startswith("divergent:")), None)
            out.append(Statement(f"{path.name}#{n}", sql, divergent, "as-logged" in directives))
    return out


# -- the generated corpus: every column type, in CREATE TABLE, ADD COLUMN and MODIFY ---------------
TYPES = [
    "TINYINT", "TINYINT(4)", "TINYINT UNSIGNED", "TINYINT(3) UNSIGNED ZEROFILL", "SMALLINT", "SMALLINT(6) UNSIGNED",
    "MEDIUMINT", "MEDIUMINT UNSIGNED", "INT", "INT(11)", "INT UNSIGNED", "INT(5) ZEROFILL", "INTEGER", "INTEGER(8)",
    "BIGINT", "BIGINT(20) UNSIGNED", "INT1", "INT2", "INT3", "INT4", "INT8", "MIDDLEINT", "BOOL", "BOOLEAN",
    "DECIMAL", "DECIMAL(5)", "DECIMAL(5,2)", "DECIMAL(65,30)", "DECIMAL(10,0) UNSIGNED", "DEC(8,3)", "FIXED(6,1)",
    "NUMERIC(12,4)", "NUMERIC", "FLOAT", "FLOAT(7,3)", "FLOAT(10)", "FLOAT(30)", "FLOAT UNSIGNED", "DOUBLE",
    "DOUBLE(12,4)", "DOUBLE PRECISION", "REAL", "FLOAT4", "FLOAT8", "BIT", "BIT(1)", "BIT(7)", "BIT(64)",
    "DATE", "TIME", "TIME(3)", "TIME(6)", "DATETIME", "DATETIME(0)", "DATETIME(3)", "DATETIME(6)", "TIMESTAMP NULL",
    "TIMESTAMP(3) NULL", "TIMESTAMP(6) NULL", "YEAR", "YEAR(4)",
    "CHAR(1)", "CHAR(10)", "CHAR(255)", "VARCHAR(1)", "VARCHAR(255)", "VARCHAR(1000)", "CHARACTER(4)",
    "CHARACTER VARYING(20)", "CHAR VARYING(9)", "NATIONAL CHAR(5)", "NCHAR(7)", "NATIONAL VARCHAR(10)",
    "NVARCHAR(12)", "NCHAR VARCHAR(3)", "VARCHAR(20) CHARACTER SET latin1", "VARCHAR(20) CHARSET ascii",
    "CHAR(3) CHARACTER SET utf8mb3", "VARCHAR(8) COLLATE utf8mb4_bin", "VARCHAR(8) CHARACTER SET latin1 COLLATE latin1_bin",
    "VARCHAR(10) BINARY", "TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT", "TEXT CHARACTER SET latin1",
    "LONGTEXT COLLATE utf8mb4_bin", "BINARY(4)", "VARBINARY(16)", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB",
    "ENUM('a','b','c')", "ENUM('x y', 'it''s', '')", "ENUM('one') CHARACTER SET latin1", "SET('a','b','c')",
    "SET('p','q')", "JSON", "GEOMETRY", "POINT", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING",
    "MULTIPOLYGON", "GEOMETRYCOLLECTION", "UUID", "INET4", "INET6",
]
DEFAULTS = {
    "INT": "7", "TINYINT": "-3", "DECIMAL(5,2)": "1.5", "DOUBLE": "2.5e3", "VARCHAR(255)": "'hello'",
    "CHAR(10)": "'it''s'", "DATE": "'2024-02-29'", "DATETIME(3)": "CURRENT_TIMESTAMP(3)", "BIT(7)": "b'101'",
    "ENUM('a','b','c')": "'b'", "SET('a','b','c')": "'a,c'", "BOOLEAN": "TRUE", "TIME": "'12:34:56'",
    "YEAR": "2024", "TIMESTAMP NULL": "CURRENT_TIMESTAMP", "BIGINT": "(1 + 2)",
}


def generated() -> list[Statement]:
    out = [Statement("gen#base", "CREATE TABLE gen_base (id INT NOT NULL PRIMARY KEY)")]
    for i, sql_type in enumerate(TYPES):
        nullable = sql_type.replace(" NULL", "")
        out.append(Statement(f"gen#{i}.create", f"CREATE TABLE gen_{i} (id INT PRIMARY KEY, c {sql_type}, d {nullable} NOT NULL)"))
        out.append(Statement(f"gen#{i}.add", f"ALTER TABLE gen_base ADD COLUMN c{i} {sql_type} AFTER id"))
        out.append(Statement(f"gen#{i}.modify", f"ALTER TABLE gen_{i} MODIFY COLUMN c {nullable} NOT NULL FIRST"))
        if sql_type in DEFAULTS:
            out.append(Statement(f"gen#{i}.default",
                                 f"ALTER TABLE gen_{i} ADD COLUMN e {sql_type} DEFAULT {DEFAULTS[sql_type]}"))
        out.append(Statement(f"gen#{i}.drop", f"DROP TABLE gen_{i}"))
    return out


# -- comparison ---------------------------------------------------------------------------------
_SERVER_TYPE = {
    "INTEGER": "INT", "INT1": "TINYINT", "INT2": "SMALLINT", "INT3": "MEDIUMINT", "INT4": "INT", "INT8": "BIGINT",
    "MIDDLEINT": "MEDIUMINT", "BOOL": "TINYINT", "BOOLEAN": "TINYINT", "DEC": "DECIMAL", "FIXED": "DECIMAL",
    "NUMERIC": "DECIMAL", "REAL": "DOUBLE", "FLOAT4": "FLOAT", "FLOAT8": "DOUBLE", "CHARACTER": "CHAR",
    "CHARACTER VARYING": "VARCHAR", "CHAR VARYING": "VARCHAR", "NATIONAL CHAR": "CHAR", "NCHAR": "CHAR",
    "NATIONAL VARCHAR": "VARCHAR", "NVARCHAR": "VARCHAR", "NCHAR VARCHAR": "VARCHAR", "NATIONAL CHARACTER": "CHAR",
    "JSON": "LONGTEXT", "LONG": "MEDIUMTEXT", "LONG VARCHAR": "MEDIUMTEXT", "LONG VARBINARY": "MEDIUMBLOB",
    "SERIAL": "BIGINT", "DOUBLE PRECISION": "DOUBLE",
}
_TEMPORAL = {"TIME", "DATETIME", "TIMESTAMP"}
_CHARSET_ALIASES = {"utf8": "utf8mb3"}


def _base_type(column: Column) -> str:
    words = [w for w in column.type_name.split() if w not in ("UNSIGNED", "SIGNED", "ZEROFILL", "BINARY")
             or column.type_name in ("BINARY",)]
    name = " ".join(words)
    name = _SERVER_TYPE.get(name, name)
    if name == "FLOAT" and column.length is not None and column.scale is None and column.length > 24:
        return "DOUBLE"
    return name


def _unescape(text: str) -> str:
    """The characters of a MySQL string literal's contents ('' and backslash escapes resolved)."""
    escapes = {"0": "\0", "n": "\n", "r": "\r", "t": "\t", "b": "\b", "Z": "\x1a"}
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append(escapes.get(text[i + 1], text[i + 1]))
            i += 2
        elif ch in "'\"" and text[i:i + 2] == ch * 2:
            out.append(ch)
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _default_matches(column: Column, server: ServerColumn) -> bool:
    value = server.default
    if value is None or value == "NULL":
        return column.default_expression is None
    if column.default_expression is None:
        # an expression default: Debezium gives no value for it
        return not (value.startswith("'") or re.fullmatch(r"-?[0-9.e+]+", value))
    mine = column.default_expression
    if value.startswith("'") and value.endswith("'"):  # a string: compare contents (Debezium keeps escapes raw)
        return _unescape(value[1:-1]) == _unescape(mine)
    if value.lower().startswith("current_timestamp"):  # also what LOCALTIME(STAMP) becomes
        return mine == "1970-01-01 00:00:00" or mine.upper().startswith("LOCALTIME")
    if value.startswith("b'"):
        return mine == value[2:-1]
    if mine.upper() in ("TRUE", "FALSE"):
        mine = "1" if mine.upper() == "TRUE" else "0"
    try:
        return Decimal(mine) == Decimal(value)
    except InvalidOperation:
        return mine == value


def column_differences(column: Column, server: ServerColumn) -> list[str]:
    problems = []

    def check(what: str, mine: object, theirs: object) -> None:
        if mine != theirs:
            problems.append(f"{column.name}.{what}: tracked {mine!r}, server {theirs!r}")

    base = _base_type(column)
    check("type", base, server.data_type)
    unsigned = "UNSIGNED" in column.type_name or "ZEROFILL" in column.type_name or column.type_name == "SERIAL"
    check("unsigned", unsigned, "unsigned" in server.column_type)
    check("optional", column.optional, server.nullable)
    if not (server.on_update and column.auto_incremented):  # Debezium's ON UPDATE sets autoIncremented
        check("autoIncremented", column.auto_incremented, server.auto_increment)
    check("comment", column.comment or "", server.comment)
    if base in ("CHAR", "VARCHAR", "BINARY", "VARBINARY"):
        check("length", column.length if column.length is not None else 1, server.char_length)
    elif base == "DECIMAL" or base in ("FLOAT", "DOUBLE") and column.scale is not None:
        check("length", column.length, server.numeric_precision)
        check("scale", column.scale, server.numeric_scale)
    elif base == "BIT":
        check("length", column.length, server.numeric_precision)
    elif base in _TEMPORAL:
        check("length", column.length or 0, server.datetime_precision)
    elif column.length is not None and base in ("TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT"):
        width = re.match(r"\w+\((\d+)\)", server.column_type)
        check("length", column.length, int(width.group(1)) if width else None)
    if base in ("ENUM", "SET"):
        members = re.findall(r"'((?:[^']|'')*)'", server.column_type[len(base) + 1:])
        check("enumValues", [v[1:-1] for v in column.enum_values or ()], members)
    if column.type_name != "JSON" and base not in ("TINYTEXT", "TEXT", "MEDIUMTEXT", "LONGTEXT") or column.charset:
        theirs = server.charset if column.type_name != "JSON" else None
        mine = _CHARSET_ALIASES.get(column.charset or "", column.charset)
        check("charset", mine, theirs)
    if not _default_matches(column, server):
        problems.append(f"{column.name}.default: tracked {column.default_expression!r}, server {server.default!r}")
    return problems


def table_differences(table: Table | None, server: ServerTable) -> list[str]:
    if table is None:
        return [f"{server.name}: not tracked"]
    problems = []
    if [c.name for c in table.columns] != [c.name for c in server.columns]:
        return [f"{server.name}: columns {[c.name for c in table.columns]} != {[c.name for c in server.columns]}"]
    for mine, theirs in zip(table.columns, server.columns, strict=True):
        problems += [f"{server.name}.{p}" for p in column_differences(mine, theirs)]
    if list(table.primary_key) != list(server.primary_key):
        problems.append(f"{server.name}: key {table.primary_key} != {server.primary_key}")
    if _CHARSET_ALIASES.get(table.default_charset or "", table.default_charset) != server.default_charset:
        problems.append(f"{server.name}: charset {table.default_charset} != {server.default_charset}")
    if (table.comment or "") != server.comment:
        problems.append(f"{server.name}: comment {table.comment!r} != {server.comment!r}")
    return problems


def differences(history: SchemaHistory, conn: pymysql.Connection, affected: set[tuple[str, str]] | None = None
                ) -> list[str]:
    """What differs between the tracked tables and the server's: which tables exist, and the `affected` ones
    (all when None) in full."""
    problems = []
    for db in DATABASES:
        with conn.cursor() as cur:
            cur.execute(f"SHOW FULL TABLES IN {db} WHERE Table_type IN ('BASE TABLE', 'SYSTEM VERSIONED')")
            on_server = {row[0] for row in cur.fetchall()}
        tracked = {name for (d, name) in history.tables() if d == db}
        problems += [f"{name}: tracked but not on the server" for name in sorted(tracked - on_server)]
        problems += [f"{name}: not tracked" for name in sorted(on_server - tracked)]
        names = None if affected is None else {name for (d, name) in affected if d == db}
        for name, table in sorted(information_schema_tables(conn, db, names).items()):
            if history.table(db, name) is not None:
                problems += table_differences(history.table(db, name), table)
    return problems


@pytest.fixture
def corpus_server(mariadb_server):
    params = mariadb_server.connection_params()
    conn = pymysql.connect(host=params["host"], port=params["port"], user=params["user"],
                           password=params["password"], autocommit=True)
    with conn.cursor() as cur:
        for db in DATABASES:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
        cur.execute(f"CREATE DATABASE {DATABASES[0]} CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci")
        cur.execute(f"CREATE DATABASE {DATABASES[1]} CHARACTER SET latin1")
        cur.execute(f"USE {DATABASES[0]}")
    yield conn
    with conn.cursor() as cur:
        for db in DATABASES:
            cur.execute(f"DROP DATABASE IF EXISTS {db}")
        cur.execute("DROP USER IF EXISTS 'hw_corpus'@'%'")
    conn.close()


def _resync(history: SchemaHistory, conn: pymysql.Connection) -> None:
    """Tracked tables set to the server's (read through SHOW CREATE TABLE), after a known divergence."""
    for table_id in [t for t in history.tables() if t[0] in DATABASES]:
        del history.state.tables[table_id]
    ids = [(db, name) for db in DATABASES for name in information_schema_tables(conn, db)]
    history.state.tables.update(read_tables(conn, ids))


def run_corpus(statements: list[Statement], conn: pymysql.Connection) -> tuple[int, list[str]]:
    history = SchemaHistory()
    for db, charset in ((DATABASES[0], "utf8mb4"), (DATABASES[1], "latin1")):
        history.state.database_charsets[db] = charset
    history.state.server_charset = "utf8mb4"
    failures = []
    handled = 0
    baseline: set[str] = set()  # differences the server's own SHOW CREATE TABLE leaves (after a resync)
    for n, statement in enumerate(statements):
        with conn.cursor() as cur:
            try:
                cur.execute(statement.sql)
            except pymysql.MySQLError as exc:
                raise AssertionError(f"the server refuses {statement.source}: {exc}") from exc
            cur.execute("SELECT DATABASE()")
            current = cur.fetchone()[0]
        sql = statement.sql
        if statement.as_logged:
            name = re.search(r"CREATE\s+TABLE\s+(\w+)", sql, re.IGNORECASE).group(1)  # type: ignore[union-attr]
            with conn.cursor() as cur:
                cur.execute(f"SHOW CREATE TABLE {name}")
                sql = cur.fetchone()[1]
        try:
            events = history.apply(sql, current, {"file": "binlog.000001", "pos": n})
            affected = {i for e in events for c in e.table_changes for i in (c.id, c.previous) if i is not None}
            # a statement that changed no tracked table (index, view, grant, ...) must leave every table right
            problems = [p for p in differences(history, conn, affected or None) if p not in baseline]
        except Exception as exc:  # noqa: BLE001 - a parser failure is a finding of the corpus
            problems = [f"error: {exc}"]
        if statement.divergent is None and problems:
            failures.append(f"{statement.source}: {statement.sql[:120]!r}: {problems[:4]}")
        elif statement.divergent is not None and not problems:
            failures.append(f"{statement.source}: marked divergent ({statement.divergent}) but handled")
        if problems:
            _resync(history, conn)
            baseline = set(differences(history, conn))
            failures += [f"{statement.source}: after re-reading the server's tables: {p}" for p in sorted(baseline)]
        else:
            handled += 1
    failures += [f"at the end, all tables: {p}" for p in differences(history, conn) if p not in baseline]
    # the snapshot's way: every table read again through SHOW CREATE TABLE
    snapshot = SchemaHistory()
    for s in snapshot_statements(conn, database_filter=lambda db: db in DATABASES):
        snapshot.apply(s.ddl, s.database or None, {"file": "binlog.000001", "pos": len(statements)})
    failures += [f"snapshot: {p}" for p in differences(snapshot, conn)]
    return handled, failures


def test_corpus_schema_equals_information_schema(corpus_server):
    statements = corpus_files() + generated()
    with corpus_server.cursor() as cur:  # tables in the system tablespace: DDL without file creation, faster
        cur.execute("SET GLOBAL innodb_file_per_table = OFF")
    try:
        handled, failures = run_corpus(statements, corpus_server)
    finally:
        with corpus_server.cursor() as cur:
            cur.execute("SET GLOBAL innodb_file_per_table = ON")
    print(f"\nDDL corpus: {handled} of {len(statements)} statements handled "
          f"({100 * handled / len(statements):.1f}%)")
    assert len(statements) >= 400
    assert not failures, "\n".join(failures)


def test_the_comparison_finds_each_kind_of_difference(corpus_server):
    with corpus_server.cursor() as cur:
        cur.execute("CREATE TABLE cmp (id INT UNSIGNED NOT NULL, s VARCHAR(5) CHARACTER SET latin1 DEFAULT 'x', "
                    "e ENUM('a','b'), d DECIMAL(6,2), t DATETIME(3), PRIMARY KEY (id)) COMMENT 'c'")
    history = SchemaHistory()
    history.state.database_charsets[DATABASES[0]] = "utf8mb4"
    history.apply("CREATE TABLE cmp (id INT NOT NULL, s VARCHAR(5) CHARACTER SET latin1 DEFAULT 'x', "
                  "e ENUM('a','b'), d DECIMAL(6,2), t DATETIME(3), PRIMARY KEY (id)) COMMENT 'c'", DATABASES[0], {})
    assert differences(history, corpus_server) == ["cmp.id.unsigned: tracked False, server True"]
    wrong = [
        "CREATE TABLE cmp (id INT UNSIGNED, s VARCHAR(6) CHARACTER SET utf8mb4 DEFAULT 'y', e ENUM('a','c'), "
        "d DECIMAL(6,3), t DATETIME(6), PRIMARY KEY (s)) COMMENT 'd'",
        "CREATE TABLE cmp (s VARCHAR(5), id INT UNSIGNED NOT NULL)",
    ]
    found = []
    for sql in wrong:
        history.apply("DROP TABLE cmp", DATABASES[0], {})
        history.apply(sql, DATABASES[0], {})
        found.append(differences(history, corpus_server))
    assert [p.split(":")[0] for p in found[0]] == [
        "cmp.id.optional", "cmp.s.optional", "cmp.s.length", "cmp.s.charset", "cmp.s.default", "cmp.e.enumValues",
        "cmp.d.scale", "cmp.t.length", "cmp", "cmp"]
    assert found[0][-2:] == ["cmp: key ('s',) != ('id',)", "cmp: comment 'd' != 'c'"]
    assert found[1] == ["cmp: columns ['s', 'id'] != ['id', 's', 'e', 'd', 't']"]
    history.apply("DROP TABLE cmp", DATABASES[0], {})
    assert differences(history, corpus_server) == ["cmp: not tracked"]


_USE = re.compile(r"^use `((?:[^`]|``)*)`; (.*)$", re.DOTALL)


def test_corpus_as_the_binlog_carries_it(corpus_server):
    """The corpus read back from the binlog (its QUERY events as the server rewrote them: CREATE TABLE ...
    SELECT expanded, DROP TABLE with `/* generated by server */`, ...) gives the server's tables."""
    statements = [s for s in corpus_files() + generated() if s.divergent is None]
    with corpus_server.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW MASTER STATUS")
        log_file, log_pos = cur.fetchone()[:2]
        cur.execute("SET GLOBAL innodb_file_per_table = OFF")
        try:
            for statement in statements:
                cur.execute(statement.sql)
        finally:
            cur.execute("SET GLOBAL innodb_file_per_table = ON")
        cur.execute(f"SHOW BINLOG EVENTS IN '{log_file}' FROM {int(log_pos)}")
        events = [(row[1], row[5]) for row in cur.fetchall() if row[2] == "Query"]
    history = SchemaHistory()
    history.state.database_charsets.update({DATABASES[0]: "utf8mb4", DATABASES[1]: "latin1"})
    history.state.server_charset = "utf8mb4"
    applied = 0
    for pos, info in events:
        use = _USE.match(info)
        database, sql = (use.group(1).replace("``", "`"), use.group(2)) if use else (None, info)
        history.apply(sql, database, {"file": log_file, "pos": pos})
        applied += 1
    assert applied >= len(statements) - 40  # temporary tables and a few others are not in a row-based binlog
    assert differences(history, corpus_server) == []
