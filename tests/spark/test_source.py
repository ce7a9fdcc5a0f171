"""The `headwater` source's `headwater.output` option: checked before a query starts; the blocks
layout carries typed blocks whose `_order` counts across a partition's batches."""

from __future__ import annotations

import pytest

from headwater.events.typed import BlockBuilder, from_ipc
from headwater.spark.source import HeadwaterDataSource, block_rows, output_layout

PROPS = {"connector.class": "postgres", "database.hostname": "h", "database.user": "u", "database.dbname": "d",
         "topic.prefix": "p"}


def test_layouts_are_checked_and_name_the_fix():
    assert output_layout({}) == "json" and output_layout({"headwater.output": "BLOCKS"}) == "blocks"
    with pytest.raises(ValueError, match=r"headwater.output='rows'.*json, blocks, table"):
        output_layout({"headwater.output": "rows"})
    with pytest.raises(ValueError, match="table_changes"):
        output_layout({"headwater.output": "table"})
    assert HeadwaterDataSource({**PROPS, "headwater.output": "blocks"}).schema() == "topic STRING, block BINARY"
    assert HeadwaterDataSource(PROPS).schema().startswith("topic STRING, key STRING, value STRING")
    with pytest.raises(ValueError, match="table_changes"):
        HeadwaterDataSource({**PROPS, "headwater.output": "table", "headwater.topic": "p.s.t",
                             "headwater.row.schema": "{}"}).schema()


def test_block_rows_count_the_order_across_batches():
    schema = {"type": "struct", "fields": [{"type": "int32", "field": "x"}]}
    batches = []
    for first in (0, 2):
        b = BlockBuilder()
        b.add("a", None, None, schema, {"x": first}, "c", 1, 1)
        b.add("b", None, None, schema, {"x": first + 1}, "c", 1, 1)
        batches.append(b.take())
    rows = [r for batch in block_rows(iter(batches)) for r in batch.to_pylist()]
    assert [r["topic"] for r in rows] == ["a", "b", "a", "b"]
    blocks = [from_ipc(r["block"]) for r in rows]
    assert [b.batch.column("_order").to_pylist() for b in blocks] == [[0], [1], [2], [3]]
    assert [b.batch.column("value").to_pylist() for b in blocks] == [[{"x": 0}], [{"x": 1}], [{"x": 2}], [{"x": 3}]]
