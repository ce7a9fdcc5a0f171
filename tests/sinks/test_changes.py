"""The reduction of a batch to the last change per key: each kind of event, keys of every shape."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from headwater.events.typed import BlockBuilder, TypedBlock
from headwater.sinks.changes import by_topic, reduce

ROW: dict[str, Any] = {"type": "struct", "optional": True, "fields": [
    {"field": "id", "type": "int32"}, {"field": "name", "type": "string", "optional": True}]}
WIDER = {**ROW, "fields": [*ROW["fields"], {"field": "extra", "type": "int64", "optional": True}]}
KEY = {"type": "struct", "fields": [{"field": "id", "type": "int32"}]}


def envelope(row: dict) -> dict:
    return {"type": "struct", "fields": [{**row, "field": "before"}, {**row, "field": "after"},
                                         {"field": "op", "type": "string"}]}


class Batch:
    """Events of a batch in order, as typed blocks."""

    def __init__(self) -> None:
        self.builder = BlockBuilder()

    def event(self, op: str | None, key: Any, before: dict | None = None, after: dict | None = None,
              row: dict = ROW, topic: str = "t", key_schema: dict | None = KEY) -> Batch:
        value = None if op is None else {"before": before, "after": after, "op": op}
        self.builder.add(topic, key_schema, key,
                         envelope(row), value, op, 1, 0)
        return self

    def tombstone(self, key: Any, key_schema: dict | None = KEY) -> Batch:
        return self.event(None, key, key_schema=key_schema)

    def blocks(self) -> list[TypedBlock]:
        return self.builder.take().blocks


def kept(blocks: list[TypedBlock]) -> list[tuple[int, str | None, Any]]:
    """(order, op, key) of the kept events, in batch order."""
    rows = []
    for b in reduce(blocks).blocks:
        for order, op, key in zip(b.batch.column("_order").to_pylist(), b.batch.column("op").to_pylist(),
                                  b.batch.column("key").to_pylist(), strict=True):
            rows.append((order, op, key))
    return sorted(rows, key=lambda r: r[0])


def k(i: int) -> dict:
    return {"id": i}


def r(i: int, name: str | None = "x") -> dict:
    return {"id": i, "name": name}


def test_the_last_change_per_key_wins() -> None:
    blocks = (Batch().event("r", k(1), after=r(1)).event("r", k(2), after=r(2)).event("u", k(1), r(1), r(1, "y"))
              .event("c", k(3), after=r(3)).event("u", k(1), r(1, "y"), r(1, "z")).blocks())
    assert kept(blocks) == [(1, "r", k(2)), (3, "c", k(3)), (4, "u", k(1))]
    (block,) = reduce(blocks).blocks
    assert block.batch.column("value").field("after").field("name").to_pylist() == ["x", "x", "z"]


def test_a_delete_that_comes_last_wins_and_its_tombstone_is_dropped() -> None:
    blocks = (Batch().event("c", k(1), after=r(1)).event("d", k(1), before=r(1)).tombstone(k(1))
              .event("c", k(2), after=r(2)).blocks())
    assert kept(blocks) == [(1, "d", k(1)), (3, "c", k(2))]


def test_a_tombstone_without_a_delete_before_it_is_a_delete() -> None:
    blocks = Batch().event("c", k(1), after=r(1)).tombstone(k(1)).tombstone(k(2)).blocks()
    assert kept(blocks) == [(1, None, k(1)), (2, None, k(2))]


def test_a_key_created_again_after_its_delete_is_the_create() -> None:
    blocks = (Batch().event("d", k(1), before=r(1)).tombstone(k(1)).event("c", k(1), after=r(1, "again"))
              .blocks())
    assert kept(blocks) == [(2, "c", k(1))]


def test_a_primary_key_change_deletes_the_old_key() -> None:
    """Debezium's key change: a delete of the old key, its tombstone, a create of the new key."""
    blocks = (Batch().event("c", k(1), after=r(1)).event("d", k(1), before=r(1)).tombstone(k(1))
              .event("c", k(10), after=r(10)).blocks())
    assert kept(blocks) == [(1, "d", k(1)), (3, "c", k(10))]


def test_a_truncate_drops_everything_before_it_and_is_kept() -> None:
    blocks = (Batch().event("c", k(1), after=r(1)).event("c", k(2), after=r(2)).event("t", None)
              .event("c", k(2), after=r(2, "after")).event("u", k(2), r(2), r(2, "later")).blocks())
    changes = reduce(blocks)
    assert changes.truncated
    assert kept(blocks) == [(2, "t", None), (4, "u", k(2))]
    assert not reduce(Batch().event("c", k(1), after=r(1)).blocks()).truncated


def test_only_the_last_of_several_truncates_is_kept() -> None:
    blocks = Batch().event("t", None).event("c", k(1), after=r(1)).event("t", None).event("c", k(2), after=r(2)).blocks()
    assert kept(blocks) == [(2, "t", None), (3, "c", k(2))]


def test_events_without_a_key_are_all_kept() -> None:
    blocks = (Batch().event("c", None, after=r(1), key_schema=None).event("c", None, after=r(1), key_schema=None)
              .event("d", None, before=r(1), key_schema=None).blocks())
    assert kept(blocks) == [(0, "c", None), (1, "c", None), (2, "d", None)]


def test_keys_compare_across_blocks_of_other_value_schemas() -> None:
    """An added column starts a new block; the key's last change may be in either."""
    blocks = (Batch().event("c", k(1), after=r(1)).event("c", k(2), after=r(2))
              .event("u", k(1), r(1), {**r(1), "extra": 7}, row=WIDER).event("u", k(2), r(2), r(2, "old schema"))
              .blocks())
    assert len(blocks) == 2
    changes = reduce(blocks)
    assert [len(b) for b in changes.blocks] == [1, 1]
    assert changes.blocks[0].batch.column("value").field("after").to_pylist() == [r(2, "old schema")]
    assert changes.blocks[1].batch.column("value").field("after").to_pylist() == [{**r(1), "extra": 7}]


def test_composite_keys_compare_by_every_field() -> None:
    pair = {"type": "struct", "fields": [{"field": "a", "type": "string"}, {"field": "b", "type": "int64"}]}
    blocks = (Batch().event("c", {"a": "x", "b": 1}, after=r(1), key_schema=pair)
              .event("c", {"a": "x", "b": 2}, after=r(2), key_schema=pair)
              .event("u", {"a": "x", "b": 1}, r(1), r(1, "y"), key_schema=pair)
              .event("c", {"a": "y", "b": 1}, after=r(3), key_schema=pair).blocks())
    assert [o for o, _, _ in kept(blocks)] == [1, 2, 3]


def test_keys_given_per_block_replace_the_key_column() -> None:
    """A sink whose primary key is a value field: `name` here."""
    blocks = (Batch().event("c", k(1), after=r(1, "a")).event("c", k(2), after=r(2, "a"))
              .event("c", k(3), after=r(3, "b")).blocks())
    names = [b.batch.column("value").field("after").field("name") for b in blocks]
    changes = reduce(blocks, keys=names)
    assert changes.blocks[0].batch.column("_order").to_pylist() == [1, 2]


def test_blocks_are_kept_whole_when_nothing_drops_and_left_out_when_all_do() -> None:
    blocks = Batch().event("c", k(1), after=r(1)).event("u", k(1), r(1), {**r(1), "extra": 1}, row=WIDER).blocks()
    changes = reduce(blocks)
    assert len(changes.blocks) == 1 and changes.blocks[0] is blocks[1]
    assert len(changes) == 1


def test_by_topic_groups_blocks() -> None:
    blocks = (Batch().event("c", k(1), after=r(1), topic="a").event("c", k(1), after=r(1), topic="b")
              .event("c", k(2), after=r(2), row=WIDER, topic="a").blocks())
    groups = by_topic(blocks)
    assert list(groups) == ["a", "b"] and [len(v) for v in groups.values()] == [2, 1]


def test_a_large_batch_reduces_column_wise() -> None:
    """100k updates over 1,000 keys: the last per key, in commit order."""
    b = Batch()
    for i in range(100_000):
        b.event("u", k(i % 1000), None, r(i % 1000, str(i)))
    changes = reduce(b.blocks())
    (block,) = changes.blocks
    assert block.batch.column("_order").to_pylist() == list(range(99_000, 100_000))
    assert block.batch.column("key").type == pa.struct([("id", pa.int32())])
