"""Headers into the value: `io.debezium.transforms.HeaderToValue`.

`headers` and `fields` are lists of the same length: the value of header `headers[i]` becomes the
field `fields[i]` of the value (a dotted name goes into a nested struct: `source.id` adds `id` to
`source`), with the header's Connect schema, appended after the struct's fields; `operation` `move`
removes the headers, `copy` keeps them. A field is added when some event of the block has the header
(Debezium takes the fields from the first event of each value schema); an event without it gets
null there, and so does an event whose nested struct is null. The value must be a struct: a tombstone
fails, as in Debezium (apply the transformation through a predicate).

Column-wise: each new field is one Arrow column picked from the headers column.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from headwater.config.properties import prop
from headwater.events.arrays import bool_array, valid_mask
from headwater.events.typed import TypedBlock
from headwater.transforms.base import Transform, TransformError
from headwater.transforms.blocks import header_values, rebuild, remove_header
from headwater.transforms.registry import register


@register
class HeaderToValue(Transform):
    """Copies or moves headers into fields of the value (see the module's docstring)."""

    CLASS_NAMES = ("io.debezium.transforms.HeaderToValue",)
    SHORT_NAME = "HeaderToValue"
    OPTIONS = (
        prop("headers", "list", required=True),
        prop("fields", "list", required=True),
        prop("operation", "enum", None, ("move", "copy"), required=True),
    )

    def configure(self) -> None:
        headers, fields = self.values["headers"] or [], self.values["fields"] or []
        if len(headers) != len(fields):
            self.fail("fields", "must have as many elements as headers",
                      f"give one field per header ({len(headers)} headers, {len(fields)} fields)")
        for option, names in (("headers", headers), ("fields", fields)):
            if not names or any(not n or " " in n for n in names):
                self.fail(option, "must be a non-empty list of names without spaces", "e.g. event_timestamp,key")
        self.pairs = list(zip(headers, fields, strict=True))

    def apply(self, block: TypedBlock) -> list[TypedBlock]:
        value = block.batch.column("value")
        schema = block.value_schema
        if schema is None or schema.get("type") != "struct" or value.null_count:
            raise TransformError("Header field insertion: only Struct values are supported, found a null value"
                                 if schema is not None and schema.get("type") == "struct" else
                                 "Header field insertion: only Struct values are supported")
        for header, field in self.pairs:
            found = header_values(block, header)
            if found is None or not found[2].any():
                continue
            column, header_schema, _ = found
            value, schema = _with_field(value, schema, field.split("."), column, header_schema or {})
        if self.values["operation"] == "move":
            for header, _ in self.pairs:
                block = remove_header(block, header)
        return [rebuild(block, value=(schema, value))]


def _with_field(struct: pa.Array, schema: dict, path: list[str], column: pa.Array, field_schema: dict
                ) -> tuple[pa.Array, dict]:
    """`struct` (of Connect `schema`) with `column` added as the field at `path`."""
    names = [f["field"] for f in schema["fields"]]
    children = [struct.field(i) for i in range(len(names))]
    fields = list(schema["fields"])
    if len(path) == 1:
        children.append(column)
        fields.append({**{k: v for k, v in field_schema.items() if k != "field"}, "field": path[0]})
    else:
        if path[0] not in names:
            raise TransformError(f"Header field insertion: the value has no struct {path[0]!r}")
        i = names.index(path[0])
        if fields[i].get("type") != "struct":
            raise TransformError(f"Header field insertion: {path[0]!r} is not a struct")
        children[i], fields[i] = _with_field(children[i], fields[i], path[1:], column, field_schema)
    valid = valid_mask(struct)
    mask = None if valid.all() else bool_array(~np.asarray(valid))
    out = pa.StructArray.from_arrays(children, names=[f["field"] for f in fields], mask=mask)
    return out, {**schema, "fields": fields}
