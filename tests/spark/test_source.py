"""The `headwater` source's `headwater.output` option: checked before a query starts; the blocks
layout carries typed blocks whose `_order` counts across a partition's batches; what a task worker
imports to unpickle the reader."""

from __future__ import annotations

import pytest

from headwater.events.typed import BlockBuilder, from_ipc
from headwater.spark.datasource import HeadwaterDataSource, output_layout
from headwater.spark.source import block_rows

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


def test_the_light_data_source_module_keeps_the_schemas_and_imports_no_connector():
    """`headwater.spark.datasource` (what Spark's creation step unpickles) copies the schemas and the sink
    option; they stay equal to the originals, and it imports no connector, NumPy or Arrow."""
    import subprocess
    import sys

    from headwater.events.batch import SPARK_SCHEMA_DDL
    from headwater.spark import filesink
    from headwater.spark import layouts as datasource

    assert datasource.EVENTS_SCHEMA_DDL == SPARK_SCHEMA_DDL
    assert datasource.FILES_SCHEMA_DDL == filesink.WRITTEN_SCHEMA_DDL
    assert datasource.SINK_OPTION == filesink.SINK_OPTION
    heavy = ("numpy", "pyarrow", "headwater.connectors.registry", "headwater.spark.source", "headwater.transforms")
    code = ("import sys\n"
            "from headwater.spark.datasource import HeadwaterDataSource\n"
            f"HeadwaterDataSource({PROPS!r}).schema()\n"
            f"print(*[m for m in {heavy!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == []


def test_a_task_worker_unpickling_the_reader_imports_none_of_the_drivers_lifecycle():
    """Spark's task workers unpickle the stream reader for every task: the connector's start-up and
    phases (snapshot, stream, incremental snapshots) run on the driver alone."""
    import pickle
    import subprocess
    import sys

    from headwater.spark.source import HeadwaterStreamReader

    reader = pickle.dumps(HeadwaterStreamReader(PROPS))
    heavy = ("headwater.engine", "headwater.connectors.common.phases", "headwater.connectors.common.incremental")
    code = ("import pickle, sys\n"
            "reader = pickle.loads(sys.stdin.buffer.read())\n"
            f"print(type(reader).__name__, *[m for m in {heavy!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], input=reader, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.decode().split() == ["HeadwaterStreamReader"]


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
