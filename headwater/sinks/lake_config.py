"""The `delta` and `iceberg` sinks' configuration: the keys of the YAML `sink` block.

    sink: {type: delta, path: lake/, mode: merge, table.name.format: "${source.table}", partition.by: [region]}
    sink: {type: iceberg, catalog.warehouse: lake/, catalog.uri: "postgresql+psycopg2://u:p@host/db"}

Both: `mode` (`merge`, the default: the table mirrors the source table; `changelog`: every change
appended), `table.name.format` (`${topic}` by default; `${source.db}`, `${source.schema}`,
`${source.table}` and any other field of the events' `source` block), `partition.by` (columns, a
list or comma-separated; a table without them is not partitioned) and `mirror: true` (every captured
table kept in step with no per-table settings: what `mode: merge` does, the default; named for a
JDBC sink user's settings to carry over) and `unavailable.value.placeholder` (the source connector's
value for unchanged TOAST, `__debezium_unavailable_value` by default: a merged table keeps its value
for it, `sinks.lake`). `delta`: `path` (the directory or URI the tables go
under, required) and `storage.options` (delta-rs's object-store settings, a mapping). `iceberg`:
`catalog.warehouse` (where the files go, required), `catalog.uri` (a SQLAlchemy URL for a SQL
catalog, SQLite in the warehouse by default; `http(s)://` for a REST catalog), `catalog.name`
(default `headwater`) and `catalog.properties` (more of pyiceberg's catalog properties, a mapping).

`parse_lake_sink` checks a block before anything starts and reports every problem at once
(`ConfigErrors`: the property, what is wrong, the fix; the closest known name for an unknown one).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from headwater.config.errors import ConfigError, ConfigErrors
from headwater.sinks.lake import DEFAULT_PLACEHOLDER, check_template

LAKE_SINKS = ("delta", "iceberg")
MODES = ("merge", "changelog")
COMMON = ("type", "mirror", "mode", "table.name.format", "partition.by", "unavailable.value.placeholder")
PROPERTIES = {
    "delta": (*COMMON, "path", "storage.options"),
    "iceberg": (*COMMON, "catalog.warehouse", "catalog.uri", "catalog.name", "catalog.properties"),
}


@dataclass(frozen=True)
class DeltaOptions:
    """The `delta` sink's settings."""

    path: str  # the directory (or URI) under which the tables live
    table_name_format: str = "${topic}"
    mode: str = "merge"
    partition_by: tuple[str, ...] = ()
    storage_options: dict[str, str] = field(default_factory=dict)
    placeholder: str = DEFAULT_PLACEHOLDER  # unavailable.value.placeholder


@dataclass(frozen=True)
class IcebergOptions:
    """The `iceberg` sink's settings."""

    warehouse: str  # where the tables' files go (a path or URI)
    catalog_uri: str | None = None  # None: a SQLite catalog in the warehouse
    catalog_name: str = "headwater"
    table_name_format: str = "${topic}"
    mode: str = "merge"
    partition_by: tuple[str, ...] = ()
    catalog_properties: dict[str, str] = field(default_factory=dict)  # more of pyiceberg's catalog properties
    placeholder: str = DEFAULT_PLACEHOLDER  # unavailable.value.placeholder


def parse_lake_sink(props: dict[str, Any]) -> DeltaOptions | IcebergOptions:
    """A `delta` or `iceberg` sink block checked (see the module's docstring)."""
    kind = props["type"]
    known = PROPERTIES[kind]
    errors: list[ConfigError] = []
    for key in props:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            errors.append(ConfigError(f"sink.{key}", f"unknown property of the {kind} sink",
                                      f"did you mean {close[0]}?" if close else "allowed: " + ", ".join(known)))
    mirror = props.get("mirror", False)
    if not isinstance(mirror, bool):
        errors.append(ConfigError("sink.mirror", f"{mirror!r} is not true or false", "write mirror: true"))
    mode = props.get("mode", "merge")
    if mode not in MODES:
        errors.append(ConfigError("sink.mode", f"{mode!r} is not allowed", "allowed values: " + ", ".join(MODES)))
    elif mirror is True and mode != "merge":
        errors.append(ConfigError("sink.mode", "mirror: true keeps tables in step, which mode: changelog does not",
                                  "remove mode, or set mirror: false"))
    fmt = props.get("table.name.format", "${topic}")
    problem = check_template(fmt) if isinstance(fmt, str) and fmt else "must be a non-empty text"
    if problem:
        errors.append(ConfigError("sink.table.name.format", problem, 'for example table.name.format: "${topic}"'))
    partition_by = _names(props.get("partition.by"), "sink.partition.by", errors)
    mappings = {k: _mapping(props.get(k), f"sink.{k}", errors) for k in ("storage.options", "catalog.properties")}
    placeholder = props.get("unavailable.value.placeholder", DEFAULT_PLACEHOLDER)
    if not isinstance(placeholder, str) or not placeholder:
        errors.append(ConfigError("sink.unavailable.value.placeholder", "must be a non-empty text",
                                  "the source connector's unavailable.value.placeholder, or leave it out"))
    if kind == "delta":
        path = _required(props, "path", "the directory the tables go under, e.g. path: lake/", errors)
        if errors:
            raise ConfigErrors(errors)
        return DeltaOptions(path, fmt, mode, partition_by, mappings["storage.options"], placeholder)
    warehouse = _required(props, "catalog.warehouse", "where the tables' files go, e.g. catalog.warehouse: lake/",
                          errors)
    uri = props.get("catalog.uri")
    if uri is not None and not _catalog_uri(uri):
        errors.append(ConfigError("sink.catalog.uri", "is not a SQLAlchemy URL or an http(s):// REST catalog URL",
                                  "for example sqlite:///lake/catalog.db or postgresql+psycopg2://user:pw@host/db"))
    name = props.get("catalog.name", "headwater")
    if not isinstance(name, str) or not name:
        errors.append(ConfigError("sink.catalog.name", "must be a non-empty text", "for example catalog.name: lake"))
    if errors:
        raise ConfigErrors(errors)
    return IcebergOptions(warehouse, uri, name, fmt, mode, partition_by, mappings["catalog.properties"], placeholder)


def _required(props: dict[str, Any], key: str, hint: str, errors: list[ConfigError]) -> str:
    value = props.get(key)
    if not isinstance(value, str) or not value:
        errors.append(ConfigError(f"sink.{key}", "is required", hint))
        return ""
    return value


def _names(value: Any, where: str, errors: list[ConfigError]) -> tuple[str, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else str(value).split(",")
    names = tuple(str(v).strip() for v in items if str(v).strip())
    if not names:
        errors.append(ConfigError(where, "names no column", "give column names, e.g. partition.by: region,day"))
    return names


def _mapping(value: Any, where: str, errors: list[ConfigError]) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        errors.append(ConfigError(where, "must be a mapping of names to values", "for example {key: value}"))
        return {}
    return {str(k): str(v) for k, v in value.items()}


def _catalog_uri(uri: Any) -> bool:
    if not isinstance(uri, str):
        return False
    if uri.startswith(("http://", "https://")):
        return True
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        make_url(uri)
    except ArgumentError:
        return False
    return True
