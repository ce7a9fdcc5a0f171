"""The schema change events one statement gives, and Debezium's column attributes, without a server."""

from __future__ import annotations

import pytest

from headwater.connectors.binlog.ddl import DdlParseError, SchemaState, apply_statement


def _state() -> SchemaState:
    state = SchemaState(server_charset="latin1")
    apply_statement(state, "CREATE DATABASE shop CHARACTER SET utf8mb4", None)
    apply_statement(state, "CREATE TABLE items (id INT NOT NULL PRIMARY KEY, name VARCHAR(10))", "shop")
    return state


def _events(state: SchemaState, sql: str, db: str | None = "shop") -> list[tuple]:
    return [(e.database, e.ddl, [(c.type, c.id, c.previous) for c in e.table_changes], e.source_table)
            for e in apply_statement(state, sql, db).events]


def test_rename_of_several_tables_gives_one_event_per_pair():
    state = _state()
    apply_statement(state, "CREATE TABLE other.t (a INT)", "shop")
    assert _events(state, "RENAME TABLE items TO goods, other.t TO other.u") == [
        ("shop", "RENAME TABLE items TO goods", [("ALTER", ("shop", "goods"), ("shop", "items"))], "goods"),
        ("other", "RENAME TABLE other.t TO other.u", [("ALTER", ("other", "u"), ("other", "t"))], "u"),
    ]


def test_alter_table_rename_to_is_one_alter_with_the_old_id():
    state = _state()
    assert _events(state, "ALTER TABLE items RENAME TO goods, ADD COLUMN x INT") == [
        ("shop", "ALTER TABLE items RENAME TO goods, ADD COLUMN x INT",
         [("ALTER", ("shop", "goods"), ("shop", "items"))], "goods")]
    assert [c.name for c in state.tables[("shop", "goods")].columns] == ["id", "name", "x"]


def test_index_statements_give_an_event_without_table_changes():
    state = _state()
    assert _events(state, "CREATE INDEX ix ON items (name)") == [("shop", "CREATE INDEX ix ON items (name)", [], "")]
    assert _events(state, "DROP INDEX ix ON items") == [("shop", "DROP INDEX ix ON items", [], "")]


def test_unique_index_over_not_null_columns_becomes_the_key_of_a_keyless_table():
    state = _state()
    apply_statement(state, "CREATE TABLE k (a INT NOT NULL, b INT)", "shop")
    assert _events(state, "CREATE UNIQUE INDEX u ON k (b)")[0][2] == []  # nullable: no key
    assert _events(state, "CREATE UNIQUE INDEX u2 ON k (a)")[0][2] == [("ALTER", ("shop", "k"), None)]
    assert state.tables[("shop", "k")].primary_key == ("a",)


def test_statements_that_change_no_table_give_a_database_event_with_the_whole_text():
    state = _state()
    for sql in ("GRANT SELECT ON shop.* TO 'u'@'%'", "CREATE VIEW v AS SELECT 1", "ALTER TABLE nowhere ADD x INT",
                "CREATE TABLE items (other INT)", "SET NAMES utf8mb4", "FLUSH TABLES"):
        assert _events(state, sql) == [("shop", sql, [], None)]
    assert [c.name for c in state.tables[("shop", "items")].columns] == ["id", "name"]
    assert _events(state, "USE other") == [("shop", "USE other", [], None)]


def test_database_statements_name_their_database():
    state = _state()
    assert _events(state, "CREATE DATABASE d2 CHARSET latin1") == [("d2", "CREATE DATABASE d2 CHARSET latin1", [], None)]
    apply_statement(state, "CREATE TABLE d2.t (s VARCHAR(3))", "shop")
    assert state.tables[("d2", "t")].columns[0].charset == "latin1"
    assert _events(state, "DROP DATABASE d2") == [("d2", "DROP DATABASE d2", [], None)]
    assert ("d2", "t") not in state.tables


def test_truncate_gives_no_event_and_names_the_table():
    state = _state()
    result = apply_statement(state, "TRUNCATE TABLE items", "shop")
    assert result.events == [] and result.truncated == [("shop", "items")]


def test_several_statements_in_one_text_are_applied_in_order():
    state = _state()
    events = _events(state, "CREATE TABLE a (x INT); ALTER TABLE a ADD y INT;")
    assert [(e[1], e[2][0][0]) for e in events] == [("CREATE TABLE a (x INT)", "CREATE"), ("ALTER TABLE a ADD y INT", "ALTER")]


def test_a_statement_that_fails_changes_nothing():
    state = _state()
    before = dict(state.tables)
    with pytest.raises(DdlParseError):
        apply_statement(state, "CREATE TABLE ok (a INT); CREATE TABLE bad (a NOSUCHTYPE)", "shop")
    assert state.tables == before
    with pytest.raises(DdlParseError, match="no database selected"):
        apply_statement(state, "CREATE TABLE t (a INT)", None)
    with pytest.raises(DdlParseError, match="column nope not found"):
        apply_statement(state, "ALTER TABLE items MODIFY nope INT", "shop")


@pytest.mark.parametrize(("definition", "expected"), [
    ("INT(11) UNSIGNED ZEROFILL NOT NULL", ("INT UNSIGNED ZEROFILL", 4, 11, None, None, False)),
    ("DOUBLE PRECISION(10,2) UNSIGNED", ("DOUBLE PRECISION UNSIGNED", 8, 10, 2, None, True)),
    ("DECIMAL", ("DECIMAL", 3, 10, 0, None, True)),
    ("NUMERIC(7)", ("NUMERIC", 2, 7, 0, None, True)),
    ("BIT", ("BIT", -7, 1, None, None, True)),
    ("NCHAR", ("NCHAR", -15, 1, None, "utf8", True)),
    ("NATIONAL VARCHAR(5) BINARY", ("NATIONAL VARCHAR BINARY", -9, 5, None, "utf8", True)),
    ("CHARACTER VARYING(9) CHARACTER SET latin1", ("CHARACTER VARYING", 12, 9, None, "latin1", True)),
    ("VARCHAR(4) BINARY", ("VARCHAR BINARY", 12, 4, None, "utf8mb4", True)),
    ("TEXT COLLATE latin1_bin", ("TEXT", 12, None, None, "latin1", True)),
    ("SET('a','b','c')", ("SET", 1, 5, None, "utf8mb4", True)),
    ("ENUM('a') NOT NULL", ("ENUM", 1, 1, None, "utf8mb4", False)),
    ("SERIAL", ("BIGINT UNSIGNED", -5, None, None, None, False)),
    ("BOOL", ("BOOL", 16, None, None, None, True)),
    ("TIMESTAMP(6)", ("TIMESTAMP", 2014, 6, None, None, True)),
    ("DATETIME", ("DATETIME", 93, None, None, None, True)),
    ("TIME(3)", ("TIME", 92, 3, None, None, True)),
    ("YEAR(4)", ("YEAR", 4, 4, None, None, True)),
    ("LONGBLOB", ("LONGBLOB", 2004, None, None, None, True)),
    ("VARBINARY(8)", ("VARBINARY", -3, 8, None, None, True)),
    ("JSON", ("JSON", 1111, None, None, None, True)),
    ("POINT", ("POINT", 1111, None, None, None, True)),
    ("LONG VARCHAR", ("LONG VARCHAR", 12, None, None, "utf8mb4", True)),
    ("FLOAT(7,3)", ("FLOAT", 6, 7, 3, None, True)),
    ("INT8", ("INT8", -5, None, None, None, True)),
])
def test_column_types_as_debezium_resolves_them(definition, expected):
    state = _state()
    apply_statement(state, f"CREATE TABLE t (c {definition})", "shop")
    c = state.tables[("shop", "t")].columns[0]
    assert (c.type_name, c.jdbc_type, c.length, c.scale, c.charset, c.optional) == expected
    assert c.type_expression == c.type_name


@pytest.mark.parametrize(("clause", "expected"), [
    ("DEFAULT 'it''s'", (True, "it''s")),
    ("DEFAULT \"dq\"", (True, "dq")),
    ("DEFAULT -5", (True, "-5")),
    ("DEFAULT 1.5e3", (True, "1.5e3")),
    ("DEFAULT NULL", (True, None)),
    ("DEFAULT TRUE", (True, "TRUE")),
    ("DEFAULT b'101'", (True, "101")),
    ("DEFAULT 0x1F", (True, None)),
    ("DEFAULT CURRENT_TIMESTAMP", (True, "1970-01-01 00:00:00")),
    ("DEFAULT now(3)", (True, "1970-01-01 00:00:00")),
    ("DEFAULT curdate()", (True, "curdate()")),
    ("DEFAULT (1 + 2)", (True, None)),
    ("DEFAULT uuid()", (True, None)),
    ("DEFAULT _utf8mb4'x'", (True, "_utf8mb4'x'")),
    ("DEFAULT 'a' COLLATE utf8mb4_bin", (True, "a")),
    ("", (False, None)),
])
def test_defaults_as_debezium_writes_them(clause, expected):
    state = _state()
    apply_statement(state, f"CREATE TABLE t (c VARCHAR(20) {clause})", "shop")
    c = state.tables[("shop", "t")].columns[0]
    assert (c.has_default, c.default_expression) == expected


def test_on_update_is_auto_increment_for_debezium_unless_part_of_a_current_timestamp_default():
    state = _state()
    apply_statement(state, "CREATE TABLE t (a TIMESTAMP DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, "
                           "b DATETIME DEFAULT '2000-01-01' ON UPDATE CURRENT_TIMESTAMP, c INT AUTO_INCREMENT KEY)",
                    "shop")
    a, b, c = state.tables[("shop", "t")].columns
    assert (a.auto_incremented, b.auto_incremented, c.auto_incremented) == (False, True, True)
    assert (a.generated, b.generated, c.generated) == (False, True, True)
    assert state.tables[("shop", "t")].primary_key == ("c",)


def test_charsets_come_from_the_column_the_table_the_database_or_the_server():
    state = _state()
    apply_statement(state, "CREATE TABLE t1 (a VARCHAR(1) CHARSET ascii, b VARCHAR(1), c INT) CHARSET utf8mb3", "shop")
    apply_statement(state, "CREATE TABLE t2 (a VARCHAR(1))", "shop")
    apply_statement(state, "CREATE TABLE nodb.t3 (a VARCHAR(1))", "shop")
    assert [c.charset for c in state.tables[("shop", "t1")].columns] == ["ascii", "utf8mb3", None]
    assert state.tables[("shop", "t2")].columns[0].charset == "utf8mb4"
    assert state.tables[("nodb", "t3")].columns[0].charset == "latin1"
    apply_statement(state, "ALTER TABLE t2 ADD b TEXT, DEFAULT CHARSET latin1", "shop")
    assert [c.charset for c in state.tables[("shop", "t2")].columns] == ["utf8mb4", "latin1"]
