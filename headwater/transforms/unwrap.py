"""ExtractNewRecordState (event flattening): the envelope replaced by its `after` row, column-wise.

As Debezium 3's `ExtractNewRecordState` does, per kind of record:
- a record whose value schema is not an envelope (name ending `.Envelope`: heartbeats, schema
  changes, transaction BEGIN/END, logical decoding messages) passes unchanged, without headers;
- a tombstone is dropped, except with `delete.tombstone.handling.mode=rewrite-with-tombstone` (or the
  older `drop.tombstones=false`); a kept one gets the `op` header `d` if `add.headers` lists `op`;
- a truncate (neither `before` nor `after`) is dropped;
- a delete becomes, by mode: nothing (`drop`); a record with a null value of the row schema
  (`tombstone`, the older `delete.handling.mode=none`); the `before` row plus `__deleted: "true"`
  (`rewrite`, `rewrite-with-tombstone`);
- a create, update or read becomes its `after` row, plus `__deleted: "false"` in the rewrite modes.
Then `route.by.field` sets the topic from the row's field (a delete's `before`), `add.fields` adds
envelope fields to the row (`op`, `ts_ms`, `source.*`, `transaction.*`; `name:newName` renames; a field
absent from the envelope is not added), `add.headers` adds them as headers, and
`drop.fields.header.name` names a header listing fields to drop from the value (and the key, with
`drop.fields.from.key`; only optional ones with `drop.fields.keep.schema.compatible`).

Which of the two option sets applies: `delete.tombstone.handling.mode` when given; else the older
`drop.tombstones`/`delete.handling.mode` when either is given (their defaults `true`/`drop`); else
`delete.tombstone.handling.mode`'s default `tombstone`, as Debezium 3 (Debezium 2.5's default was the
older pair's, dropping deletes).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from headwater.config.properties import prop
from headwater.events.arrays import string_scalar, valid_mask
from headwater.events.typed import TypedBlock, connect_type
from headwater.transforms.base import Transform, TransformError
from headwater.transforms.blocks import (
    add_header,
    field_schema,
    header_values,
    rebuild,
    schema_basics,
    schema_fields,
    split_by_topic,
    struct_array,
    struct_children,
    struct_schema,
    take,
)
from headwater.transforms.registry import register

MODES = ("drop", "tombstone", "rewrite", "rewrite-with-tombstone")
DELETED = "__deleted"
_OPTIONAL_STRING = {"type": "string", "optional": True}
_TOP_LEVEL = ("op", "ts_ms", "ts_us", "ts_ns")
_TRANSACTION = ("id", "total_order", "data_collection_order")


@dataclass(frozen=True)
class FieldReference:
    """An envelope field named in `add.fields`/`add.headers` (Debezium's FieldReference)."""

    struct: str | None  # source, transaction, or None for a top-level field
    field: str
    new_name: str

    @classmethod
    def parse(cls, prefix: str, entry: str) -> FieldReference:
        parts = entry.split(":")
        if len(parts) > 2 or not parts[0]:
            raise ValueError(f"not a field name: {entry!r}")
        splits = parts[0].split(".")
        field = splits[0] if len(splits) == 1 else splits[1]
        struct = (None if field in _TOP_LEVEL else "transaction" if field in _TRANSACTION else "source") \
            if len(splits) == 1 else splits[0]
        if len(parts) == 2:
            new_name = prefix + parts[1]
        else:
            new_name = prefix + (field if len(splits) == 1 else f"{struct}_{field}")
        return cls(struct, field, new_name)

    def schema(self, envelope: dict) -> dict | None:
        """The added field's schema (basics copied, optional, no default), None if the envelope lacks it."""
        parent = field_schema(envelope, self.struct) if self.struct else envelope
        found = field_schema(parent, self.field)
        if found is None:
            found = field_schema(envelope, self.field)  # a field another SMT added to the envelope
        if found is None:
            return None
        out = {"type": found["type"]}
        for k in ("items", "keys", "values"):
            if k in found:
                out[k] = found[k]
        if found["type"] == "struct":
            out["fields"] = found["fields"]
        out["optional"] = True
        out.update(schema_basics(found))
        return out

    def values(self, value: pa.Array, envelope: dict) -> pa.Array:
        """The field's value per row of the envelope column (null where its struct is null)."""
        parent = field_schema(envelope, self.struct) if self.struct else envelope
        in_parent = field_schema(parent, self.field) is not None
        path = f"{self.struct}.{self.field}" if self.struct and in_parent else self.field
        indices, t = [], value.type
        for part in path.split("."):
            i = t.get_field_index(part)
            indices.append(i)
            t = t.field(i).type
        return pc.struct_field(value, indices)


@register
class ExtractNewRecordState(Transform):
    """io.debezium.transforms.ExtractNewRecordState (see the module's docstring)."""

    CLASS_NAMES = ("io.debezium.transforms.ExtractNewRecordState",)
    SHORT_NAME = "ExtractNewRecordState"
    OPTIONS = (
        prop("delete.tombstone.handling.mode", "enum", allowed=MODES),
        prop("drop.tombstones", "boolean"),
        prop("delete.handling.mode", "enum", allowed=("drop", "none", "rewrite")),
        prop("route.by.field", default=""),
        prop("add.fields.prefix", default="__"),
        prop("add.fields", "list", default=""),
        prop("add.headers.prefix", default="__"),
        prop("add.headers", "list", default=""),
        prop("drop.fields.header.name", default=""),
        prop("drop.fields.from.key", "boolean", default=False),
        prop("drop.fields.keep.schema.compatible", "boolean", default=True),
        prop("replace.null.with.default", "boolean", default=True),
    )

    def configure(self) -> None:
        v = self.values
        mode = v["delete.tombstone.handling.mode"]
        legacy = v["drop.tombstones"] is not None or v["delete.handling.mode"] is not None
        if mode is None and legacy:
            deletes = v["delete.handling.mode"] or "drop"
            self.keep_tombstones = v["drop.tombstones"] is False
            self.deletes = {"none": "tombstone"}.get(deletes, deletes)
            self.truncates_kept = self.keep_tombstones  # Debezium's legacy strategy keeps them with tombstones
        else:
            mode = mode or "tombstone"
            self.keep_tombstones = mode == "rewrite-with-tombstone"
            self.deletes = "rewrite" if mode.startswith("rewrite") else mode
            self.truncates_kept = False
        self.rewrite = self.deletes == "rewrite"
        self.fields = self._references("add.fields", v["add.fields.prefix"])
        self.headers = self._references("add.headers", v["add.headers.prefix"])
        self.route = v["route.by.field"].strip() or None
        self.drop_header = v["drop.fields.header.name"].strip() or None

    def _references(self, option: str, prefix: str) -> list[FieldReference]:
        out = []
        for entry in self.values[option]:
            try:
                out.append(FieldReference.parse(prefix, entry))
            except ValueError as exc:
                self.fail(option, str(exc), "write field, struct.field or field:newName, comma-separated")
        return out

    def apply(self, block: TypedBlock) -> list[TypedBlock]:
        value = block.batch.column("value")
        schema = block.value_schema
        present = valid_mask(value)
        if not present.any():
            return self._tombstones(block)
        if schema is None or not str(schema.get("name") or "").endswith(".Envelope"):
            return [block] if present.all() else [take(block, present), *self._tombstones(take(block, ~present))]
        if not present.all():
            return [*self.apply(take(block, present)), *self._tombstones(take(block, ~present))]
        block = self._add_headers(block, schema)
        after = pc.struct_field(value, [value.type.get_field_index("after")])
        before_index = value.type.get_field_index("before")
        before = pc.struct_field(value, [before_index]) if before_index >= 0 else pa.nulls(len(block))
        has_after, has_before = valid_mask(after), valid_mask(before)
        out = []
        if has_after.any():
            out += self._rows(take(block, has_after), "after", False)
        deletes = ~has_after & has_before
        if deletes.any() and self.deletes != "drop":
            out += self._rows(take(block, deletes), "before", True)
        truncates = ~has_after & ~has_before
        if truncates.any() and self.truncates_kept:
            out.append(take(block, truncates))
        return out

    def _tombstones(self, block: TypedBlock) -> list[TypedBlock]:
        if not self.keep_tombstones:
            return []
        if any(r.field == "op" for r in self.headers):
            n = len(block)
            for r in self.headers:
                if r.field == "op":
                    block = add_header(block, r.new_name, {"type": "string", "optional": False},
                                       pa.repeat(string_scalar("d"), n))
        return [block]

    def _add_headers(self, block: TypedBlock, envelope: dict) -> TypedBlock:
        value = block.batch.column("value")
        for r in self.headers:
            schema = r.schema(envelope)
            if schema is not None:
                block = add_header(block, r.new_name, schema, r.values(value, envelope))
        return block

    def _rows(self, block: TypedBlock, part: str, delete: bool) -> list[TypedBlock]:
        """The rows' `after` (or a delete's `before`) as the value, with the options applied, per group of
        rows whose `drop.fields.header.name` header lists the same fields."""
        return [out for group, names in self._drop_groups(block) for out in self._flatten(group, part, delete, names)]

    def _drop_groups(self, block: TypedBlock) -> list[tuple[TypedBlock, set[str]]]:
        """The block's rows grouped by the field names their drop-fields header lists (none: one group)."""
        found = header_values(block, self.drop_header) if self.drop_header is not None else None
        if found is None:
            return [(block, set())]
        groups: dict[tuple[str, ...], list[int]] = {}
        for i, listed in enumerate(found[0].to_pylist()):
            groups.setdefault(tuple(listed or ()), []).append(i)
        if len(groups) == 1:
            return [(block, set(next(iter(groups))))]
        return [(take(block, pa.array(rows, pa.int64())), set(listed)) for listed, rows in groups.items()]

    def _dropped(self, schema: dict | None, names: set[str]) -> set[str]:
        """The fields of a struct schema to drop (only optional ones with drop.fields.keep.schema.compatible)."""
        if not names or schema is None or schema.get("type") != "struct":
            return set()
        compatible = self.values["drop.fields.keep.schema.compatible"]
        return {n for n, s in schema_fields(schema) if n in names and (s.get("optional") or not compatible)}

    def _flatten(self, block: TypedBlock, part: str, delete: bool, names: set[str]) -> list[TypedBlock]:
        """Debezium's order: a delete is rewritten, routed, its fields dropped, then fields added; any
        other record is extracted (and rewritten), routed, fields added, then fields dropped."""
        envelope = block.value_schema
        assert envelope is not None
        value = block.batch.column("value")
        row_schema = field_schema(envelope, part)
        assert row_schema is not None
        row_schema = {k: v for k, v in row_schema.items() if k != "field"}
        row = pc.struct_field(value, [value.type.get_field_index(part)])
        topics = self._topics(row, row_schema)
        n = len(block)
        if self.values["drop.fields.from.key"] and valid_mask(block.batch.column("key")).any():
            gone = self._dropped(block.key_schema, names)
            if gone:
                block = rebuild(block, key=_without(block.key_schema, block.batch.column("key"), gone))
        if delete and self.deletes == "tombstone":
            new = rebuild(block, value=(row_schema, pa.nulls(n, row.type)))
            return split_by_topic(new, topics) if topics is not None else [new]
        fields = schema_fields(row_schema)
        children = struct_children(row)
        if self.rewrite:
            if self.values["replace.null.with.default"]:
                children = [(name, _with_default(c, s)) for (name, c), (_, s) in zip(children, fields, strict=True)]
            fields.append((DELETED, _OPTIONAL_STRING))
            children.append((DELETED, pa.repeat(string_scalar("true" if delete else "false"), n)))
        if delete:
            fields, children = self._drop(fields, children, names)
        for r in self.fields:
            s = r.schema(envelope)
            if s is not None:
                fields.append((r.new_name, s))
                children.append((r.new_name, r.values(value, envelope)))
        if not delete:
            fields, children = self._drop(fields, children, names)
        # Debezium rebuilds the schema of every row it keeps (copying its basics: not optional)
        new = rebuild(block, value=(struct_schema(fields, False, **schema_basics(row_schema)),
                                    struct_array(children, length=n)))
        return split_by_topic(new, topics) if topics is not None else [new]

    def _drop(self, fields: list[tuple[str, dict]], children: list[tuple[str, pa.Array]], names: set[str]
              ) -> tuple[list[tuple[str, dict]], list[tuple[str, pa.Array]]]:
        """The value's fields without those `drop.fields.header.name` lists (Kafka's ReplaceField `exclude`)."""
        gone = self._dropped(struct_schema(fields), names)
        if not gone:
            return fields, children
        return [f for f in fields if f[0] not in gone], [c for c in children if c[0] not in gone]

    def _topics(self, row: pa.Array, row_schema: dict) -> pa.Array | None:
        """`route.by.field`: the topic of each row (null: unchanged), from the row (a delete's `before`)."""
        if self.route is None:
            return None
        fs = field_schema(row_schema, self.route)
        if fs is None:
            raise TransformError(f"route.by.field {self.route!r} is not a field of {row_schema.get('name')}")
        if fs["type"] != "string":
            raise TransformError(f"route.by.field {self.route!r} is a {fs['type']}, not a string")
        topics = pc.struct_field(row, [row.type.get_field_index(self.route)])
        blank = pc.equal(pc.utf8_trim_whitespace(topics), "")
        return pc.if_else(blank, pa.nulls(len(topics), pa.string()), topics)


def _without(schema: dict | None, column: pa.Array, gone: set[str]) -> tuple[dict, pa.Array]:
    """A struct column and its schema without the fields `gone` (Kafka's ReplaceField `exclude`)."""
    assert schema is not None
    fields = [(n, s) for n, s in schema_fields(schema) if n not in gone]
    children = [(n, c) for n, c in struct_children(column) if n not in gone]
    new_schema = struct_schema(fields, schema.get("optional", False), **schema_basics(schema))
    return new_schema, struct_array(children, valid_mask(column), length=len(column))


def _with_default(column: pa.Array, schema: dict) -> pa.Array:
    """A field's nulls replaced by its schema's default (InsertField with replace.null.with.default)."""
    if "default" not in schema or schema["default"] is None or not column.null_count:
        return column
    typ, to_arrow = connect_type(schema)
    return pc.fill_null(column, pa.scalar(to_arrow(schema["default"]), typ))

