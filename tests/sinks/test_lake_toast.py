"""Unchanged TOAST in the `delta` and `iceberg` sinks on a real PostgreSQL: an update under REPLICA
IDENTITY DEFAULT that leaves a TOASTed text, bytea and text[] column unchanged gets Debezium's
`__debezium_unavailable_value`; a merged table keeps the value it holds (or the value earlier in the
same batch), the change log holds the placeholder."""

from __future__ import annotations

import polars as pl
import pyarrow.compute as pc
import pytest

from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from headwater.events.typed import TypedBlock
from headwater.sinks.delta import DeltaSink
from headwater.sinks.iceberg import IcebergSink, open_catalog
from headwater.sinks.lake import batch_changes, unavailable
from headwater.sinks.lake_config import DeltaOptions, IcebergOptions
from tests.sinks.lake_support import normal

SCHEMA = """
CREATE FUNCTION big(seed int) RETURNS text LANGUAGE sql  -- 6400 characters
  AS $$ SELECT string_agg(md5(seed || '.' || g), '') FROM generate_series(1, 200) g $$;
CREATE TABLE docs (id int PRIMARY KEY, n int, body text, blob bytea, tags text[]);
ALTER TABLE docs ALTER COLUMN body SET STORAGE EXTERNAL, ALTER COLUMN blob SET STORAGE EXTERNAL,
                 ALTER COLUMN tags SET STORAGE EXTERNAL;
INSERT INTO docs SELECT i, 0, big(i), convert_to(big(-i), 'UTF8'), ARRAY[big(i + 100)] FROM generate_series(1, 3) i;
"""
PHASES = [
    "UPDATE docs SET n = 1 WHERE id IN (1, 2)",  # the values are older than the batch: the table's stay
    """
    INSERT INTO docs VALUES (4, 0, big(4), convert_to(big(-4), 'UTF8'), ARRAY[big(104)]);
    UPDATE docs SET n = 2 WHERE id = 4;
    UPDATE docs SET body = big(20) WHERE id = 2;
    UPDATE docs SET n = 3 WHERE id = 2;
    UPDATE docs SET n = 3, tags = ARRAY['short'] WHERE id = 3;
    """,  # the values come earlier in the batch
    "UPDATE docs SET n = 5",
    "ALTER TABLE docs ADD COLUMN extra text; UPDATE docs SET extra = 'x' WHERE id = 1",  # with a new column
]


def _batches(pg_server, pg_db: str, placeholder: str | None = None) -> list[list[TypedBlock]]:
    pg_server.execute(SCHEMA, pg_db)
    props = {"connector.class": "postgres", **pg_server.connector_properties(pg_db), "topic.prefix": "toast",
             "slot.name": f"{pg_db}_toast", "table.include.list": "public.docs"}
    if placeholder is not None:
        props["unavailable.value.placeholder"] = placeholder
    engine = Engine(validate_connector(props), output="typed", max_events=1000)
    batches = []
    try:
        for phase in ["", *PHASES]:
            if phase:
                pg_server.execute(phase, pg_db)
            batches += [list(batch) for batch in engine.blocks(once=True)]
    finally:
        engine.close()
    return batches


def _source(pg_server, pg_db: str) -> list[dict]:
    conn = pg_server.connect(pg_db)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT * FROM docs ORDER BY id")
            names = [d[0] for d in cur.description]
            return [{k: normal(v) for k, v in zip(names, row, strict=True)} for row in cur.fetchall()]
    finally:
        conn.close()


def _placeholders(batches: list[list[TypedBlock]]) -> dict[str, int]:
    """How many cells of each column hold the placeholder in the batches' change events."""
    counts = dict.fromkeys(["body", "blob", "tags"], 0)
    for blocks in batches:
        for changes in batch_changes(blocks, reduced=False).values():
            for column in counts:
                mask = unavailable(changes.rows.column(column))
                assert mask is not None
                counts[column] += pc.sum(mask).as_py() or 0
    return counts


@pytest.mark.parametrize("kind", ["delta", "iceberg"])
def test_merge_keeps_the_value_of_unchanged_toast(pg_server, pg_db, tmp_path, kind):
    batches = _batches(pg_server, pg_db)
    assert len(batches) == 1 + len(PHASES)
    # the events hold the placeholder: ids 1 and 2; then 4, 2 (twice but for body) and 3 (but for
    # tags); then 1 to 4 (but 3 for its short tags); then 1
    assert _placeholders(batches) == {"body": 2 + 3 + 4 + 1, "blob": 2 + 4 + 4 + 1, "tags": 2 + 3 + 3 + 1}
    if kind == "delta":
        sink: DeltaSink | IcebergSink = DeltaSink(DeltaOptions(str(tmp_path / "lake"), "${source.table}"), "toast")
    else:
        sink = IcebergSink(IcebergOptions(str(tmp_path / "warehouse"), table_name_format="${source.table}"), "toast")
    for batch_id, blocks in enumerate(batches):
        sink.write(blocks, batch_id)
        if batch_id in (1, 2, 3):
            assert _lake(sink, tmp_path) != _source(pg_server, pg_db)  # the source moved on since
    assert _lake(sink, tmp_path) == _source(pg_server, pg_db)


def test_a_placeholder_of_the_connector_s_own(pg_server, pg_db, tmp_path):
    batches = _batches(pg_server, pg_db, placeholder="~unchanged~")
    for placeholder, equal in [("~unchanged~", True), (DeltaOptions("").placeholder, False)]:
        root = tmp_path / placeholder
        sink = DeltaSink(DeltaOptions(str(root), "${source.table}", placeholder=placeholder), "toast")
        for batch_id, blocks in enumerate(batches):
            sink.write(blocks, batch_id)
        rows = sorted(pl.read_delta(str(root / "docs")).to_dicts(), key=lambda r: r["id"])
        assert ([{k: normal(v) for k, v in row.items()} for row in rows] == _source(pg_server, pg_db)) is equal
        assert any(row["body"] == "~unchanged~" for row in rows) is not equal


def test_changelog_writes_the_placeholder(pg_server, pg_db, tmp_path):
    batches = _batches(pg_server, pg_db)
    sink = DeltaSink(DeltaOptions(str(tmp_path / "log"), "${source.table}", mode="changelog"), "toast")
    for batch_id, blocks in enumerate(batches):
        sink.write(blocks, batch_id)
    log = pl.read_delta(str(tmp_path / "log" / "docs")).sort("_batch_id", "_batch_order")
    first = log.filter(pl.col("_batch_id") == 1)
    assert first["body"].to_list() == ["__debezium_unavailable_value"] * 2
    assert first["blob"].to_list() == [b"__debezium_unavailable_value"] * 2
    assert first["tags"].to_list() == [["__debezium_unavailable_value"]] * 2


def _lake(sink: DeltaSink | IcebergSink, tmp_path) -> list[dict]:
    if isinstance(sink, DeltaSink):
        rows = pl.read_delta(str(tmp_path / "lake" / "docs")).to_dicts()
    else:
        rows = open_catalog(sink.options).load_table("default.docs").scan().to_arrow().to_pylist()
    return sorted(({k: normal(v) for k, v in row.items()} for row in rows), key=lambda r: r["id"])
