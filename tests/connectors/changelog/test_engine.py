"""The change-log connector through the embedded engine, on a real PostgreSQL: snapshot in key-range
chunks, streamed transactions, transaction metadata, restarts that neither lose nor repeat an event;
and the proof that it is built from the shared layer alone (no import of the PostgreSQL connector)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import orjson
import pytest

from headwater.config.errors import ConfigErrors
from headwater.connectors.base import Offset, WorkUnit
from headwater.connectors.registry import validate_connector
from headwater.engine import Engine, OffsetFile
from tests.connectors.changelog.scenario import STREAMED, Model, check_events, dsn, properties
from tests.connectors.changelog.snapshot import SnapshotChunk

PACKAGE = Path(__file__).parent
CONTEXT = "__debezium.context."


def as_dicts(batches: list) -> list[dict[str, Any]]:
    """The events as dicts, headers without Debezium 3's context headers (`context`: checked in
    test_spark.py, one run id per start)."""
    return [{"topic": e.topic, "key": e.key_json(), "value": e.value_json(),
             "headers": {k: orjson.loads(v) for k, v in e.headers or () if not k.startswith(CONTEXT)},
             "context": {k: orjson.loads(v) for k, v in e.headers or () if k.startswith(CONTEXT)}}
            for b in batches for e in b.rows()]


def run(props: dict, offsets: Path, *, max_events: int | None = None, handled: int | None = None,
        planned: list[list[WorkUnit]] | None = None) -> list[dict[str, Any]]:
    """Events of one `--once` run; with `handled`, the run stops before handling more batches than that
    (the batch in flight is not committed, as in a crash)."""
    engine = Engine(validate_connector(props), OffsetFile(offsets), max_events=max_events)
    if planned is not None:
        plan = engine.connector.plan

        def recording(start: Offset, end: Offset) -> list[WorkUnit]:
            units = plan(start, end)
            planned.append(units)
            return units
        engine.connector.plan = recording  # type: ignore[method-assign]
    got = []
    try:
        for i, batch in enumerate(engine.batches(once=True)):
            if handled is not None and i == handled:
                break
            got.append(batch)
    finally:
        engine.close()
    return as_dicts(got)


def test_snapshot_then_stream_then_restart(pg_server, pg_db, tmp_path):
    model = Model(dsn(pg_server, pg_db))
    model.setup(accounts=25, orders=12)
    props = properties(pg_server, pg_db)
    offsets = tmp_path / "offsets.json"

    planned: list[list[WorkUnit]] = []
    snapshot = model.snapshot()
    # the run stops once the snapshot batch (one event batch per chunk) is committed
    check_events(run(props, offsets, planned=planned, handled=5), snapshot, pg_db)
    chunks = [u for units in planned for u in units if isinstance(u, SnapshotChunk)]
    assert [c.table.name for c in chunks] == ["accounts"] * 3 + ["orders"] * 2  # key ranges of 10 rows
    stored = orjson.loads(offsets.read_text())["offset"]
    assert stored["snapshot"] == "completed" and stored["seq"] == 1  # streaming starts at the log's first row

    # a new engine streams from the stored offset: from the snapshot's position, then from a streaming one
    changes = model.transaction(*STREAMED[0])
    check_events(run(props, offsets), changes, pg_db)
    later = [c for ops in STREAMED[1:] for c in model.transaction(*ops)]
    events = run(props, offsets)
    check_events(events, later, pg_db)
    # order 13's new key: a delete with the new key in a header, its tombstone, a create with the old key
    moved = [(e["value"] and e["value"]["op"], e["key"], e["headers"]) for e in events[-3:]]
    assert moved == [("d", {"id": 13}, {"__debezium.newkey": {"id": 113}}), (None, {"id": 13}, {}),
                     ("c", {"id": 113}, {"__debezium.oldkey": {"id": 13}})]
    assert run(props, offsets) == []
    assert orjson.loads(offsets.read_text())["offset"]["snapshot"] == "streaming"


def test_batches_cut_inside_transactions_restart_exactly(pg_server, pg_db, tmp_path):
    model = Model(dsn(pg_server, pg_db))
    model.setup(accounts=3, orders=12)
    props = properties(pg_server, pg_db)
    offsets = tmp_path / "offsets.json"
    assert len(run(props, offsets)) == 15  # the snapshot
    changes = [c for ops in STREAMED for c in model.transaction(*ops)]

    delivered: list[dict] = []
    for handled in (1, 2, 1):  # each run stops with a batch of 2 changes in flight (not committed)
        delivered += run(props, offsets, max_events=2, handled=handled)
        if len(delivered) == 2:  # two of the first transaction's three changes: stored inside it
            assert orjson.loads(offsets.read_text())["offset"]["n"] == 2
    delivered += run(props, offsets, max_events=2)
    check_events(delivered, changes, pg_db)


def test_transaction_metadata(pg_server, pg_db, tmp_path):
    model = Model(dsn(pg_server, pg_db))
    model.setup(accounts=2, orders=1)
    props = properties(pg_server, pg_db, **{"provide.transaction.metadata": "true"})
    offsets = tmp_path / "offsets.json"
    assert len(run(props, offsets)) == 3  # the snapshot
    placed = model.rows["orders"][1][3]
    changes = model.transaction(("insert", "orders", (5, 1, "x", placed)), ("update", "accounts", 1, {"owner": "o"}),
                                ("insert", "orders", (6, 2, None, placed)), ("update", "orders", 1, {"id": 101}))
    events = run(props, offsets, max_events=2)  # the transaction's counts carried across two batches
    txid = str(changes[0].txid)
    begin, end = events[0], events[-1]
    assert begin["topic"] == end["topic"] == "shop.transaction"
    assert (begin["value"]["status"], begin["value"]["id"], end["value"]["status"]) == ("BEGIN", txid, "END")
    assert end["value"]["event_count"] == 5  # the new key is a delete and a create
    assert sorted((d["data_collection"], d["event_count"]) for d in end["value"]["data_collections"]) == [
        ("public.accounts", 1), ("public.orders", 4)]
    data = events[1:-1]
    check_events(data, changes, pg_db)
    assert [(e["value"]["transaction"]["id"], e["value"]["transaction"]["total_order"],
             e["value"]["transaction"]["data_collection_order"]) for e in data if e["value"]] == [
        (txid, 1, 1), (txid, 2, 1), (txid, 3, 2), (txid, 4, 3), (txid, 5, 4)]


def test_connector_imports_only_the_shared_layer():
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n.startswith("headwater.connectors.postgres") for n in names), (path.name, names)


def test_bad_configuration_is_refused_by_name(pg_server):
    props = properties(pg_server, "db", **{"changelog.table": "hw_changelog", "time.precision.mode": "isostring"})
    with pytest.raises(ConfigErrors) as err:
        validate_connector(props)
    assert {e.property for e in err.value.errors} == {"changelog.table", "time.precision.mode"}
    with pytest.raises(ConfigErrors, match="unknown connector"):
        validate_connector({**props, "connector.class": "tests.connectors.changelog.properties:NOTHING"})
