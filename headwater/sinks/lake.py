"""What the Delta Lake and Iceberg sinks share: a batch's typed blocks as one table of row changes per
captured table, and the name of each target table.

`batch_changes` gathers the events of a batch (typed blocks, `events.typed`, whose `_order` gives
each event's place in the batch) into one `TopicChanges` per topic whose value is a change-event
envelope: the row images (`events.arrow.RowImages`: `after`, or `before` for a delete, as typed
columns, plus `_op`, `_change_type`, `_commit_version`, `_commit_timestamp`, `_source_ts_ms`) in
event order, with the columns of every value schema the batch holds for the topic (a column added
mid-batch is null in the rows before it). A truncate is a row too, `_op` `t` and an all-null image.
With `reduced`, the events are first reduced to the last change per key (`sinks.changes.reduce`:
a truncate drops what came before it and is kept first; a primary-key change is a delete of the
old key and a create of the new one), and `TopicChanges.upserts_and_deletes` splits them into the
rows to upsert and the keys to delete. Other topics (transaction metadata, heartbeats, logical
messages) and tombstones have no rows.

Unchanged TOAST: PostgreSQL does not send a TOASTed value an update leaves unchanged (under REPLICA
IDENTITY DEFAULT), and Debezium writes `__debezium_unavailable_value` in its place (`unavailable`
finds it: the text in a text column, its bytes in a binary one, a one-element text or bytes array).
Reduced changes fill such a cell with the same key's last value in the batch that is not the
placeholder (the insert or update before it); the cells left (the value is older than the batch)
are in `TopicChanges.unavailable`, for the sink to keep the target row's value. Other types (int,
uuid and date arrays, hstore) and the change log keep the placeholder as it is.

`table_name` expands a `table.name.format` such as `${topic}` or `${source.schema}_${source.table}`
from the topic and its events' `source` block.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from headwater.connectors.postgres.types import DEFAULT_PLACEHOLDER, TypeSettings
from headwater.events.arrays import int64_array, lit, string_array
from headwater.events.arrow import META, RowImages, arrow_type, row_schema
from headwater.events.typed import TypedBlock
from headwater.sinks.changes import by_topic, reduce

CHANGE_OPS = ("c", "r", "u", "d", "t")  # the events that change a table (a truncate's row is all nulls)
UPSERT_OPS = ("c", "r", "u")
CHANGE_COLUMNS = [name for name, _ in META]  # the change columns RowImages adds after the row's
_TEMPLATE = re.compile(r"\$\{(topic|source\.[A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class TopicChanges:
    """The row changes of one topic in one batch (see the module's docstring)."""

    topic: str
    key: list[str]  # the key's columns (the fields of the key schema); empty for a table without key
    rows: pa.Table  # row images and CHANGE_COLUMNS, in event order; a truncate's row image is all nulls
    truncated: bool  # whether the rows hold a truncate
    source: dict[str, str]  # the `source` block's fields of the topic's first event (for names)
    # reduced changes: per column, the rows whose value is unchanged TOAST older than the batch
    unavailable: dict[str, pa.Array] = field(default_factory=dict)

    def upserts_and_deletes(self) -> tuple[pa.Table, pa.Table, dict[str, pa.Array]]:
        """The rows to upsert (row columns only) and the keys to delete, of reduced changes, and per
        column the upserted rows that hold unchanged TOAST (the target's value to keep)."""
        if not self.key:
            raise ValueError(f"topic {self.topic}: the table has no primary key, so its changes cannot be "
                             "merged by key (use the sink's mode: changelog)")
        op = self.rows.column("_op")
        upsert = pc.is_in(op, value_set=string_array(list(UPSERT_OPS)))
        upserts = self.rows.filter(upsert).drop_columns(CHANGE_COLUMNS)
        deletes = self.rows.filter(pc.fill_null(pc.equal(op, lit("d")), lit(False))).select(self.key)
        return upserts, deletes, {c: m.filter(upsert) for c, m in self.unavailable.items()}

    def changelog(self, batch_id: int, first: int = 0) -> pa.Table:
        """The rows as change-log rows: `_batch_id` and `_batch_order` (the change's place in the batch,
        counted from `first`) after the row's and the change columns, so that readers can order the
        changes of a commit."""
        n = len(self.rows)
        return self.rows.append_column("_batch_id", int64_array(np.full(n, batch_id))).append_column(
            "_batch_order", int64_array(np.arange(first, first + n)))


@dataclass(frozen=True)
class DataFile:
    """A parquet file of change-log rows a Spark task wrote for one table, for the driver to commit."""

    table: str  # the table's location (Delta) or identifier (Iceberg)
    path: str  # Delta: relative to the table's location; Iceberg: the full path
    size: int
    rows: int
    schema: pa.Schema

    def record(self) -> dict[str, object]:
        """The file as a row of `DATA_FILES` (what a task gives the driver)."""
        return {"table": self.table, "path": self.path, "size": self.size, "rows": self.rows,
                "schema": self.schema.serialize().to_pybytes()}

    @classmethod
    def of(cls, record: dict[str, object]) -> DataFile:
        """The file of a row of `DATA_FILES`."""
        schema = pa.ipc.read_schema(pa.py_buffer(record["schema"]))  # type: ignore[arg-type]
        return cls(str(record["table"]), str(record["path"]), int(record["size"]),  # type: ignore[call-overload]
                   int(record["rows"]), schema)  # type: ignore[call-overload]


DATA_FILES = pa.schema([("table", pa.string()), ("path", pa.string()), ("size", pa.int64()), ("rows", pa.int64()),
                        ("schema", pa.binary())])


def batch_changes(blocks: Iterable[TypedBlock], reduced: bool, placeholder: str = DEFAULT_PLACEHOLDER
                  ) -> dict[str, TopicChanges]:
    """The row changes of each topic of a batch whose values are change-event envelopes, reduced to
    the last change per key if `reduced` (with unchanged TOAST, written as `placeholder`, filled in
    from the batch where it can be: see the module's docstring). A null stays null even where the
    column has a default (the table holds what the source row holds)."""
    envelopes = [b for b in blocks if b.value_schema is not None and row_schema(b.value_schema)[1]]
    out = {}
    for topic, group in by_topic(envelopes).items():
        kept = reduce(group).blocks if reduced else group
        if not kept:
            continue
        changes = _topic_changes(topic, kept)
        if reduced and changes.key:
            masks = {c: m for c in changes.rows.column_names if c not in CHANGE_COLUMNS
                     if (m := unavailable(changes.rows.column(c), placeholder)) is not None and pc.any(m).as_py()}
            if masks:
                _fill_from_batch(changes, _topic_changes(topic, group).rows, masks, placeholder)
        out[topic] = changes
    return out


def unavailable(column: pa.ChunkedArray | pa.Array, placeholder: str = DEFAULT_PLACEHOLDER) -> pa.Array | None:
    """Where a row image's column holds Debezium's unchanged-TOAST `placeholder` (see the module's
    docstring), None for a type that cannot hold it."""
    settings = TypeSettings(placeholder=placeholder)

    def equal(values: pa.Array | pa.ChunkedArray, t: pa.DataType) -> pa.Array | None:
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            return pc.equal(values, pa.scalar(settings.placeholder_text, t))
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return pc.equal(values, pa.scalar(settings.placeholder_bytes, t))
        return None

    t = column.type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        single = pc.if_else(pc.equal(pc.list_value_length(column), 1), column, pa.scalar(None, t))
        mask = equal(pc.list_element(single, 0), t.value_type)
    else:
        mask = equal(column, t)
    if mask is None:
        return None
    mask = pc.fill_null(mask, lit(False))
    return mask.combine_chunks() if isinstance(mask, pa.ChunkedArray) else mask


def fill_column(rows: pa.Table, column: str, mask: pa.Array, key: list[str], previous: pa.Table
                ) -> tuple[pa.Table, pa.Array]:
    """`rows` with the cells of `column` that `mask` marks replaced by the value of the row with the
    same key in `previous` (one row per key, with the key's columns and `column`) where it has one;
    and the mask of the cells it has none for."""
    left = rows.select(key).append_column("__row", int64_array(np.arange(len(rows))))
    right = previous.select(key).cast(left.select(key).schema).append_column(
        "__previous", int64_array(np.arange(len(previous))))
    joined = left.join(right, keys=key, join_type="left outer").sort_by("__row")
    at = joined.column("__previous").combine_chunks()
    found = pc.is_valid(at)
    values = previous.column(column).cast(rows.schema.field(column).type).take(at)
    i = rows.schema.get_field_index(column)
    filled = pc.if_else(pc.and_(mask, found), values, rows.column(column))
    return rows.set_column(i, rows.schema.field(i), filled), pc.and_(mask, pc.invert(found))


def _fill_from_batch(changes: TopicChanges, every: pa.Table, masks: dict[str, pa.Array], placeholder: str) -> None:
    """Fill the unchanged-TOAST cells of the reduced `changes` from the same key's last other value
    among `every` change of the batch; keep the masks of the cells left in `changes.unavailable`."""
    upsert = pc.is_in(every.column("_op"), value_set=string_array(list(UPSERT_OPS)))
    rows = changes.rows
    for column, mask in masks.items():
        placeholders = unavailable(every.column(column), placeholder)
        assert placeholders is not None  # the column's type holds the placeholder in `changes.rows`
        known = pc.and_(upsert, pc.invert(placeholders))
        candidates = every.select([*changes.key, column]).append_column(
            "__row", int64_array(np.arange(len(every)))).filter(known)
        last = candidates.group_by(changes.key).aggregate([("__row", "max")]).column("__row_max")
        previous = every.select([*changes.key, column]).take(last)
        rows, left = fill_column(rows, column, mask, changes.key, previous)
        if pc.any(left).as_py():
            changes.unavailable[column] = left
    changes.rows = rows


def _topic_changes(topic: str, blocks: list[TypedBlock]) -> TopicChanges:
    columns: dict[str, tuple[str, pa.DataType, Callable]] = {}
    for block in blocks:
        after, _ = row_schema(block.value_schema or {})
        for f in after.get("fields", []):
            if f["field"] not in columns:
                columns[f["field"]] = (f["field"], *arrow_type(f))
    images = RowImages({}, True, list(columns.values()), replace_null=False)
    for block in blocks:
        images.add(block, CHANGE_OPS)
    rows = images.table()
    truncated = bool(pc.any(pc.equal(rows.column("_op"), lit("t"))).as_py())
    key_schema = blocks[-1].key_schema
    key = [f["field"] for f in key_schema.get("fields", [])] if key_schema else []
    return TopicChanges(topic, key, rows, truncated, _source_fields(blocks[0]))


def _source_fields(block: TypedBlock) -> dict[str, str]:
    value = block.batch.column("value")
    if not len(value) or "source" not in [f.name for f in value.type]:
        return {}
    source = value.field("source")
    first = source[0].as_py() or {}
    return {k: str(v) for k, v in first.items() if v is not None}


def table_name(template: str, changes: TopicChanges) -> str:
    """`template` with `${topic}` and `${source.FIELD}` (a field of the events' `source` block) filled in."""

    def sub(m: re.Match[str]) -> str:
        name = m.group(1)
        if name == "topic":
            return changes.topic
        value = changes.source.get(name.removeprefix("source."))
        if value is None:
            raise ValueError(f"topic {changes.topic}: table.name.format {template!r} names ${{{name}}}, "
                             "which its events' source block does not have")
        return value

    return _TEMPLATE.sub(sub, template)


def safe_name(name: str, allowed: str = "._-") -> str:
    """A name with every character other than letters, digits and `allowed` replaced by `_`."""
    return "".join(c if c.isalnum() or c in allowed else "_" for c in name)


def check_template(template: str) -> str | None:
    """What is wrong with a `table.name.format`, or None."""
    rest = _TEMPLATE.sub("", template)
    if "${" in rest:
        return "only ${topic} and ${source.FIELD} (db, schema, table, ...) can be filled in"
    return None


def cast_types(table: pa.Table, lake_type: Callable[[pa.DataType], pa.DataType]) -> pa.Table:
    """`table` with each column cast to the type `lake_type` gives for its type (nested types too)."""
    schema = pa.schema([pa.field(f.name, nested_type(f.type, lake_type)) for f in table.schema])
    return table if schema == table.schema else table.cast(schema)


def nested_type(t: pa.DataType, lake_type: Callable[[pa.DataType], pa.DataType]) -> pa.DataType:
    """`lake_type` applied to a type and, inside lists, maps and structs, to every part of it."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return pa.list_(nested_type(t.value_type, lake_type))
    if pa.types.is_map(t):
        return pa.map_(nested_type(t.key_type, lake_type), nested_type(t.item_type, lake_type))
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, nested_type(f.type, lake_type)) for f in t])
    return lake_type(t)
