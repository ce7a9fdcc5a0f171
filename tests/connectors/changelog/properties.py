"""The change-log connector's properties and its row in the connector registry.

`connector.class: tests.connectors.changelog.properties:CONNECTOR` names it (the registry loads the
row by that path, also in Spark's Python workers).
"""

from __future__ import annotations

from typing import Any

from headwater.config.errors import ConfigError
from headwater.config.properties import Property, prop
from headwater.config.validation import PropertySet
from headwater.connectors.registry import Connector

CLASS = "tests.connectors.changelog.properties:CONNECTOR"

DEFINITIONS: list[Property] = [
    prop("database.hostname", required=True),
    prop("database.port", "int", 5432, minimum=1, maximum=65535, why="a TCP port"),
    prop("database.user", required=True),
    prop("database.password", "password"),
    prop("database.dbname", required=True),
    prop("schema.include.list", "regexes"),
    prop("schema.exclude.list", "regexes"),
    prop("snapshot.mode", "enum", "initial", ("initial", "always", "never", "initial_only", "no_data", "when_needed")),
    prop("changelog.table", default="public.hw_changelog", doc="the change-log table, as schema.table"),
]


def check(values: dict[str, Any], errors: list[ConfigError]) -> None:
    if values.get("time.precision.mode") == "isostring":
        errors.append(ConfigError("time.precision.mode", "isostring is not supported by the change-log connector",
                                  "use adaptive (the default), connect, microseconds or nanoseconds"))
    table = values.get("changelog.table")
    if table is not None and table.count(".") != 1:
        errors.append(ConfigError("changelog.table", f"{table!r} is not schema.table", "e.g. public.hw_changelog"))


PROPERTIES = PropertySet(DEFINITIONS, exclusive=[("schema.include.list", "schema.exclude.list")], check=check)

CONNECTOR = Connector("changelog", ("tests.connectors.changelog.ChangelogConnector",),
                      properties="tests.connectors.changelog.properties:PROPERTIES",
                      source="tests.connectors.changelog.source:ChangelogSource")
