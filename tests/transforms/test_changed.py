"""ExtractChangedRecordState: the documentation's test vector (Debezium's own headers are compared in
test_smts)."""

from __future__ import annotations

from tests.transforms.envelopes import block, field, run

ROW = [field("id", "int32", False), field("name", "string"), field("email", "string"), field("blob", "bytes")]
PROPS = {"transforms": "c", "transforms.c.type": "io.debezium.transforms.ExtractChangedRecordState",
         "transforms.c.header.changed.name": "Changed", "transforms.c.header.unchanged.name": "Unchanged"}


def test_spec_vector():
    before = {"id": 1, "name": "a", "email": "x", "blob": None}
    after = {"id": 1, "name": "b", "email": "x", "blob": None}
    [update, insert] = run(PROPS, block("t.t", ROW, [("u", before, after), ("c", None, after)]))
    assert update["headers"] == {"Changed": ["name"], "Unchanged": ["id", "email", "blob"]}
    assert update["value"]["after"] == after  # the value is unchanged
    assert insert["headers"] == {"Changed": [], "Unchanged": []}  # as Debezium 3.6.3 does


def test_bytes_never_equal_and_only_named_headers():
    before = {"id": 1, "name": None, "email": "x", "blob": "AQI="}
    props = {k: v for k, v in PROPS.items() if "unchanged" not in k}
    [update, tombstone] = run(props, block("t.t", ROW, [("u", before, dict(before)), (None, before, None)]))
    assert update["headers"] == {"Changed": ["blob"]}  # a Java byte array equals only itself
    assert tombstone["headers"] == {}
