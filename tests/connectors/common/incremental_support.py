"""What the incremental-snapshot tests of every connector share: an engine on a thread, the replay of
its events into a table's state, the snapshot's reads, and a workload of inserts, updates, deletes and
primary-key changes on the keys a snapshot reads."""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import SourceConnector
from headwater.connectors.common import incremental as inc
from headwater.engine.engine import Engine, OffsetFile
from headwater.events.batch import Event


class Run:
    """An engine over `connector` on a thread, collecting events until told to stop."""

    def __init__(self, connector: SourceConnector, config: ConnectorConfig, offsets: Path | None = None):
        self.connector = connector
        self.engine = Engine(config, OffsetFile(offsets) if offsets else None, connector=connector)
        self.events: list[Event] = []
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for ev in self.engine.events():
                self.events.append(ev)
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def wait(self, what: Callable[[], bool], timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while not what():
            if self.error is not None:
                raise self.error
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.1)

    def offset(self) -> dict[str, Any]:
        return self.engine.offset or {}

    def snapshot_done(self) -> bool:
        return self.engine.offset is not None and not self.offset().get(inc.COLLECTIONS)

    def saw_done(self, n: int) -> bool:
        return any(table_of(e) == "done" and value(e)["after"]["id"] == n for e in list(self.events))

    def stop(self) -> None:
        self.engine.stop()
        self.thread.join(60)
        self.engine.close()
        if self.error is not None:
            raise self.error


def value(e: Event) -> dict[str, Any]:
    return json.loads(e.value) if e.value else {}


def table_of(e: Event) -> str | None:
    v = value(e)
    return v.get("source", {}).get("table") if v else None


def replay(events: list[Event], table: str) -> dict[int, dict[str, Any]]:
    """The rows of `table` (keyed by `id`) a consumer holds after applying `events` in order."""
    state: dict[int, dict[str, Any]] = {}
    for e in events:
        v = value(e)
        if not v or v.get("source", {}).get("table") != table:
            continue
        if v["op"] == "d":
            state.pop(v["before"]["id"], None)
        else:
            state[v["after"]["id"]] = v["after"]
    return state


def reads(events: list[Event]) -> list[int]:
    """The ids of the incremental snapshot's rows of any table with an id column, in order."""
    out = []
    for e in events:
        v = value(e)
        if v.get("op") == "r" and v["source"]["snapshot"] == "incremental" and "id" in v["after"]:
            out.append(v["after"]["id"])
    return out


def reads_of(events: list[Event], table: str) -> list[Event]:
    return [e for e in events if value(e).get("op") == "r" and value(e)["source"]["table"] == table]


@dataclass(frozen=True)
class Workload:
    """The statements of a workload on `items (id int PRIMARY KEY, v int, color text)` in one database's SQL
    (DB-API `%s` parameters): add to v, delete, insert or add 100 when the key is there, change a key."""

    connect: Callable[[], Any]  # a DB-API connection, not in autocommit
    update: str = "UPDATE items SET v = v + 1 WHERE id = %s"
    delete: str = "DELETE FROM items WHERE id = %s"
    upsert: str = ""
    move: str = "UPDATE items SET id = %s WHERE id = %s"

    def run(self, rows: int, stop: threading.Event, seed: int) -> None:
        """Transactions of inserts, updates, deletes and primary-key changes on the snapshot's keys until
        `stop` (a transaction whose key change collides is rolled back, and the workload goes on)."""
        rnd = random.Random(seed)
        conn = self.connect()
        top = rows * 3
        try:
            cur = conn.cursor()
            while not stop.is_set():
                try:
                    for _ in range(rnd.randint(1, 5)):
                        k = rnd.randint(1, rows)
                        op = rnd.random()
                        if op < 0.4:
                            cur.execute(self.update, (k,))
                        elif op < 0.6:
                            cur.execute(self.delete, (k,))
                        elif op < 0.8:
                            cur.execute(self.upsert, (k,))
                        elif op < 0.9:  # a key beyond the table's end
                            top += 1
                            cur.execute(self.move, (top, k))
                        else:  # a key inside the table: a later chunk's, or one already read
                            cur.execute(self.move, (rnd.randint(1, rows), k))
                    conn.commit()
                except Exception:
                    conn.rollback()
                time.sleep(0.002)
        finally:
            conn.close()

    def start(self, rows: int, seed: int = 7) -> tuple[threading.Thread, threading.Event]:
        stop = threading.Event()
        t = threading.Thread(target=self.run, args=(rows, stop, seed), daemon=True)
        t.start()
        return t, stop
