"""Schema change events filtered by type: `io.debezium.transforms.SchemaChangeEventFilter` (Debezium 3.x).

`schema.change.event.exclude.list` names types among CREATE, ALTER, DROP, TRUNCATE and DATABASE. A
schema change event (value schema named `...SchemaChangeValue`) is dropped when its type is listed:
the `type` of its first `tableChanges` entry, DATABASE when `tableChanges` is empty; one without
`tableChanges` is dropped too. Every other record passes. (PostgreSQL emits no schema change events;
the binlog connectors do.)
"""

from __future__ import annotations

import numpy as np
import pyarrow.compute as pc

from headwater.config.properties import prop
from headwater.events.arrays import valid_mask
from headwater.events.typed import TypedBlock
from headwater.transforms.base import Transform
from headwater.transforms.blocks import take, value_field
from headwater.transforms.registry import register

TYPES = ("CREATE", "ALTER", "DROP", "TRUNCATE", "DATABASE")


@register
class SchemaChangeEventFilter(Transform):
    """Drops schema change events of the listed types (see the module's docstring)."""

    CLASS_NAMES = ("io.debezium.transforms.SchemaChangeEventFilter",)
    SHORT_NAME = "SchemaChangeEventFilter"
    OPTIONS = (prop("schema.change.event.exclude.list", required=True),)

    def configure(self) -> None:
        listed = self.values["schema.change.event.exclude.list"].split(",")
        bad = [t for t in listed if t not in TYPES]
        if bad:
            self.fail("schema.change.event.exclude.list", f"{bad[0]!r} is not a schema change event type",
                      "list some of " + ", ".join(TYPES) + " (upper case, no spaces)")
        self.excluded = set(listed)

    def apply(self, block: TypedBlock) -> list[TypedBlock]:
        schema = block.value_schema
        if schema is None or not str(schema.get("name") or "").endswith("SchemaChangeValue"):
            return [block]
        present = valid_mask(block.batch.column("value"))
        changes = value_field(block, "tableChanges")
        if changes is None:
            return [take(block, ~present)]
        column = changes[0]
        has = valid_mask(column)
        counts = np.asarray(pc.fill_null(pc.list_value_length(column), 0))
        types = np.full(len(block), "DATABASE", dtype=object)
        nonempty = np.flatnonzero(has & (counts > 0))
        if len(nonempty):
            offsets = np.asarray(column.offsets)[nonempty]
            firsts = pc.struct_field(column.values, [column.type.value_type.get_field_index("type")]).take(offsets)
            types[nonempty] = firsts.to_pylist()
        drop = present & (~has | np.isin(types, list(self.excluded)))
        return [take(block, ~drop)] if drop.any() else [block]
