"""The schema history's properties (Debezium's names and defaults), for the MySQL and MariaDB connectors.

`PROPERTIES` is the `PropertySet` the connectors include; `history_settings` turns validated values
into `SchemaHistory` settings. `schema.history.internal` (the Kafka-backed store class) is refused:
headwater keeps the history in a file beside the offsets.
"""

from __future__ import annotations

from typing import Any

from headwater.config.properties import ConnectorConfig, Property, prop, refuse
from headwater.config.validation import PropertySet
from headwater.connectors.binlog.history import DEFAULT_DDL_FILTER

DEFINITIONS: list[Property] = [
    prop("include.schema.changes", "boolean", True),
    prop("schema.history.internal.skip.unparseable.ddl", "boolean", False),
    prop("schema.history.internal.store.only.captured.tables.ddl", "boolean", False),
    prop("schema.history.internal.store.only.captured.databases.ddl", "boolean", False),
    prop("schema.history.internal.ddl.filter", "regexes", ",".join(DEFAULT_DDL_FILTER)),
    prop("inconsistent.schema.handling.mode", "enum", "fail", ("fail", "warn", "skip")),
    refuse("schema.history.internal",
           why="headwater keeps the schema history in a file beside the offsets, not in a Kafka topic",
           instead="leave it out; the history lives in the Spark checkpoint or next to the engine's offset file"),
]

PROPERTIES = PropertySet(DEFINITIONS)


def history_settings(config: ConnectorConfig) -> dict[str, Any]:
    """Keyword arguments for `SchemaHistory` from validated properties (filters are the caller's)."""
    return {
        "skip_unparseable_ddl": bool(config["schema.history.internal.skip.unparseable.ddl"]),
        "store_only_captured_tables_ddl": bool(config["schema.history.internal.store.only.captured.tables.ddl"]),
        "store_only_captured_databases_ddl": bool(
            config["schema.history.internal.store.only.captured.databases.ddl"]),
        "ddl_filter": tuple(config["schema.history.internal.ddl.filter"] or ()),
    }
