"""Connect schemas inferred from JSON documents, as Debezium's JsonSchemaData does.

The outbox router (`table.expand.json.payload`) and DecodeLogicalDecodingMessageContent turn JSON text
into Connect data: `infer` gives the schema (optional everywhere: booleans, int32 or int64 by
magnitude, double, string, arrays by their first non-null element, the fields of all objects of an
array merged in order of appearance, objects as structs named by their path from `key` (`a.b`; the top one unnamed without a key); a null is
left out, or optional bytes with `null_bytes`; an empty array is left out), `conform` the value for
it (only the schema's fields, checked), `parse` the first JSON value of a text (Jackson ignores what
follows it). `Unexpandable` marks text Debezium keeps as it is; a value that cannot be put in the
schema it inferred fails (`TransformError`), as it fails Debezium's engine.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import orjson

from headwater.transforms.base import TransformError


class Unexpandable(Exception):
    """Text Debezium keeps as it is: not JSON, or JSON without a schema to infer."""


def _reject(constant: str) -> Any:
    raise Unexpandable(constant)


_DECODER = json.JSONDecoder(parse_constant=_reject)
_LONG_DIGITS = re.compile(r"\d{19}")


def parse(text: str) -> Any:
    """The first JSON value of `text` (Jackson's readTree ignores what follows it): orjson for a text
    that is one JSON document, else the standard library's decoder (trailing text, integers beyond
    64 bits)."""
    if _LONG_DIGITS.search(text) is None:  # orjson reads integers beyond 64 bits as floats
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    try:
        return _DECODER.raw_decode(text)[0]
    except ValueError as exc:
        raise Unexpandable(str(exc)) from exc


_INT32 = {"type": "int32", "optional": True}
_INT64 = {"type": "int64", "optional": True}
_FLOAT64 = {"type": "double", "optional": True}
_STRING = {"type": "string", "optional": True}
_BOOLEAN = {"type": "boolean", "optional": True}
_BYTES = {"type": "bytes", "optional": True}


def infer(key: str | None, node: Any, null_bytes: bool) -> dict | None:
    """The Connect schema Debezium's JsonSchemaData infers for a JSON value (None: no schema)."""
    if isinstance(node, bool):
        return _BOOLEAN
    if isinstance(node, int):
        if -2**31 <= node < 2**31:
            return _INT32
        if -2**63 <= node < 2**63:
            return _INT64
        raise TransformError(f"the JSON payload holds {node}, beyond a long: Debezium cannot expand it")
    if isinstance(node, float):
        return _FLOAT64
    if isinstance(node, str):
        return _STRING
    if node is None:
        return _BYTES if null_bytes else None
    if isinstance(node, list):
        if not node:
            return None
        return {"type": "array", "items": _items(key, node, null_bytes), "optional": True}
    fields: list[dict] = []
    names: set[str] = set()
    for name, child in node.items():
        schema = infer(name if key is None else f"{key}.{name}", child, null_bytes)
        if schema is not None and name not in names:
            names.add(name)
            fields.append({**schema, "field": name})
    return _struct(key, fields)


def _struct(key: str | None, fields: list[dict]) -> dict:
    """An optional struct schema named `key` (no name for None)."""
    out: dict[str, Any] = {"type": "struct", "fields": fields, "optional": True}
    if key is not None:
        out["name"] = key
    return out


def _items(key: str | None, array: list, null_bytes: bool) -> dict:
    """The element schema of a JSON array: of its first non-null element, the fields of all its objects
    merged (first seen first)."""
    sample = next((x for x in array if x is not None), None)
    kinds = {_kind(x) for x in array if x is not None}
    if len(kinds) > 1:
        raise Unexpandable("not a homogenous array")
    if isinstance(sample, dict):
        merged: dict[str, dict] = {}
        for element in array:
            if isinstance(element, dict):
                schema = infer(key, element, null_bytes)
                assert schema is not None
                for f in schema["fields"]:
                    old = merged.get(f["field"])
                    if old is None or (old["type"] == "bytes" and f["type"] != "bytes"):
                        merged[f["field"]] = f
        return _struct(key, list(merged.values()))
    item = infer(None, sample, null_bytes)
    if item is None:
        raise Unexpandable("array with unrecognized member schema")
    return item


def _kind(x: Any) -> str:
    """Jackson's node type, numbers told apart as JsonSchemaData does for arrays."""
    if isinstance(x, bool):
        return "boolean"
    if isinstance(x, int):
        return "int32" if -2**31 <= x < 2**31 else "int64"
    return type(x).__name__


def conform(node: Any, schema: dict | None) -> Any:
    """The JSON value as the struct Debezium builds for `schema`: only the schema's fields, checked."""
    if node is None or schema is None:
        return None
    t = schema["type"]
    if t == "struct":
        if not isinstance(node, dict):
            raise TransformError(f"the JSON payload holds {node!r} where its inferred schema has a struct")
        return {f["field"]: conform(node.get(f["field"]), f) for f in schema["fields"] if f["field"] in node}
    if t == "array":
        return [conform(x, schema["items"]) for x in node]
    if not _FITS[t](node):
        raise TransformError(f"the JSON payload holds {node!r} where its inferred schema has {t}")
    return node


#: whether a JSON value fits a primitive Connect type (Connect's Struct.put checks it)
_FITS: dict[str, Callable[[Any], bool]] = {
    "int32": lambda x: type(x) is int and -2**31 <= x < 2**31,
    "int64": lambda x: type(x) is int,
    "double": lambda x: type(x) is float, "string": lambda x: type(x) is str,
    "boolean": lambda x: type(x) is bool, "bytes": lambda x: False}
