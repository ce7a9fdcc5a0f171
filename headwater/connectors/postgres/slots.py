"""Replication slot and publication management, and the checks made before streaming starts.

Follows Debezium: `publication.autocreate.mode` (`all_tables`, `disabled`, `filtered` with
ALTER PUBLICATION ... SET TABLE), `replica.identity.autoset.values`, one slot per connector. Every
failure says what to run to fix it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg2.errors
from psycopg2 import sql

from headwater.connectors.errors import SourceError
from headwater.connectors.postgres.pgoutput import str_to_lsn


@dataclass(frozen=True)
class SlotState:
    """A row of pg_replication_slots."""

    name: str
    plugin: str | None
    database: str | None
    active_pid: int | None
    restart_lsn: int | None
    confirmed_flush_lsn: int | None
    wal_status: str | None


def check_server(conn) -> None:
    """Fail early, with the fix, when the server cannot do logical decoding for this user."""
    with conn.cursor() as cur:
        cur.execute("SHOW wal_level")
        level = cur.fetchone()[0]
        if level != "logical":
            raise SourceError(
                f"wal_level is {level!r}, but logical decoding needs 'logical': run "
                "ALTER SYSTEM SET wal_level = logical; and restart PostgreSQL")
        cur.execute("SELECT rolreplication, rolsuper FROM pg_roles WHERE rolname = current_user")
        repl, superuser = cur.fetchone()
        if not (repl or superuser):
            cur.execute("SELECT current_user")
            user = cur.fetchone()[0]
            raise SourceError(
                f"user {user!r} lacks the REPLICATION attribute: run ALTER ROLE \"{user}\" REPLICATION;")
        cur.execute("SHOW server_encoding")
        if cur.fetchone()[0].upper() not in ("UTF8", "UTF-8"):
            raise SourceError("the database encoding is not UTF-8, which headwater (like Debezium) requires")


def get_slot(conn, name: str) -> SlotState | None:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT slot_name, plugin, database, active_pid, restart_lsn::text, confirmed_flush_lsn::text, "
            "wal_status FROM pg_replication_slots WHERE slot_name = %s", (name,))
        row = cur.fetchone()
    if row is None:
        return None
    return SlotState(row[0], row[1], row[2], row[3], str_to_lsn(row[4]), str_to_lsn(row[5]), row[6])


def validate_slot(slot: SlotState, dbname: str) -> None:
    if slot.plugin != "pgoutput":
        raise SourceError(f"replication slot {slot.name!r} uses plugin {slot.plugin!r}, not pgoutput: "
                          f"drop it (SELECT pg_drop_replication_slot('{slot.name}')) or set slot.name")
    if slot.database != dbname:
        raise SourceError(f"replication slot {slot.name!r} belongs to database {slot.database!r}, "
                          f"not {dbname!r}: give each connector its own slot.name")


def drop_slot(conn, name: str) -> None:
    with conn.cursor() as cur:
        cur.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
                    (name,))


def drop_slot_when_inactive(conn, name: str, timeout_s: float = 10.0) -> None:
    """Drop the slot once no walsender holds it any more (a connection just closed lets go of its
    slot only when its backend has exited)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            drop_slot(conn, name)
            return
        except psycopg2.errors.ObjectInUse:
            if time.monotonic() > deadline:
                raise SourceError(f"cannot drop replication slot {name!r}: it is still in use by another "
                                  "process") from None
            time.sleep(0.1)


def wait_for_exit(conn, pid: int, timeout_s: float = 10.0) -> bool:
    """Wait until backend `pid` has exited (a walsender whose client closed the connection holds its
    slot until then); False if it is still there after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pid,))
            if cur.fetchone() is None:
                return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)


def terminate_slot_holder(conn, slot: SlotState) -> None:
    """End the backend holding `slot` (a crashed earlier run of ours whose connection lingers)."""
    if slot.active_pid:
        with conn.cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)", (slot.active_pid,))


def _publication(conn, name: str) -> tuple[bool, list[str]] | None:
    with conn.cursor() as cur:
        cur.execute("SELECT puballtables FROM pg_publication WHERE pubname = %s", (name,))
        row = cur.fetchone()
        if row is None:
            return None
        cur.execute("SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = %s "
                    "ORDER BY 1", (name,))
        return bool(row[0]), [r[0] for r in cur.fetchall()]


def ensure_publication(conn, name: str, mode: str, tables: Sequence[tuple[str, str]]) -> None:
    """Create or adapt the publication per `publication.autocreate.mode`."""
    existing = _publication(conn, name)
    ident = sql.Identifier(name)
    table_list = sql.SQL(", ").join(sql.Identifier(s, t) for s, t in tables)
    with conn.cursor() as cur:
        if mode == "disabled":
            if existing is None:
                raise SourceError(
                    f"publication {name!r} does not exist and publication.autocreate.mode is disabled: "
                    f"create it (CREATE PUBLICATION {name} FOR TABLE ...;) and restart")
            return
        if mode == "all_tables":
            if existing is None:
                try:
                    cur.execute(sql.SQL("CREATE PUBLICATION {} FOR ALL TABLES").format(ident))
                except Exception as exc:
                    raise SourceError(
                        f"cannot create publication {name!r} FOR ALL TABLES ({str(exc).strip()}): it needs a "
                        "superuser; create it yourself or use publication.autocreate.mode=filtered") from None
            return
        # filtered
        if not tables:
            raise SourceError("publication.autocreate.mode is filtered but no table matches the table filters: "
                              "check table.include.list / schema.include.list")
        if existing is None:
            cur.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(ident, table_list))
            return
        alltables, current = existing
        if alltables:
            raise SourceError(f"publication {name!r} is FOR ALL TABLES, which filtered mode cannot alter: "
                              "drop it or use publication.autocreate.mode=all_tables")
        wanted = sorted(f"{s}.{t}" for s, t in tables)
        if current != wanted:
            cur.execute(sql.SQL("ALTER PUBLICATION {} SET TABLE {}").format(ident, table_list))


IDENTITY_RX = re.compile(r"^(DEFAULT|FULL|NOTHING|INDEX\s+(\S+))$", re.IGNORECASE)


def parse_identity_autoset(value: str) -> list[tuple[re.Pattern[str], str, str | None]]:
    """`schema1.*:FULL,schema2.table2:NOTHING,schema2.table3:INDEX idx_name`."""
    rules = []
    for item in [p.strip() for p in value.split(",") if p.strip()]:
        if ":" not in item:
            raise SourceError(f"replica.identity.autoset.values: {item!r} lacks ':<identity>' "
                              "(e.g. public.orders:FULL)")
        pattern, ident = item.rsplit(":", 1)
        m = IDENTITY_RX.match(ident.strip())
        if not m:
            raise SourceError(f"replica.identity.autoset.values: {ident!r} is not DEFAULT, FULL, NOTHING "
                              "or INDEX <name>")
        kind = m.group(1).split()[0].upper()
        rules.append((re.compile(pattern.strip()), kind, m.group(2)))
    return rules


def apply_replica_identity(conn, value: str, tables: Sequence[tuple[str, str]]) -> None:
    """Set the replica identity of matching tables (replica.identity.autoset.values)."""
    rules = parse_identity_autoset(value)
    with conn.cursor() as cur:
        for schema, table in tables:
            for rx, kind, index in rules:
                if rx.fullmatch(f"{schema}.{table}"):
                    if kind == "INDEX":
                        stmt = sql.SQL("ALTER TABLE {} REPLICA IDENTITY USING INDEX {}").format(
                            sql.Identifier(schema, table), sql.Identifier(index))
                    else:
                        stmt = sql.SQL("ALTER TABLE {} REPLICA IDENTITY " + kind).format(
                            sql.Identifier(schema, table))
                    try:
                        cur.execute(stmt)
                    except Exception as exc:
                        raise SourceError(f"replica.identity.autoset.values: cannot set {kind} on "
                                          f"{schema}.{table}: {str(exc).strip()} (the user must own the table)"
                                          ) from None
                    break
