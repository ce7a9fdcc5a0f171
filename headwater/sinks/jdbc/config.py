"""The `jdbc` sink's configuration: Debezium's JDBC sink properties as keys of the YAML `sink` block.

    sink: {type: jdbc, connection.url: jdbc:postgresql://host:5432/db, connection.username: u,
           connection.password: ${PW}, insert.mode: upsert, primary.key.mode: record_key,
           delete.enabled: true, schema.evolution: basic}

`parse_jdbc_sink` checks every property before anything connects and reports all problems at once
(`ConfigErrors`: the property, what is wrong, the fix; the closest known name for an unknown one).
`topics` or `topics.regex` choose the topics written (default: every topic of table changes; never
transaction metadata, heartbeats or schema changes). `mirror: true` is headwater's shorthand for keeping every captured table in step with no per-table
settings: upsert by the record key, deletes and truncates applied, missing tables and columns
created, each table named as its source table (`${source.table}`). `batch.atomic: true` (headwater's)
applies all tables of a micro-batch in one transaction, written by one Spark task, instead of one
transaction per task with the tables spread over the tasks. The password is held as a
`SecretStr`, so neither the configuration's text nor an error shows it.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote

from pydantic import SecretStr

from headwater.config.errors import ConfigError, ConfigErrors

DEFAULT_COLUMN_NAMING = "io.debezium.connector.jdbc.naming.DefaultColumnNamingStrategy"
DEFAULT_TABLE_NAMING = "io.debezium.connector.jdbc.naming.DefaultTableNameStrategy"
INSERT_MODES = ("insert", "update", "upsert")
PK_MODES = ("none", "kafka", "record_key", "record_value")
EVOLUTIONS = ("none", "basic")
#: URL scheme -> dialect name; the dialects without a driver here generate SQL only
SCHEMES = {"postgresql": "postgresql", "mysql": "mysql", "mariadb": "mysql", "oracle": "oracle",
           "sqlserver": "sqlserver", "db2": "db2"}
CONNECTED = ("postgresql", "mysql")  # the dialects this machine has a driver for
DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306}

#: every property the sink block takes (Debezium's names, and headwater's `type`, `mirror`, `batch.atomic`)
PROPERTIES = (
    "type", "mirror", "batch.atomic", "topics", "topics.regex", "connection.url", "connection.username", "connection.password", "insert.mode",
    "delete.enabled", "truncate.enabled", "primary.key.mode", "primary.key.fields", "schema.evolution",
    "table.name.format", "quote.identifiers", "batch.size", "field.include.list", "field.exclude.list",
    "database.time_zone", "column.naming.strategy", "table.naming.strategy",
    # accepted for a Debezium user's settings to carry over; a Python driver has no pool to size
    "connection.provider", "connection.pool.min_size", "connection.pool.max_size",
    "connection.pool.acquire_increment", "connection.pool.timeout", "dialect.postgres.postgis.schema",
    "dialect.sqlserver.identity.insert", "connector.class", "tasks.max", "name",
)
_URL = re.compile(r"jdbc:(?P<scheme>[a-z0-9]+):(?://(?P<host>\[[^\]]+\]|[^:/?;]*)(?::(?P<port>\d+))?)?"
                  r"(?:/(?P<db>[^?;]*))?(?P<rest>[?;].*)?")


@dataclass(frozen=True)
class Target:
    """Where a JDBC URL points: dialect, host, port, database and the URL's parameters."""

    dialect: str
    host: str
    port: int
    database: str
    params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JdbcSinkConfig:
    """A checked `jdbc` sink block (see the module's docstring)."""

    url: str
    target: Target
    username: str | None
    password: SecretStr | None
    insert_mode: str = "insert"
    delete_enabled: bool = False
    truncate_enabled: bool = False
    primary_key_mode: str = "none"
    primary_key_fields: tuple[str, ...] = ()
    schema_evolution: str = "none"
    table_name_format: str = "${topic}"
    quote_identifiers: bool = False
    batch_size: int = 500
    field_include: tuple[str, ...] = ()
    field_exclude: tuple[str, ...] = ()
    time_zone: str = "UTC"
    mirror: bool = False
    topics: tuple[str, ...] = ()
    topics_regex: str | None = None
    batch_atomic: bool = False

    def properties(self) -> dict[str, str]:
        """The configuration as Debezium's properties (the password left out), e.g. to ship it to
        Spark's tasks with `connection.password` added back from the secret."""
        props = {"connection.url": self.url, "insert.mode": self.insert_mode,
                 "delete.enabled": str(self.delete_enabled).lower(),
                 "truncate.enabled": str(self.truncate_enabled).lower(), "primary.key.mode": self.primary_key_mode,
                 "schema.evolution": self.schema_evolution, "table.name.format": self.table_name_format,
                 "quote.identifiers": str(self.quote_identifiers).lower(), "batch.size": str(self.batch_size),
                 "database.time_zone": self.time_zone, "batch.atomic": str(self.batch_atomic).lower()}
        if self.username is not None:
            props["connection.username"] = self.username
        if self.primary_key_fields:
            props["primary.key.fields"] = ",".join(self.primary_key_fields)
        if self.field_include:
            props["field.include.list"] = ",".join(self.field_include)
        if self.field_exclude:
            props["field.exclude.list"] = ",".join(self.field_exclude)
        if self.topics:
            props["topics"] = ",".join(self.topics)
        if self.topics_regex is not None:
            props["topics.regex"] = self.topics_regex
        return props

    def __repr__(self) -> str:
        return f"JdbcSinkConfig({self.properties()!r})"


def parse_url(url: str) -> Target:
    """The target of a JDBC URL (`jdbc:postgresql://host:port/db?k=v`, `jdbc:mariadb://...`,
    `jdbc:mysql://...`; Oracle's, SQL Server's and Db2's for their dialects); ValueError if it is not one."""
    parts = url.strip().split(":")
    if len(parts) < 3 or parts[0] != "jdbc" or parts[1] not in SCHEMES:
        raise ValueError("not a JDBC URL of a known database")
    dialect = SCHEMES[parts[1]]
    m = _URL.fullmatch(url.strip())
    if m is None:
        if dialect in CONNECTED:
            raise ValueError(f"not a {dialect} JDBC URL")
        return Target(dialect, "", 0, "")  # a database headwater generates SQL for but does not connect to
    params: dict[str, str] = {}
    rest = m.group("rest") or ""
    if rest.startswith("?"):
        params = dict(parse_qsl(rest[1:]))
    elif rest.startswith(";"):  # SQL Server: ;databaseName=db;user=...
        params = dict(p.split("=", 1) for p in rest[1:].split(";") if "=" in p)
    database = unquote(m.group("db") or params.get("databaseName", ""))
    host = (m.group("host") or "localhost").strip("[]")
    return Target(dialect, host, int(m.group("port") or DEFAULT_PORTS.get(dialect, 0)), database, params)


def _flag(props: dict[str, Any], key: str, default: bool, errors: list[ConfigError]) -> bool:
    v = props.get(key, default)
    if isinstance(v, bool):
        return v
    text = str(v).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    errors.append(ConfigError(f"sink.{key}", f"{v!r} is not a boolean", "write true or false"))
    return default


def _choice(props: dict[str, Any], key: str, allowed: tuple[str, ...], default: str, errors: list[ConfigError]) -> str:
    v = str(props.get(key, default)).strip().lower()
    if v not in allowed:
        errors.append(ConfigError(f"sink.{key}", f"{props[key]!r} is not allowed", "allowed values: " + ", ".join(allowed)))
        return default
    return v


def _names(props: dict[str, Any], key: str) -> tuple[str, ...]:
    v = props.get(key)
    if v is None:
        return ()
    items = v if isinstance(v, list) else str(v).split(",")
    return tuple(s.strip() for s in map(str, items) if s.strip())


def parse_jdbc_sink(props: dict[str, Any]) -> JdbcSinkConfig:
    """A `jdbc` sink block checked (see the module's docstring); `ConfigErrors` with every problem."""
    errors: list[ConfigError] = []
    for key in props:
        if key not in PROPERTIES:
            close = difflib.get_close_matches(str(key), PROPERTIES, n=1)
            errors.append(ConfigError(f"sink.{key}", "unknown property of the jdbc sink",
                                      f"did you mean {close[0]}?" if close else "see the JDBC sink's properties"))
    mirror = _flag(props, "mirror", False, errors)
    defaults: dict[str, Any] = {"insert.mode": "upsert", "primary.key.mode": "record_key", "delete.enabled": True,
                                "truncate.enabled": True, "schema.evolution": "basic",
                                "table.name.format": "${source.table}"} if mirror else {}
    p = {**defaults, **props}
    url = p.get("connection.url")
    target = Target("postgresql", "", 0, "")
    if not url:
        errors.append(ConfigError("sink.connection.url", "is required",
                                  "add connection.url: jdbc:postgresql://host:5432/db (or jdbc:mariadb://, jdbc:mysql://)"))
    else:
        try:
            target = parse_url(str(url))
        except ValueError:
            errors.append(ConfigError("sink.connection.url", f"{url!r} is not a JDBC URL headwater can write to",
                                      "use jdbc:postgresql://host:port/db, jdbc:mariadb://host:port/db or "
                                      "jdbc:mysql://host:port/db"))
        else:
            if target.dialect not in CONNECTED:
                errors.append(ConfigError("sink.connection.url", f"no {target.dialect} driver in headwater yet",
                                          "write to PostgreSQL, MariaDB or MySQL"))
            elif not target.database:
                errors.append(ConfigError("sink.connection.url", "names no database",
                                          "end the URL with /<database>"))
    insert_mode = _choice(p, "insert.mode", INSERT_MODES, "insert", errors)
    pk_mode = _choice(p, "primary.key.mode", PK_MODES, "none", errors)
    evolution = _choice(p, "schema.evolution", EVOLUTIONS, "none", errors)
    delete_enabled = _flag(p, "delete.enabled", False, errors)
    if pk_mode == "kafka":
        errors.append(ConfigError("sink.primary.key.mode", "kafka takes the key from Kafka's topic, partition and "
                                  "offset, which events read without Kafka do not have",
                                  "use record_key (or record_value with primary.key.fields)"))
    if insert_mode in ("upsert", "update") and pk_mode == "none":
        errors.append(ConfigError("sink.primary.key.mode", f"insert.mode={insert_mode} needs a primary key",
                                  "set primary.key.mode: record_key (or record_value)"))
    if delete_enabled and pk_mode != "record_key":
        errors.append(ConfigError("sink.delete.enabled", "deletes find their row by the record key",
                                  "set primary.key.mode: record_key, or delete.enabled: false"))
    include, exclude = _names(p, "field.include.list"), _names(p, "field.exclude.list")
    if include and exclude:
        errors.append(ConfigError("sink.field.include.list", "field.include.list and field.exclude.list exclude "
                                  "each other", "keep one of them"))
    for key, default in (("column.naming.strategy", DEFAULT_COLUMN_NAMING), ("table.naming.strategy", DEFAULT_TABLE_NAMING)):
        if key in p and str(p[key]) != default:
            errors.append(ConfigError(f"sink.{key}", f"{p[key]!r} is not available", f"the one strategy is {default}"))
    fmt = str(p.get("table.name.format", "${topic}"))
    unknown = set(re.findall(r"\$\{([^}]*)\}", fmt)) - {"topic", "source.db", "source.schema", "source.table"}
    if unknown:
        errors.append(ConfigError("sink.table.name.format", f"unknown placeholder ${{{sorted(unknown)[0]}}}",
                                  "use ${topic}, ${source.db}, ${source.schema} or ${source.table}"))
    batch_size = 500
    try:
        batch_size = int(p.get("batch.size", 500))
        if batch_size <= 0:
            raise ValueError
    except (TypeError, ValueError):
        errors.append(ConfigError("sink.batch.size", f"{p.get('batch.size')!r} is not a positive whole number",
                                  "for example batch.size: 500"))
    time_zone = str(p.get("database.time_zone", "UTC"))
    try:
        from zoneinfo import ZoneInfo

        ZoneInfo(time_zone)
    except (ValueError, KeyError, OSError):
        errors.append(ConfigError("sink.database.time_zone", f"{time_zone!r} is not a time zone",
                                  "use an IANA name such as UTC or Europe/Berlin"))
    topics, topics_regex = _names(p, "topics"), p.get("topics.regex")
    if topics and topics_regex is not None:
        errors.append(ConfigError("sink.topics.regex", "topics and topics.regex exclude each other", "keep one of them"))
    if topics_regex is not None:
        try:
            re.compile(str(topics_regex))
        except re.error as exc:
            errors.append(ConfigError("sink.topics.regex", f"is not a regular expression: {exc}",
                                      "for example topics.regex: inventory\\..*"))
    truncate_enabled = _flag(p, "truncate.enabled", False, errors)
    quote = _flag(p, "quote.identifiers", False, errors)
    batch_atomic = _flag(p, "batch.atomic", False, errors)
    if errors:
        raise ConfigErrors(errors)
    password = p.get("connection.password")
    return JdbcSinkConfig(
        url=str(url), target=target,
        username=None if p.get("connection.username") is None else str(p["connection.username"]),
        password=None if password is None else SecretStr(str(password)),
        insert_mode=insert_mode, delete_enabled=delete_enabled,
        truncate_enabled=truncate_enabled, primary_key_mode=pk_mode,
        primary_key_fields=_names(p, "primary.key.fields"), schema_evolution=evolution, table_name_format=fmt,
        quote_identifiers=quote, batch_size=batch_size,
        field_include=include, field_exclude=exclude, time_zone=time_zone, mirror=mirror, topics=topics,
        topics_regex=None if topics_regex is None else str(topics_regex), batch_atomic=batch_atomic)
