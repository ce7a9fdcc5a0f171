"""Fields into headers: Kafka's `org.apache.kafka.connect.transforms.HeaderFrom$Value` and `$Key`.

`fields` and `headers` are lists of the same length: the top-level field `fields[i]` of the value (or
key) becomes a header named `headers[i]` with the field's Connect schema, appended after the existing
headers; `operation` `copy` keeps the field, `move` removes it from the struct and its schema. The
record must be a struct: a null value (tombstone) fails, as in Kafka (apply it through a predicate).

Column-wise: each header is one Arrow column of the struct.
"""

from __future__ import annotations

import pyarrow as pa

from headwater.config.properties import prop
from headwater.events.typed import TypedBlock
from headwater.transforms.base import Transform, TransformError
from headwater.transforms.blocks import add_header, rebuild, struct_field
from headwater.transforms.registry import register


class _HeaderFrom(Transform):
    """Copies or moves struct fields into headers (see the module's docstring)."""

    PART = "value"
    OPTIONS = (
        prop("fields", "list", required=True),
        prop("headers", "list", required=True),
        prop("operation", "enum", None, ("move", "copy"), required=True),
    )

    def configure(self) -> None:
        fields, headers = self.values["fields"] or [], self.values["headers"] or []
        if len(headers) != len(fields):
            self.fail("headers", "must have as many elements as fields",
                      f"give one header per field ({len(fields)} fields, {len(headers)} headers)")
        if not fields:
            self.fail("fields", "must be a non-empty list of field names", "e.g. source,op,transaction")
        self.pairs = list(zip(fields, headers, strict=True))

    def apply(self, block: TypedBlock) -> list[TypedBlock]:
        column = block.batch.column(self.PART)
        schema = block.value_schema if self.PART == "value" else block.key_schema
        if schema is None or schema.get("type") != "struct" or column.null_count:
            raise TransformError(f"HeaderFrom: the {self.PART} must be a non-null Struct")
        for field, header in self.pairs:
            found = struct_field(column, schema, field)
            if found is None:
                raise TransformError(f"HeaderFrom: the {self.PART} has no field {field!r}")
            values, field_schema = found
            block = add_header(block, header, field_schema, values)
        if self.values["operation"] == "move":
            moved = {f for f, _ in self.pairs}
            kept = [(i, f) for i, f in enumerate(schema["fields"]) if f["field"] not in moved]
            new = pa.StructArray.from_arrays([column.field(i) for i, _ in kept],
                                             names=[f["field"] for _, f in kept])
            new_schema = {**schema, "fields": [f for _, f in kept]}
            block = (rebuild(block, value=(new_schema, new)) if self.PART == "value"
                     else rebuild(block, key=(new_schema, new)))
        return [block]


@register
class HeaderFromValue(_HeaderFrom):
    """`HeaderFrom$Value`: fields of the value into headers."""

    CLASS_NAMES = ("org.apache.kafka.connect.transforms.HeaderFrom$Value",)
    SHORT_NAME = "HeaderFrom$Value"


@register
class HeaderFromKey(_HeaderFrom):
    """`HeaderFrom$Key`: fields of the key into headers."""

    CLASS_NAMES = ("org.apache.kafka.connect.transforms.HeaderFrom$Key",)
    SHORT_NAME = "HeaderFrom$Key"
    PART = "key"
