"""The facts of pieces of one batch merge into the batch's: counts add up, a transaction that goes on
from one piece into the next counts once, places follow the pieces' order, the tables a blocking snapshot's
units abandoned are kept; and they survive JSON."""

from __future__ import annotations

import json

from headwater.events.typed import BlockBuilder
from headwater.observe.facts import BatchFacts, batch_facts, merge

SCHEMA = {"type": "struct", "fields": [{"type": "int32", "field": "id"},
                                       {"type": "struct", "field": "source", "fields": [
                                           {"type": "string", "field": "schema"}, {"type": "string", "field": "table"},
                                           {"type": "string", "field": "snapshot", "optional": True}]}]}


def _piece(rows: list[tuple[str, str, int, str | None]]) -> BatchFacts:
    """The facts of typed events (topic, op, commit version, source.snapshot)."""
    b = BlockBuilder()
    for i, (topic, op, version, snapshot) in enumerate(rows):
        b.add(topic, None, None, SCHEMA, {"id": i, "source": {"schema": "s", "table": topic, "snapshot": snapshot}},
              op, version, 0)
    return batch_facts(b.take())


def test_pieces_merge_into_the_batch():
    whole = [("a", "c", 1, None), ("a", "u", 2, None), ("b", "d", 2, None), ("b", "c", 3, None),
             ("a", "c", 3, None), ("a", "r", 4, "last_in_data_collection")]
    one = _piece(whole)
    merged = merge([_piece(whole[:3]), _piece(whole[3:])])  # no transaction spans the two pieces
    assert merged.ops == one.ops == {"c": 3, "u": 1, "d": 1, "r": 1}
    assert merged.transactions == one.transactions == 4
    assert (merged.first_version, merged.last_version) == (1, 4)
    split_txn = merge([_piece(whole[:2]), _piece(whole[2:])])  # transaction 2 goes on into the second piece
    assert split_txn.transactions == 4
    assert [(t, n) for _, t, _, n in merged.topics] == [("a", 4), ("b", 2)]
    assert merged.table_ends == [(5, "s.a")] and merged.size == 6
    assert (merged.last_topic, merged.last_op) == ("a", "r") and merged.last_source["table"] == "a"
    assert BatchFacts.from_json(json.loads(json.dumps(merged.to_json()))) == merged


def test_the_tables_abandoned_are_kept_through_a_merge_and_json():
    merged = merge([_piece([("a", "r", 1, "first")]), BatchFacts(abandoned=["s.b"]), BatchFacts(abandoned=["s.c"])])
    assert merged.abandoned == ["s.b", "s.c"] and merged.ops == {"r": 1}
    again = BatchFacts.from_json(json.loads(json.dumps(merged.to_json())))
    assert again == merged
    old = {k: v for k, v in merged.to_json().items() if k != "abandoned"}  # a facts row of an older version
    assert BatchFacts.from_json(old).abandoned == []
