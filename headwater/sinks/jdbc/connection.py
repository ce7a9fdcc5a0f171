"""Connections to the JDBC sink's targets through their Python drivers: psycopg2 for PostgreSQL,
PyMySQL for MariaDB and MySQL.

`connect` opens one from a `JdbcSinkConfig` (the JDBC URL's host, port and database; the URL's
`user`/`password` parameters when the properties do not give them) in a transaction of its own
(no autocommit). `Connection.many` runs a statement for many rows in pages of `batch.size`: an
`INSERT ... VALUES (...)` as multi-row inserts (psycopg2's `execute_values`; PyMySQL's
`executemany` does the same by itself), anything else as a batch of statements. `columns` reads a
table's column names from `information_schema`. Driver errors become `DatabaseError` with the
database's own message.
"""

from __future__ import annotations

import io
import re
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from headwater.sinks.jdbc.config import JdbcSinkConfig

_VALUES = re.compile(r"(.*\bVALUES\s*)(\((?:\s*%s\s*,)*\s*%s\s*\))(.*)", re.S)


class DatabaseError(Exception):
    """The target refused a statement; the message is the database's."""


class BulkLoadRefused(DatabaseError):
    """The target does not allow the bulk load (MySQL's `LOAD DATA LOCAL` with `local_infile` off)."""


#: the error codes of a LOAD DATA LOCAL the server or client does not allow (MySQL: 1148, 2068, 3948; MariaDB: 4166)
LOCAL_INFILE_REFUSED = (1148, 2068, 3948, 4166)


class Connection(ABC):
    """One connection to the target, in a transaction (see the module's docstring)."""

    def __init__(self, raw: Any, errors: tuple[type[BaseException], ...], page: int):
        self.raw = raw
        self.errors = errors
        self.page = page
        self.cursor = raw.cursor()

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> None:
        try:
            self.cursor.execute(sql, params)
        except self.errors as exc:
            raise DatabaseError(_message(exc)) from exc

    def query(self, sql: str, params: Sequence[Any] | None = None) -> list[tuple]:
        self.execute(sql, params)
        return list(self.cursor.fetchall())

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        try:
            self._many(sql, rows)
        except self.errors as exc:
            raise DatabaseError(_message(exc)) from exc

    def _many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        for i in range(0, len(rows), self.page):
            self.cursor.executemany(sql, rows[i:i + self.page])

    @abstractmethod
    def columns(self, table: str) -> list[str]:
        """The names of a table's columns (none if there is no such table)."""

    def commit(self) -> None:
        self.raw.commit()

    def rollback(self) -> None:
        self.raw.rollback()

    def close(self) -> None:
        self.raw.close()


class PostgresConnection(Connection):
    def _many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        from psycopg2.extras import execute_batch, execute_values

        m = _VALUES.fullmatch(sql)
        if m is None:
            execute_batch(self.cursor, sql, rows, page_size=self.page)
        else:
            execute_values(self.cursor, m.group(1) + "%s" + m.group(3), rows, template=m.group(2), page_size=self.page)

    def columns(self, table: str) -> list[str]:
        return [r[0] for r in self.query("SELECT column_name FROM information_schema.columns WHERE "
                                         "table_schema = current_schema() AND table_name = %s", [table])]

    def copy(self, table: str, columns: list[str], csv: bytes) -> None:
        """COPY CSV text (UTF-8) into `table`'s `columns` (identifiers as the SQL writes them)."""
        try:
            self.cursor.copy_expert(f"COPY {table} ({', '.join(columns)}) FROM STDIN WITH (FORMAT csv)",
                                    io.BytesIO(csv), size=1 << 20)
        except self.errors as exc:
            raise DatabaseError(_message(exc)) from exc


class MySqlConnection(Connection):
    def load(self, table: str, columns: list[str], text: bytes, hexed: list[bool]) -> list[tuple]:
        """`LOAD DATA LOCAL INFILE` of `types.load_text`'s text into `table`'s `columns` (identifiers
        as the SQL writes them; the `hexed` ones through UNHEX), through a temporary file PyMySQL
        sends; the warnings it gave (a value the column could not hold is a warning there, not an
        error). `BulkLoadRefused` when the server or client does not allow local files
        (`local_infile` off, as in MySQL 8's default)."""
        targets = [f"@h{i}" if h else c for i, (c, h) in enumerate(zip(columns, hexed, strict=True))]
        sets = [f"{c} = UNHEX(@h{i})" for i, (c, h) in enumerate(zip(columns, hexed, strict=True)) if h]
        with tempfile.NamedTemporaryFile(prefix="headwater-load-", suffix=".csv") as f:
            f.write(text)
            f.flush()
            sql = (f"LOAD DATA LOCAL INFILE {self.raw.escape(f.name)} INTO TABLE {table} CHARACTER SET utf8mb4 "
                   "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' ESCAPED BY '' "
                   f"LINES TERMINATED BY '\\n' ({', '.join(targets)})" + (" SET " + ", ".join(sets) if sets else ""))
            try:
                self.cursor.execute(sql)
            except self.errors as exc:
                if exc.args and exc.args[0] in LOCAL_INFILE_REFUSED:
                    raise BulkLoadRefused(_message(exc)) from exc
                raise DatabaseError(_message(exc)) from exc
        return [w for w in self.query("SHOW WARNINGS") if w[0] != "Note"]

    def columns(self, table: str) -> list[str]:
        return [r[0] for r in self.query("SELECT column_name FROM information_schema.columns WHERE "
                                         "table_schema = DATABASE() AND table_name = %s", [table])]


def _message(exc: BaseException) -> str:
    """The database's message of a driver error (PyMySQL's is (code, text))."""
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    if len(args) == 2 and isinstance(args[0], int):
        return f"({args[0]}) {args[1]}"
    return str(exc).strip()


def connect(cfg: JdbcSinkConfig) -> Connection:
    """A connection to the configured target, in a transaction."""
    t = cfg.target
    user = cfg.username if cfg.username is not None else t.params.get("user")
    password = cfg.password.get_secret_value() if cfg.password is not None else t.params.get("password")
    try:
        if t.dialect == "postgresql":
            import psycopg2

            raw = psycopg2.connect(host=t.host, port=t.port, dbname=t.database, user=user, password=password,
                                   application_name="headwater-jdbc-sink", client_encoding="UTF8")
            return PostgresConnection(raw, (psycopg2.Error,), cfg.batch_size)
        if t.dialect == "mysql":
            import pymysql

            raw = pymysql.connect(host=t.host, port=t.port, database=t.database, user=user, password=password or "",
                                  charset="utf8mb4", autocommit=False, local_infile=True)
            with raw.cursor() as c:
                c.execute("SET time_zone = '+00:00'")
            return MySqlConnection(raw, (pymysql.MySQLError,), cfg.batch_size)
    except Exception as exc:
        text = _message(exc)
        if password:
            text = text.replace(password, "****")
        raise DatabaseError(f"cannot connect to {t.dialect} at {t.host}:{t.port}/{t.database}: {text}") from None
    raise DatabaseError(f"no driver for {t.dialect} in headwater")
