"""Connections to PostgreSQL: normal ones for catalog and snapshot reads, replication ones for the slot.

Connection parameters come from Debezium's `database.*` properties. Errors raised here never
carry the password.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg2
import psycopg2.extensions
import psycopg2.extras

from headwater.config.properties import ConnectorConfig


class SourceError(RuntimeError):
    """A problem with the source database that the user must act on; the message says what to do."""


@dataclass(frozen=True)
class ConnectionParams:
    """What psycopg2 needs to connect; picklable, so executors can open their own connections."""

    host: str
    port: int
    user: str
    password: str | None
    dbname: str
    sslmode: str = "prefer"
    sslcert: str | None = None
    sslkey: str | None = None
    sslrootcert: str | None = None
    sslpassword: str | None = None
    keepalives: bool = True
    initial_statements: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, cfg: ConnectorConfig) -> ConnectionParams:
        stmts = cfg.get("database.initial.statements")
        return cls(
            host=cfg["database.hostname"], port=cfg["database.port"], user=cfg["database.user"],
            password=cfg.get("database.password"), dbname=cfg["database.dbname"],
            sslmode=cfg["database.sslmode"], sslcert=cfg.get("database.sslcert"),
            sslkey=cfg.get("database.sslkey"), sslrootcert=cfg.get("database.sslrootcert"),
            sslpassword=cfg.get("database.sslpassword"), keepalives=cfg["database.tcpKeepAlive"],
            initial_statements=split_statements(stmts) if stmts else (),
        )

    def kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {
            "host": self.host, "port": self.port, "user": self.user, "dbname": self.dbname,
            "sslmode": self.sslmode, "keepalives": 1 if self.keepalives else 0,
            "application_name": "headwater", "connect_timeout": 30,
            # the text forms the type converters read (and pgoutput writes in this session's settings)
            "options": "-c DateStyle=ISO -c IntervalStyle=postgres -c TimeZone=UTC -c bytea_output=hex",
        }
        if self.password is not None:
            kw["password"] = self.password
        for name in ("sslcert", "sslkey", "sslrootcert", "sslpassword"):
            if getattr(self, name):
                kw[name] = getattr(self, name)
        return kw

    def where(self) -> str:
        return f"{self.user}@{self.host}:{self.port}/{self.dbname}"

    def __repr__(self) -> str:  # never show the password
        return f"ConnectionParams({self.where()})"


def split_statements(text: str) -> tuple[str, ...]:
    """Debezium's `database.initial.statements`: `;`-separated, `;;` for a literal semicolon."""
    parts, cur, i = [], [], 0
    while i < len(text):
        if text[i] == ";":
            if text[i + 1:i + 2] == ";":
                cur.append(";")
                i += 2
                continue
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(text[i])
        i += 1
    parts.append("".join(cur).strip())
    return tuple(p for p in parts if p)


def _clean(exc: Exception, params: ConnectionParams) -> str:
    text = str(exc).strip()
    if params.password:
        text = text.replace(params.password, "********")
    return text


def connect(params: ConnectionParams, autocommit: bool = True) -> psycopg2.extensions.connection:
    """A normal connection with `database.initial.statements` applied."""
    try:
        conn = psycopg2.connect(**params.kwargs())
    except psycopg2.OperationalError as exc:
        raise SourceError(f"cannot connect to PostgreSQL at {params.where()}: {_clean(exc, params)}") from None
    conn.autocommit = autocommit
    if params.initial_statements:
        with conn.cursor() as cur:
            for stmt in params.initial_statements:
                cur.execute(stmt)
    return conn


def connect_replication(params: ConnectionParams) -> psycopg2.extras.LogicalReplicationConnection:
    """A logical replication connection (replication=database)."""
    try:
        return psycopg2.connect(connection_factory=psycopg2.extras.LogicalReplicationConnection,
                                **params.kwargs())
    except psycopg2.OperationalError as exc:
        msg = _clean(exc, params)
        hint = ""
        if "replication" in msg and ("pg_hba" in msg or "permission" in msg or "must be" in msg):
            hint = (" -- the user needs the REPLICATION attribute (ALTER ROLE ... REPLICATION) and a "
                    "pg_hba.conf line allowing it to connect to this database")
        raise SourceError(f"cannot open a replication connection to {params.where()}: {msg}{hint}") from None
