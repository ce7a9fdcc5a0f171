"""The Arrow types of typed blocks: Connect's logical types become Arrow's where every value fits."""

from __future__ import annotations

import pyarrow as pa

from headwater.events.typed import connect_type

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
