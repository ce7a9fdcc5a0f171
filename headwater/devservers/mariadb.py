"""A throwaway MariaDB server with a row-based, GTID-carrying binlog, for tests, the demo and benchmarks.

The server runs from the distribution's binaries (``mariadbd``, ``mariadb-install-db``) in a temporary
directory: data, binlog, unix socket, error log and option files all live there, and ``stop()`` deletes
it. It listens on a free port on 127.0.0.1 and runs as an unprivileged account when the caller is root
(mariadbd refuses to run as root). Talking to it needs no Python driver: ``execute()`` and ``query()``
go through the ``mariadb`` command-line client.

Accounts: ``headwater`` (password ``PASSWORD``) has every privilege, replication included, from any
host; ``root`` has ``ROOT_PASSWORD`` on the socket and on 127.0.0.1/::1.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwater.devservers.common import free_port, make_owned_dir, run_as, service_user

PASSWORD = "headwater-secret"
ROOT_PASSWORD = "headwater-root-secret"
SUPERUSER = "headwater"

# Server options, written to the [mariadbd] group of the server's own option file (the system's
# /etc/mysql files are never read). `settings` given to MariaDBServer override or extend these.
SERVER_SETTINGS: dict[str, str] = {
    "bind-address": "127.0.0.1",
    "skip-name-resolve": "1",
    # Binlog as Debezium wants it: row events carrying whole rows and column metadata.
    "server-id": "1",
    "log-bin": "binlog",
    "binlog-format": "ROW",
    "binlog-row-image": "FULL",
    "binlog-row-metadata": "FULL",
    "binlog-checksum": "CRC32",
    # GTIDs are always on with log-bin; one domain, strict sequence numbers.
    "gtid-domain-id": "0",
    "gtid-strict-mode": "1",
    "sync-binlog": "0",
    # Fast, small and not durable across power loss (durable across a server crash or kill).
    "innodb-buffer-pool-size": "128M",
    "innodb-log-file-size": "64M",
    "innodb-flush-log-at-trx-commit": "2",
    "innodb-doublewrite": "0",
    "performance-schema": "0",
    "character-set-server": "utf8mb4",
    "collation-server": "utf8mb4_unicode_ci",
    "default-time-zone": "+00:00",
    "max-connections": "200",
    "max-allowed-packet": "64M",
}

STARTUP_TIMEOUT = 60.0


def mariadb_binary(name: str) -> str:
    """The path of a MariaDB program (`mariadbd`, `mariadb`, `mariadb-install-db`, `mariadb-binlog`)."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/usr/local/sbin:/usr/local/bin")
    if not found:
        raise RuntimeError(f"MariaDB program {name!r} not found: apt-get install -y mariadb-server")
    return found


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _ident(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _option_lines(options: dict[str, str]) -> str:
    return "".join(f"{key} = {value}\n" for key, value in options.items())


def _log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class _PortInUse(RuntimeError):
    """mariadbd could not bind its port (someone took it between free_port() and the start)."""


@dataclass
class MariaDBServer:
    """One MariaDB server in a temporary directory; `start()` it, `stop()` removes it."""

    settings: dict[str, str] = field(default_factory=dict)
    port: int = 0
    root: Path | None = None
    user: str | None = None
    superuser: str = SUPERUSER
    password: str = PASSWORD
    root_password: str = ROOT_PASSWORD
    server_id: int = 1
    _proc: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _log_offset: int = field(default=0, init=False, repr=False)

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> MariaDBServer:
        """Create the data directory, start the server and wait until it accepts connections."""
        self.user = service_user()
        self.root = Path(tempfile.mkdtemp(prefix="headwater-mariadb-"))
        try:
            os.chmod(self.root, 0o755)
            for sub in ("data", "run", "tmp"):
                make_owned_dir(self.root / sub, self.user)
            self._install()
            fixed_port = bool(self.port)
            for attempt in range(3):
                if not fixed_port:
                    self.port = free_port()
                self._write_option_files()
                try:
                    self._launch()
                    break
                except _PortInUse:
                    if fixed_port or attempt == 2:
                        raise
        except BaseException:
            self.stop()
            raise
        return self

    def _install(self) -> None:
        """mariadb-install-db, with accounts set up by an --extra-file run in the same bootstrap."""
        assert self.root is not None
        hostname = socket.gethostname()
        setup = self.root / "run" / "setup.sql"
        setup.write_text(
            # Bootstrap runs with grant tables off: loading them makes account statements work.
            "FLUSH PRIVILEGES;\n"
            # install-db leaves root without a password on localhost, 127.0.0.1, ::1 and hostname.
            f"ALTER USER IF EXISTS 'root'@'localhost' IDENTIFIED BY {_sql_string(self.root_password)};\n"
            f"ALTER USER IF EXISTS 'root'@'127.0.0.1' IDENTIFIED BY {_sql_string(self.root_password)};\n"
            f"ALTER USER IF EXISTS 'root'@'::1' IDENTIFIED BY {_sql_string(self.root_password)};\n"
            + (f"DROP USER IF EXISTS 'root'@{_sql_string(hostname)};\n" if hostname != "localhost" else "")
            + f"CREATE USER {_sql_string(self.superuser)}@'%' IDENTIFIED BY {_sql_string(self.password)};\n"
            f"GRANT ALL PRIVILEGES ON *.* TO {_sql_string(self.superuser)}@'%' WITH GRANT OPTION;\n"
            # Part of ALL already; spelled out because CDC depends on them.
            f"GRANT REPLICATION SLAVE, REPLICATION CLIENT, BINLOG MONITOR, RELOAD, SELECT "
            f"ON *.* TO {_sql_string(self.superuser)}@'%';\n"
        )
        os.chmod(setup, 0o644)
        cmd = [
            mariadb_binary("mariadb-install-db"), "--no-defaults",
            f"--datadir={self.root / 'data'}",
            "--auth-root-authentication-method=normal",
            "--skip-test-db", "--skip-name-resolve",
            f"--extra-file={setup}",
            # Passed through to the bootstrap mariadbd: InnoDB files are created at the final sizes.
            f"--innodb-buffer-pool-size={self._options()['innodb-buffer-pool-size']}",
            f"--innodb-log-file-size={self._options()['innodb-log-file-size']}",
            f"--tmpdir={self.root / 'tmp'}",
        ]
        if self.user:
            cmd.insert(2, f"--user={self.user}")
        run_as(cmd, self.user, cwd=self.root)

    def _options(self) -> dict[str, str]:
        options = dict(SERVER_SETTINGS)
        options["server-id"] = str(self.server_id)
        options.update(self.settings)
        return options

    def _write_option_files(self) -> None:
        assert self.root is not None
        run = self.root / "run"
        server = {
            "datadir": str(self.root / "data"),
            "tmpdir": str(self.root / "tmp"),
            "socket": str(self.socket),
            "pid-file": str(run / "mariadbd.pid"),
            "log-error": str(self.error_log),
            "port": str(self.port),
            **self._options(),
        }
        if self.user:
            server["user"] = self.user
        server_cnf = self.root / "server.cnf"
        server_cnf.write_text("[mariadbd]\n" + _option_lines(server))
        os.chmod(server_cnf, 0o644)
        client = {
            "protocol": "TCP",
            "host": "127.0.0.1",
            "port": str(self.port),
            "user": self.superuser,
            "password": self.password,
            "default-character-set": "utf8mb4",
        }
        client_cnf = self.root / "client.cnf"
        client_cnf.write_text("[client]\n" + _option_lines(client))
        os.chmod(client_cnf, 0o600)

    def _launch(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Start mariadbd (as the service user) and wait until it answers a query."""
        assert self.root is not None
        cmd = [mariadb_binary("mariadbd"), f"--defaults-file={self.root / 'server.cnf'}"]
        extra: dict[str, Any] = {}
        if self.user:
            # Start it as the service user outright rather than as root with --user: no root process.
            extra = {"user": self.user, "group": self.user, "extra_groups": []}
        try:
            self._log_offset = self.error_log.stat().st_size
        except OSError:
            self._log_offset = 0
        with open(self.root / "run" / "console.log", "ab") as console:
            self._proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT,
                cwd=self.root, start_new_session=True, **extra,
            )
        self.wait_ready(timeout)

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Wait until the server answers `SELECT 1`; raise with its error log if it dies or times out."""
        deadline = time.monotonic() + timeout
        while True:
            if self._proc is not None and self._proc.poll() is not None:
                self._proc = None
                try:
                    with open(self.error_log, "rb") as f:
                        f.seek(self._log_offset)
                        new = f.read().decode(errors="replace")
                except OSError:
                    new = ""
                if "Address already in use" in new or "Do you already have another" in new:
                    raise _PortInUse(f"mariadbd could not listen on port {self.port}:\n{self.log_tail()}")
                raise RuntimeError(f"mariadbd exited during startup:\n{self.log_tail()}")
            try:
                self.query("SELECT 1", connect_timeout=2)
                return
            except RuntimeError as exc:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"MariaDB on port {self.port} not ready after {timeout:.0f}s ({exc}):\n"
                        f"{self.log_tail()}"
                    ) from None
                time.sleep(0.1)

    def log_tail(self, lines: int = 40) -> str:
        """The end of the server's error log and of its stdout/stderr (where option errors go)."""
        assert self.root is not None, "server not started"
        parts = []
        for title, path in (("error log", self.error_log), ("console", self.root / "run" / "console.log")):
            text = _log_tail(path, lines)
            if text.strip():
                parts.append(f"--- {title} ({path}) ---\n{text}")
        return "\n".join(parts) or "(the server wrote no log)"

    def _shutdown(self, mode: str) -> None:
        """Stop the process: `fast` is a clean shutdown (SIGTERM), `immediate` a crash (SIGKILL)."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        if mode == "immediate":
            proc.kill()
            proc.wait()
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self, mode: str = "fast") -> None:
        """Restart the server on the same port and data (`mode` fast or immediate, as in PostgresServer)."""
        if mode not in ("fast", "immediate"):
            raise ValueError(f"restart mode must be 'fast' or 'immediate', not {mode!r}")
        self._shutdown(mode)
        self._launch()

    def stop(self) -> None:
        """Stop the server and delete its files."""
        if self.root is None:
            return
        self._shutdown("immediate")
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def __enter__(self) -> MariaDBServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- where it is ---------------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The mariadbd process id while it runs."""
        return self._proc.pid if self._proc is not None and self._proc.poll() is None else None

    @property
    def socket(self) -> Path:
        assert self.root is not None, "server not started"
        return self.root / "run" / "mariadbd.sock"

    @property
    def error_log(self) -> Path:
        assert self.root is not None, "server not started"
        return self.root / "run" / "error.log"

    def connection_params(self, db: str | None = None) -> dict[str, Any]:
        """Keyword arguments for a MySQL-protocol driver (PyMySQL, mysqlclient, mariadb) to connect."""
        params: dict[str, Any] = {"host": "127.0.0.1", "port": self.port, "user": self.superuser,
                                  "password": self.password}
        if db is not None:
            params["database"] = db
        return params

    def dsn(self, db: str | None = None) -> str:
        """The server as a URL: mysql://user:password@127.0.0.1:port/db."""
        return f"mysql://{self.superuser}:{self.password}@127.0.0.1:{self.port}/{db or ''}"

    def client_args(self) -> list[str]:
        """Options that point a MariaDB command-line tool (mariadb, mariadb-binlog, ...) at this server."""
        assert self.root is not None, "server not started"
        return [f"--defaults-file={self.root / 'client.cnf'}"]

    def connector_properties(self, db: str | None = None) -> dict[str, str]:
        """Debezium connection properties for this server (and, given `db`, its database.include.list)."""
        props = {
            "database.hostname": "127.0.0.1",
            "database.port": str(self.port),
            "database.user": self.superuser,
            "database.password": self.password,
        }
        if db is not None:
            props["database.include.list"] = db
        return props

    # -- SQL -----------------------------------------------------------------------------------

    def _client(self, sql: str, db: str | None, *options: str, connect_timeout: int = 10) -> str:
        cmd = [mariadb_binary("mariadb"), *self.client_args(), "--batch", f"--connect-timeout={connect_timeout}",
               *options]
        if db is not None:
            cmd.append(f"--database={db}")
        proc = subprocess.run(cmd, input=sql, capture_output=True, text=True, encoding="utf-8")
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr.strip() or f"mariadb client exited with {proc.returncode}")
        return proc.stdout

    def execute(self, sql: str, db: str | None = None) -> None:
        """Run one or more `;`-separated statements (autocommit), raising RuntimeError on an SQL error."""
        self._client(sql, db)

    def query(self, sql: str, db: str | None = None, connect_timeout: int = 10) -> list[tuple[str | None, ...]]:
        """The rows of the last result set of `sql`, each value a string (as the server prints it) or None.

        Binary values come back as the client decodes them: select HEX(col) to compare bytes.
        """
        out = self._client(sql, db, "--xml", connect_timeout=connect_timeout)
        body = "".join(line for line in out.splitlines(keepends=True) if not line.startswith("<?xml"))
        if not body.strip():
            return []
        nil = "{http://www.w3.org/2001/XMLSchema-instance}nil"
        resultsets = ET.fromstring(f"<all>{body}</all>").findall("resultset")
        if not resultsets:
            return []
        return [
            tuple(None if f.get(nil) == "true" else (f.text or "") for f in row.findall("field"))
            for row in resultsets[-1].findall("row")
        ]

    def scalar(self, sql: str, db: str | None = None) -> str | None:
        """The first value of the first row of `sql` (None when there are no rows)."""
        rows = self.query(sql, db)
        return rows[0][0] if rows and rows[0] else None

    def create_database(self, name: str) -> str:
        self.execute(f"CREATE DATABASE {_ident(name)}")
        return name

    def drop_database(self, name: str) -> None:
        self.execute(f"DROP DATABASE IF EXISTS {_ident(name)}")

    def variables(self, *names: str) -> dict[str, str]:
        """Server variables (SHOW GLOBAL VARIABLES), all of them or the named ones."""
        rows = self.query("SHOW GLOBAL VARIABLES")
        wanted = set(names)
        return {k: v or "" for k, v in rows if k is not None and (not wanted or k in wanted)}

    def binlog_files(self) -> list[str]:
        """The server's binlog file names, oldest first."""
        return [row[0] for row in self.query("SHOW BINARY LOGS") if row[0] is not None]

    def gtid_binlog_pos(self) -> str:
        """@@gtid_binlog_pos: the GTID of the last event group written to the binlog, per domain."""
        return self.scalar("SELECT @@gtid_binlog_pos") or ""
