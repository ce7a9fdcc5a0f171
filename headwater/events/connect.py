"""Kafka Connect schemas, as Debezium builds them and as Kafka's JsonConverter writes them.

A `Schema` is immutable and hashable so that per-table schemas can be cached and compared. The
JSON form follows JsonConverter.asJsonSchema: `type`, then `items`/`keys`+`values`/`fields`,
`optional`, `name`, `version`, `doc`, `parameters`, `default`, and `field` last for struct fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

# Connect's primitive type names
INT8, INT16, INT32, INT64 = "int8", "int16", "int32", "int64"
FLOAT32, FLOAT64 = "float", "double"
BOOLEAN, STRING, BYTES = "boolean", "string", "bytes"
ARRAY, MAP, STRUCT = "array", "map", "struct"

NO_DEFAULT = object()


@dataclass(frozen=True)
class Field:
    name: str
    schema: Schema


@dataclass(frozen=True)
class Schema:
    """A Connect schema. `default` is the Java-side default value converted to its JSON form."""

    type: str
    optional: bool = False
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    parameters: tuple[tuple[str, str], ...] | None = None
    default: Any = NO_DEFAULT
    fields: tuple[Field, ...] = ()
    items: Schema | None = None  # array element schema
    keys: Schema | None = None  # map key schema
    values: Schema | None = None  # map value schema
    _json: dict | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def has_default(self) -> bool:
        return self.default is not NO_DEFAULT

    def with_optional(self, optional: bool = True) -> Schema:
        return replace(self, optional=optional, _json=None)

    def with_default(self, default: Any) -> Schema:
        return replace(self, default=default, _json=None)

    def with_parameters(self, params: dict[str, str]) -> Schema:
        merged = dict(self.parameters or ())
        merged.update(params)
        return replace(self, parameters=tuple(merged.items()), _json=None)

    def without_parameters(self, prefix: str) -> Schema:
        """This schema without the parameters whose names start with `prefix`."""
        if not self.parameters:
            return self
        kept = tuple((k, v) for k, v in self.parameters if not k.startswith(prefix))
        return replace(self, parameters=kept or None, _json=None)

    def to_json(self) -> dict:
        """The schema as JsonConverter writes it (cached; treat the result as read-only)."""
        cached = self._json
        if cached is not None:
            return cached
        out: dict[str, Any] = {"type": self.type}
        if self.type == ARRAY and self.items is not None:
            out["items"] = self.items.to_json()
        elif self.type == MAP and self.keys is not None and self.values is not None:
            out["keys"] = self.keys.to_json()
            out["values"] = self.values.to_json()
        elif self.type == STRUCT:
            out["fields"] = [{**f.schema.to_json(), "field": f.name} for f in self.fields]
        out["optional"] = self.optional
        if self.name is not None:
            out["name"] = self.name
        if self.version is not None:
            out["version"] = self.version
        if self.doc is not None:
            out["doc"] = self.doc
        if self.parameters is not None:
            out["parameters"] = dict(self.parameters)
        if self.has_default:
            out["default"] = self.default
        object.__setattr__(self, "_json", out)
        return out


def struct(name: str | None, fields: list[tuple[str, Schema]], optional: bool = False,
           version: int | None = None) -> Schema:
    return Schema(STRUCT, optional=optional, name=name, version=version,
                  fields=tuple(Field(n, s) for n, s in fields))


def primitive(type_: str, optional: bool = False, name: str | None = None, version: int | None = None,
              parameters: dict[str, str] | None = None) -> Schema:
    return Schema(type_, optional=optional, name=name, version=version,
                  parameters=tuple(parameters.items()) if parameters else None)


def array(items: Schema, optional: bool = True) -> Schema:
    return Schema(ARRAY, optional=optional, items=items)


def map_of(keys: Schema, values: Schema, optional: bool = True) -> Schema:
    return Schema(MAP, optional=optional, keys=keys, values=values)

