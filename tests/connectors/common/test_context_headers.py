"""Debezium 3's context headers: which records get them (data and schema change records, not transaction
records, heartbeats or messages), after a record's own headers, in JSON rows and in typed blocks alike."""

from __future__ import annotations

import json
import uuid

import pytest

from headwater.config.errors import ConfigErrors
from headwater.connectors.common.context_headers import ContextHeaders, uuid7
from headwater.connectors.registry import validate_connector
from headwater.events.batch import ArrowEvents, EventBatch
from headwater.events.formats.json import JsonOptions, to_event_batch
from headwater.events.typed import TypedEvents
from headwater.spark.sinks import jsonl_lines
from tests.golden_support import UUID7
from tests.transforms.support import Events

HEADERS = ContextHeaders("dbserver1", "postgresql", "01a21d5b-d692-7262-bca9-1f43d49adfbb")
CONTEXT = [("__debezium.context.connectorLogicalName", "dbserver1"), ("__debezium.context.taskId", "0"),
           ("__debezium.context.connectorName", "postgresql"),
           ("__debezium.context.runId", "01a21d5b-d692-7262-bca9-1f43d49adfbb")]
HEARTBEAT = ("__debezium-heartbeat.dbserver1", {"type": "struct", "optional": False, "name": "io.debezium.connector.common.ServerNameKey",
                                                "fields": [{"field": "serverName", "type": "string", "optional": False}]})
PLAIN = {"type": "struct", "optional": False, "fields": [{"field": "x", "type": "string", "optional": True}]}


def sample() -> TypedEvents:
    """A snapshot row, a key change (delete with a header, tombstone, create with a header), a truncate, a
    transaction END, a heartbeat, a logical message and a schema change record (topic `topic.prefix`)."""
    events = Events()
    events.add("r", None, {"id": 1, "name": "a"}, topic="dbserver1.inventory.customers")
    events.add("d", {"id": 1, "name": "a"}, None, topic="dbserver1.inventory.customers",
               headers=[("__debezium.newkey", {"id": 2})])
    events.add(None, topic="dbserver1.inventory.customers", key={"id": 1})
    events.add("c", None, {"id": 2, "name": "a"}, topic="dbserver1.inventory.customers",
               headers=[("__debezium.oldkey", {"id": 1})])
    events.add("t", topic="dbserver1.inventory.customers", key={"id": 0})
    events.record("dbserver1.transaction", PLAIN, {"x": "1"}, PLAIN, {"x": "END"})
    events.record(HEARTBEAT[0], HEARTBEAT[1], {"serverName": "dbserver1"}, PLAIN, {"x": "1"})
    events.record("dbserver1.message", None, None, PLAIN, {"x": "m"}, "m")
    events.record("dbserver1", PLAIN, {"x": "inventory"}, PLAIN, {"x": "CREATE TABLE ..."})
    return events.take()


def expected(schemas: bool) -> list[list[tuple[str, object]] | None]:
    def text(v: object) -> object:
        return {"schema": {"type": "string", "optional": False}, "payload": v} if schemas else v
    context = [(k, text(v)) for k, v in CONTEXT]
    key = {"type": "struct", "fields": [{"type": "int32", "optional": False, "field": "id"}], "optional": False,
           "name": "dbserver1.inventory.customers.Key"}
    def keyed(v: object) -> object:
        return {"schema": key, "payload": v} if schemas else v
    return [context, [("__debezium.newkey", keyed({"id": 2})), *context], context,
            [("__debezium.oldkey", keyed({"id": 1})), *context], context, None, None, None, context]


def parsed(batch) -> list[list[tuple[str, object]] | None]:
    return [None if e.headers is None else [(k, json.loads(v)) for k, v in e.headers] for e in batch.rows()]


@pytest.mark.parametrize("schemas", [True, False])
def test_json_rows_and_typed_blocks_get_the_same_headers(schemas):
    options = JsonOptions(schemas_enable=schemas)
    typed = sample()
    rows = to_event_batch(typed, options)
    assert isinstance(rows, EventBatch)
    assert parsed(HEADERS.apply(rows, options)) == expected(schemas)  # JSON rows, headers added column-wise
    headed = HEADERS.apply(typed, options)
    assert isinstance(headed, TypedEvents)
    assert parsed(to_event_batch(headed, options)) == expected(schemas)  # typed blocks, then written as JSON
    for block in headed:
        if block.topic == "dbserver1.inventory.customers":
            assert {k: v for k, v in block.header_schemas.items() if k.startswith("__debezium.context.")} == {
                k: {"type": "string", "optional": False} for k, _ in CONTEXT}
    # the jsonl sink writes them, column-wise, after the record's own
    headed_rows = HEADERS.apply(rows, options)
    assert isinstance(headed_rows, ArrowEvents)
    lines = [json.loads(line) for line in jsonl_lines(headed_rows.to_arrow()).to_pylist()]
    assert [list(line.get("headers", {}).items()) or None for line in lines] == expected(schemas)


def test_a_run_id_is_a_new_uuid7_per_start():
    props = {"connector.class": "postgres", "database.hostname": "h", "database.user": "u", "database.dbname": "d",
             "topic.prefix": "p"}
    runs = [ContextHeaders.start(validate_connector(props)) for _ in range(3)]
    assert all(r is not None and (r.logical_name, r.connector_name, r.task_id) == ("p", "postgresql", "0") for r in runs)
    ids = [r.run_id for r in runs if r is not None]
    assert len(set(ids)) == 3 and all(UUID7.fullmatch(i) for i in ids)
    assert [uuid.UUID(i).version for i in ids] == [7, 7, 7]
    assert ContextHeaders.start(validate_connector({**props, "extended.headers.enabled": "false"})) is None
    mariadb = {**props, "connector.class": "io.debezium.connector.mariadb.MariaDbConnector", "database.port": 3306,
               "database.server.id": 5}
    mariadb.pop("database.dbname")
    started = ContextHeaders.start(validate_connector(mariadb))
    assert started is not None and started.connector_name == "mariadb"
    with pytest.raises(ConfigErrors, match="extended.headers.enabled"):
        validate_connector({**props, "extended.headers.enabled": "maybe"})


def test_uuid7_orders_by_time():
    first, second = uuid7(), uuid7()
    assert first.version == second.version == 7 and first.variant == uuid.RFC_4122
    assert first.int >> 80 <= second.int >> 80  # the millisecond timestamp leads
