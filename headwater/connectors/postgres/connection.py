"""Connections to PostgreSQL: normal ones for catalog and snapshot reads, replication ones for the slot.

Connection parameters come from Debezium's `database.*` properties. Errors raised here never
carry the password.

`CopyBothStream` drives a replication connection's COPY BOTH phase through libpq directly (the
libpq psycopg2 itself uses), instead of psycopg2's `read_message`: psycopg2 answers server
keepalives itself and moves the flush position it reports up to the server's WAL end whenever
the client has confirmed the last message it received, so the slot would be confirmed past what
the caller has durably processed. Here the flush LSN sent is only ever the one the caller gives.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import re
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg2
import psycopg2.errors
import psycopg2.extensions
import psycopg2.extras

from headwater.config.properties import ConnectorConfig
from headwater.connectors.common.statements import split_statements
from headwater.connectors.errors import ConnectError, PositionLost, SourceError
from headwater.connectors.postgres.pgoutput import PG_EPOCH_OFFSET_US

log = logging.getLogger("headwater.postgres")
T = TypeVar("T")


# connection failures that retrying cannot mend: the database, the role or its rights are missing
_FATAL_CONNECT = ("does not exist", "password authentication failed", "no pg_hba.conf entry",
                  "permission denied", "must be superuser or replication role", "is not permitted to log in")


def _connect_error(msg: str) -> type[SourceError]:
    return SourceError if any(s in msg for s in _FATAL_CONNECT) else ConnectError


class SlotLost(PositionLost):
    """The replication slot is gone or can no longer serve the position asked for."""


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


_LIBPQ_PREFIX = re.compile(r'^connection to server (at|on) "[^"]*"(, port \d+|[^:]*) failed: (FATAL: )?')


def _clean(exc: BaseException, params: ConnectionParams) -> str:
    """libpq's message on one line, without the server's address it repeats (the caller names it)
    and never with the password."""
    text = " ".join(str(exc).split())
    if params.password:
        text = text.replace(params.password, "********")
    return _LIBPQ_PREFIX.sub("", text)


# SQLSTATE classes that are the connection's or the server's state, not the query's: connection exceptions (08),
# transaction rollbacks (40: serialization failures, deadlocks), insufficient resources (53), operator
# intervention (57: shutdown, a cancelled query), system errors (58), internal errors (XX)
_NOT_THE_QUERY = ("08", "40", "53", "57", "58", "XX")


def query_error(exc: BaseException) -> bool:
    """Whether `exc` (or the error it was raised from) is an error PostgreSQL returned for a query (a relation that
    does not exist, bad SQL, a missing privilege, a value that cannot be converted, ...) rather than one of the
    connection (lost: no SQLSTATE; refused; the server shutting down) or a transient one."""
    while exc is not None and not isinstance(exc, psycopg2.Error):
        exc = exc.__cause__  # type: ignore[assignment]
    if exc is None or isinstance(exc, psycopg2.InterfaceError):
        return False
    code = getattr(exc, "pgcode", None)
    return bool(code) and not str(code).startswith(_NOT_THE_QUERY)


def clean(exc: BaseException, params: ConnectionParams) -> str:
    """An error's message on one line, never with the password."""
    return _clean(exc, params)


def _target(params: ConnectionParams) -> str:
    return f"host {params.host}, port {params.port}, database {params.dbname}, user {params.user}"


def connect(params: ConnectionParams, autocommit: bool = True) -> psycopg2.extensions.connection:
    """A normal connection with `database.initial.statements` applied."""
    try:
        conn = psycopg2.connect(**params.kwargs())
    except psycopg2.OperationalError as exc:
        msg = _clean(exc, params)
        raise _connect_error(msg)(f"cannot connect to PostgreSQL ({_target(params)}): {msg}") from None
    conn.autocommit = autocommit
    if params.initial_statements:
        with conn.cursor() as cur:
            for stmt in params.initial_statements:
                cur.execute(stmt)
    return conn


def connect_replication(params: ConnectionParams, settings: dict[str, str] | None = None,
                        ) -> psycopg2.extras.LogicalReplicationConnection:
    """A logical replication connection (replication=database), with `settings` for its session."""
    kw = params.kwargs()
    if settings:
        kw["options"] = " ".join([kw["options"], *(f"-c {name}={value}" for name, value in settings.items())])
    try:
        return psycopg2.connect(connection_factory=psycopg2.extras.LogicalReplicationConnection, **kw)
    except psycopg2.OperationalError as exc:
        msg = _clean(exc, params)
        hint = ""
        if "replication" in msg and ("pg_hba" in msg or "permission" in msg or "must be" in msg):
            hint = (" -- the user needs the REPLICATION attribute (ALTER ROLE ... REPLICATION) and a "
                    "pg_hba.conf line allowing it to connect to this database")
        cls = SourceError if hint else _connect_error(msg)
        raise cls(f"cannot open a replication connection to PostgreSQL ({_target(params)}): {msg}{hint}") from None


_XLOGDATA = struct.Struct(">QQq")  # data start, WAL end, send time
XLOGDATA_PAYLOAD = 1 + _XLOGDATA.size  # where an XLogData message's payload starts
_KEEPALIVE = struct.Struct(">QqB")  # WAL end, send time, reply requested
_STATUS = struct.Struct(">cQQQqB")  # 'r', write, flush, apply, client time, reply requested
_PGRES_FATAL_ERROR = 7
_PG_DIAG_SQLSTATE = ord("C")
_libpq_handles: dict[bool, Any] = {}
# Calls that never wait: libpq's sockets are non-blocking, PQconsumeInput reads what has arrived and
# PQgetCopyData is called in async mode. They keep the GIL (a call that released it would wait up to
# the interpreter's switch interval, 5 ms, to get it back whenever another thread is busy decoding:
# three times per message). The others (sending, which may wait for the socket, and results) release it.
_NO_WAIT = ("PQgetCopyData", "PQconsumeInput", "PQfreemem")


def _libpq(no_wait: bool = False) -> Any:
    """The libpq psycopg2 is linked with (a PGconn must only be used with the library that made it):
    with `no_wait`, a handle whose calls keep the GIL (for the `_NO_WAIT` functions only)."""
    if no_wait not in _libpq_handles:
        import psycopg2._psycopg as ext

        # dlsym searches the module's dependencies: its libpq
        lib = ctypes.PyDLL(ext.__file__) if no_wait else ctypes.CDLL(ext.__file__)
        vp, ip = ctypes.c_void_p, ctypes.c_int
        for name, args, res in (
            ("PQgetCopyData", [vp, ctypes.POINTER(vp), ip], ip),
            ("PQconsumeInput", [vp], ip),
            ("PQputCopyData", [vp, ctypes.c_char_p, ip], ip),
            ("PQflush", [vp], ip),
            ("PQfreemem", [vp], None),
            ("PQerrorMessage", [vp], ctypes.c_char_p),
            ("PQgetResult", [vp], vp),
            ("PQresultStatus", [vp], ip),
            ("PQresultErrorField", [vp, ip], ctypes.c_char_p),
            ("PQresultErrorMessage", [vp], ctypes.c_char_p),
            ("PQclear", [vp], None),
        ):
            if no_wait and name not in _NO_WAIT:
                continue
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, res
        _libpq_handles[no_wait] = lib
    return _libpq_handles[no_wait]


@dataclass
class XLogData:
    """One message of the replication stream: `payload` is a pgoutput message starting at `data_start`."""

    data_start: int
    payload: bytes


class CopyBothStream:
    """The COPY BOTH phase of a replication connection after START_REPLICATION, read and answered here.

    `read()` returns the next XLogData message, or None when none is buffered; keepalives update
    `wal_end` (every transaction committing before it has been sent) and set `reply_requested`.
    `send_status(write, flush)` sends a standby status update. A lost connection or a server error
    raises the psycopg2 exception for its SQLSTATE (`OperationalError` when there is none).
    """

    def __init__(self, conn: psycopg2.extensions.connection):
        self.conn = conn
        self.lib = _libpq()
        self.fast = _libpq(no_wait=True)
        self.ptr = ctypes.c_void_p(conn.pgconn_ptr)
        self.fd = conn.fileno()
        self.wal_end = 0
        self.reply_requested = False
        self._buf = ctypes.c_void_p()
        self._buf_ref = ctypes.byref(self._buf)

    def read(self) -> XLogData | None:
        raw = self.read_raw()
        if raw is None:
            return None
        return XLogData(_XLOGDATA.unpack_from(raw, 1)[0], raw[XLOGDATA_PAYLOAD:])

    def read_raw(self) -> bytes | None:
        """`read()` without the object: the whole XLogData message (its data start at offset 1, as
        `>Q`; its payload from `XLOGDATA_PAYLOAD` on), for a caller that takes the payload apart itself."""
        lib, ptr, buf, buf_ref = self.fast, self.ptr, self._buf, self._buf_ref
        consumed = False
        while True:
            n = lib.PQgetCopyData(ptr, buf_ref, 1)
            if n > 0:
                try:
                    raw = ctypes.string_at(buf, n)
                finally:
                    lib.PQfreemem(buf)
                kind = raw[0]
                if kind == 0x77:  # 'w' XLogData
                    return raw
                if kind == 0x6B:  # 'k' primary keepalive
                    wal_end, _, reply = _KEEPALIVE.unpack_from(raw, 1)
                    self.wal_end = max(self.wal_end, wal_end)
                    self.reply_requested = self.reply_requested or bool(reply)
                    continue
                raise psycopg2.OperationalError(f"unexpected replication message type {chr(kind)!r}")
            if n == 0:
                if consumed:
                    return None
                if not lib.PQconsumeInput(ptr):
                    raise psycopg2.OperationalError(self._error_message())
                consumed = True
                continue
            if n == -1:
                raise self._end_error()
            raise psycopg2.OperationalError(self._error_message())

    def send_status(self, write: int, flush: int, reply: bool = False) -> None:
        now = time.time_ns() // 1000 - PG_EPOCH_OFFSET_US
        data = _STATUS.pack(b"r", write, flush, flush, now, 1 if reply else 0)
        if self.lib.PQputCopyData(self.ptr, data, len(data)) != 1 or self.lib.PQflush(self.ptr) != 0:
            raise psycopg2.OperationalError(self._error_message())
        self.reply_requested = False

    def _error_message(self) -> str:
        msg = self.lib.PQerrorMessage(self.ptr)
        return (msg or b"").decode("utf-8", "replace").strip() or "the replication connection was lost"

    def _end_error(self) -> Exception:
        """The server ended the COPY: the error it sent, as the psycopg2 exception for its SQLSTATE."""
        lib = self.lib
        res = lib.PQgetResult(self.ptr)
        if not res:
            return psycopg2.OperationalError(self._error_message())
        try:
            if lib.PQresultStatus(res) != _PGRES_FATAL_ERROR:
                return psycopg2.OperationalError("the server ended the replication stream")
            code = (lib.PQresultErrorField(res, _PG_DIAG_SQLSTATE) or b"").decode()
            text = (lib.PQresultErrorMessage(res) or b"").decode("utf-8", "replace").strip()
        finally:
            lib.PQclear(res)
        cls: type[Exception] = psycopg2.OperationalError
        if code:
            with contextlib.suppress(KeyError):
                cls = psycopg2.errors.lookup(code)
        return cls(text or f"replication stream ended with SQLSTATE {code}")


@dataclass
class Reconnecting:
    """Runs an operation that uses the normal connection again after that connection was lost
    (a server restart), `max_retries` times (-1: without limit) `wait_s` apart, as
    `errors.max.retries` and `retriable.restart.connector.wait.ms` say."""

    reset: Callable[[], None]  # forget the broken connection, so the next use opens a new one
    max_retries: int = -1
    wait_s: float = 10.0

    def __call__(self, what: str, fn: Callable[[], T]) -> T:
        failures = 0
        while True:
            try:
                return fn()
            except (psycopg2.OperationalError, psycopg2.InterfaceError, ConnectError) as exc:
                failures += 1
                text = " ".join(str(exc).split()) or type(exc).__name__
                if 0 <= self.max_retries < failures:
                    raise SourceError(f"{what} failed after {failures - 1} retries "
                                      f"(errors.max.retries={self.max_retries}): {text}") from None
                log.warning("%s: lost the connection (%s); retrying in %.1fs (attempt %d)",
                            what, text, self.wait_s, failures)
                self.reset()
                time.sleep(self.wait_s)
