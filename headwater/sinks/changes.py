"""A batch of change events reduced to the last change per key, the input of the sinks that keep
tables in step (JDBC, Delta Lake, Iceberg).

`reduce` takes the typed blocks (`events.typed`) of one topic from one batch and keeps, per key, the
event that decides the row's final state, in commit order (`_order`, the event's place in the batch):

- snapshot reads, creates and updates: the last one per key wins (an upsert of its `after`);
- deletes: a delete that is the last event of its key wins (a delete by key);
- tombstones: a tombstone right after a delete of the same key is dropped (the delete stays, with its
  `before`); any other tombstone is a delete by key (flattened records with tombstone deletes);
- truncates (`op` "t"): every event before the batch's last truncate is dropped, the truncate kept,
  so that a sink empties the table and then applies what follows;
- primary-key changes need nothing of their own: Debezium writes a delete of the old key (and its
  tombstone) and a create of the new key, so the old key's last change is that delete;
- events without a key (a table without a primary key) cannot be reduced: all of them are kept.

The key is the `key` column unless `keys` gives one array per block (a sink whose primary key comes
from the value, say); struct keys compare field by field. The work is column-wise: the key fields
of all blocks are sorted by key and `_order` and the last row of each run is taken; no Python loop
per event. The result keeps each block's schemas: the blocks filtered to the kept events, empty ones
left out, so a sink applies them in order (`Changes.blocks`). `by_topic` groups the blocks of a batch
(or of a DataFrame partition of blocks) by topic.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.arrays import bool_array, bool_values, int64_array, int64_values, lit, valid_mask
from headwater.events.typed import TypedBlock

TRUNCATE = "t"
DELETE = "d"
_BLOCK, _ROW, _ORDER, _OP, _TOMB = "__block", "__row", "__order", "__op", "__tombstone"


@dataclass(frozen=True)
class Changes:
    """The last change per key of one topic's events in a batch: `blocks` are the input blocks
    filtered to the kept events (a truncate among them first, when the batch has one)."""

    topic: str
    blocks: list[TypedBlock]

    @property
    def truncated(self) -> bool:
        """Whether the batch truncates the table (before the other kept events apply)."""
        return any(pc.any(pc.equal(b.batch.column("op"), lit(TRUNCATE))).as_py() for b in self.blocks)

    def __len__(self) -> int:
        return sum(len(b) for b in self.blocks)


def by_topic(blocks: Iterable[TypedBlock]) -> dict[str, list[TypedBlock]]:
    """The blocks grouped by topic, each topic's in the order given."""
    groups: dict[str, list[TypedBlock]] = {}
    for b in blocks:
        groups.setdefault(b.topic, []).append(b)
    return groups


def reduce(blocks: Sequence[TypedBlock], keys: Sequence[pa.Array] | None = None) -> Changes:
    """The last change per key of the blocks of one topic (see the module's docstring); `keys`, if
    given, holds each block's key array (struct or primitive) in place of its `key` column."""
    if not blocks:
        raise ValueError("reduce needs at least one block")
    topics = {b.topic for b in blocks}
    if len(topics) > 1:
        raise ValueError(f"reduce takes the blocks of one topic, not of {sorted(topics)}")
    if keys is not None and len(keys) != len(blocks):
        raise ValueError("reduce needs one key array per block")
    parts = [_events(i, b, b.batch.column("key") if keys is None else keys[i]) for i, b in enumerate(blocks)]
    events = pa.concat_tables(parts, promote_options="permissive")
    keep = _last_per_key(_after_last_truncate(events))
    rows = keep.column(_ROW).combine_chunks()
    owner = keep.column(_BLOCK).combine_chunks()
    kept = []
    for i, b in enumerate(blocks):
        mine = int64_values(rows.filter(pc.equal(owner, lit(i))).cast(pa.int64()))
        if len(mine) == len(b):
            kept.append(b)
        elif len(mine):
            mask = np.zeros(len(b), dtype=bool)
            mask[mine] = True
            kept.append(TypedBlock(b.batch.filter(bool_array(mask))))
    return Changes(blocks[0].topic, kept)


def _events(index: int, block: TypedBlock, key: pa.Array) -> pa.Table:
    """One row per event: its block and row, `_order`, `op`, whether it is a tombstone, and the key's
    fields (none for a block without a key)."""
    b = block.batch
    n = b.num_rows
    columns = {_BLOCK: int64_array(np.full(n, index)), _ROW: int64_array(np.arange(n)),
               _ORDER: b.column("_order"), _OP: b.column("op"),
               _TOMB: bool_array(~valid_mask(b.column("value")))}
    if not pa.types.is_null(key.type):
        columns.update(_key_fields(key, "__key"))
        columns["__keyed"] = bool_array(valid_mask(key))
    else:
        columns["__keyed"] = bool_array(np.zeros(n, dtype=bool))
    return pa.table(columns)


def _key_fields(key: pa.Array, prefix: str) -> dict[str, pa.Array]:
    """A key's primitive parts by path (struct fields flattened, nested ones too)."""
    if not pa.types.is_struct(key.type):
        return {prefix: key}
    out: dict[str, pa.Array] = {}
    for f, child in zip(key.type, key.flatten(), strict=True):
        out.update(_key_fields(child, f"{prefix}.{f.name}"))
    return out


def _after_last_truncate(events: pa.Table) -> pa.Table:
    """The events from the last truncate on (all of them if there is none)."""
    truncates = events.filter(pc.fill_null(pc.equal(events.column(_OP), lit(TRUNCATE)), lit(False)))
    if not truncates.num_rows:
        return events
    last = pc.max(truncates.column(_ORDER))
    return events.filter(pc.greater_equal(events.column(_ORDER), last))


def _last_per_key(events: pa.Table) -> pa.Table:
    """Per key the last event (a tombstone right after a delete dropped first); events without a
    key, and truncates, all kept."""
    keyed = bool_values(events.column("__keyed").combine_chunks())
    keyed &= ~bool_values(pc.fill_null(pc.equal(events.column(_OP), lit(TRUNCATE)), lit(False)).combine_chunks())
    loose = events.filter(bool_array(~keyed))
    rows = events.filter(bool_array(keyed))
    if rows.num_rows:
        key_names = [n for n in rows.column_names if n.startswith("__key") and n != "__keyed"]
        rows = rows.take(pc.sort_indices(rows, sort_keys=[(n, "ascending") for n in key_names] + [(_ORDER, "ascending")]))
        same = _same_as_previous(rows, key_names)
        op = rows.column(_OP).combine_chunks()
        after_delete = np.zeros(rows.num_rows, dtype=bool)
        after_delete[1:] = bool_values(pc.fill_null(pc.equal(op, lit(DELETE)), lit(False)))[:-1]
        tomb = bool_values(rows.column(_TOMB).combine_chunks())
        dropped = tomb & same & after_delete
        if dropped.any():
            rows = rows.filter(bool_array(~dropped))
            same = _same_as_previous(rows, key_names)
        last = np.ones(rows.num_rows, dtype=bool)
        last[:-1] = ~same[1:]
        rows = rows.filter(bool_array(last))
    kept = pa.concat_tables([loose, rows])
    return kept.take(pc.sort_indices(kept.column(_ORDER)))


def _same_as_previous(rows: pa.Table, key_names: list[str]) -> np.ndarray:
    """Per row whether its key equals the previous row's (nulls equal to nulls)."""
    n = rows.num_rows
    same = np.zeros(n, dtype=bool)
    if n < 2:
        return same
    same[1:] = True
    for name in key_names:
        col = rows.column(name).combine_chunks()
        a, b = col.slice(0, n - 1), col.slice(1)
        equal = bool_values(pc.fill_null(pc.equal(a, b), lit(False)))
        both_null = ~valid_mask(a) & ~valid_mask(b)
        same[1:] &= equal | both_null
    return same
