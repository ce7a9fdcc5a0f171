"""What the incremental-snapshot tests of every connector share: an engine on a thread, the replay of
its events into a table's state, the snapshot's reads, a workload of inserts, updates, deletes and
primary-key changes on the keys a snapshot reads, and `headwater signal` on the command line."""

from __future__ import annotations

import json
import random
import re
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


def cli_signal(tmp_path: Path, source: dict[str, str], data: dict[str, Any]) -> Path:
    """`headwater signal` for a pipeline of `source` (a configuration file written in `tmp_path`): a signal
    without data-collections refused with exit status 2, then an execute-snapshot with `data` queued; the
    file it is queued in."""
    import yaml
    from click.testing import CliRunner

    from headwater.cli.main import cli

    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump({
        "name": "t", "source": source, "sink": {"type": "jsonl", "path": str(tmp_path / "out")},
        "spark": {"master": "local[1]", "checkpoint": str(tmp_path / "ckpt")}}))
    bad = CliRunner().invoke(cli, ["signal", str(config_file), "execute-snapshot", "--data", "{}"])
    assert bad.exit_code == 2 and "data-collections" in bad.output
    ok = CliRunner().invoke(cli, ["signal", str(config_file), "execute-snapshot", "--data", json.dumps(data)])
    assert ok.exit_code == 0, ok.output
    queued = tmp_path / "ckpt" / "signals.jsonl"
    assert json.loads(queued.read_text().splitlines()[-1])["type"] == "execute-snapshot"
    return queued


Send = Callable[[str, Any, str], None]  # a signal through the source channel: type, data, id


def keyed_snapshots(run: Run, send: Send, pairs: str, nokey: str, changes: Callable[[threading.Event], None],
                    finish: Callable[[], None]) -> None:
    """An incremental snapshot of `pairs` (a two-column key) while `changes` runs until told to stop, then one
    of `nokey` (no primary key) by its surrogate-key `code`, until `finish` returns."""
    stop = threading.Event()
    worker = threading.Thread(target=changes, args=(stop,), daemon=True)
    try:
        worker.start()
        send("execute-snapshot", {"data-collections": [pairs]}, "s1")
        run.wait(lambda: bool(reads_of(run.events, pairs.rsplit(".", 1)[-1])))
        run.wait(run.snapshot_done, 300)
        stop.set()
        worker.join(30)
        send("execute-snapshot", {"data-collections": [nokey], "surrogate-key": "code"}, "s2")
        run.wait(lambda: bool(reads_of(run.events, nokey.rsplit(".", 1)[-1])))
        finish()
    finally:
        stop.set()


def blocking_during_workload(run: Run, send: Send, items: str, rows: int,
                             workload: Callable[[], tuple[threading.Thread, threading.Event]],
                             mark: Callable[[int], None]) -> list[Event]:
    """`type: blocking` twice: once with a full SELECT of the blue rows (every third) in place of `items`'
    query, once whole while `workload` runs; then marker 1 (`mark`) is delivered. The snapshots' rows."""
    def blocking_reads() -> list[Event]:
        return [e for e in run.events if value(e).get("op") == "r" and value(e)["source"]["snapshot"] != "incremental"]

    send("execute-snapshot", {"data-collections": [items], "type": "blocking", "additional-conditions": [
        {"data-collection": items, "filter": f"SELECT * FROM {items} WHERE color = 'blue'"}]}, "b1")
    run.wait(lambda: len(blocking_reads()) == rows // 3)
    assert sorted(value(e)["after"]["id"] for e in blocking_reads()) == list(range(3, rows + 1, 3))
    worker, stop = workload()
    time.sleep(0.5)
    send("execute-snapshot", {"data-collections": [items], "type": "BLOCKING"}, "b2")
    run.wait(lambda: len(blocking_reads()) > rows // 3 + rows // 2)
    time.sleep(0.5)
    stop.set()
    worker.join(30)
    mark(1)
    run.wait(lambda: run.saw_done(1))
    rows_read = blocking_reads()
    assert {value(e)["source"]["snapshot"] for e in rows_read} <= {
        "first", "true", "last", "first_in_data_collection", "last_in_data_collection"}
    return rows_read


def insert_signal(conn: Any, type_: str, data: dict[str, Any] | str | None, id_: str) -> None:
    """A signal through the source channel: a row of `dbz_signal` inserted (and committed) through the DB-API
    connection `conn`, which is closed."""
    try:
        cur = conn.cursor()
        text = data if isinstance(data, str) or data is None else json.dumps(data)
        cur.execute("INSERT INTO dbz_signal VALUES (%s, %s, %s)", (id_, type_, text))
        conn.commit()
    finally:
        conn.close()


def pause_resume_stop(run: Run, send: Send, items: str, rows: int, mark: Callable[[int], None],
                      status: Callable[[dict[str, Any]], dict[str, Any]], log_text: Callable[[], str]) -> None:
    """An incremental snapshot of `items` paused (nothing read while paused, the position kept, `status`
    says so), resumed, then stopped before its end; the log channel's notifications in that order."""
    send("execute-snapshot", {"data-collections": [items]}, "s1")
    send("pause-snapshot", None, "p1")
    run.wait(lambda: bool(run.offset().get(inc.PAUSED)))
    paused_at = run.offset().get(inc.PRIMARY_KEY)
    shown = status(run.offset())
    assert shown["incremental_snapshot"] == "paused" and shown["incremental_snapshot_signal"] == "s1"
    assert shown["incremental_snapshot_tables_left"] == items
    n = len(reads(run.events))
    mark(1)
    run.wait(lambda: run.saw_done(1))
    time.sleep(1.0)
    assert len(reads(run.events)) == n and run.offset().get(inc.PRIMARY_KEY) == paused_at
    send("resume-snapshot", None, "r1")
    run.wait(lambda: len(reads(run.events)) >= n + 400)
    send("stop-snapshot", {"type": "incremental"}, "x1")
    run.wait(run.snapshot_done)
    stopped = len(reads(run.events))
    mark(2)
    run.wait(lambda: run.saw_done(2))
    assert len(reads(run.events)) == stopped < rows
    assert len(set(reads(run.events))) == stopped
    kinds = re.findall(r"aggregateType='Incremental Snapshot', type='([A-Z_]+)'", log_text())
    assert kinds[0] == "STARTED" and kinds[-1] == "ABORTED"
    assert kinds.index("PAUSED") < kinds.index("RESUMED") and "COMPLETED" not in kinds


def conditions_and_malformed_signals(run: Run, send: Send, items: str, pattern: str, finish: Callable[[], None],
                                     log_text: Callable[[], str]) -> str:
    """A condition naming no column (the table skipped), malformed signals (each logged with its reason and
    skipped), a log signal, then a snapshot of the tables `pattern` matches with the condition
    `color = 'blue'` on `items` (2,000 rows: every third is blue) until `finish` returns. The log."""
    send("execute-snapshot", {"data-collections": [items], "additional-conditions": [
        {"data-collection": items, "filter": "no_such_column = 1"}]}, "bad0")
    run.wait(lambda: f"skipping {items}" in log_text())
    send("execute-snapshot", "{not json", "bad1")
    send("no-such-signal", None, "bad2")
    send("execute-snapshot", {"type": "incremental"}, "bad3")
    send("log", {"message": "hello from a signal at {}"}, "l1")
    send("execute-snapshot", {"data-collections": [pattern], "additional-conditions": [
        {"data-collection": items, "filter": "color = 'blue'"}]}, "s1")
    finish()
    assert reads(run.events) == list(range(3, 2001, 3))
    text = log_text()
    assert "no_such_column" in text
    assert "bad1" in text and "not JSON" in text
    assert "bad2" in text and "no-such-signal" in text
    assert "bad3" in text and "data-collections" in text
    return text
