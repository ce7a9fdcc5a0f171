"""Connect schemas as Arrow types and row images as typed columns, on events the real Debezium wrote.

The golden scenarios (tests/golden/postgres/*/debezium.jsonl, recorded from Debezium 3.6.3 with
schemas) hold every Connect and Debezium type the PostgreSQL connector emits, with their edge
values; the types no PostgreSQL event has (NanoTime, NanoTimestamp, maps with non-string keys) are
written here by hand, in the JSON form Kafka's JsonConverter gives them.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from headwater.events.arrow import META, RowImages, arrow_type, row_schema
from headwater.events.typed import BlockBuilder, TypedBlock

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "postgres"
UTC = dt.UTC
META_NAMES = [name for name, _ in META]
OUT_OF_RANGE = "out of Python's range"


def golden_rows(scenario: str, op: str = "r") -> tuple[pa.Table, list[dict[str, Any]]]:
    """The row images of the events of `op` on table t in a golden scenario, as a table and as rows."""
    events = [json.loads(line) for line in (GOLDEN / scenario / "debezium.jsonl").read_text().splitlines()]
    events = [e for e in events if e["topic"] == "golden.public.t" and e["value"] is not None
              and e["value"]["payload"]["op"] == op]
    assert events, f"no {op!r} events in {scenario}"
    images = RowImages(*row_schema(events[0]["value"]["schema"]))
    images.add(typed_block(events[0]["value"]["schema"], [(e["value"]["payload"], op, i, 0) for i, e in enumerate(events)]))
    table = images.table()
    columns = {name: [_py(v) for v in table.column(name)] for name in table.column_names}
    rows = [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]
    return table, sorted(rows, key=lambda r: r["id"])


def typed_block(value_schema: dict, events: list[tuple[Any, str | None, int, int]]) -> TypedBlock:
    """One typed block of events (payload, op, commit version, commit time in microseconds) of one schema."""
    builder = BlockBuilder()
    for payload, op, version, ts_us in events:
        builder.add("t", None, None, value_schema, payload, op, version, ts_us)
    (block,) = builder.take()
    return block


def _py(scalar: pa.Scalar) -> Any:
    """The scalar as Python, or OUT_OF_RANGE where Python cannot hold it (a date past year 9999)."""
    try:
        return scalar.as_py()
    except (OverflowError, ValueError):
        return OUT_OF_RANGE


def field(table: pa.Table, name: str) -> pa.DataType:
    return table.schema.field(name).type


def b64(unscaled: int) -> str:
    return base64.b64encode(unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)).decode()


def convert(schema: dict, value: Any) -> tuple[pa.DataType, Any]:
    """`value` through `arrow_type(schema)` and Arrow, back as Python."""
    typ, fn = arrow_type(schema)
    return typ, pa.array([fn(value)], type=typ)[0].as_py()


# ------------------------------------------------------------------------------ numbers


def test_decimals_with_scale_and_variable_scale():
    table, rows = golden_rows("types_numeric_precise")
    assert field(table, "n102") == pa.decimal128(10, 2) and field(table, "n50") == pa.decimal128(5, 0)
    assert field(table, "n3810") == pa.decimal128(38, 10)
    assert field(table, "m") == pa.decimal128(38, 2)  # money: a scale, no precision
    one = rows[0]
    assert one["n102"] == decimal.Decimal("-99999999.99") and one["n50"] == decimal.Decimal("99999")
    assert one["n3810"] == decimal.Decimal("1234567890123456789012345678.0123456789")
    assert one["m"] == decimal.Decimal("-92233720368547758.08")
    # numeric without precision: io.debezium.data.VariableScaleDecimal, each value with its own scale
    assert field(table, "n") == pa.string() and field(table, "nn") == pa.string()
    assert one["n"] == "12345.6789" and one["nn"] == "0"
    assert decimal.Decimal(rows[4]["n"]) == decimal.Decimal("1e-30")
    assert decimal.Decimal(rows[5]["n"]) == decimal.Decimal("1e100")
    # a scale above the precision has no decimal128: the exact value as text
    assert field(table, "n35") == pa.string() and decimal.Decimal(one["n35"]) == decimal.Decimal("0.00123")
    assert rows[9]["n"] is None and rows[9]["n102"] is None and rows[9]["n102nn"] == decimal.Decimal("0.00")


def test_decimal_beyond_38_digits_is_text():
    schema = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
              "parameters": {"scale": "2", "connect.decimal.precision": "50"}}
    assert convert(schema, b64(-123456789012345678901234567890123456789012345678)) == (
        pa.string(), "-1234567890123456789012345678901234567890123456.78")


def test_integers_floats_and_their_nan_and_infinities():
    table, rows = golden_rows("types_numeric_precise")
    assert [field(table, c) for c in ("i2", "i4", "i8", "f4", "f8")] == [
        pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64()]
    assert (rows[0]["i2"], rows[0]["i4"], rows[0]["i8"]) == (-32768, -2147483648, -9223372036854775808)
    assert rows[0]["f8"] == 3.141592653589793
    assert math.isnan(rows[1]["f4"]) and math.isnan(rows[1]["f8"])  # JSON "NaN"
    assert rows[2]["f8"] == math.inf and rows[3]["f4"] == -math.inf
    assert rows[9]["i2"] is None and rows[9]["f4"] is None


@pytest.mark.parametrize("mode", ["double", "string"])
def test_decimal_handling_modes_give_plain_types(mode):
    table, rows = golden_rows(f"types_numeric_{mode}")
    expected = pa.float64() if mode == "double" else pa.string()
    assert field(table, "n102") == expected and field(table, "n") == expected
    assert rows[0]["n102"] == (-99999999.99 if mode == "double" else "-99999999.99")


# ------------------------------------------------------------------------------ time


def test_temporal_types_adaptive():
    table, rows = golden_rows("types_temporal_adaptive")
    assert field(table, "d") == pa.date32()
    assert field(table, "t0") == pa.time32("ms") and field(table, "t6") == pa.time64("us")
    assert field(table, "ts0") == pa.timestamp("ms") and field(table, "ts") == pa.timestamp("us")
    assert field(table, "tstz") == pa.timestamp("us", tz="UTC")
    assert field(table, "tz") == pa.string()  # ZonedTime: no Arrow type for a time with a zone
    assert field(table, "iv") == pa.int64()  # MicroDuration
    one = rows[0]
    assert one["d"] == dt.date(2020, 2, 29)
    assert one["t3"] == dt.time(12, 34, 56, 789000) and one["t6"] == dt.time(12, 34, 56, 123456)
    assert one["ts"] == dt.datetime(2020, 1, 1, 12, 34, 56, 123456)
    assert one["ts3"] == dt.datetime(2020, 1, 1, 12, 34, 56, 123000)
    assert one["tstz"] == dt.datetime(2020, 1, 1, 8, 0, tzinfo=UTC)
    assert one["tstz5"] == dt.datetime(2020, 1, 1, 11, 30, 0, 123450, tzinfo=UTC)
    assert one["tz"] == "07:04:56.123456Z"
    assert rows[4]["tstz"] == dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
    assert rows[7]["d"] is None and rows[7]["tstz"] is None


def test_temporal_values_python_cannot_hold_pass_through():
    """PostgreSQL's infinity and years outside 1..9999 stay numbers in Arrow (Python's datetime
    cannot read them back, Arrow and Parquet keep them)."""
    table, _ = golden_rows("types_temporal_adaptive")
    ids = table.column("id").to_pylist()
    days = table.column("d").cast(pa.int32()).to_pylist()
    micros = table.column("tstz").cast(pa.int64()).to_pylist()
    by_id = {i: (d, us) for i, d, us in zip(ids, days, micros, strict=True)}
    assert by_id[2] == (-622191234, 2**63 - 1)  # 'infinity'
    assert by_id[3] == (-625821272, -(2**63))  # '-infinity'
    assert by_id[4][1] == -62167219200000000  # '0000-01-01T00:00:00.000000Z', as Debezium's MicroTimestamp
    assert by_id[6][1] == 2**63 - 1  # '+294276-12-31T23:59:59.999999Z' is past Arrow's range


def test_temporal_types_connect_and_microsecond_time():
    table, rows = golden_rows("types_temporal_connect")
    assert field(table, "d") == pa.date32() and field(table, "t6") == pa.time32("ms")
    assert field(table, "ts") == pa.timestamp("ms")
    assert rows[0]["d"] == dt.date(2020, 2, 29) and rows[0]["t6"] == dt.time(12, 34, 56, 123000)
    assert rows[0]["ts"] == dt.datetime(2020, 1, 1, 12, 34, 56, 123000)
    table, rows = golden_rows("types_temporal_adaptive_time_microseconds")
    assert field(table, "t0") == pa.time64("us") and rows[0]["t3"] == dt.time(12, 34, 56, 789000)


def test_nano_time_and_nano_timestamp():
    assert convert({"type": "int64", "name": "io.debezium.time.NanoTime"}, 45296123456789) == (
        pa.time64("ns"), dt.time(12, 34, 56, 123456))
    typ, fn = arrow_type({"type": "int64", "name": "io.debezium.time.NanoTimestamp"})
    assert typ == pa.timestamp("ns")
    assert pa.array([fn(1577882096123456789)], type=typ).cast(pa.int64())[0].as_py() == 1577882096123456789


# ------------------------------------------------------------------------------ binary


@pytest.mark.parametrize(("mode", "ba", "baa"), [
    ("bytes", b"\xde\xad\xbe\xef", [b"\x01\x02", b"\xff"]),
    ("base64", "3q2+7w==", ["AQI=", "/w=="]),
    ("base64_url_safe", "3q2-7w==", ["AQI=", "_w=="]),
    ("hex", "deadbeef", ["0102", "ff"]),
])
def test_bytes_in_each_binary_handling_mode(mode, ba, baa):
    table, rows = golden_rows(f"types_binary_{mode}")
    kind = pa.binary() if mode == "bytes" else pa.string()
    assert field(table, "ba") == kind and field(table, "baa") == pa.list_(kind)
    assert rows[0]["ba"] == ba and rows[0]["baa"] == baa


# ------------------------------------------------------------------------------ containers


def test_arrays_with_null_items():
    table, rows = golden_rows("types_arrays")
    assert field(table, "ai4") == pa.list_(pa.int32()) and field(table, "af4") == pa.list_(pa.float32())
    assert field(table, "ats") == pa.list_(pa.timestamp("us"))
    assert field(table, "atstz") == pa.list_(pa.timestamp("us", tz="UTC"))
    one = rows[0]
    assert one["ai4"] == [1, None, 3] and one["ab"] == [True, False, None]
    assert one["atx"] == ["a,b", 'c"d', "e\\f", "NULL", None, " sp ", "", "x"]
    assert one["af4"][0] == 1.5 and math.isnan(one["af4"][1]) and one["af4"][2] == math.inf
    assert one["aba"] == [b"\xde\xad\xbe\xef", None, b""]
    assert rows[1]["ai4"] == [] and rows[2]["af4"] is None


def test_maps_from_objects_and_from_pairs():
    table, rows = golden_rows("types_hstore_map")
    assert field(table, "h") == pa.map_(pa.string(), pa.string())
    assert field(table, "ha") == pa.list_(pa.map_(pa.string(), pa.string()))
    assert rows[0]["h"] == [("a", "1"), ("b", None)]
    assert rows[0]["ha"] == [[("a", "1")], [("b", "2"), ("c", "3")]]
    # JsonConverter writes a map whose keys are not strings as [key, value] pairs
    schema = {"type": "map", "keys": {"type": "int32"}, "values": {"type": "int64", "name": "io.debezium.time.MicroTimestamp"}}
    assert convert(schema, [[1, 0], [2, None]]) == (
        pa.map_(pa.int32(), pa.timestamp("us")), [(1, dt.datetime(1970, 1, 1)), (2, None)])


def test_structs_and_semantic_strings():
    table, rows = golden_rows("types_text_misc")
    point = field(table, "p")
    assert isinstance(point, pa.StructType) and point.field("wkb").type == pa.binary()
    assert point.field("x").type == pa.float64()
    one = rows[0]
    assert one["p"]["x"] == 1.5 and one["p"]["srid"] is None
    assert one["u"] == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" and field(table, "j") == pa.string()
    assert one["dn"] == decimal.Decimal("12.500") and one["bt16"] == b"\x01\x01"


# ------------------------------------------------------------------------------ row images


def test_row_images_of_creates_updates_and_deletes():
    schema = {"type": "struct", "fields": [
        {"field": "before", "type": "struct", "optional": True, "fields": [
            {"field": "id", "type": "int32"}, {"field": "price", "type": "bytes", "optional": True,
                                               "name": "org.apache.kafka.connect.data.Decimal",
                                               "parameters": {"scale": "2", "connect.decimal.precision": "6"}}]},
        {"field": "after", "type": "struct", "optional": True, "fields": [
            {"field": "id", "type": "int32"}, {"field": "price", "type": "bytes", "optional": True,
                                               "name": "org.apache.kafka.connect.data.Decimal",
                                               "parameters": {"scale": "2", "connect.decimal.precision": "6"}}]},
        {"field": "source", "type": "struct", "fields": [{"field": "ts_ms", "type": "int64"}]},
        {"field": "op", "type": "string"}]}
    row, envelope = row_schema(schema)
    assert envelope and [f["field"] for f in row["fields"]] == ["id", "price"]
    images = RowImages(row, envelope)
    commit = dt.datetime(2026, 1, 2, tzinfo=UTC)
    us = int(commit.timestamp()) * 1_000_000
    images.add(typed_block(schema, [
        ({"before": None, "after": {"id": 1, "price": b64(250)}, "source": {"ts_ms": 7}, "op": "c"}, "c", 10, us),
        ({"before": None, "after": {"id": 1, "price": None}, "source": {"ts_ms": 8}, "op": "u"}, "u", 11, us),
        ({"before": {"id": 1, "price": None}, "after": None, "source": {"ts_ms": 9}, "op": "d"}, "d", 12, 0)]))
    table = images.table()
    assert table.column_names == ["id", "price", *META_NAMES]
    assert table.schema.field("price").type == pa.decimal128(6, 2)
    assert table.to_pylist() == [
        {"id": 1, "price": decimal.Decimal("2.50"), "_op": "c", "_change_type": "insert", "_commit_version": 10,
         "_commit_timestamp": commit, "_source_ts_ms": 7},
        {"id": 1, "price": None, "_op": "u", "_change_type": "update_postimage", "_commit_version": 11,
         "_commit_timestamp": commit, "_source_ts_ms": 8},
        {"id": 1, "price": None, "_op": "d", "_change_type": "delete", "_commit_version": 12,
         "_commit_timestamp": dt.datetime(1970, 1, 1, tzinfo=UTC), "_source_ts_ms": 9},
    ]


def test_records_without_an_envelope_keep_their_fields():
    schema = {"type": "struct", "fields": [{"field": "status", "type": "string"},
                                           {"field": "event_count", "type": "int64", "optional": True}]}
    row, envelope = row_schema(schema)
    assert row is schema and not envelope
    images = RowImages(row, envelope)
    images.add(typed_block(schema, [({"status": "END", "event_count": 3}, None, 5, 0)]))
    assert images.table().to_pylist() == [{"status": "END", "event_count": 3, "_op": None, "_change_type": None,
                                           "_commit_version": 5, "_commit_timestamp": dt.datetime(1970, 1, 1, tzinfo=UTC),
                                           "_source_ts_ms": None}]
