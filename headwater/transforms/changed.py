"""Field-level changes: `io.debezium.transforms.ExtractChangedRecordState` (Debezium 3.x).

For each change event (a record whose value is a change envelope; tombstones and other records pass
untouched) the header `header.changed.name` lists the fields of `after` whose value differs from
`before`'s, and `header.unchanged.name` the others, in `after`'s field order; both are Connect arrays
of optional strings, optional, named after the header. As in Debezium 3.6.3 (observed), every change
event gets the headers, with empty lists unless it has both `before` and `after` (an update under
REPLICA IDENTITY FULL, or one whose `before` the connector filled). Values compare as Java's
`Objects.equals` does on what the event holds: nulls equal each other, bytes by content (Debezium
holds them as ByteBuffers), decimals by value, arrays and structs element by element.

Column-wise: one Arrow comparison per field of `after`, and the lists built from the boolean matrix.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from headwater.config.properties import prop
from headwater.events.arrays import valid_mask
from headwater.events.typed import TypedBlock
from headwater.transforms.base import Transform
from headwater.transforms.blocks import add_header, value_field
from headwater.transforms.registry import register


def names_schema(name: str) -> dict:
    """The Connect schema of a header listing field names."""
    return {"type": "array", "items": {"type": "string", "optional": True}, "optional": True, "name": name}


@register
class ExtractChangedRecordState(Transform):
    """Headers naming the changed and unchanged fields of an update (see the module's docstring)."""

    CLASS_NAMES = ("io.debezium.transforms.ExtractChangedRecordState",)
    SHORT_NAME = "ExtractChangedRecordState"
    OPTIONS = (prop("header.changed.name"), prop("header.unchanged.name"))

    def apply(self, block: TypedBlock) -> list[TypedBlock]:
        changed_name = (self.values["header.changed.name"] or "").strip()
        unchanged_name = (self.values["header.unchanged.name"] or "").strip()
        schema = block.value_schema
        if not (changed_name or unchanged_name) or schema is None \
                or not str(schema.get("name") or "").endswith(".Envelope"):
            return [block]
        present = valid_mask(block.batch.column("value"))
        if not present.any():
            return [block]
        after, before = value_field(block, "after"), value_field(block, "before")
        if after is None or before is None:
            return [block]
        names = [f["field"] for f in after[1]["fields"]]
        n = len(block)
        both = valid_mask(after[0]) & valid_mask(before[0])
        changed = np.zeros((n, len(names)), dtype=bool)
        before_names = {f["field"]: f for f in before[1]["fields"]}
        for j, field in enumerate(after[1]["fields"]):
            a = after[0].field(j)
            if field["field"] not in before_names:
                changed[:, j] = valid_mask(a)
                continue
            b = before[0].field(before[0].type.get_field_index(field["field"]))
            a_valid, b_valid = valid_mask(a), valid_mask(b)
            equal = pc.fill_null(pc.equal(a, b) if _comparable(a.type) else _equal_lists(a, b), False)
            same = (~a_valid & ~b_valid) | np.asarray(equal.to_numpy(zero_copy_only=False), dtype=bool)
            changed[:, j] = ~same
        changed &= both[:, None]
        unchanged = ~changed & both[:, None]
        if changed_name:
            block = add_header(block, changed_name, names_schema(changed_name), _lists(changed, names), present)
        if unchanged_name:
            block = add_header(block, unchanged_name, names_schema(unchanged_name), _lists(unchanged, names), present)
        return [block]


def _comparable(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_map(t))


def _equal_lists(a: pa.Array, b: pa.Array) -> pa.Array:
    """Element-wise deep equality of nested values (structs, lists, maps), as Java's `equals`."""
    return pa.array([x == y for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True)], pa.bool_())


def _lists(mask: np.ndarray, names: list[str]) -> pa.Array:
    """Per row, the names whose column is True in `mask` (rows x names)."""
    counts = np.count_nonzero(mask, axis=1)
    offsets = np.zeros(len(mask) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    picked = np.nonzero(mask)[1]
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(names, pa.string()).take(pa.array(picked, pa.int64())))
