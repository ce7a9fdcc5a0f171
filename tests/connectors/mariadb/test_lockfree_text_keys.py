"""The lock-free snapshot of tables keyed by text and by (int, text) on a real MariaDB (keyorder.py).

The keys mix upper and lower case and some end in a space, under case-insensitive PAD SPACE collations,
so Python's order of the keys is not the server's: the chunks' ranges come from the server's ORDER BY,
and the merge and the stream filter must place every change in the chunk the server's range SELECT
puts it in. Writers insert, update, delete and change keys (also to a key equal under the collation,
`UPPER(k)`) while the table is snapshotted in many chunks; replaying the events must meet every row as
its before-image says and end equal to the table.
"""

from __future__ import annotations

import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pymysql
import pytest

from headwater.connectors.binlog import lockfree
from headwater.connectors.binlog.connection import ConnectionParams
from headwater.connectors.binlog.keyorder import ChunkOrder, KeyColumn, key_columns
from headwater.connectors.binlog.schema import Column, Table
from headwater.connectors.registry import validate_connector
from headwater.devservers.mariadb import MariaDBServer
from headwater.engine import Engine, OffsetFile
from tests.connectors.mariadb.test_lockfree import writes_in_every_window

KEYS = 240
DEADLOCK, LOCK_WAIT_TIMEOUT = 1213, 1205


def word(n: int) -> str:
    """Key n: a letter in either case (Python sorts every capital before every small letter), the number,
    and for some a trailing space (equal to the key without it under PAD SPACE)."""
    letter = chr(ord("a") + n * 7 % 26)
    return f"{letter.upper() if n % 2 else letter}{n:03d}{' ' if n % 7 == 0 else ''}"


def same(key: str) -> str:
    """A key as the case-insensitive PAD SPACE collations compare it (no accents in these keys)."""
    return key.rstrip(" ").lower()


TABLES = {
    "tk": ("CREATE TABLE tk (k VARCHAR(20) COLLATE utf8mb4_general_ci PRIMARY KEY, v VARCHAR(40) NOT NULL)",
           lambda n: (word(n),), ("k",)),
    "tc": ("CREATE TABLE tc (a INT, b VARCHAR(20) COLLATE utf8mb4_unicode_ci, v VARCHAR(40) NOT NULL, "
           "PRIMARY KEY (a, b))", lambda n: (n % 3, word(n)), ("a", "b")),
}


def writer(params: dict[str, Any], table: str, stop: threading.Event, seed: int) -> int:
    """Small random transactions on the table's keys until `stop`; the number of transactions."""
    make, columns = TABLES[table][1], TABLES[table][2]
    where = " AND ".join(f"{c} = %s" for c in columns)
    rnd = random.Random(seed)
    conn = pymysql.connect(**params, autocommit=False)
    n = 0
    with conn.cursor() as cur:
        while not stop.is_set():
            try:
                for _ in range(rnd.randint(1, 3)):
                    k, other, v = make(rnd.randrange(KEYS)), make(rnd.randrange(KEYS)), f"w{n}.{rnd.randrange(1000)}"
                    op = rnd.choice(["insert", "update", "delete", "key change", "case change"])
                    if op == "insert":
                        cur.execute(f"INSERT IGNORE INTO {table} VALUES ({', '.join('%s' for _ in k)}, %s)", (*k, v))
                    elif op == "update":
                        cur.execute(f"UPDATE {table} SET v = %s WHERE {where}", (v, *k))
                    elif op == "delete":
                        cur.execute(f"DELETE FROM {table} WHERE {where}", k)
                    elif op == "key change":
                        sets = ", ".join(f"{c} = %s" for c in columns)
                        cur.execute(f"UPDATE IGNORE {table} SET {sets} WHERE {where}", (*other, *k))
                    else:  # a key equal to the old one under the collation, spelt differently
                        text = columns[-1]
                        cur.execute(f"UPDATE {table} SET {text} = IF(BINARY {text} = UPPER({text}), LOWER({text}), "
                                    f"UPPER({text})) WHERE {where}", k)
                conn.commit()
                n += 1
            except pymysql.err.OperationalError as e:
                if e.args[0] not in (DEADLOCK, LOCK_WAIT_TIMEOUT):
                    raise
                conn.rollback()
            time.sleep(0.002)
    conn.close()
    return n


class Replay:
    """The table as a consumer rebuilds it from the events, keyed as the collation compares keys; each
    event is checked against it."""

    def __init__(self, table: str):
        self.table = table
        self.columns = TABLES[table][2]
        self.rows: dict[tuple[Any, ...], tuple[tuple[Any, ...], str]] = {}  # same key -> (key as written, v)
        self.ops: dict[str, int] = {}

    def key(self, row: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        written = tuple(row[c] for c in self.columns)
        return tuple(same(x) if isinstance(x, str) else x for x in written), written

    def apply(self, event: Any) -> None:
        value = event.value_json()
        if value is None or not event.topic.endswith(f".{self.table}"):
            return
        op, before, after = value["op"], value["before"], value["after"]
        self.ops[op] = self.ops.get(op, 0) + 1
        if op in ("r", "c"):
            assert self.key(after)[0] not in self.rows, f"{op} of {after}, which the consumer holds"
        elif op in ("u", "d"):
            k, written = self.key(before)
            assert self.rows.get(k) == (written, before["v"]), f"{op} of {before} meets {self.rows.get(k)}"
        if before is not None:
            self.rows.pop(self.key(before)[0], None)
        if after is not None:
            k, written = self.key(after)
            self.rows[k] = (written, after["v"])


def table_rows(server: MariaDBServer, db: str, table: str) -> dict[tuple[Any, ...], tuple[tuple[Any, ...], str]]:
    columns = TABLES[table][2]
    out = {}
    for row in server.query(f"SELECT {', '.join(columns)}, v FROM {table}", db):
        written = tuple(int(str(x)) if c == "a" else x for c, x in zip(columns, row[:-1], strict=True))
        out[tuple(same(x) if isinstance(x, str) else x for x in written)] = (written, str(row[-1]))
    return out


@pytest.fixture
def folded(monkeypatch):
    """How many binlog changes the chunks' windows held (the merges had work to do when > 0), and how many
    key-range chunks were read."""
    count = [0, 0]
    read = lockfree.read_window

    def counting(*args: Any) -> Any:
        changes = read(*args)
        count[0] += len(changes)
        count[1] += 1
        return changes
    monkeypatch.setattr(lockfree, "read_window", counting)
    return count


@pytest.mark.parametrize("table", ["tk", "tc"])
def test_text_keys_are_chunked_in_the_servers_order_under_concurrent_writes(mariadb_server, mariadb_db, folded,
                                                                           monkeypatch, tmp_path, table):
    ddl, make, _ = TABLES[table]
    mariadb_server.execute(ddl, mariadb_db)
    mariadb_server.execute(f"INSERT INTO {table} VALUES " + ",".join(
        "(" + ", ".join(f"'{x}'" if isinstance(x, str) else str(x) for x in make(n)) + f", 'init{n}')"
        for n in range(0, KEYS, 2)), mariadb_db)
    props = {"connector.class": "mariadb", **mariadb_server.connector_properties(mariadb_db),
             "database.server.id": "5407", "topic.prefix": "lt", "include.schema.changes": "false",
             "headwater.snapshot.chunk.rows": "10", "headwater.max.batch.events": "30"}
    writes_in_every_window(monkeypatch)
    replay = Replay(table)
    engine = Engine(validate_connector(props), OffsetFile(tmp_path / "o.json"))
    stop = threading.Event()
    try:
        with ThreadPoolExecutor(2) as pool:
            runs = [pool.submit(writer, mariadb_server.connection_params(mariadb_db), table, stop, seed)
                    for seed in (5, 6)]
            try:
                for event in engine.events(once=True):
                    replay.apply(event)
            finally:
                stop.set()
            transactions = sum(r.result() for r in runs)
        for event in engine.events(once=True):  # what the writers did after the first run's end
            replay.apply(event)
        stored = OffsetFile(tmp_path / "o.json").load()
    finally:
        engine.close()
    assert transactions > 5 and folded[0] > 0  # the windows held changes
    assert folded[1] >= 10  # the table was read in key-range chunks
    assert stored is not None and stored["snapshot"] == "streaming"
    assert replay.ops["r"] > 0 and replay.ops.get("c", 0) > 0
    assert replay.rows == table_rows(mariadb_server, mariadb_db, table)


def test_a_text_key_orders_as_the_collation(mariadb_server):
    params = ConnectionParams.from_config(validate_connector(
        {"connector.class": "mariadb", **mariadb_server.connector_properties(), "topic.prefix": "x",
         "database.server.id": "5408"}))
    pad = ChunkOrder(params, [KeyColumn(0, "k", "utf8mb4", "utf8mb4_general_ci", 10)])
    nopad = ChunkOrder(params, [KeyColumn(0, "k", "utf8mb4", "utf8mb4_nopad_bin", 10)])
    try:
        assert pad.order(("a",)) == pad.order(("A",)) == pad.order(("a  ",)) == pad.order(("\u00e4",))
        assert pad.order(("a",)) < pad.order(("B",)) < pad.order(("c",))  # 'B' < 'a' in Python
        assert pad.order(("b\t",)) < pad.order(("b",))  # PAD SPACE: 'b' compares as 'b ', after a tab
        assert nopad.order(("b",)) < nopad.order(("b ",)) and nopad.order(("B",)) < nopad.order(("a",))
    finally:
        pad.close()
        nopad.close()


def _column(name: str, type_name: str, position: int, length: int | None = None) -> Column:
    return Column(name, type_name, type_name, 0, length, None, position, False)


def test_which_keys_are_chunked():
    def key(*types: str) -> tuple[KeyColumn, ...] | None:
        columns = tuple(_column(f"c{i}", t, i + 1, 8) for i, t in enumerate(types))
        table = Table("d", "t", (*columns, _column("v", "INT", len(types) + 1)), tuple(c.name for c in columns))
        return key_columns(table, {f"c{i}": ("utf8mb4", "utf8mb4_general_ci") for i in range(len(types))})
    assert key("INT UNSIGNED", "CHAR") == (KeyColumn(0, "c0"), KeyColumn(1, "c1", "utf8mb4", "utf8mb4_general_ci", 8))
    assert key("BIGINT") == (KeyColumn(0, "c0"),)
    for other in ("DATE", "DECIMAL", "VARBINARY", "ENUM", "DATETIME"):  # one exact chunk
        assert key("INT", other) is None
    assert key_columns(Table("d", "t", (_column("v", "INT", 1),)), {}) is None  # no key
