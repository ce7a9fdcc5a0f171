#!/usr/bin/env python3
"""Record real pgoutput messages from a throwaway PostgreSQL server into tests/data/pgoutput/.

Starts a server (``logical_decoding_work_mem = 64kB`` so large transactions stream), creates a
schema and a publication, then for each recording creates a logical slot, runs a workload on
one or more connections, and reads the slot with psycopg2's ``LogicalReplicationConnection``
(``decode=False``) until the sentinel non-transactional message ``headwater.end``. It writes:

- ``<name>.jsonl``: one line per message, ``{"data_start": "0/...", "wal_end": "0/...",
  "payload": "<hex>"}``, in the order received;
- ``<name>.sql``: the schema and the workload, each statement under a comment naming the
  connection (``a``, ``b``, ...) that ran it, in order;
- ``manifest.json``: per recording, the replication options and the server version.

Recordings: ``text_v1`` (protocol 1, every non-streaming message type), ``stream_v2``
(protocol 2, ``streaming 'on'``: a streamed committed transaction interleaved with a small one,
a streamed subtransaction rolled back, a streamed aborted transaction from a replication origin)
and ``binary_v2``
(``binary 'true'``). The recorder does not use the decoder.

    .venv/bin/python scripts/record_pgoutput.py [--out tests/data/pgoutput]
"""

from __future__ import annotations

import argparse
import json
import select
import sys
import time
from pathlib import Path

import psycopg2
import psycopg2.extras

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from headwater.connectors.postgres.pgoutput import lsn_to_str  # noqa: E402
from headwater.devservers.postgres import PostgresServer  # noqa: E402

DBNAME = "recording"
PUBLICATION = "headwater_pub"
END_PREFIX = "headwater.end"

SCHEMA = [
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
    "CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text, mood mood,"
    " balance numeric(10,2), created timestamptz DEFAULT '2024-01-02 03:04:05+00')",
    "CREATE TABLE docs (id int PRIMARY KEY, title text, body text)",
    "ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL",
    "CREATE TABLE audit (id int, note text)",
    "ALTER TABLE audit REPLICA IDENTITY FULL",
    "CREATE TABLE accounts (id int PRIMARY KEY, code text NOT NULL, owner text)",
    "CREATE UNIQUE INDEX accounts_code ON accounts (code)",
    "ALTER TABLE accounts REPLICA IDENTITY USING INDEX accounts_code",
    "CREATE TABLE parent (id serial PRIMARY KEY)",
    "CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent (id))",
    "CREATE TABLE events (id int PRIMARY KEY, payload text)",
    "CREATE TABLE kinds (id int PRIMARY KEY, i2 smallint, i8 bigint, f8 float8, num numeric,"
    " flag bool, t text, ts timestamptz, d date, u uuid, j jsonb, arr int[], raw bytea, m mood,"
    " nothing text)",
    "CREATE TABLE not_published (id int)",
    f"CREATE PUBLICATION {PUBLICATION} FOR TABLE customers, docs, audit, accounts, parent, child, events, kinds",
]

# An incompressible 3000-character text (stored out of line: docs.body has STORAGE EXTERNAL).
BIG = "(SELECT string_agg(md5(g::text), '') FROM generate_series(1, 94) g)"
# ~100-character row payloads: enough changes overflow 64kB of decoding memory and stream.
WIDE = "repeat(md5(g::text), 3)"

END = [("a", f"SELECT pg_logical_emit_message(false, '{END_PREFIX}', 'done')")]

TEXT_V1 = [
    ("a", "BEGIN"),
    ("a", "INSERT INTO customers (id, name, email, mood, balance) VALUES"
          " (1, 'Alice', 'alice@example.com', 'happy', 10.50),"
          " (2, 'Zoë ✓ \"quoted\" \\ back', NULL, 'ok', -3),"
          " (3, E'multi\\nline\\ttab', 'c@example.com', NULL, NULL)"),
    ("a", "COMMIT"),
    ("a", "UPDATE customers SET balance = 99.99 WHERE id = 1"),  # no old tuple
    ("a", "UPDATE customers SET id = 20 WHERE id = 2"),  # key change: old key (K)
    ("a", "DELETE FROM customers WHERE id = 3"),  # old key (K)
    ("a", f"INSERT INTO docs VALUES (1, 'first', {BIG})"),
    ("a", "UPDATE docs SET title = 'renamed' WHERE id = 1"),  # body unchanged TOAST (u)
    ("a", "INSERT INTO audit VALUES (1, 'one'), (2, NULL)"),
    ("a", "UPDATE audit SET note = 'uno' WHERE id = 1"),  # full old row (O)
    ("a", "DELETE FROM audit WHERE id = 2"),  # full old row (O)
    ("a", "INSERT INTO accounts VALUES (1, 'ACC-1', 'alice')"),
    ("a", "UPDATE accounts SET owner = 'bob' WHERE id = 1"),  # index identity, key unchanged
    ("a", "UPDATE accounts SET code = 'ACC-2' WHERE id = 1"),  # index key changed (K)
    ("a", "DELETE FROM accounts WHERE id = 1"),
    ("a", "ALTER TABLE docs REPLICA IDENTITY FULL"),  # Relation sent again before the next change
    ("a", "UPDATE docs SET title = 'full' WHERE id = 1"),
    ("a", "INSERT INTO parent DEFAULT VALUES"),
    ("a", "INSERT INTO child VALUES (1, 1)"),
    ("a", "TRUNCATE parent RESTART IDENTITY CASCADE"),  # options 3, relations parent and child
    ("a", "TRUNCATE audit"),  # options 0
    ("a", "TRUNCATE accounts RESTART IDENTITY"),  # options 2
    ("a", "BEGIN"),
    ("a", "INSERT INTO customers (id, name) VALUES (4, 'Dave')"),
    ("a", "SELECT pg_logical_emit_message(true, 'headwater.test', 'transactional hello')"),
    ("a", "SELECT pg_logical_emit_message(false, 'headwater.test', 'sent at once, inside a transaction')"),
    ("a", "COMMIT"),
    ("a", "SELECT pg_logical_emit_message(false, 'headwater.bytes', '\\x00ff10'::bytea)"),
    ("a", "SELECT pg_logical_emit_message(true, 'headwater.only', 'a transaction with only a message')"),
    ("a", "BEGIN"),
    ("a", "INSERT INTO customers (id, name) VALUES (5, 'rolled back')"),
    ("a", "SELECT pg_logical_emit_message(false, 'headwater.test', 'non-transactional, then rollback')"),
    ("a", "ROLLBACK"),
    ("a", "INSERT INTO not_published VALUES (1)"),  # a transaction with nothing published
    ("a", "TRUNCATE not_published"),
    ("b", "SELECT pg_replication_origin_session_setup('headwater_origin')"),
    ("b", "BEGIN"),
    ("b", "SELECT pg_replication_origin_xact_setup('0/ABCDEF0', '2024-05-06 07:08:09+00')"),
    ("b", "INSERT INTO customers (id, name) VALUES (6, 'from origin')"),
    ("b", "COMMIT"),
    ("b", "SELECT pg_replication_origin_session_reset()"),
    *END,
]

STREAM_V2 = [
    ("a", "BEGIN"),
    ("a", f"INSERT INTO events SELECT g, {WIDE} FROM generate_series(1, 300) g"),
    ("b", "INSERT INTO customers (id, name) VALUES (100, 'interleaved')"),  # commits mid-stream
    ("a", "SELECT pg_logical_emit_message(true, 'headwater.stream', 'inside a streamed transaction')"),
    ("a", "UPDATE events SET payload = 'updated' WHERE id <= 2"),
    ("a", "DELETE FROM events WHERE id = 3"),
    ("a", "INSERT INTO audit VALUES (7, 'seven')"),
    ("a", "TRUNCATE audit"),
    ("a", "SAVEPOINT s1"),
    ("a", f"INSERT INTO events SELECT g, {WIDE} FROM generate_series(1001, 1300) g"),
    ("a", "ROLLBACK TO SAVEPOINT s1"),  # streamed subtransaction aborted
    ("a", "INSERT INTO events VALUES (2001, 'after the savepoint')"),
    ("b", "BEGIN"),
    ("b", "INSERT INTO customers (id, name) VALUES (101, 'small, commits after the big one')"),
    ("a", "COMMIT"),
    ("b", "COMMIT"),
    ("c", "SELECT pg_replication_origin_session_setup('headwater_origin')"),  # Origin inside a block
    ("c", "BEGIN"),
    ("c", f"INSERT INTO events SELECT g, {WIDE} FROM generate_series(3001, 3300) g"),
    ("c", "ROLLBACK"),  # streamed transaction aborted
    ("c", "SELECT pg_replication_origin_session_reset()"),
    ("a", "INSERT INTO events VALUES (4001, 'small, not streamed')"),
    *END,
]

BINARY_V2 = [
    ("a", "INSERT INTO kinds VALUES (1, -2, 9007199254740993, 1.5, 12345.678901, true, 'héllo',"
          " '2024-02-29 12:34:56.789012+00', '2024-02-29', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',"
          " '{\"k\": [1, 2]}', '{1,NULL,3}', '\\xdeadbeef', 'sad', NULL)"),
    ("a", "UPDATE kinds SET t = 'changed' WHERE id = 1"),
    ("a", f"INSERT INTO docs VALUES (2, 'binary', {BIG})"),
    ("a", "UPDATE docs SET title = 'still binary' WHERE id = 2"),  # unchanged TOAST in binary mode
    ("a", "DELETE FROM kinds WHERE id = 1"),
    *END,
]

BASE_OPTIONS = {"publication_names": PUBLICATION, "messages": "true"}
RECORDINGS = {
    "text_v1": ({**BASE_OPTIONS, "proto_version": "1"}, TEXT_V1),
    "stream_v2": ({**BASE_OPTIONS, "proto_version": "2", "streaming": "on"}, STREAM_V2),
    "binary_v2": ({**BASE_OPTIONS, "proto_version": "2", "binary": "true"}, BINARY_V2),
}


def run_workload(server: PostgresServer, steps: list[tuple[str, str]]) -> None:
    conns: dict[str, psycopg2.extensions.connection] = {}
    try:
        for name, sql in steps:
            if name not in conns:
                conns[name] = server.connect(DBNAME)
            with conns[name].cursor() as cur:
                cur.execute(sql)
    finally:
        for conn in conns.values():
            conn.close()


def read_slot(server: PostgresServer, slot: str, options: dict[str, str], timeout: float = 60.0) -> list[dict]:
    """Messages from the slot's start up to and including the ``headwater.end`` message."""
    conn = psycopg2.connect(server.dsn(DBNAME), connection_factory=psycopg2.extras.LogicalReplicationConnection)
    sentinel = END_PREFIX.encode() + b"\0"
    lines: list[dict] = []
    try:
        cur = conn.cursor()
        cur.start_replication(slot_name=slot, decode=False, options=options)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = cur.read_message()
            if msg is None:
                select.select([cur], [], [], 1.0)
                continue
            lines.append({"data_start": lsn_to_str(msg.data_start), "wal_end": lsn_to_str(msg.wal_end),
                          "payload": msg.payload.hex()})
            if msg.payload[:1] == b"M" and sentinel in msg.payload:
                return lines
        raise RuntimeError(f"slot {slot}: no {END_PREFIX} message within {timeout}s ({len(lines)} read)")
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "data" / "pgoutput")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    manifest = {}
    with PostgresServer(settings={"logical_decoding_work_mem": "64kB"}) as server:
        server.create_database(DBNAME)
        for stmt in SCHEMA:
            server.execute(stmt, DBNAME)
        server.execute("SELECT pg_replication_origin_create('headwater_origin')", DBNAME)
        version = server.query("SHOW server_version_num")[0][0]
        for name, (options, steps) in RECORDINGS.items():
            slot = f"record_{name}"
            server.execute(f"SELECT pg_create_logical_replication_slot('{slot}', 'pgoutput')", DBNAME)
            run_workload(server, steps)
            lines = read_slot(server, slot, options)
            with open(args.out / f"{name}.jsonl", "w") as f:
                for line in lines:
                    f.write(json.dumps(line) + "\n")
            sql = [f"-- {name}: pgoutput options {json.dumps(options)}", "-- schema (before the slot)"]
            sql += [f"{stmt};" for stmt in SCHEMA]
            sql.append("SELECT pg_replication_origin_create('headwater_origin');")
            sql.append(f"-- workload (slot {slot} created first)")
            sql += [f"-- {conn}\n{stmt};" for conn, stmt in steps]
            (args.out / f"{name}.sql").write_text("\n".join(sql) + "\n")
            manifest[name] = {"options": options, "server_version_num": int(version), "slot": slot,
                              "messages": len(lines)}
            print(f"{name}: {len(lines)} messages")
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


if __name__ == "__main__":
    main()
