"""Connections to MySQL and MariaDB (PyMySQL) and the checks made before anything is captured.

`ConnectionParams` (picklable: executors open their own connections) comes from Debezium's
`database.*` properties; `connect` opens a normal connection with `database.initial.statements`
applied, and turns a failure into `ConnectError` (retriable: the server could not be reached) or
`SourceError` (refused credentials), naming host, port and user, never the password.
`check_server` refuses a server that cannot be captured, naming the setting or privilege to
change: the binlog off, `binlog_format` not ROW, `binlog_row_image` neither FULL nor NOBLOB (Debezium's
binlog connectors after 3.6 take both; 3.6.3 takes FULL only), missing privileges. `binlog_row_image`
can also be set per session, which no check at the start sees: `images.py` completes a NOBLOB image
and stops the stream at a MINIMAL one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pymysql

from headwater.config.properties import ConnectorConfig
from headwater.connectors.common.statements import split_statements
from headwater.connectors.errors import ConnectError, SourceError

# server errors that retrying cannot mend: refused credentials, an unknown database, no rights
_FATAL = {1044, 1045, 1049, 1142, 1227, 1251, 1698}


@dataclass(frozen=True)
class ConnectionParams:
    """What PyMySQL needs to connect."""

    host: str
    port: int
    user: str
    password: str | None
    connect_timeout_s: float = 30.0
    initial_statements: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, cfg: ConnectorConfig) -> ConnectionParams:
        stmts = cfg.get("database.initial.statements")
        return cls(host=cfg["database.hostname"], port=cfg["database.port"], user=cfg["database.user"],
                   password=cfg.get("database.password"), connect_timeout_s=cfg["connect.timeout.ms"] / 1000,
                   initial_statements=split_statements(stmts) if stmts else ())

    def kwargs(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "user": self.user, "password": self.password or "",
                "connect_timeout": max(1, int(self.connect_timeout_s)), "charset": "utf8mb4", "autocommit": True,
                # `database.ssl.mode` disabled (the only mode built): PyMySQL would otherwise try TLS when the
                # server offers it, and load the system's CA certificates for every connection (~40 ms)
                "ssl_disabled": True}

    def where(self) -> str:
        return f"host {self.host}, port {self.port}, user {self.user}"

    def __repr__(self) -> str:  # never show the password
        return f"ConnectionParams({self.user}@{self.host}:{self.port})"


def clean(exc: BaseException, params: ConnectionParams) -> str:
    """The driver's message on one line, never with the password."""
    args: tuple[Any, ...] = getattr(exc, "args", ())
    text = " ".join(str(args[1] if len(args) > 1 else exc).split())
    if params.password:
        text = text.replace(params.password, "********")
    return text


# server errors that are the connection's or the server's state, not the query's: shutting down (1053), the
# connection killed or aborted (1927, 1152, 1184), network reads and writes (1158-1161), too many connections
# (1040), a lock wait timeout or a deadlock (1205, 1213: transient), the query interrupted (1317)
_NOT_THE_QUERY = {1040, 1053, 1152, 1158, 1159, 1160, 1161, 1184, 1205, 1213, 1317, 1927}


def query_error(exc: BaseException) -> bool:
    """Whether `exc` is an error the server returned for a query (a table that does not exist, bad SQL, a
    missing privilege, ...) rather than one of the connection (lost, refused, the server shutting down: the
    client's codes from 2000) or a transient one (a lock wait timeout, a deadlock)."""
    if not isinstance(exc, pymysql.err.MySQLError) or isinstance(exc, pymysql.err.InterfaceError):
        return False
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
    return 0 < code < 2000 and code not in _NOT_THE_QUERY


def connect(params: ConnectionParams, *, initial_statements: bool = True, **kwargs: Any) -> pymysql.Connection:
    """A connection (autocommit, utf8mb4, session time zone UTC) with `database.initial.statements` run;
    `kwargs` go to PyMySQL (e.g. `conv={}` for values as the text protocol gives them)."""
    try:
        conn = pymysql.connect(**{**params.kwargs(), **kwargs})
    except pymysql.err.MySQLError as exc:
        code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
        kind = SourceError if code in _FATAL else ConnectError
        raise kind(f"cannot connect to the database ({params.where()}): {clean(exc, params)}") from None
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        if initial_statements:
            for stmt in params.initial_statements:
                cur.execute(stmt)
    return conn


def variables(conn: pymysql.Connection, names: tuple[str, ...]) -> dict[str, str]:
    """Global server variables by name (lower case), as text."""
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN (" + ", ".join(["%s"] * len(names)) + ")",
                    list(names))
        return {str(k).lower(): "" if v is None else str(v) for k, v in cur.fetchall()}


def grants(conn: pymysql.Connection) -> set[str]:
    """The privileges the connected user holds on every database (`*.*`), upper case; `ALL` for all."""
    with conn.cursor() as cur:
        cur.execute("SHOW GRANTS FOR CURRENT_USER()")
        rows = [str(r[0]) for r in cur.fetchall()]
        roles = []
        cur.execute("SELECT CURRENT_ROLE()")
        role = cur.fetchone()
        if role and role[0] and role[0] != "NONE":
            roles = [r.strip() for r in str(role[0]).split(",")]
        for r in roles:
            cur.execute(f"SHOW GRANTS FOR {r}")
            rows += [str(x[0]) for x in cur.fetchall()]
    held: set[str] = set()
    for line in rows:
        m = re.match(r"GRANT (.+?) ON \*\.\* TO", line)
        if m is None:
            continue
        for p in m.group(1).split(","):
            p = p.strip().upper()
            held.add("ALL" if p.startswith("ALL") else p)
    return held


@dataclass(frozen=True)
class Requirement:
    """A privilege the connector needs, why, and the privileges that imply it (besides ALL)."""

    privilege: str
    why: str
    implied_by: tuple[str, ...] = ()


def check_server(conn: pymysql.Connection, product: str, monitor: str, locking: str, snapshot: bool) -> None:
    """Refuse a server that cannot be captured, naming what to change. `product` names the server in
    messages, `monitor` its privilege for SHOW MASTER STATUS / SHOW BINARY LOGS (MySQL's REPLICATION
    CLIENT, MariaDB's BINLOG MONITOR); `locking` is `snapshot.locking.mode`; `snapshot` whether a
    snapshot may be taken (it needs SELECT, and RELOAD for the global read lock)."""
    found = variables(conn, ("log_bin", "binlog_format", "binlog_row_image"))
    if found.get("log_bin", "OFF").upper() not in ("ON", "1"):
        raise SourceError(f"the {product} server does not write a binlog (log_bin is OFF): start it with "
                          "log-bin (and binlog-format=ROW, binlog-row-image=FULL) in its configuration")
    if found.get("binlog_format", "").upper() != "ROW":
        raise SourceError(f"binlog_format is {found.get('binlog_format')}, not ROW: set binlog_format=ROW "
                          "in the server's configuration (SET GLOBAL binlog_format='ROW' until its restart)")
    if found.get("binlog_row_image", "").upper() not in ("FULL", "NOBLOB"):
        raise SourceError(f"binlog_row_image is {found.get('binlog_row_image')}, not FULL or NOBLOB: a "
                          "partial image's columns cannot be told from NULLs; set binlog_row_image=FULL in the "
                          "server's configuration (SET GLOBAL binlog_row_image='FULL' until its restart)")
    needed = [Requirement("REPLICATION SLAVE", "to read the binlog", ("REPLICATION REPLICA",)),
              Requirement(monitor, "to read the binlog position (SHOW MASTER STATUS, SHOW BINARY LOGS)",
                          ("REPLICATION CLIENT", "BINLOG MONITOR", "SUPER"))]
    if snapshot:
        needed.append(Requirement("SELECT", "to read the tables' rows in the snapshot"))
        if locking != "none":
            needed.append(Requirement("RELOAD", f"for the snapshot's FLUSH TABLES WITH READ LOCK "
                                                f"(snapshot.locking.mode={locking})"))
    held = grants(conn)
    if "ALL" in held:
        return
    missing = [r for r in needed if r.privilege not in held and not held & set(r.implied_by)]
    if missing:
        names = ", ".join(r.privilege for r in missing)
        whys = "; ".join(f"{r.privilege} {r.why}" for r in missing)
        raise SourceError(f"the user lacks {names} on *.* ({whys}): GRANT {names} ON *.* TO the connector's user")
