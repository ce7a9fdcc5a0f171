"""Debezium's semantic type rules in connectors/common/semantics.py: the schema names and units
of every time.precision.mode (as Debezium 3.6.3 declares them in the recorded golden events),
decimal.handling.mode and binary.handling.mode."""

from __future__ import annotations

import pytest

from headwater.config.common import COMMON
from headwater.connectors.common import semantics as sem
from headwater.events.connect import BYTES, FLOAT64, INT32, INT64, STRING

ALLOWED = {p.name: p.allowed for p in COMMON}  # each mode property's values, as configuration accepts them

TIME = {
    # mode: (precision 3, precision 6) -> schema name
    "adaptive": ("io.debezium.time.Time", "io.debezium.time.MicroTime"),
    "adaptive_time_microseconds": ("io.debezium.time.MicroTime", "io.debezium.time.MicroTime"),
    "connect": ("org.apache.kafka.connect.data.Time", "org.apache.kafka.connect.data.Time"),
    "isostring": ("io.debezium.time.IsoTime", "io.debezium.time.IsoTime"),
    "microseconds": ("io.debezium.time.MicroTime", "io.debezium.time.MicroTime"),
    "nanoseconds": ("io.debezium.time.NanoTime", "io.debezium.time.NanoTime"),
}
TIMESTAMP = {
    "adaptive": ("io.debezium.time.Timestamp", "io.debezium.time.MicroTimestamp"),
    "adaptive_time_microseconds": ("io.debezium.time.Timestamp", "io.debezium.time.MicroTimestamp"),
    "connect": ("org.apache.kafka.connect.data.Timestamp", "org.apache.kafka.connect.data.Timestamp"),
    "isostring": ("io.debezium.time.IsoTimestamp", "io.debezium.time.IsoTimestamp"),
    "microseconds": ("io.debezium.time.MicroTimestamp", "io.debezium.time.MicroTimestamp"),
    "nanoseconds": ("io.debezium.time.NanoTimestamp", "io.debezium.time.NanoTimestamp"),
}
DATE = {"adaptive": "io.debezium.time.Date", "adaptive_time_microseconds": "io.debezium.time.Date",
        "connect": "org.apache.kafka.connect.data.Date", "isostring": "io.debezium.time.IsoDate",
        "microseconds": "io.debezium.time.Date", "nanoseconds": "io.debezium.time.Date"}


@pytest.mark.parametrize("mode", ALLOWED["time.precision.mode"])
def test_temporal_schemas_of_every_mode(mode):
    assert (sem.time_schema(mode, 3).name, sem.time_schema(mode, 6).name) == TIME[mode]
    assert (sem.timestamp_schema(mode, 3).name, sem.timestamp_schema(mode, 6).name) == TIMESTAMP[mode]
    assert sem.date_schema(mode).name == DATE[mode]
    assert sem.date_schema(mode).type == (STRING if mode == "isostring" else INT32)


def test_units_and_types():
    assert [sem.time_unit("adaptive", p) for p in (0, 3, 4, 6, 9, None)] == ["ms", "ms", "us", "us", "ns", "us"]
    assert sem.timestamp_unit("adaptive_time_microseconds", 3) == "ms"  # only times are always micro
    assert sem.time_schema("adaptive", 3).type == INT32 and sem.time_schema("nanoseconds", 0).type == INT64
    assert sem.timestamp_schema("isostring", 6).type == STRING
    assert sem.ZONED_TIMESTAMP.name == "io.debezium.time.ZonedTimestamp"


def test_nanoseconds_range():
    assert sem.nanos_from_micros(9223372036854775) == 9223372036854775000  # 2262-04-11T23:47:16.854775
    assert sem.nanos_from_micros(9223372036854776) is None
    assert sem.nanos_from_micros(-9223372036854775) == -9223372036854775000
    assert sem.nanos_from_micros(-9223372036854776) is None


def test_decimal_modes():
    precise = sem.decimal_mode_schema("precise", 2, 5)
    assert (precise.type, precise.name, dict(precise.parameters or ())) == \
        (BYTES, "org.apache.kafka.connect.data.Decimal", {"scale": "2", "connect.decimal.precision": "5"})
    assert sem.decimal_mode_schema("precise", 0, None, variable=True) is sem.VARIABLE_SCALE_DECIMAL
    assert sem.decimal_mode_schema("double", 2, 5).type == FLOAT64
    assert sem.decimal_mode_schema("string", 2, 5).type == STRING
    assert dict(sem.decimal_schema(3, None).parameters or ()) == {"scale": "3"}


def test_binary_modes():
    data = bytes([0xFB, 0xFF, 0x00])
    assert {m: sem.binary_encoder(m)(data) for m in ALLOWED["binary.handling.mode"]} == {
        "bytes": "+/8A", "base64": "+/8A", "base64-url-safe": "-_8A", "hex": "fbff00"}
    assert sem.binary_schema("bytes").type == BYTES and sem.binary_schema("hex").type == STRING
