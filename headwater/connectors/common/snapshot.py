"""Snapshot planning every connector shares: which tables, in which order, their markers, and key ranges.

- `snapshot_tables`: the tables a snapshot reads, in Debezium's order (`snapshot.include.collection.list`
  picks, the order of `table.include.list` sorts, then the name);
- `select_overrides`: `snapshot.select.statement.overrides` and its per-table statements;
- `marker`: Debezium 3's `source.snapshot` value of a snapshot record (first, last, ...);
- `chunks_per_batch`: how many chunks a snapshot read in several batches puts in one;
- `key_ranges`: Debezium's chunk boundary calculation for databases without PostgreSQL's CTIDs. A
  table is cut by its key (the primary key; several columns compare as a row value) into ranges
  of about `chunk_rows` rows, each found by one boundary query (`ORDER BY key LIMIT 1 OFFSET n`
  from the previous boundary). A range is `lo <= key < hi` (open at both ends of the table), so
  every row falls in exactly one range. NULL sorts first: a nullable key column (a unique key used
  in place of a primary key) is compared null-safely. `KeyDialect` is how one database spells the
  SQL this needs; a database overrides only what differs (quoting, NULL ordering, LIMIT/OFFSET).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from headwater.config.properties import ConnectorConfig
from headwater.connectors.common.filters import matches_any

T = TypeVar("T")


# ------------------------------------------------------------------------ tables and their order


def snapshot_order(name: str, include: Sequence[str] | None) -> tuple[int, str]:
    """Debezium's order: by the first `table.include.list` pattern the table (`schema.table`) matches,
    then by name."""
    if include:
        for i, pattern in enumerate(include):
            if matches_any([pattern], name):
                return i, name
        return len(include), name
    return 0, name


def snapshot_tables(tables: Iterable[T], name: Callable[[T], str], config: ConnectorConfig) -> list[T]:
    """The captured tables a snapshot reads, in order: those `snapshot.include.collection.list` names
    (all when it is not set), sorted by `snapshot_order`. `name` gives a table's `schema.table`."""
    only = config.get("snapshot.include.collection.list")
    chosen = [t for t in tables if not only or matches_any(only, name(t))]
    include = config.get("table.include.list")
    return sorted(chosen, key=lambda t: snapshot_order(name(t), include))


def select_overrides(config: ConnectorConfig) -> dict[str, str]:
    """The SELECT statements that replace a table's snapshot query, by `schema.table`
    (`snapshot.select.statement.overrides` lists the tables, `...overrides.<table>` holds each one)."""
    out = {}
    for table in config.get("snapshot.select.statement.overrides") or ():
        statement = config.extra.get(f"snapshot.select.statement.overrides.{table}")
        if statement:
            out[table] = statement
    return out


def marker(first_table: bool, last_table: bool, first_row: bool, last_row: bool) -> str:
    """Debezium 3's `source.snapshot` value for a snapshot record (the last marks win over the first)."""
    if last_row and last_table:
        return "last"
    if first_row and first_table:
        return "first"
    if last_row:
        return "last_in_data_collection"
    if first_row:
        return "first_in_data_collection"
    return "true"


def chunks_per_batch(config: ConnectorConfig, parallelism: int, max_events: int | None) -> int:
    """The chunks one batch of a snapshot read in several batches holds: at least two, at least the source's
    parallelism, and as many as `headwater.max.batch.events` (lowered by the read limit `max_events`)
    over `headwater.snapshot.chunk.rows` allow."""
    cap = min(max_events or config["headwater.max.batch.events"], config["headwater.max.batch.events"])
    return max(2, parallelism, cap // config["headwater.snapshot.chunk.rows"])


# ------------------------------------------------------------------------ key ranges


class KeyDialect:
    """How a database's SQL spells what `key_ranges` needs; this is standard SQL (and PostgreSQL's)."""

    placeholder = "%s"  # the driver's parameter marker
    row_values = True  # (a, b) < (x, y) compares lexicographically (and uses the index)

    def quote(self, name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    def table(self, schema: str, name: str) -> str:
        return f"{self.quote(schema)}.{self.quote(name)}"

    def nulls_first(self, column: str) -> str:
        """An ORDER BY item sorting NULL before every value."""
        return f"{column} NULLS FIRST"

    def first_row(self, query: str, offset: int) -> str:
        """`query` (ordered) limited to its row number `offset` + 1."""
        return f"{query} LIMIT 1 OFFSET {offset}"

    def estimated_rows(self, cursor: Any, table: str) -> int | None:
        """The server's estimate of `table`'s rows (from its statistics, without reading the table), or None
        when it has none to give this way (here: none; `dense_ranges` then cuts by queries)."""
        return None


@dataclass(frozen=True)
class ChunkKey:
    """The columns a table is cut by, in order, and whether each may be NULL."""

    columns: tuple[str, ...]
    nullable: tuple[bool, ...]

    def __post_init__(self) -> None:
        if not self.columns or len(self.columns) != len(self.nullable):
            raise ValueError("a chunk key needs one or more columns, each with its nullability")


@dataclass(frozen=True)
class KeyRange:
    """The rows whose key k is `lo <= k < hi`, in key order; None: unbounded on that side."""

    lo: tuple[Any, ...] | None
    hi: tuple[Any, ...] | None

    def where(self, key: ChunkKey, dialect: KeyDialect) -> tuple[str | None, list[Any]]:
        """The SQL condition of the range (None for the whole table) and its parameters."""
        parts, params = [], []
        if self.lo is not None:
            sql, p = _compare(key, dialect, self.lo, below=False)
            parts.append(sql)
            params += p
        if self.hi is not None:
            sql, p = _compare(key, dialect, self.hi, below=True)
            parts.append(sql)
            params += p
        return (" AND ".join(parts) or None), params

    def select(self, table: str, columns: Sequence[str], key: ChunkKey, dialect: KeyDialect) -> tuple[str, list[Any]]:
        """The query reading the range's rows of `table` (an SQL table reference), in key order, and its
        parameters."""
        where, params = self.where(key, dialect)
        cols = ", ".join(dialect.quote(c) for c in columns)
        return (f"SELECT {cols} FROM {table}" + (f" WHERE {where}" if where else "")
                + f" ORDER BY {order_by(key, dialect)}"), params


def key_between(key: ChunkKey, dialect: KeyDialect, after: Sequence[Any] | None,
                upto: Sequence[Any] | None) -> tuple[str | None, list[Any]]:
    """The SQL condition `after < key <= upto` (None: unbounded on that side; None for no bound at all) and
    its parameters: an incremental snapshot's chunk after the last key it read, up to the table's largest."""
    parts, params = [], []
    for bound, below in ((after, False), (upto, True)):
        if bound is not None:
            sql, p = _compare(key, dialect, tuple(bound), below=below, strict=True)
            parts.append(sql)
            params += p
    return (" AND ".join(parts) or None), params


def order_by(key: ChunkKey, dialect: KeyDialect) -> str:
    """The key order the ranges follow (NULL first)."""
    return ", ".join(dialect.nulls_first(dialect.quote(c)) if n else dialect.quote(c)
                     for c, n in zip(key.columns, key.nullable, strict=True))


def key_ranges(cursor: Any, dialect: KeyDialect, table: str, key: ChunkKey, chunk_rows: int,
               first: tuple[int, int] = (0, 0), start: tuple[Any, ...] | None = None,
               unique_integer: bool = False) -> list[KeyRange]:
    """Ranges of about `chunk_rows` rows covering `table` (an SQL table reference) by `key`, in order;
    with `first` = (n, rows), the first n ranges of about `rows` rows instead; with `start`, only the keys
    from `start` on (the first range's `lo`).

    Each boundary is the key of the row `chunk_rows` rows after the previous boundary, read with one
    query through `cursor` (a DB-API cursor). A key value held by more than `chunk_rows` rows (a
    non-unique key) ends its range at the next larger key. An empty table, or one smaller than a
    chunk, is one range with no bounds. With `unique_integer` (the key is one integer column holding no
    NULL and no value twice: a primary key) the ranges may be cut by arithmetic instead (`dense_ranges`)."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be positive, not {chunk_rows}")
    if unique_integer and len(key.columns) == 1 and not key.nullable[0]:
        dense = dense_ranges(cursor, dialect, table, key.columns[0], chunk_rows, first, start)
        if dense is not None:
            return dense
    columns = ", ".join(dialect.quote(c) for c in key.columns)
    ordered = order_by(key, dialect)

    def first_key(where: tuple[str | None, list[Any]], offset: int) -> tuple[Any, ...] | None:
        """The key `offset` rows into the rows matching `where`, in key order."""
        cond, params = where
        query = f"SELECT {columns} FROM {table}" + (f" WHERE {cond}" if cond else "") + f" ORDER BY {ordered}"
        cursor.execute(dialect.first_row(query, offset), params)
        row = cursor.fetchone()
        return None if row is None else tuple(row)

    bounds: list[tuple[Any, ...]] = []
    while True:
        rest = KeyRange(bounds[-1] if bounds else start, None).where(key, dialect)
        bound = first_key(rest, first[1] if len(bounds) < first[0] and first[1] else chunk_rows)
        if bound is None:
            break
        if bound == (bounds[-1] if bounds else first_key(rest, 0)):
            # the whole chunk holds one key value: end this range at the next larger key
            bound = first_key(_compare(key, dialect, bound, below=False, strict=True), 0)
            if bound is None:
                break
        bounds.append(bound)
    edges: list[tuple[Any, ...] | None] = [start, *bounds, None]
    return [KeyRange(lo, hi) for lo, hi in zip(edges, edges[1:], strict=False)]


# `dense_ranges` cuts by arithmetic while the key's values fill at least 1/DENSE_FILL of their span
DENSE_FILL = 2


def dense_ranges(cursor: Any, dialect: KeyDialect, table: str, column: str, chunk_rows: int,
                 first: tuple[int, int] = (0, 0), start: tuple[Any, ...] | None = None) -> list[KeyRange] | None:
    """`key_ranges` of a table whose key is one unique, non-NULL integer `column`, cut by arithmetic as
    Flink CDC cuts an evenly distributed key: from the smallest key (or `start`) on, a range every
    `chunk_rows` values (the first n every `rows`, `first` = (n, rows)). A range of w values holds at most
    w rows, so no range holds more rows than the boundary queries would give it; fewer where values are
    missing. Two queries (the key's smallest and largest, from its index, and the server's estimate of
    the table's rows, `dialect.estimated_rows`), where the boundary queries read every row of the table
    once. None (cut by queries then) when the server gives no estimate or the values fill less than
    1/`DENSE_FILL` of their span (there would be more than `DENSE_FILL` times as many ranges, mostly
    sparse)."""
    estimate = dialect.estimated_rows(cursor, table)
    if estimate is None:
        return None
    col = dialect.quote(column)
    where = f" WHERE {col} >= {dialect.placeholder}" if start is not None else ""
    cursor.execute(f"SELECT MIN({col}), MAX({col}) FROM {table}{where}", [start[0]] if start is not None else [])
    low, high = cursor.fetchone()
    if low is None:
        return [KeyRange(start, None)]
    # the bounds as the cursor gives keys (a text-protocol cursor: as text), as the queries' bounds are
    like = str if isinstance(low, str) else (lambda v: str(v).encode()) if isinstance(low, bytes) else int
    low, high = int(low), int(high)
    if start is not None:
        low = int(start[0])
    span = high - low + 1
    if span > DENSE_FILL * max(estimate, chunk_rows):
        return None
    bounds: list[tuple[Any, ...]] = []
    edge = low
    while True:
        edge += first[1] if len(bounds) < first[0] and first[1] else chunk_rows
        if edge > high:
            break
        bounds.append((like(edge),))
    edges: list[tuple[Any, ...] | None] = [start, *bounds, None]
    return [KeyRange(lo, hi) for lo, hi in zip(edges, edges[1:], strict=False)]


def _compare(key: ChunkKey, dialect: KeyDialect, bound: tuple[Any, ...], *, below: bool,
             strict: bool = False) -> tuple[str, list[Any]]:
    """`key < bound` (below; `key <= bound` when strict) or `key >= bound` (`key > bound` when strict),
    NULL sorting first."""
    cols = [dialect.quote(c) for c in key.columns]
    ph = dialect.placeholder
    simple = not any(key.nullable) and (dialect.row_values or len(cols) == 1)
    if below and strict and not simple:  # key <= bound: not key > bound (NULL sorts first: false compared)
        sql, params = _compare(key, dialect, bound, below=False, strict=True)
        return (f"NOT COALESCE({sql}, FALSE)" if any(key.nullable) else f"NOT ({sql})"), params
    if simple:
        op = ("<=" if strict else "<") if below else (">" if strict else ">=")
        if len(cols) == 1:
            return f"{cols[0]} {op} {ph}", [bound[0]]
        return f"({', '.join(cols)}) {op} ({', '.join(ph for _ in cols)})", list(bound)
    # lexicographic, one column at a time: equal on the first i columns, then before/after on the next
    terms, params = [], []
    for i, (col, value, nullable) in enumerate(zip(cols, bound, key.nullable, strict=True)):
        op = "<" if below else (">=" if i == len(cols) - 1 and not strict else ">")
        if value is None and op == "<":
            continue  # nothing sorts before NULL
        equal, equal_params = _all_equal(cols[:i], bound[:i], ph)
        if value is None:  # everything is >= NULL; what is > NULL is not NULL
            step, step_params = ([] if op == ">=" else [f"{col} IS NOT NULL"]), []
        else:
            below_value = f"({col} IS NULL OR {col} < {ph})" if nullable else f"{col} < {ph}"
            step = [below_value if op == "<" else f"{col} {op} {ph}"]
            step_params = [value]
        terms.append(" AND ".join([*equal, *step]) or "1 = 1")
        params += equal_params + step_params
    if len(terms) < 2:
        return (terms[0] if terms else "1 = 0"), params
    return "(" + " OR ".join(f"({t})" for t in terms) + ")", params


def _all_equal(cols: Sequence[str], values: Sequence[Any], ph: str) -> tuple[list[str], list[Any]]:
    """Null-safe equality of each column with its value."""
    terms, params = [], []
    for col, value in zip(cols, values, strict=True):
        if value is None:
            terms.append(f"{col} IS NULL")
        else:
            terms.append(f"{col} = {ph}")
            params.append(value)
    return terms, params
