"""The chain from Python: on a batch's typed blocks, and on a Spark DataFrame of blocks."""

from __future__ import annotations

import pytest

from headwater.config.errors import ConfigErrors
from headwater.events.formats.json import JsonOptions, to_event_batch
from headwater.events.typed import from_ipc, ipc_bytes
from headwater.transforms.chain import in_order
from headwater.transforms.dataframe import transform_blocks, transform_events
from tests.transforms.support import Events, as_json, unwrap

PROPS = {"connector.class": "postgres", "topic.prefix": "dbserver1",  # connector keys are ignored
         **unwrap(delete_tombstone_handling_mode="rewrite")}


def events() -> Events:
    return (Events().add("c", None, {"id": 1, "name": "a"}).add("d", {"id": 1, "name": "a"}, None)
            .add(None, key={"id": 1}).add("c", None, {"id": 2, "name": "b"}, topic="db.other"))


def test_on_typed_events():
    out = as_json(transform_events(events().take(), PROPS))
    assert [e["value"] for e in out] == [{"id": 1, "name": "a", "__deleted": "false"},
                                         {"id": 1, "name": "a", "__deleted": "true"},
                                         {"id": 2, "name": "b", "__deleted": "false"}]


def test_bad_properties_are_refused_at_once():
    with pytest.raises(ConfigErrors, match="transforms.unwrap.nope"):
        transform_events(events().take(), {**PROPS, "transforms.unwrap.nope": "1"})
    with pytest.raises(ValueError, match="no transformation"):
        transform_events(events().take(), {"topic.prefix": "x"})


@pytest.mark.spark
def test_on_a_dataframe_of_blocks(spark):
    blocks = events().take()
    rows = [(b.topic, bytearray(ipc_bytes(b))) for b in blocks]
    df = spark.createDataFrame(rows, "topic STRING, block BINARY")
    out = transform_blocks(df, PROPS).collect()
    back = in_order([from_ipc(bytes(r["block"])) for r in out])
    assert {r["topic"] for r in out} == {"dbserver1.inventory.customers", "db.other"}
    values = [e.value for e in to_event_batch(back, JsonOptions()).rows()]
    assert values == ['{"id":1,"name":"a","__deleted":"false"}', '{"id":1,"name":"a","__deleted":"true"}',
                      '{"id":2,"name":"b","__deleted":"false"}']


def test_the_table_layout_refuses_transformations():
    import json

    from headwater.spark.datasource import HeadwaterDataSource
    props = {"connector.class": "postgres", "database.hostname": "127.0.0.1", "database.user": "u",
             "database.dbname": "d", "topic.prefix": "p", **unwrap()}
    options = {"headwater.properties": json.dumps(props), "headwater.output": "table", "headwater.topic": "p.public.t",
               "headwater.row.schema": "{}"}
    with pytest.raises(ValueError, match="transformations do not apply"):
        HeadwaterDataSource(options).streamReader(None)
    del options["headwater.output"]
    reader = HeadwaterDataSource(options).streamReader(None)
    assert getattr(reader, "chain", None) is not None
