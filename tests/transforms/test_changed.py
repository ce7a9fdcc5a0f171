"""ExtractChangedRecordState: the documentation's test vector (Debezium's own headers are compared in
test_smts)."""

from __future__ import annotations

from headwater.events.connect import BYTES, INT32, STRING, primitive
from tests.transforms.support import Events, as_json, row_schema, run

ROW = row_schema("t.t", id=primitive(INT32), name=primitive(STRING, optional=True),
                 email=primitive(STRING, optional=True), blob=primitive(BYTES, optional=True))


def changed(props: dict[str, str], events: list[tuple[str | None, dict | None, dict | None]]) -> list[dict]:
    changes = Events()
    for op, before, after in events:
        changes.add(op, before, after, topic="t.t", row=ROW)
    return as_json(run(changes, props))
PROPS = {"transforms": "c", "transforms.c.type": "io.debezium.transforms.ExtractChangedRecordState",
         "transforms.c.header.changed.name": "Changed", "transforms.c.header.unchanged.name": "Unchanged"}


def test_spec_vector():
    before = {"id": 1, "name": "a", "email": "x", "blob": None}
    after = {"id": 1, "name": "b", "email": "x", "blob": None}
    [update, insert] = changed(PROPS, [("u", before, after), ("c", None, after)])
    assert update["headers"] == {"Changed": ["name"], "Unchanged": ["id", "email", "blob"]}
    assert update["value"]["after"] == after  # the value is unchanged
    assert insert["headers"] == {"Changed": [], "Unchanged": []}  # as Debezium 3.6.3 does


def test_bytes_by_content_and_only_named_headers():
    before = {"id": 1, "name": None, "email": "x", "blob": "AQI="}
    props = {k: v for k, v in PROPS.items() if "unchanged" not in k}
    [same, other, tombstone] = changed(props, [("u", before, dict(before)), ("u", before, {**before, "blob": "AQM="}),
                                               (None, before, None)])
    assert same["headers"] == {"Changed": []} and other["headers"] == {"Changed": ["blob"]}
    assert "headers" not in tombstone
