"""A throwaway PostgreSQL server with logical decoding on, for tests, the demo and benchmarks."""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from headwater.devservers.common import free_port, make_owned_dir, run_as, service_user

PASSWORD = "headwater-secret"

SERVER_SETTINGS = {
    "wal_level": "logical",
    "max_wal_senders": "20",
    "max_replication_slots": "20",
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "synchronous_commit": "on",
    "full_page_writes": "off",
    "shared_buffers": "256MB",
    "max_connections": "100",
    "wal_sender_timeout": "60s",
    "logging_collector": "off",
    "log_min_messages": "warning",
    "timezone": "'UTC'",
}


def pg_bindir() -> Path:
    """The directory holding PostgreSQL's server binaries (initdb, postgres, pg_ctl)."""
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True).stdout.strip()
        if out and Path(out, "initdb").exists():
            return Path(out)
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    if not candidates:
        raise RuntimeError("PostgreSQL server binaries not found: run `make install` (it installs postgresql-15)")
    return Path(candidates[0]).parent


@dataclass
class PostgresServer:
    """One PostgreSQL cluster in a temporary directory; `start()` it, `stop()` removes it."""

    settings: dict[str, str] = field(default_factory=dict)
    port: int = 0
    root: Path | None = None
    user: str | None = None
    superuser: str = "postgres"
    password: str = PASSWORD

    def start(self) -> PostgresServer:
        self.user = service_user()
        self.root = Path(tempfile.mkdtemp(prefix="headwater-pg-"))
        os.chmod(self.root, 0o755)
        make_owned_dir(self.root / "data", self.user)
        make_owned_dir(self.root / "run", self.user)
        self.port = self.port or free_port()
        bindir = pg_bindir()
        pwfile = self.root / "run" / "pw"
        pwfile.write_text(self.password + "\n")
        if self.user:
            shutil.chown(pwfile, self.user, self.user)
        run_as(
            [str(bindir / "initdb"), "-D", str(self.root / "data"), "-U", self.superuser,
             "--pwfile", str(pwfile), "-E", "UTF8", "--locale=C.UTF-8", "--auth-local=trust",
             "--auth-host=scram-sha-256"],
            self.user,
        )
        conf = dict(SERVER_SETTINGS)
        conf.update(self.settings)
        conf["port"] = str(self.port)
        conf["unix_socket_directories"] = f"'{self.root / 'run'}'"
        with open(self.root / "data" / "postgresql.conf", "a") as f:
            for k, v in conf.items():
                f.write(f"{k} = {v}\n")
        with open(self.root / "data" / "pg_hba.conf", "a") as f:
            f.write("host replication all 127.0.0.1/32 scram-sha-256\n")
        self._pg_ctl("start", "-w", "-t", "60", "-l", str(self.root / "run" / "server.log"))
        return self

    @property
    def _root(self) -> Path:
        """`root` of a started server."""
        if self.root is None:
            raise RuntimeError("the PostgreSQL server is not started")
        return self.root

    def _pg_ctl(self, *args: str) -> None:
        run_as([str(pg_bindir() / "pg_ctl"), "-D", str(self._root / "data"), *args], self.user)

    def restart(self, mode: str = "fast") -> None:
        """Restart the server (`mode` fast or immediate, as pg_ctl takes it)."""
        self._pg_ctl("stop", "-w", "-m", mode)
        self._pg_ctl("start", "-w", "-t", "60", "-l", str(self._root / "run" / "server.log"))

    def stop(self) -> None:
        """Stop the server and delete its files."""
        if self.root is None:
            return
        with contextlib.suppress(RuntimeError):
            self._pg_ctl("stop", "-w", "-m", "immediate")
        shutil.rmtree(self.root, ignore_errors=True)
        self.root = None

    def dsn(self, dbname: str = "postgres", **extra: str) -> str:
        parts = {"host": "127.0.0.1", "port": str(self.port), "user": self.superuser,
                 "password": self.password, "dbname": dbname, **extra}
        return " ".join(f"{k}={v}" for k, v in parts.items())

    def connect(self, dbname: str = "postgres", autocommit: bool = True):
        import psycopg2

        conn = psycopg2.connect(self.dsn(dbname))
        conn.autocommit = autocommit
        return conn

    def execute(self, sql: str, dbname: str = "postgres") -> None:
        conn = self.connect(dbname)
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
        finally:
            conn.close()

    def query(self, sql: str, dbname: str = "postgres") -> list[tuple]:
        conn = self.connect(dbname)
        try:
            with conn.cursor() as cur:
                cur.execute(sql)
                return cur.fetchall()
        finally:
            conn.close()

    def create_database(self, name: str) -> str:
        self.execute(f'CREATE DATABASE "{name}"')
        return name

    def connector_properties(self, dbname: str) -> dict[str, str]:
        """Debezium connection properties for this server and database."""
        return {
            "database.hostname": "127.0.0.1",
            "database.port": str(self.port),
            "database.user": self.superuser,
            "database.password": self.password,
            "database.dbname": dbname,
        }

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        env = dict(os.environ, PGPASSWORD=self.password)
        proc = subprocess.run(
            [str(pg_bindir() / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
             "-p", str(self.port), "-U", self.superuser, "-d", dbname, "-c", sql],
            capture_output=True, text=True, env=env,
        )
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr)
        return proc.stdout

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.time() + timeout
        while True:
            try:
                self.query("SELECT 1")
                return
            except Exception:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
