"""The server's order of a lock-free chunk key: integer columns by value, text columns by their collation.

The lock-free snapshot cuts a table into key ranges with the server's own ORDER BY (`key_ranges`), and
its merge and stream filter then decide in Python whether a binlog change falls in a range
(`chunkmerge`, `chunkprogress`). For a text column Python's order is not the server's (`'B' < 'a'`
in Python, not under `utf8mb4_general_ci`; `'a' = 'A'` and, with PAD SPACE, `'a' = 'a '`), so a text
key column is ordered by the weights the server gives it: `WEIGHT_STRING(value AS CHAR(n))` in the
column's collation, padded with spaces to the column's length for a PAD SPACE collation (every
MariaDB collation but the `_nopad_` ones), so equal keys have equal weights and weights compare
bytewise as the server compares the values.

`ChunkOrder` holds a table's key columns and the weights learnt so far: those of a chunk's SELECT rows
come with the rows (`weight_columns`), those of binlog changes and chunk bounds are asked for in
batches (`prefetch`), each value once. A key column of another type (temporal, decimal, binary, ENUM,
...) makes the table one exact chunk, as before.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from headwater.connectors.binlog.connection import ConnectionParams, connect
from headwater.connectors.binlog.schema import INTEGER_TYPES, Table
from headwater.connectors.binlog.snapshot import DIALECT

TEXT_TYPES = frozenset(("CHAR", "VARCHAR"))
BATCH = 500  # values per weight query


@dataclass(frozen=True)
class KeyColumn:
    """One key column: its index in the table's columns and, for text, its collation and length."""

    index: int
    name: str
    charset: str | None = None  # None: an integer column
    collation: str | None = None
    chars: int = 0

    @property
    def text(self) -> bool:
        return self.collation is not None

    def _weight(self, expr: str) -> str:
        pad = "" if "_nopad_" in (self.collation or "") else f" AS CHAR({self.chars})"
        return f"WEIGHT_STRING({expr}{pad})"

    def column_weight(self) -> str:
        """The SQL of the column's weights in a SELECT of the table."""
        return self._weight(DIALECT.quote(self.name))

    def value_weight(self) -> str:
        """The SQL of a parameter's weights in the column's collation."""
        return self._weight(f"CONVERT(%s USING {self.charset}) COLLATE {self.collation}")


def key_columns(t: Table, collations: dict[str, tuple[str, str]]) -> tuple[KeyColumn, ...] | None:
    """The table's primary key columns when each is an integer or a CHAR/VARCHAR column whose
    (charset, collation) `collations` names (by lower-case column name); else None (one exact chunk)."""
    if not t.primary_key:
        return None
    names = [c.name for c in t.columns]
    out = []
    for name in t.primary_key:
        column = t.column(name)
        if column is None:
            return None
        kind = column.type_name.split()[0]
        index = names.index(column.name)
        if kind in INTEGER_TYPES:
            out.append(KeyColumn(index, column.name))
        elif kind in TEXT_TYPES and column.name.lower() in collations:
            charset, collation = collations[column.name.lower()]
            out.append(KeyColumn(index, column.name, charset, collation, column.length or 1))
        else:
            return None
    return tuple(out)


def has_text_key(t: Table) -> bool:
    """Whether a primary key column is CHAR or VARCHAR (its collation must be read)."""
    return any((c := t.column(n)) is not None and c.type_name.split()[0] in TEXT_TYPES for n in t.primary_key)


def read_collations(cur: Any, t: Table) -> dict[str, tuple[str, str]]:
    """The (charset, collation) of the table's text key columns, by lower-case column name."""
    cur.execute("SELECT COLUMN_NAME, CHARACTER_SET_NAME, COLLATION_NAME FROM information_schema.COLUMNS "
                "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s AND COLLATION_NAME IS NOT NULL", (t.database, t.name))
    keys = {n.lower() for n in t.primary_key}
    return {str(n).lower(): (str(cs), str(co)) for n, cs, co in cur.fetchall() if str(n).lower() in keys}


def chunk_columns(cur: Any, t: Table) -> tuple[KeyColumn, ...] | None:
    """The table's chunk key (`key_columns`, the collations of a text key read through `cur`), or None
    when the table is one exact chunk."""
    return key_columns(t, read_collations(cur, t) if has_text_key(t) else {})


class ChunkOrder:
    """A chunked table's key columns, and its keys' order as the server's (`order`)."""

    def __init__(self, params: ConnectionParams, columns: Sequence[KeyColumn]):
        self.params = params
        self.columns = tuple(columns)
        self.indexes = tuple(c.index for c in self.columns)
        self.text = any(c.text for c in self.columns)
        self.weights: dict[tuple[int, str], bytes] = {}  # (key column position, value) -> weights
        self._conn: Any = None
        self._lock = threading.Lock()  # the connection of its own, for lookups from several threads

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_conn": None, "_lock": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _lock=threading.Lock())

    def key_of(self, values: Sequence[Any], text_row: bool) -> tuple[Any, ...]:
        """A row's key tuple: from a SELECT row of text values (`text_row`) or a binlog image."""
        return tuple(_text(values[c.index]) if c.text else int(values[c.index]) if text_row else values[c.index]
                     for c in self.columns)

    def weight_columns(self) -> list[str]:
        """The SQL expressions a chunk's SELECT adds after the table's columns: each text key column's weights."""
        return [c.column_weight() for c in self.columns if c.text]

    def learn(self, key: Sequence[Any], weights: Sequence[Any]) -> None:
        """The weights a SELECT row brought (`weight_columns`' values) for its key."""
        it = iter(weights)
        for i, c in enumerate(self.columns):
            if c.text:
                self.weights[(i, key[i])] = bytes(next(it))

    def order(self, key: Sequence[Any]) -> tuple[Any, ...]:
        """The key as a value that sorts and compares as the server's keys (weights asked for when unknown)."""
        if not self.text:
            return tuple(key)
        missing = [(i, v) for i, (c, v) in enumerate(zip(self.columns, key, strict=True))
                   if c.text and (i, v) not in self.weights]
        if missing:
            self._fetch(missing)
        return tuple(self.weights[(i, v)] if c.text else v for i, (c, v) in enumerate(zip(self.columns, key,
                                                                                          strict=True)))

    def prefetch(self, keys: Iterable[Sequence[Any] | None], cur: Any = None) -> None:
        """Ask the server once for the weights of every text value of `keys` not known yet (through `cur`,
        or a connection of its own)."""
        if not self.text:
            return
        missing = {(i, _text(k[i])) for k in keys if k is not None for i, c in enumerate(self.columns)
                   if c.text and (i, _text(k[i])) not in self.weights}
        if missing:
            self._fetch(sorted(missing), cur)

    def _fetch(self, missing: list[tuple[int, str]], cur: Any = None) -> None:
        if cur is None:
            with self._lock:
                if self._conn is None:
                    self._conn = connect(self.params)
                with self._conn.cursor() as own:
                    self._fetch(missing, own)
            return
        for start in range(0, len(missing), BATCH):
            part = missing[start:start + BATCH]
            cur.execute("SELECT " + ", ".join(self.columns[i].value_weight() for i, _ in part), [v for _, v in part])
            row = cur.fetchone()
            for (i, v), w in zip(part, row, strict=True):
                self.weights[(i, v)] = bytes(w)

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
