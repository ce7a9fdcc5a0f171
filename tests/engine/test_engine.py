"""The embedded engine's two outputs on a real PostgreSQL: JSON rows (`events()`), and typed blocks
(`blocks()`) whose JSON serialization gives the same events."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from headwater.events.formats.json import JsonOptions, to_event_batch
from headwater.events.typed import TypedBlock, TypedEvents
from tests.golden_support import RUN_ID_HEADER, UUID7

SETUP = """
CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, price numeric(8,2), at timestamptz,
                    note text DEFAULT 'none');
INSERT INTO items VALUES (1, 'pen', 2.50, '2024-01-02 03:04:05+00', 'a'), (2, 'ink', NULL, NULL, NULL);
"""
CHANGES = """
UPDATE items SET price = 3.75 WHERE id = 1;
UPDATE items SET id = 3 WHERE id = 2;
DELETE FROM items WHERE id = 1;
TRUNCATE items;
"""


def _props(pg_server, pg_db, slot: str) -> dict:
    return {"connector.class": "postgres", **pg_server.connector_properties(pg_db), "topic.prefix": "p",
            "slot.name": slot, "table.include.list": "public.items", "provide.transaction.metadata": "true",
            "skipped.operations": "none"}


def test_blocks_hold_every_record_kind_typed(pg_server, pg_db):
    pg_server.execute(SETUP, pg_db)
    engine = Engine(validate_connector(_props(pg_server, pg_db, "typed_slot")), output="typed")
    try:
        batches = list(engine.blocks(once=True))
        pg_server.execute(CHANGES, pg_db)
        batches += list(engine.blocks(once=True))
    finally:
        engine.close()
    assert batches and all(isinstance(b, TypedEvents) for b in batches)
    blocks: list[TypedBlock] = [block for b in batches for block in b]
    assert {b.topic for b in blocks} == {"p.public.items", "p.transaction"}
    data = [b for b in blocks if b.topic == "p.public.items"]
    after = data[0].batch.schema.field("value").type.field("after").type
    assert after.field("price").type == pa.decimal128(8, 2) and after.field("at").type == pa.string()
    assert data[0].batch.schema.field("key").type.field("id").type == pa.int32()
    ops = [op for b in data for op in b.batch.column("op").to_pylist()]
    # snapshot rows, an update, a key change (delete, tombstone, create), a delete and its tombstone, a truncate
    assert ops == ["r", "r", "u", "d", None, "c", "d", None, "t"]
    # a header's value is the field of its name in a struct of the block's header names, typed as the key
    headers = [[(e["key"], e["value"][e["key"]]) for e in h] for b in data for h in b.batch.column("headers").to_pylist()]
    # every data change record, tombstones too, ends with Debezium 3's context headers, one run id for the engine
    run_id = headers[0][-1][1]
    assert UUID7.fullmatch(run_id)
    context = [("__debezium.context.connectorLogicalName", "p"), ("__debezium.context.taskId", "0"),
               ("__debezium.context.connectorName", "postgresql"), ("__debezium.context.runId", run_id)]
    assert headers == [context, context, context, [("__debezium.newkey", {"id": 3}), *context], context,
                       [("__debezium.oldkey", {"id": 2}), *context], context, context, context]
    assert {n: (s or {}).get("name") for b in data for n, s in b.header_schemas.items()} == {
        "__debezium.newkey": "p.public.items.Key", "__debezium.oldkey": "p.public.items.Key",
        **{n: None for n, _ in context}}
    assert all(h is None for b in blocks if b.topic == "p.transaction" for h in b.batch.column("headers").to_pylist())
    statuses = [v["status"] for b in blocks if b.topic == "p.transaction" for v in b.batch.column("value").to_pylist()]
    assert statuses == ["BEGIN", "END"]  # the changes are one transaction
    # `_order` gives the order of the events across the blocks of a batch
    last = batches[-1]
    order = sorted((o, block.topic, op) for block in last for o, op in zip(
        block.batch.column("_order").to_pylist(), block.batch.column("op").to_pylist(), strict=True))
    assert [o for o, _, _ in order] == list(range(len(last)))
    assert [t for _, t, _ in order] == ["p.transaction", *["p.public.items"] * 7, "p.transaction"]
    assert [op for _, _, op in order][1:-1] == ["u", "d", None, "c", "d", None, "t"]
    with pytest.raises(ValueError, match="output"):
        next(Engine(validate_connector(_props(pg_server, pg_db, "x")), output="json").blocks())


def _comparable(rows) -> list[tuple]:
    """Events without their processing times (read when each event is made) and their run id (one per
    engine, checked)."""
    out = []
    assert len({v for r in rows for k, v in r.headers or () if k == RUN_ID_HEADER}) == 1
    for r in rows:
        r.headers = r.headers and [(k, "run" if k == RUN_ID_HEADER else v) for k, v in r.headers]
        value = json.loads(r.value) if r.value is not None else None
        if value is not None:
            for k in ("ts_ms", "ts_us", "ts_ns"):
                value["payload"].pop(k, None)
        out.append((r.topic, r.key, value, r.op, r.headers, r.change_type, r.commit_version))
    return out


@pytest.mark.parametrize("replace_null", [True, False])
def test_typed_blocks_written_as_json_are_the_json_events(pg_server, pg_db, replace_null):
    pg_server.execute(SETUP, pg_db)
    options = JsonOptions(schemas_enable=True, replace_null_with_default=replace_null)
    engines = {output: Engine(validate_connector(_props(pg_server, pg_db, f"{output}_slot")), schemas_enable=True,
                              replace_null_with_default=replace_null, output=output) for output in ("json", "typed")}
    runs: dict[str, list] = {"json": [], "typed": []}
    try:
        for step in ("snapshot", "changes"):
            if step == "changes":
                pg_server.execute(CHANGES, pg_db)
            runs["json"] += list(engines["json"].events(once=True))
            runs["typed"] += [e for b in engines["typed"].blocks(once=True) for e in to_event_batch(b, options).rows()]
    finally:
        for engine in engines.values():
            engine.close()
    typed, direct = _comparable(runs["typed"]), _comparable(runs["json"])
    # the two slots see the same changes; the snapshots' positions and times are their own
    for rows in (typed, direct):
        for r in rows:
            if r[2] is not None and r[2]["payload"].get("op") == "r":
                r[2]["payload"]["source"] = None
    assert [r[:6] for r in typed] == [r[:6] for r in direct]
    notes = [r[2]["payload"]["after"]["note"] for r in direct if r[2] is not None and r[3] == "r"]
    assert notes == ["a", "none" if replace_null else None]
