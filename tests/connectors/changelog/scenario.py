"""The change-log connector's test scenario: the tables, the trigger log, the writes, the expected events.

`Model` applies each write to the database and to a Python copy of the tables, and from the copy
says which Debezium events the write must produce (independently of the connector's code).
"""

from __future__ import annotations

import base64
import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import psycopg2

from tests.connectors.changelog.properties import CLASS

SETUP = """
CREATE TABLE hw_changelog (seq bigserial PRIMARY KEY, txid bigint NOT NULL, tbl text NOT NULL, op char(1) NOT NULL,
                           before jsonb, after jsonb, committed_at timestamptz NOT NULL DEFAULT now());
CREATE FUNCTION hw_capture() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- writers append in commit order: each holds the log until it commits
    LOCK TABLE hw_changelog IN EXCLUSIVE MODE;
    INSERT INTO hw_changelog (txid, tbl, op, before, after)
    VALUES (txid_current(), TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME, left(TG_OP, 1),
            CASE WHEN TG_OP <> 'INSERT' THEN to_jsonb(OLD) END, CASE WHEN TG_OP <> 'DELETE' THEN to_jsonb(NEW) END);
    RETURN NULL;
END $$;
CREATE TABLE accounts (id int PRIMARY KEY, owner text NOT NULL, balance numeric(12,2), active boolean,
                       opened timestamp, big bigint);
CREATE TABLE orders (id bigint PRIMARY KEY, account int NOT NULL, note text, placed timestamp(3));
CREATE TRIGGER accounts_log AFTER INSERT OR UPDATE OR DELETE ON accounts FOR EACH ROW EXECUTE FUNCTION hw_capture();
CREATE TRIGGER orders_log AFTER INSERT OR UPDATE OR DELETE ON orders FOR EACH ROW EXECUTE FUNCTION hw_capture();
"""

COLUMNS = {"accounts": ("id", "owner", "balance", "active", "opened", "big"),
           "orders": ("id", "account", "note", "placed")}
EPOCH = dt.datetime(1970, 1, 1)
CHUNK_ROWS = 10


def account(i: int) -> tuple:
    return (i, f"owner {i}", None if i % 5 == 0 else Decimal(f"{i}.{i:02d}"), i % 2 == 0,
            None if i % 7 == 0 else dt.datetime(2026, 1, 1, 3, 4, 5, i), 2**40 + i)


def order(i: int) -> tuple:
    return (i, i % 25 + 1, None if i % 4 == 0 else f"note {i}", dt.datetime(2026, 2, i % 28 + 1, 1, 2, 3, 123000))


def properties(pg_server, dbname: str, **extra: str) -> dict[str, str]:
    return {"connector.class": CLASS, **pg_server.connector_properties(dbname), "topic.prefix": "shop",
            "headwater.snapshot.chunk.rows": str(CHUNK_ROWS), **extra}


def _decimal(d: Decimal | None) -> str | None:
    """Kafka Connect's Decimal (scale 2): the unscaled value's big-endian two's complement, base64."""
    if d is None:
        return None
    n = int(d.scaleb(2))
    return base64.b64encode(n.to_bytes(n.bit_length() // 8 + 1, "big", signed=True)).decode()


def image(table: str, row: tuple | None) -> dict[str, Any] | None:
    """A row as Debezium writes it: numeric(12,2) as Decimal bytes, timestamp as MicroTimestamp,
    timestamp(3) as Timestamp (milliseconds)."""
    if row is None:
        return None
    out = dict(zip(COLUMNS[table], row, strict=True))
    if table == "accounts":
        out["balance"] = _decimal(out["balance"])
        out["opened"] = None if out["opened"] is None else (out["opened"] - EPOCH) // dt.timedelta(microseconds=1)
    else:
        out["placed"] = (out["placed"] - EPOCH) // dt.timedelta(milliseconds=1)
    return out


@dataclass
class Change:
    """One expected data event."""

    table: str
    op: str
    id: int
    before: tuple | None
    after: tuple | None
    txid: int | None = None


@dataclass
class Model:
    """The tables, written in the database and kept in Python."""

    dsn: dict[str, Any]
    rows: dict[str, dict[int, tuple]] = field(default_factory=lambda: {"accounts": {}, "orders": {}})

    def setup(self, accounts: int, orders: int) -> None:
        with psycopg2.connect(**self.dsn) as conn, conn.cursor() as cur:
            cur.execute(SETUP)
            cur.execute("ALTER TABLE accounts DISABLE TRIGGER accounts_log; ALTER TABLE orders DISABLE TRIGGER orders_log")
            for i in range(1, accounts + 1):
                self._insert(cur, "accounts", account(i))
            for i in range(1, orders + 1):
                self._insert(cur, "orders", order(i))
            cur.execute("ALTER TABLE accounts ENABLE TRIGGER accounts_log; ALTER TABLE orders ENABLE TRIGGER orders_log")
        conn.close()

    def _insert(self, cur: Any, table: str, row: tuple) -> None:
        cols = COLUMNS[table]
        cur.execute(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))})", row)
        self.rows[table][row[0]] = row

    def transaction(self, *ops: tuple) -> list[Change]:
        """Apply `ops` in one transaction: ("insert", table, row), ("update", table, id, {column: value}),
        ("delete", table, id); the changes they must produce."""
        changes = []
        conn = psycopg2.connect(**self.dsn)
        with conn, conn.cursor() as cur:
            cur.execute("SELECT txid_current()")
            txid = cur.fetchone()[0]
            for kind, table, *args in ops:
                rows = self.rows[table]
                if kind == "insert":
                    self._insert(cur, table, args[0])
                    changes.append(Change(table, "c", args[0][0], None, args[0], txid))
                elif kind == "update":
                    key, values = args
                    sets = ", ".join(f"{c} = %s" for c in values)
                    cur.execute(f"UPDATE {table} SET {sets} WHERE id = %s", (*values.values(), key))
                    cols = COLUMNS[table]
                    old = rows.pop(key)
                    new = tuple(values.get(c, v) for c, v in zip(cols, old, strict=True))
                    if new[0] == key:
                        changes.append(Change(table, "u", key, old, new, txid))
                    else:  # a new key: a delete of the old one and a create of the new one
                        changes += [Change(table, "d", key, old, None, txid), Change(table, "c", new[0], None, new, txid)]
                    rows[new[0]] = new
                else:
                    cur.execute(f"DELETE FROM {table} WHERE id = %s", (args[0],))
                    changes.append(Change(table, "d", args[0], rows.pop(args[0]), None, txid))
        conn.close()
        return changes

    def snapshot(self) -> list[Change]:
        """The snapshot's records, in its order: tables by name, rows by key."""
        return [Change(t, "r", i, None, row) for t in sorted(self.rows) for i, row in sorted(self.rows[t].items())]


def dsn(pg_server, dbname: str) -> dict[str, Any]:
    props = pg_server.connector_properties(dbname)
    return {"host": props["database.hostname"], "port": int(props["database.port"]),
            "user": props["database.user"], "password": props["database.password"], "dbname": dbname}


STREAMED = [
    (("insert", "accounts", account(26)), ("update", "accounts", 1, {"balance": Decimal("99.50"), "active": True}),
     ("delete", "orders", 12)),
    (("insert", "orders", order(13)), ("update", "orders", 1, {"note": "changed", "placed": dt.datetime(2026, 3, 1)}),
     ("insert", "orders", order(14))),
    (("delete", "accounts", 2),),
    (("update", "accounts", 3, {"owner": "third owner", "opened": None, "big": -5}),
     ("insert", "accounts", account(27)), ("delete", "accounts", 27), ("update", "orders", 13, {"id": 113})),
]


def check_events(events: list[dict], changes: list[Change], dbname: str, tombstones: bool = True) -> None:
    """`events` ({"topic", "key", "value"} with JSON decoded) are exactly the events of `changes`,
    in order; snapshot records carry the markers of their place."""
    expected: list[tuple[str, Any, Any]] = []
    for c in changes:
        expected.append((f"shop.public.{c.table}", {"id": c.id}, c))
        if c.op == "d" and tombstones:
            expected.append((f"shop.public.{c.table}", {"id": c.id}, None))
    got = [(e["topic"], e["key"]) for e in events]
    assert got == [(t, k) for t, k, _ in expected], got
    snapshot = [c for c in changes if c.op == "r"]
    for n, (e, (_, _, c)) in enumerate(zip(events, expected, strict=True)):
        if c is None:
            assert e["value"] is None, e  # a tombstone
            continue
        v = e["value"]
        assert (v["op"], v["before"], v["after"]) == (c.op, image(c.table, c.before), image(c.table, c.after)), e
        src = v["source"]
        assert (src["connector"], src["name"], src["db"], src["schema"], src["table"]) == (
            "changelog", "shop", dbname, "public", c.table)
        assert src["txId"] == c.txid and isinstance(src["seq"], int) and src["sequence"] is None
        if c.op == "r":
            assert src["snapshot"] == _marker(snapshot, n), (n, src)
        else:
            assert src["snapshot"] == "false"


def _marker(snapshot: list[Change], n: int) -> str:
    c = snapshot[n]
    tables = [s.table for s in snapshot]
    first_row, last_row = n == tables.index(c.table), n == len(tables) - 1 - tables[::-1].index(c.table)
    if last_row and n == len(tables) - 1:
        return "last"
    if first_row and n == 0:
        return "first"
    return "last_in_data_collection" if last_row else "first_in_data_collection" if first_row else "true"
