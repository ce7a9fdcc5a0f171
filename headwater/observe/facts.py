"""The few columns of a batch the metrics and notifications need, read column-wise.

`batch_facts(batch)` gives one Arrow table, one row per event in the batch's order: `topic`, `op`,
and from the value's `source` block `ts_ms`, the transaction (`txId` on PostgreSQL, `gtid` on the
binlog connectors), the `snapshot` marker and the table (`schema.table`, or `db.table`). Typed
blocks are read through their struct columns; JSON rows through regular expressions over the
value text (Debezium's `source` block holds no nested object), never by parsing each event.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.batch import Events
from headwater.events.typed import TypedEvents

FACTS = pa.schema([
    ("topic", pa.string()), ("op", pa.string()), ("ts_ms", pa.int64()), ("tx", pa.string()),
    ("marker", pa.string()), ("table", pa.string()),
])

_SOURCE = r'"source":\{[^}]*'


def batch_facts(batch: Events | TypedEvents) -> pa.Table:
    """The batch's facts (see the module's docstring), in the batch's event order."""
    if isinstance(batch, TypedEvents):
        tables = [_block_facts(b.topic, b.batch) for b in batch]
        if not tables:
            return FACTS.empty_table()
        return pa.concat_tables(tables).sort_by("_order").drop_columns("_order")
    return _json_facts(batch.to_arrow())


def _nulls(n: int, t: pa.DataType = pa.string()) -> pa.Array:
    return pa.nulls(n, t)


def _field(struct: pa.Array, name: str) -> pa.Array | None:
    if not pa.types.is_struct(struct.type) or struct.type.get_field_index(name) < 0:
        return None
    return pc.struct_field(struct, name)


def _table_names(first: pa.Array | None, table: pa.Array | None, n: int) -> pa.Array:
    if table is None:
        return _nulls(n)
    if first is None:
        return table.cast(pa.string())
    return pc.binary_join_element_wise(first.cast(pa.string()), table.cast(pa.string()), ".")


def _block_facts(topic: str, b: pa.RecordBatch) -> pa.Table:
    n = b.num_rows
    value = b.column("value")
    source = _field(value, "source")
    if source is None:
        ts = tx = marker = None
        table = _nulls(n)
    else:
        ts = _field(source, "ts_ms")
        tx = _field(source, "txId")
        if tx is None:
            tx = _field(source, "gtid")
        marker = _field(source, "snapshot")
        first = _field(source, "schema")
        table = _table_names(first if first is not None else _field(source, "db"), _field(source, "table"), n)
    return pa.table({
        "topic": pa.array([topic] * n, pa.string()),
        "op": b.column("op").cast(pa.string()),
        "ts_ms": ts.cast(pa.int64()) if ts is not None else _nulls(n, pa.int64()),
        "tx": tx.cast(pa.string()) if tx is not None else _nulls(n),
        "marker": marker.cast(pa.string()) if marker is not None else _nulls(n),
        "table": table,
        "_order": b.column("_order"),
    })


def _extract(values: pa.Array, pattern: str) -> pa.Array:
    """The one group of `pattern` in each text, null where it does not match."""
    found = pc.extract_regex(values, pattern)
    return pc.if_else(found.is_valid(), pc.struct_field(found, 0), pa.scalar(None, pa.string()))


def _json_facts(b: pa.RecordBatch) -> pa.Table:
    value = b.column("value")
    tx = _extract(value, _SOURCE + r'"txId":(?P<v>\d+)')
    gtid = _extract(value, _SOURCE + r'"gtid":"(?P<v>[^"]*)"')
    first = _extract(value, _SOURCE + r'"schema":"(?P<v>[^"]*)"')
    db = _extract(value, _SOURCE + r'"db":"(?P<v>[^"]*)"')
    table = _extract(value, _SOURCE + r'"table":"(?P<v>[^"]*)"')
    return pa.table({
        "topic": b.column("topic"),
        "op": b.column("op"),
        "ts_ms": _extract(value, _SOURCE + r'"ts_ms":(?P<v>-?\d+)').cast(pa.int64()),
        "tx": pc.coalesce(tx, gtid),
        "marker": _extract(value, _SOURCE + r'"snapshot":"(?P<v>[^"]*)"'),
        "table": pc.binary_join_element_wise(pc.coalesce(first, db), table, "."),
    })
