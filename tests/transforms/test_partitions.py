"""PartitionRouting: the documentation's test vector, Java hashCode values known independently, the
partition header, and what passes unchanged (Debezium's own partitions are compared in test_smts)."""

from __future__ import annotations

import decimal

import pytest

from headwater.config.errors import ConfigErrors
from headwater.transforms import parse_chain
from headwater.transforms.partitions import PARTITION_HEADER, java_hash, java_string_hash
from tests.transforms.support import Events, as_json, run


def routing(**options: str) -> dict[str, str]:
    return {"transforms": "p", "transforms.p.type": "io.debezium.transforms.partitions.PartitionRouting",
            **{f"transforms.p.{k.replace('_', '.')}": v for k, v in options.items()}}


@pytest.mark.parametrize(("text", "expected"), [("hammer", -1224598842), ("scooter", 1923926513),
                                                 ("car battery", 321238465), ("rocks", 108686766), ("hello", 99162322),
                                                 ("", 0), ("😀", 1772899)])
def test_java_string_hash_code(text, expected):
    assert java_string_hash(text) == expected


def test_java_hash_codes_of_other_types():
    assert java_hash(5_000_000_000, {"type": "int64"}) == 705032705  # Long.hashCode
    assert java_hash(-1, {"type": "int64"}) == 0
    assert java_hash(1.5, {"type": "double"}) == 1073217536  # Double.hashCode
    assert java_hash(True, {"type": "boolean"}) == 1231 and java_hash(False, {"type": "boolean"}) == 1237
    decimal_schema = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal"}
    assert java_hash(decimal.Decimal("1.50"), decimal_schema) == 31 * 150 + 2  # BigDecimal.hashCode
    assert java_hash(decimal.Decimal("-1.50"), decimal_schema) == 31 * -150 + 2


def test_spec_vector_java_hash():
    names = ["hammer", "hammer", "scooter", "car battery", "rocks", None]
    events: list[tuple[str | None, dict | None, dict | None]] = [("c", None, {"id": i, "name": n})
                                                                  for i, n in enumerate(names)]
    events.append(("d", {"id": 9, "name": "scooter"}, None))  # change.name reads before for a delete
    events.append((None, {"id": 9, "name": "scooter"}, None))  # a tombstone passes
    changes = Events()
    for op, before, after in events:
        changes.add(op, before, after, topic="t.parts")
    got = as_json(run(changes, routing(partition_payload_fields="change.name", partition_topic_num="2")))
    assert [e.get("headers", {}).get(PARTITION_HEADER) for e in got] == [0, 0, 1, 1, 0, None, 1, None]


def test_bad_options_are_refused():
    with pytest.raises(ConfigErrors, match="partition.topic.num"):
        parse_chain(routing(partition_payload_fields="after.name", partition_topic_num="0"))
    with pytest.raises(ConfigErrors, match="partition.payload.fields"):
        parse_chain(routing(partition_topic_num="2"))


def test_java_hash_codes_of_bytes_and_lists():
    assert java_hash(b"", {"type": "bytes"}) == 1  # ByteBuffer.hashCode
    assert java_hash(b"\x01\x02", {"type": "bytes"}) == 31 * (31 * 1 + 2) + 1
    assert java_hash(b"\xff", {"type": "bytes"}) == 31 - 1
    strings = {"type": "array", "items": {"type": "string"}}
    assert java_hash(["a", None], strings) == 31 * (31 * 1 + 97) + 0  # List.hashCode


def test_list_and_bytes_fields_route():
    from headwater.events.connect import BYTES, INT32, STRING, array, primitive
    from tests.transforms.support import row_schema

    row = row_schema("t.l", id=primitive(INT32), tags=array(primitive(STRING, optional=True)),
                     blob=primitive(BYTES, optional=True))
    changes = Events()
    for i, (tags, blob) in enumerate([(["a", None], "AQI="), (None, None)]):
        changes.add("c", None, {"id": i, "tags": tags, "blob": blob}, topic="t.l", row=row)
    got = as_json(run(changes, routing(partition_payload_fields="after.tags,after.blob", partition_topic_num="1000")))
    expected = (31 * (31 * 1 + 97) + (31 * (31 * 1 + 2) + 1)) % 1000
    assert [e.get("headers", {}).get(PARTITION_HEADER) for e in got] == [expected, None]


def test_hash_of_every_type_equals_debezium(pg_server):
    from tests.golden_support import assert_events_equal
    from tests.transforms.golden_transforms import ROOT, expected_events, run_scenario

    directory = ROOT / "partition_hashes"
    assert_events_equal(expected_events(directory), run_scenario(pg_server, directory), keep_headers=True)
