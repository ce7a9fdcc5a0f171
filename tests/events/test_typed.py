"""The Arrow types of typed blocks: Connect's logical types become Arrow's where every value fits."""

from __future__ import annotations

import pyarrow as pa

from headwater.events.typed import BlockBuilder, connect_type, from_ipc, ipc_bytes

MICROS = {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "version": 1}
UNBOUNDED = {"type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
             "parameters": {"scale": "2"}}


def test_types() -> None:
    """Logical types become Arrow's where the value fits them all, else stay physical."""
    assert connect_type(MICROS)[0] == pa.timestamp("us")
    assert connect_type(UNBOUNDED)[0] == pa.binary()  # no precision: any number of digits
    dec = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
           "parameters": {"scale": "2", "connect.decimal.precision": "5"}}
    assert connect_type(dec)[0] == pa.decimal128(5, 2)
    zoned = {"type": "string", "name": "io.debezium.time.ZonedTimestamp"}
    assert connect_type(zoned)[0] == pa.string()
    assert connect_type({"type": "float"})[0] == pa.float64()


def test_a_block_through_arrow_ipc_keeps_its_schemas_and_moves_its_order() -> None:
    b = BlockBuilder()
    b.add("t", None, None, UNBOUNDED_ROW, {"x": "AQ=="}, "c", 3, 4)
    b.add("t", None, None, UNBOUNDED_ROW, None, None, 3, 4)
    (block,) = b.take()
    back = from_ipc(ipc_bytes(block, 10))
    assert back.topic == "t" and back.value_schema == UNBOUNDED_ROW and back.key_schema is None
    assert back.batch.column("_order").to_pylist() == [10, 11]
    assert back.batch.drop_columns(["_order"]).equals(block.batch.drop_columns(["_order"]))


UNBOUNDED_ROW = {"type": "struct", "fields": [{**UNBOUNDED, "field": "x"}]}
