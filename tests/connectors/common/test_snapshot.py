"""Snapshot planning shared by connectors (common/snapshot.py): order, overrides, markers, and the
primary-key range splitter, checked against real PostgreSQL tables: the union of the ranges is the
table exactly, each row once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from headwater.config.properties import ConnectorConfig
from headwater.connectors.common.snapshot import (
    ChunkKey,
    KeyDialect,
    KeyRange,
    dense_ranges,
    key_ranges,
    marker,
    select_overrides,
    snapshot_tables,
)


def config(extra: dict[str, str] | None = None, **lists: str) -> ConnectorConfig:
    """Validated properties as snapshot planning reads them: list properties as lists, `extra` the
    per-table override statements."""
    values = {name.replace("_", "."): value.split(",") for name, value in lists.items()}
    return ConnectorConfig("fake", values, definitions={}, extra=extra or {})


# ------------------------------------------------------------------------ tables, overrides, markers


def test_snapshot_tables_order_and_pick():
    tables = ["public.b", "public.a", "s.z", "s.c", "public.c"]
    cfg = config(table_include_list="s\\..*,public\\.c,public\\..*")
    assert snapshot_tables(tables, str, cfg) == ["s.c", "s.z", "public.c", "public.a", "public.b"]
    cfg = config(table_include_list="s\\..*,public\\..*", snapshot_include_collection_list="public.a,s.z")
    assert snapshot_tables(tables, str, cfg) == ["s.z", "public.a"]
    assert snapshot_tables(tables, str, config()) == sorted(tables)


def test_select_overrides():
    cfg = config({"snapshot.select.statement.overrides.public.a": "SELECT * FROM public.a WHERE id > 1"},
                 snapshot_select_statement_overrides="public.a,public.b")
    assert select_overrides(cfg) == {"public.a": "SELECT * FROM public.a WHERE id > 1"}
    assert select_overrides(config()) == {}


@pytest.mark.parametrize(("flags", "expected"), [
    ((True, True, True, True), "last"),
    ((True, False, True, False), "first"),
    ((False, True, True, False), "first_in_data_collection"),
    ((True, False, False, True), "last_in_data_collection"),
    ((False, False, False, False), "true"),
])
def test_marker(flags, expected):
    assert marker(*flags) == expected


# ------------------------------------------------------------------------ key ranges on PostgreSQL


class ExpandedDialect(KeyDialect):
    """A database without row-value comparisons: the key is compared one column at a time."""

    row_values = False


@pytest.fixture
def cursor(pg_server, pg_db) -> Iterator[Any]:
    conn = pg_server.connect(pg_db)
    with conn.cursor() as cur:
        yield cur
    conn.close()


def read_ranges(cur: Any, dialect: KeyDialect, table: str, key: ChunkKey, chunk_rows: int
                ) -> tuple[list[KeyRange], list[list[tuple[Any, ...]]]]:
    """The ranges of `table` and the rows each one selects."""
    ranges = key_ranges(cur, dialect, table, key, chunk_rows)
    cur.execute(f"SELECT * FROM {table} LIMIT 0")
    columns = [d.name for d in cur.description]
    chunks = []
    for r in ranges:
        cur.execute(*r.select(table, columns, key, dialect))
        chunks.append(cur.fetchall())
    return ranges, chunks


def check(cur: Any, table: str, key: ChunkKey, chunk_rows: int, dialect: KeyDialect | None = None,
          unique: bool = True) -> list[list[tuple[Any, ...]]]:
    """The ranges' rows are the table's, each once; with a unique key no range holds more than a chunk."""
    dialect = dialect or KeyDialect()
    ranges, chunks = read_ranges(cur, dialect, table, key, chunk_rows)
    cur.execute(f"SELECT * FROM {table}")
    everything = cur.fetchall()
    union = [row for chunk in chunks for row in chunk]
    assert Counter(union) == Counter(everything) and len(union) == len(everything)
    assert ranges[0].lo is None and ranges[-1].hi is None
    assert all(a.hi == b.lo for a, b in zip(ranges, ranges[1:], strict=False))  # contiguous
    if unique:
        assert all(len(c) == chunk_rows for c in chunks[:-1]) and len(chunks[-1]) <= chunk_rows
        assert len(chunks) == max(1, -(-len(everything) // chunk_rows))
    return chunks


DIALECTS = [KeyDialect(), ExpandedDialect()]


@pytest.mark.parametrize("dialect", DIALECTS, ids=["row-values", "expanded"])
def test_single_key(pg_server, pg_db, cursor, dialect):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text);"
                      "INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 1000) g", pg_db)
    chunks = check(cursor, "t", ChunkKey(("id",), (False,)), 100, dialect)
    assert [c[0][0] for c in chunks] == list(range(1, 1000, 100))
    check(cursor, "t", ChunkKey(("id",), (False,)), 333, dialect)  # a last range shorter than the others
    check(cursor, "t", ChunkKey(("id",), (False,)), 1, dialect)


@pytest.mark.parametrize("dialect", DIALECTS, ids=["row-values", "expanded"])
def test_composite_key_skewed(pg_server, pg_db, cursor, dialect):
    """Most rows share the first key column: ranges split inside one of its values."""
    pg_server.execute("CREATE TABLE t (a int, b text, c int, v int, PRIMARY KEY (a, b, c));"
                      "INSERT INTO t SELECT 1, 'k' || (g % 7), g, g FROM generate_series(1, 700) g;"
                      "INSERT INTO t SELECT g, 'x', 0, g FROM generate_series(2, 40) g;"
                      "INSERT INTO t VALUES (1000000, '', -5, 0), (-3, 'z', 1, 0)", pg_db)
    key = ChunkKey(("a", "b", "c"), (False, False, False))
    for rows in (50, 64, 99, 741, 742, 5000):
        check(cursor, "t", key, rows, dialect)


def test_text_key(pg_server, pg_db, cursor):
    """Text compares in the column's collation, in the boundary queries and the ranges alike."""
    values = ["", " ", "a", "A", "b", "B", "ä", "Äb", "z", "Z", "10", "9", "a b", "a-b", "ab", "é", "e", "f",
              "ß", "ss", "ǅ", "日本", "\\", "'", '"', "a\tb"] + [f"k{i:04d}" for i in range(300)]
    literals = ", ".join("(" + "'" + v.replace("'", "''") + "')" for v in values)
    pg_server.execute(f'CREATE TABLE t (k text PRIMARY KEY); INSERT INTO t VALUES {literals};'
                      f'CREATE TABLE u (k text COLLATE "C" PRIMARY KEY); INSERT INTO u SELECT k FROM t;'
                      f'CREATE TABLE "Odd ""name""" ("Key col" varchar(10) PRIMARY KEY);'
                      f'INSERT INTO "Odd ""name""" SELECT left(k, 10) FROM t ON CONFLICT DO NOTHING', pg_db)
    for rows in (1, 7, 25, 100):
        check(cursor, "t", ChunkKey(("k",), (False,)), rows)
        check(cursor, "u", ChunkKey(("k",), (False,)), rows)
        check(cursor, KeyDialect().table("public", 'Odd "name"'), ChunkKey(("Key col",), (False,)), rows)


def test_other_key_types(pg_server, pg_db, cursor):
    """Boundary values go back to the server as parameters: they must compare as the column's type."""
    pg_server.execute("CREATE TABLE t (u uuid, ts timestamptz, n numeric, b bytea, PRIMARY KEY (u, ts, n, b));"
                      "INSERT INTO t SELECT md5(g::text)::uuid, '2024-01-01'::timestamptz + g * interval '1 ms', "
                      "g / 7.0, decode(md5(g::text), 'hex') FROM generate_series(1, 300) g;"
                      "CREATE TABLE v (ts timestamptz, n numeric, b bytea, PRIMARY KEY (n, b, ts));"
                      "INSERT INTO v SELECT ts, n, b FROM t", pg_db)
    check(cursor, "t", ChunkKey(("u", "ts", "n", "b"), (False,) * 4), 17)
    check(cursor, "v", ChunkKey(("n", "b", "ts"), (False,) * 3), 17)
    check(cursor, "v", ChunkKey(("n", "b", "ts"), (False,) * 3), 17, ExpandedDialect())


def test_empty_table_and_one_chunk(pg_server, pg_db, cursor):
    pg_server.execute("CREATE TABLE e (id int PRIMARY KEY); CREATE TABLE s (id int PRIMARY KEY);"
                      "INSERT INTO s SELECT generate_series(1, 9)", pg_db)
    key = ChunkKey(("id",), (False,))
    assert key_ranges(cursor, KeyDialect(), "e", key, 10) == [KeyRange(None, None)]
    assert check(cursor, "e", key, 10) == [[]]
    assert key_ranges(cursor, KeyDialect(), "s", key, 10) == [KeyRange(None, None)]
    assert key_ranges(cursor, KeyDialect(), "s", key, 9) == [KeyRange(None, None)]
    assert key_ranges(cursor, KeyDialect(), "s", key, 8) == [KeyRange(None, (9,)), KeyRange((9,), None)]
    # the first ranges smaller (the lock-free snapshot's first batch), then ranges of chunk_rows again
    assert key_ranges(cursor, KeyDialect(), "s", key, 4, first=(2, 1)) == [
        KeyRange(None, (2,)), KeyRange((2,), (3,)), KeyRange((3,), (7,)), KeyRange((7,), None)]
    assert key_ranges(cursor, KeyDialect(), "s", key, 10, first=(2, 4)) == [
        KeyRange(None, (5,)), KeyRange((5,), (9,)), KeyRange((9,), None)]
    # from a key on (a blocking snapshot going on after a restart): ranges of the keys from it
    assert key_ranges(cursor, KeyDialect(), "s", key, 3, start=(4,)) == [
        KeyRange((4,), (7,)), KeyRange((7,), None)]
    assert key_ranges(cursor, KeyDialect(), "s", key, 3, start=(10,)) == [KeyRange((10,), None)]


def test_skewed_single_key(pg_server, pg_db, cursor):
    """Dense and sparse stretches of the key: ranges follow rows, not key values."""
    pg_server.execute("CREATE TABLE t (id bigint PRIMARY KEY);"
                      "INSERT INTO t SELECT generate_series(1, 500);"
                      "INSERT INTO t SELECT g::bigint * 1000000007 FROM generate_series(1, 50) g;"
                      "INSERT INTO t SELECT -g * g * g FROM generate_series(1, 30) g", pg_db)
    for rows in (10, 64, 579, 580, 581):
        check(cursor, "t", ChunkKey(("id",), (False,)), rows)


def test_nullable_key_with_duplicates(pg_server, pg_db, cursor):
    """A nullable unique key (NULLs repeat): NULL sorts first, compares null-safely, and a value held by
    more rows than a chunk ends its range at the next key."""
    pg_server.execute("CREATE TABLE t (a int, b text, v int, UNIQUE (a, b));"
                      "INSERT INTO t SELECT NULL, NULL, g FROM generate_series(1, 30) g;"
                      "INSERT INTO t SELECT NULL, 'b' || g, g FROM generate_series(1, 20) g;"
                      "INSERT INTO t SELECT g % 5, NULL, g FROM generate_series(1, 25) g;"
                      "INSERT INTO t SELECT g, 'x' || g, g FROM generate_series(1, 40) g", pg_db)
    key = ChunkKey(("a", "b"), (True, True))
    for rows in (1, 4, 10, 29, 31, 200):
        chunks = check(cursor, "t", key, rows, unique=False)
        assert all(chunks[:-1])  # no empty range before the end
    pg_server.execute("CREATE TABLE n (id int UNIQUE); INSERT INTO n SELECT generate_series(1, 60);"
                      "INSERT INTO n SELECT NULL FROM generate_series(1, 5)", pg_db)
    for rows in (1, 2, 5, 60):
        check(cursor, "n", ChunkKey(("id",), (True,)), rows, unique=False)


def test_range_conditions():
    key = ChunkKey(("a", "b"), (False, False))
    assert KeyRange(None, None).where(key, KeyDialect()) == (None, [])
    assert KeyRange((1, "x"), (2, "y")).where(key, KeyDialect()) == (
        '("a", "b") >= (%s, %s) AND ("a", "b") < (%s, %s)', [1, "x", 2, "y"])
    assert KeyRange((1, "x"), None).where(key, ExpandedDialect()) == (
        '(("a" > %s) OR ("a" = %s AND "b" >= %s))', [1, 1, "x"])
    assert KeyRange(None, (5, None)).select("t", ["a", "v"], ChunkKey(("a", "b"), (False, True)), KeyDialect()) == (
        'SELECT "a", "v" FROM t WHERE "a" < %s ORDER BY "a", "b" NULLS FIRST', [5])
    assert KeyRange((None, 2), None).where(ChunkKey(("a", "b"), (True, True)), KeyDialect()) == (
        '(("a" IS NOT NULL) OR ("a" IS NULL AND "b" >= %s))', [2])
    with pytest.raises(ValueError):
        ChunkKey(("a",), ())


# ------------------------------------------------------------------------ ranges cut by arithmetic


class Estimating(KeyDialect):
    """A dialect whose server estimates a table's rows as told."""

    def __init__(self, estimate: int | None):
        self.estimate = estimate

    def estimated_rows(self, cursor: Any, table: str) -> int | None:
        return self.estimate


class KeysCursor:
    """A cursor over one table's unique integer keys: answers `dense_ranges`' MIN/MAX query (and records
    every statement, so a test sees that no boundary query ran)."""

    def __init__(self, keys: list[int]):
        self.keys = sorted(keys)
        self.statements: list[str] = []
        self.row: tuple[Any, ...] | None = None

    def execute(self, sql: str, params: list[Any] = ()) -> None:  # type: ignore[assignment]
        self.statements.append(sql)
        assert sql.startswith("SELECT MIN(") and "OFFSET" not in sql
        keys = [k for k in self.keys if not params or k >= int(params[0])]
        self.row = (min(keys), max(keys)) if keys else (None, None)

    def fetchone(self) -> tuple[Any, ...] | None:
        return self.row


def test_dense_keys_are_cut_every_chunk_rows_values():
    key = ChunkKey(("id",), (False,))
    cur = KeysCursor(list(range(1, 101)))
    ranges = key_ranges(cur, Estimating(100), "t", key, 10, unique_integer=True)
    assert ranges == [KeyRange(None, (11,)), *[KeyRange((b,), (b + 10,)) for b in range(11, 91, 10)],
                      KeyRange((91,), None)]
    assert len(cur.statements) == 1
    # what the boundary queries give a dense key: the key chunk_rows rows after the previous bound
    assert dense_ranges(cur, Estimating(100), "t", "id", 10, first=(2, 4)) == [
        KeyRange(None, (5,)), KeyRange((5,), (9,)), *[KeyRange((b,), (b + 10,)) for b in range(9, 99, 10)],
        KeyRange((99,), None)]
    assert dense_ranges(cur, Estimating(100), "t", "id", 30, start=(50,)) == [
        KeyRange((50,), (80,)), KeyRange((80,), None)]
    assert dense_ranges(cur, Estimating(100), "t", "id", 100) == [KeyRange(None, None)]  # one chunk
    assert dense_ranges(cur, Estimating(100), "t", "id", 10, start=(500,)) == [KeyRange((500,), None)]
    assert dense_ranges(KeysCursor([]), Estimating(0), "t", "id", 10) == [KeyRange(None, None)]
    text = KeysCursor(list(range(1, 31)))  # a text-protocol cursor gives keys as text: so are the bounds
    text.fetchone = lambda: (b"1", b"30")  # type: ignore[method-assign]
    assert dense_ranges(text, Estimating(30), "t", "id", 10) == [
        KeyRange(None, (b"11",)), KeyRange((b"11",), (b"21",)), KeyRange((b"21",), None)]
    text.fetchone = lambda: ("1", "30")  # type: ignore[method-assign]
    assert dense_ranges(text, Estimating(30), "t", "id", 10, start=("1",)) == [
        KeyRange(("1",), ("11",)), KeyRange(("11",), ("21",)), KeyRange(("21",), None)]


def test_sparse_keys_no_estimate_or_another_key_go_to_the_boundary_queries():
    sparse = KeysCursor(list(range(1, 1001, 10)))  # 100 keys over 1,000 values
    assert dense_ranges(sparse, Estimating(100), "t", "id", 10) is None
    assert dense_ranges(KeysCursor(list(range(1, 101))), Estimating(None), "t", "id", 10) is None
    assert dense_ranges(KeysCursor(list(range(1, 101))), Estimating(40), "t", "id", 10) is None  # estimate too low
    cur = KeysCursor(list(range(1, 101)))
    with pytest.raises(AssertionError):  # a nullable or composite key, or no unique_integer: the queries
        key_ranges(cur, Estimating(100), "t", ChunkKey(("id",), (True,)), 10, unique_integer=True)
    with pytest.raises(AssertionError):
        key_ranges(cur, Estimating(100), "t", ChunkKey(("id",), (False,)), 10)


@pytest.mark.parametrize("seed", range(20))
def test_a_dense_cut_covers_every_key_once_and_no_range_holds_more_than_a_chunk(seed):
    import random

    rnd = random.Random(seed)
    low, n = rnd.randint(-10**12, 10**12), rnd.randint(1, 400)
    keys = sorted(rnd.sample(range(low, low + rnd.randint(n, 2 * n)), n))  # values filling half their span or more
    chunk, first = rnd.randint(1, 50), (rnd.randint(0, 3), rnd.randint(1, 20))
    ranges = dense_ranges(KeysCursor(keys), Estimating(n), "t", "id", chunk, first=first)
    assert ranges is not None and ranges[0].lo is None and ranges[-1].hi is None
    held = [[k for k in keys if (r.lo is None or k >= r.lo[0]) and (r.hi is None or k < r.hi[0])] for r in ranges]
    assert [k for h in held for k in h] == keys
    for i, h in enumerate(held):
        assert len(h) <= (first[1] if i < first[0] else chunk)
