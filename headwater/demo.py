"""`make demo`: a small shop on a throwaway PostgreSQL, then on a throwaway MariaDB, captured by headwater on local Spark;
then the PostgreSQL shop mirrored into a second database by the `jdbc` sink.

For each database it shows the initial snapshot arriving in the jsonl sink, then makes a few changes
(an insert, an update, a multi-table transaction, a delete, a primary-key change) and shows their
change events arriving, then stops the query and the server. PostgreSQL is captured by the
`postgres` connector (pgoutput), MariaDB by the `mariadb` connector (the binlog), through the same
pipeline and sink. The last part runs the same PostgreSQL shop with `sink: {type: jdbc, mirror:
true}` into a database `replica` and prints the replica's tables after the snapshot and after the
changes. Nothing outside a temporary directory is touched.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from headwater.devservers.mariadb import MariaDBServer
from headwater.devservers.postgres import PostgresServer

console = Console(highlight=False)

POSTGRES_SHOP = """
CREATE TABLE customers (id serial PRIMARY KEY, name text NOT NULL, email text UNIQUE, created timestamptz DEFAULT now());
CREATE TABLE products (id serial PRIMARY KEY, name text NOT NULL, price numeric(10,2) NOT NULL, stock int DEFAULT 0);
CREATE TABLE orders (id serial PRIMARY KEY, customer_id int REFERENCES customers(id), product_id int REFERENCES products(id),
                     quantity int NOT NULL, ordered_at timestamp DEFAULT '2026-01-01 12:00:00');
"""

MARIADB_SHOP = """
CREATE TABLE customers (id int AUTO_INCREMENT PRIMARY KEY, name varchar(100) NOT NULL, email varchar(100) UNIQUE,
                        created timestamp DEFAULT current_timestamp);
CREATE TABLE products (id int AUTO_INCREMENT PRIMARY KEY, name varchar(100) NOT NULL, price decimal(10,2) NOT NULL,
                       stock int DEFAULT 0);
CREATE TABLE orders (id int AUTO_INCREMENT PRIMARY KEY, customer_id int REFERENCES customers(id),
                     product_id int REFERENCES products(id), quantity int NOT NULL,
                     ordered_at datetime DEFAULT '2026-01-01 12:00:00');
"""

SHOP_ROWS = """
INSERT INTO customers (name, email) VALUES ('Ada Lovelace', 'ada@example.com'), ('Alan Turing', 'alan@example.com'),
  ('Grace Hopper', 'grace@example.com');
INSERT INTO products (name, price, stock) VALUES ('notebook', 3.50, 100), ('fountain pen', 24.90, 12), ('ink', 7.25, 40);
INSERT INTO orders (customer_id, product_id, quantity) VALUES (1, 1, 2), (2, 2, 1), (3, 3, 5), (1, 3, 1);
"""

CHANGES = [
    ("a new customer", "INSERT INTO customers (name, email) VALUES ('Katherine Johnson', 'kj@example.com')"),
    ("a price change", "UPDATE products SET price = 26.50 WHERE name = 'fountain pen'"),
    ("an order and its stock, in one transaction",
     "BEGIN; INSERT INTO orders (customer_id, product_id, quantity) VALUES (4, 2, 1); "
     "UPDATE products SET stock = stock - 1 WHERE id = 2; COMMIT"),
    ("a cancelled order", "DELETE FROM orders WHERE id = 3"),
    ("a primary-key change", "UPDATE customers SET id = 30 WHERE id = 3 AND NOT EXISTS (SELECT 1 FROM orders WHERE customer_id = 3)"),
]


@dataclass
class Shop:
    """One database's shop: how to start its server, its tables, and the connector properties that capture it."""

    title: str
    start: Callable[[], Any]  # a started dev server (PostgresServer or MariaDBServer), with stop()
    tables: str
    source: Callable[[Any], dict[str, str]]


SHOPS = [
    Shop("PostgreSQL 15 (wal_level=logical)", lambda: PostgresServer().start(), POSTGRES_SHOP,
         lambda server: {"connector.class": "postgres", **server.connector_properties("shop"), "topic.prefix": "shop",
                         "table.include.list": "public.customers,public.products,public.orders"}),
    Shop("MariaDB 10.11 (log-bin, ROW format)", lambda: MariaDBServer().start(), MARIADB_SHOP,
         lambda server: {"connector.class": "mariadb", **server.connector_properties("shop"), "topic.prefix": "shop",
                         "database.server.id": "5400",
                         "table.include.list": "shop.customers,shop.products,shop.orders"}),
]


def read_events(out: Path, seen: int) -> list[dict]:
    lines = []
    for f in sorted(out.glob("*.jsonl")):
        lines.extend(f.read_text().splitlines())
    return [json.loads(line) for line in lines[seen:]]


def show(events: list[dict], title: str) -> None:
    t = Table(title=title, title_justify="left")
    for col in ("topic", "op", "key", "before", "after"):
        t.add_column(col, overflow="fold")
    for e in events:
        v = e["value"]
        if v is None:
            t.add_row(e["topic"], "tombstone", json.dumps(e["key"]), "", "")
            continue
        if "ddl" in v:  # a schema change record (MariaDB's, on the topic named by topic.prefix)
            t.add_row(e["topic"], "schema change", json.dumps(e["key"]), "", v["ddl"])
            continue
        t.add_row(e["topic"], v.get("op", ""), json.dumps(e["key"]),
                  json.dumps(v.get("before")) if v.get("before") else "", json.dumps(v.get("after")) if v.get("after") else "")
    console.print(t)


def wait_for(out: Path, seen: int, at_least: int, timeout: float) -> list[dict]:
    """The events after the first `seen`, once `at_least` of them are row events (or at the timeout)."""
    deadline = time.monotonic() + timeout
    while True:
        events = read_events(out, seen)
        rows = sum(1 for e in events if e["value"] is not None and "op" in e["value"])
        if rows >= at_least or time.monotonic() > deadline:
            return events
        time.sleep(0.5)


def capture(shop: Shop, work: Path, spark: Any) -> Any:
    """Start `shop`'s server and tables, capture them (snapshot, then the CHANGES), stop the query and the server.
    Returns the Spark session (started by the first shop, reused by the next)."""
    console.rule(f"[bold]{shop.title}")
    console.print(f"Starting a throwaway {shop.title} ...")
    server = shop.start()
    query = None
    try:
        server.create_database("shop")
        server.execute(shop.tables + SHOP_ROWS, "shop")
        console.print(f"{shop.title.split(' (')[0]} on 127.0.0.1:{server.port}, database [bold]shop[/bold]: "
                      "customers, products, orders")
        work.mkdir(parents=True)
        cfg_path = work / "shop.yaml"
        cfg: dict[str, Any] = {
            "name": "shop",
            "source": shop.source(server),
            "sink": {"type": "jsonl", "path": str(work / "out")},
            "spark": {"master": "local[2]", "checkpoint": str(work / "state"), "trigger.interval": "1 second"},
        }
        cfg_path.write_text(yaml.safe_dump(cfg))
        safe = {**cfg, "source": {**cfg["source"], "database.password": "********"}}
        console.print("\nThe configuration (what `headwater run shop.yaml` reads):")
        console.print(yaml.safe_dump(safe, sort_keys=False), markup=False)

        from headwater.pipeline_config import load_config
        from headwater.spark.pipeline import spark_session, start_query

        config = load_config(cfg_path)
        if spark is None:
            console.print("Starting Spark (local[2]) ...")
            spark = spark_session(config)
        console.print("Starting the streaming query; the first batch is the snapshot ...")
        query = start_query(spark, config)
        out = work / "out"
        events = wait_for(out, 0, 10, 300)
        rows = sum(1 for e in events if e["value"] is not None and e["value"].get("op") == "r")
        show(events, f"Initial snapshot: {rows} read events (op r), one per row"
             + (f", after {len(events) - rows} schema change records" if len(events) > rows else ""))
        seen = len(events)
        for title, sql in CHANGES:
            server.execute(sql, "shop")
            wait_for(out, seen, 1, 120)
            time.sleep(1.5)
            new = read_events(out, seen)
            seen += len(new)
            show(new, f"After {title}: {sql}")
        console.print("\nEvery event is also in the files under the sink path, one JSON object a line, "
                      "exactly as Debezium's JsonConverter writes them:")
        for f in sorted(out.glob("*.jsonl"))[:3]:
            console.print(f"  {f.name}")
        console.print(f"\nSample line:\n{(sorted(out.glob('*.jsonl'))[0]).read_text().splitlines()[0]}", markup=False,
                      soft_wrap=True)
        return spark
    finally:
        if query is not None:
            query.stop()
        server.stop()


def replica_tables(server: PostgresServer, title: str) -> None:
    """Print the replica's shop tables, read back with SQL."""
    conn = server.connect("replica")
    try:
        with conn.cursor() as cur:
            for table, cols in (("customers", "id, name, email"), ("products", "id, name, price, stock"),
                                ("orders", "id, customer_id, product_id, quantity")):
                cur.execute(f"SELECT {cols} FROM {table} ORDER BY id")
                t = Table(title=f"{title}: replica.{table}", title_justify="left")
                for c in cols.split(", "):
                    t.add_column(c)
                for row in cur.fetchall():
                    t.add_row(*("" if v is None else str(v) for v in row))
                console.print(t)
    finally:
        conn.close()


def _replica_count(server: PostgresServer, sql: str) -> int:
    conn = server.connect("replica")
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM information_schema.tables WHERE table_name = 'orders'")
            if not cur.fetchone()[0]:
                return -1
            cur.execute(sql)
            return int(cur.fetchone()[0])
    finally:
        conn.close()


def wait_replica(server: PostgresServer, query: Any, sql: str, expected: int, timeout: float) -> None:
    """Wait until `sql` (a count on the replica) gives `expected`, or the timeout passes; the query's
    error if it stopped."""
    deadline = time.monotonic() + timeout
    while _replica_count(server, sql) != expected and time.monotonic() < deadline:
        if not query.isActive:
            raise RuntimeError(f"the streaming query stopped: {query.exception()}")
        time.sleep(0.5)


def mirror(work: Path, spark: Any) -> Any:
    """The PostgreSQL shop mirrored into the database `replica` of the same server by the jdbc sink."""
    console.rule("[bold]PostgreSQL mirrored into a second database (sink: jdbc, mirror: true)")
    server = PostgresServer().start()
    query = None
    try:
        server.create_database("shop")
        server.create_database("replica")
        server.execute(POSTGRES_SHOP + SHOP_ROWS, "shop")
        work.mkdir(parents=True)
        cfg_path = work / "mirror.yaml"
        sink = {"type": "jdbc", "connection.url": f"jdbc:postgresql://127.0.0.1:{server.port}/replica",
                "connection.username": server.superuser, "connection.password": server.password, "mirror": True}
        cfg: dict[str, Any] = {
            "name": "mirror", "source": SHOPS[0].source(server), "sink": sink,
            "spark": {"master": "local[2]", "checkpoint": str(work / "state"), "trigger.interval": "1 second"},
        }
        cfg_path.write_text(yaml.safe_dump(cfg))
        safe = {**cfg, "source": {**cfg["source"], "database.password": "********"},
                "sink": {**sink, "connection.password": "********"}}
        console.print("The configuration: every captured table kept in step in the database `replica`, created "
                      "there by the sink:")
        console.print(yaml.safe_dump(safe, sort_keys=False), markup=False)

        from headwater.pipeline_config import load_config
        from headwater.spark.pipeline import spark_session, start_query

        config = load_config(cfg_path)
        if spark is None:
            spark = spark_session(config)
        query = start_query(spark, config)
        wait_replica(server, query, "SELECT count(*) FROM orders", 4, 300)
        replica_tables(server, "After the snapshot")
        console.print("The changes: " + "; ".join(title for title, _ in CHANGES))
        for _, sql in CHANGES:
            server.execute(sql, "shop")
        wait_replica(server, query, "SELECT count(*) FROM customers WHERE id = 30", 1, 120)
        wait_replica(server, query, "SELECT count(*) FROM orders", 4, 60)
        replica_tables(server, "After the changes")
        return spark
    finally:
        if query is not None:
            query.stop()
        server.stop()


def main() -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(tempfile.mkdtemp(prefix="headwater-demo-"))
    console.rule("[bold]headwater demo")
    spark = None
    try:
        for i, shop in enumerate(SHOPS):
            spark = capture(shop, work / str(i), spark)
        spark = mirror(work / "mirror", spark)
        console.rule("[green]demo finished: both databases captured, one mirrored, servers stopped")
        return 0
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
