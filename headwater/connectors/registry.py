"""The registry of connectors: names, property definitions and source classes, loaded on first use.

Each connector is registered once, by its short name, other names users write, and Debezium's
class names; its property definitions (a `PropertySet`) and its `SourceConnector` class are named
by module path and imported only when needed, so importing the registry imports no connector.
Adding a connector is one `Connector(...)` row (plus its package); a connector kept outside
headwater is named by `connector.class: package.module:ATTRIBUTE`, the path of its `Connector` row
(loaded, and known by its short name from then on, in every process that reads the configuration:
also Spark's Python workers), or made known in this process with `register`. `validate_connector` checks a
connector's properties (the YAML `source:` block, Spark's options); `create_source` builds the
connector's driver-side half from the validated configuration.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from headwater.config.errors import ConfigError, ConfigErrors
from headwater.config.properties import ConnectorConfig
from headwater.config.validation import PropertySet, all_definitions, restore_case, validate_properties

if TYPE_CHECKING:
    from headwater.connectors.base import SourceConnector


@dataclass(frozen=True)
class Connector:
    """One connector: its names, and where its properties and source class live (None: not built yet)."""

    name: str  # short name, what ConnectorConfig.connector holds
    classes: tuple[str, ...]  # Debezium's class names
    aliases: tuple[str, ...] = ()  # other short names users write
    properties: str | None = None  # "module:attribute" of its PropertySet
    source: str | None = None  # "module:attribute" of its SourceConnector class
    debezium_name: str | None = None  # Debezium's `Module.name()` (source.connector), when not `name`

    @property
    def implemented(self) -> bool:
        return self.properties is not None and self.source is not None

    @property
    def plugin_name(self) -> str:
        """Debezium's name of the connector (`source.connector`, the `connectorName` context header)."""
        return self.debezium_name or self.name


CONNECTORS: tuple[Connector, ...] = (
    Connector("postgres", ("io.debezium.connector.postgresql.PostgresConnector",), ("postgresql", "pg"),
              properties="headwater.connectors.postgres.properties:PROPERTIES",
              source="headwater.connectors.postgres.source:PostgresSource", debezium_name="postgresql"),
    Connector("mysql", ("io.debezium.connector.mysql.MySqlConnector",),
              properties="headwater.connectors.mysql.properties:PROPERTIES",
              source="headwater.connectors.mysql.source:MySqlSource"),
    Connector("mariadb", ("io.debezium.connector.mariadb.MariaDbConnector",),
              properties="headwater.connectors.mariadb.properties:PROPERTIES",
              source="headwater.connectors.mariadb.source:MariaDbSource"),
    Connector("oracle", ("io.debezium.connector.oracle.OracleConnector",)),
    Connector("sqlserver", ("io.debezium.connector.sqlserver.SqlServerConnector",), ("mssql",)),
    Connector("db2", ("io.debezium.connector.db2.Db2Connector",)),
    Connector("mongodb", ("io.debezium.connector.mongodb.MongoDbConnector",), ("mongo",)),
)


_REGISTERED: dict[str, Connector] = {}  # connectors defined outside headwater, by short name


def register(connector: Connector) -> None:
    """Make a connector defined outside headwater known in this process, by its names."""
    _REGISTERED[connector.name] = connector


def _load(path: str) -> Any:
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _known() -> tuple[Connector, ...]:
    return (*CONNECTORS, *_REGISTERED.values())


def find(value: str) -> Connector | None:
    """The connector called `value` (a short name, any case, a Debezium class name, or the
    `module:ATTRIBUTE` path of a `Connector` row defined outside headwater); None if unknown."""
    v = value.strip()
    if ":" in v:
        try:
            found = _load(v)
        except (ImportError, AttributeError):
            return None
        if not isinstance(found, Connector):
            return None
        register(found)
        return found
    low = v.lower()
    for c in _known():
        if low == c.name or low in c.aliases or v in c.classes:
            return c
    return None


def lookup(value: Any) -> Connector:
    """The implemented connector `value` (connector.class) names; ConfigErrors naming the known ones if none."""
    if value in (None, ""):
        raise ConfigErrors([ConfigError("connector.class", "is required",
                                        "set it to postgres (or Debezium's class name)")])
    found = find(str(value))
    implemented = ", ".join(c.name for c in _known() if c.implemented)
    if found is None:
        raise ConfigErrors([ConfigError(
            "connector.class", f"unknown connector {value!r}",
            f"use one of: {', '.join(c.name for c in _known())} (implemented: {implemented}), "
            "Debezium's class name, or the module:ATTRIBUTE path of a connector defined outside headwater")])
    if not found.implemented:
        raise ConfigErrors([ConfigError(
            "connector.class", f"the {found.name} connector is not implemented in headwater yet",
            "implemented: " + implemented)])
    return found


def properties_of(connector: Connector) -> PropertySet:
    """The connector's own property definitions and checks."""
    assert connector.properties is not None, f"{connector.name} is not implemented"
    found: PropertySet = _load(connector.properties)
    return found


def validate_connector(props: Mapping[str, Any]) -> ConnectorConfig:
    """Validate connector properties (the YAML `source:` block); raise ConfigErrors listing all problems."""
    connector = lookup(props.get("connector.class"))
    return validate_properties(connector.name, props, properties_of(connector))


def canonical_names(props: Mapping[str, Any]) -> dict[str, Any]:
    """`props` with the case of the named connector's property names restored (Spark lower-cases
    option keys); unchanged if the connector is not known (validation then says so)."""
    connector = find(str(props.get("connector.class") or ""))
    if connector is None or not connector.implemented:
        return dict(props)
    return restore_case(props, all_definitions(properties_of(connector)))


def create_source(config: ConnectorConfig, **kwargs: Any) -> SourceConnector:
    """The SourceConnector for `config.connector` (keyword arguments go to its constructor)."""
    entry = lookup(config.connector)
    assert entry.source is not None
    connector: SourceConnector = _load(entry.source)(config, **kwargs)
    return connector
