"""Connector properties: Debezium's names, types, defaults and allowed values, and their validation.

Each connector declares its properties here as `Property` rows (a small ConfigDef, as Debezium has).
Validation turns a flat dict of user values into a `ConnectorConfig` of typed values, or raises
`ConfigErrors` naming every bad property with a hint: unknown names (with the closest known name),
wrong types, values outside the allowed set, missing required properties, and include/exclude lists
given together. Properties Debezium has but headwater does not implement yet are refused by name,
never silently ignored.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from headwater.config.errors import ConfigError, ConfigErrors

SECRET_WORDS = ("password", "secret", "sslpassword", "token")
MASK = "********"


@dataclass(frozen=True)
class Property:
    """One connector property as Debezium defines it."""

    name: str
    type: str = "string"  # string | int | boolean | list | enum | password
    default: Any = None
    allowed: tuple[str, ...] = ()
    required: bool = False
    doc: str = ""
    supported: bool = True
    aliases: Mapping[str, str] = field(default_factory=dict)  # deprecated value -> value


def _p(name: str, type: str = "string", default: Any = None, allowed: Iterable[str] = (), **kw: Any) -> Property:
    return Property(name, type, default, tuple(allowed), **kw)


NOT_YET = "headwater does not implement this Debezium property yet"

# Properties every connector has (Debezium's common source-connector properties).
COMMON: list[Property] = [
    _p("name", doc="connector name"),
    _p("connector.class", required=True, doc="short name (postgres, mysql, ...) or Debezium's class name"),
    _p("tasks.max", "int", 1),
    _p("topic.prefix", required=True, doc="namespace of topic and schema names"),
    _p("topic.delimiter", default="."),
    _p("topic.cache.size", "int", 10000),
    _p("topic.transaction", default="transaction"),
    _p("topic.heartbeat.prefix", default="__debezium-heartbeat"),
    _p("topic.naming.strategy", default="io.debezium.schema.SchemaTopicNamingStrategy",
       allowed=("io.debezium.schema.SchemaTopicNamingStrategy",)),
    _p("tombstones.on.delete", "boolean", True),
    _p("skipped.operations", "list", "t", allowed=("c", "u", "d", "t", "none")),
    _p("skip.messages.without.change", "boolean", False),
    _p("provide.transaction.metadata", "boolean", False),
    _p("heartbeat.interval.ms", "int", 0),
    _p("heartbeat.action.query"),
    _p("errors.max.retries", "int", -1),
    _p("retriable.restart.connector.wait.ms", "int", 10000),
    _p("event.processing.failure.handling.mode", "enum", "fail", ("fail", "warn", "skip")),
    _p("max.batch.size", "int", 2048),
    _p("max.queue.size", "int", 8192),
    _p("max.queue.size.in.bytes", "int", 0),
    _p("poll.interval.ms", "int", 500),
    _p("schema.name.adjustment.mode", "enum", "none", ("none", "avro", "avro_unicode")),
    _p("field.name.adjustment.mode", "enum", "none", ("none", "avro", "avro_unicode")),
    _p("binary.handling.mode", "enum", "bytes", ("bytes", "base64", "base64-url-safe", "hex")),
    _p("decimal.handling.mode", "enum", "precise", ("precise", "double", "string")),
    _p("time.precision.mode", "enum", "adaptive", ("adaptive", "adaptive_time_microseconds", "connect", "isostring", "microseconds", "nanoseconds")),
    _p("column.include.list", "list"),
    _p("column.exclude.list", "list"),
    _p("column.propagate.source.type", "list"),
    _p("datatype.propagate.source.type", "list"),
    _p("message.key.columns"),
    _p("snapshot.include.collection.list", "list"),
    _p("snapshot.select.statement.overrides", "list"),
    _p("snapshot.delay.ms", "int", 0),
    _p("snapshot.fetch.size", "int", 10240),
    _p("snapshot.max.threads", "int", 1),
    _p("snapshot.lock.timeout.ms", "int", 10000),
    _p("custom.metric.tags"),
    # Debezium properties headwater refuses for now (named, so the user learns why).
    *[
        _p(n, supported=False, doc=NOT_YET)
        for n in (
            "signal.data.collection", "signal.enabled.channels", "signal.kafka.topic",
            "signal.kafka.groupid", "signal.kafka.bootstrap.servers", "signal.kafka.poll.timeout.ms",
            "notification.enabled.channels", "notification.sink.topic.name",
            "incremental.snapshot.chunk.size", "incremental.snapshot.watermarking.strategy",
            "incremental.snapshot.allow.schema.changes", "converters", "post.processors",
            "kafka.consumer.offset.commit.enabled",
        )
    ],
]

POSTGRES: list[Property] = [
    _p("plugin.name", "enum", "pgoutput", ("pgoutput",),
       doc="only pgoutput is supported (decoderbufs and wal2json are not)"),
    _p("slot.name", default="debezium"),
    _p("slot.drop.on.stop", "boolean", False),
    _p("slot.max.retries", "int", 6),
    _p("slot.retry.delay.ms", "int", 10000),
    _p("slot.stream.params"),
    _p("publication.name", default="dbz_publication"),
    _p("publication.autocreate.mode", "enum", "all_tables", ("all_tables", "disabled", "filtered")),
    _p("replica.identity.autoset.values"),
    _p("database.hostname", required=True),
    _p("database.port", "int", 5432),
    _p("database.user", required=True),
    _p("database.password", "password"),
    _p("database.dbname", required=True),
    _p("database.sslmode", "enum", "prefer",
       ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")),
    _p("database.sslcert"),
    _p("database.sslkey"),
    _p("database.sslpassword", "password"),
    _p("database.sslrootcert"),
    _p("database.tcpKeepAlive", "boolean", True),
    _p("database.initial.statements"),
    _p("schema.include.list", "list"),
    _p("schema.exclude.list", "list"),
    _p("table.include.list", "list"),
    _p("table.exclude.list", "list"),
    _p("hstore.handling.mode", "enum", "json", ("json", "map")),
    _p("interval.handling.mode", "enum", "numeric", ("numeric", "string")),
    _p("money.fraction.digits", "int", 2),
    _p("include.unknown.datatypes", "boolean", False),
    _p("message.prefix.include.list", "list"),
    _p("message.prefix.exclude.list", "list"),
    _p("unavailable.value.placeholder", default="__debezium_unavailable_value"),
    _p("snapshot.mode", "enum", "initial",
       ("initial", "always", "never", "initial_only", "no_data", "when_needed"),
       aliases={"schema_only": "no_data"}),
    _p("status.update.interval.ms", "int", 10000),
    _p("schema.refresh.mode", "enum", "columns_diff",
       ("columns_diff", "columns_diff_exclude_unchanged_toast")),
    _p("flush.lsn.source", "boolean", True),
    _p("xmin.fetch.interval.ms", "int", 0),
    # headwater's own: pgoutput protocol version (2 streams large in-progress transactions,
    # which headwater spills to disk) and the replication connection's read buffer bound.
    _p("headwater.pgoutput.protocol.version", "int", 2, doc="pgoutput protocol version: 1 or 2"),
    _p("headwater.stream.buffer.bytes", "int", 256 * 1024 * 1024,
       doc="memory the driver-side replication reader may buffer before it stops reading"),
    _p("headwater.max.batch.events", "int", 200_000,
       doc="the most change messages one batch takes (bounds the driver's memory; maxEventsPerTrigger may lower it)"),
    _p("headwater.snapshot.chunk.rows", "int", 200_000,
       doc="target rows per snapshot chunk (one chunk = one Spark partition)"),
]

# Properties whose names carry a parameter (Debezium's "column.mask.with.<n>.chars" and such).
PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"column\.truncate\.to\.(\d+)\.chars"), "list"),
    (re.compile(r"column\.mask\.with\.(\d+)\.chars"), "list"),
    (re.compile(r"column\.mask\.hash\.(v2\.)?([A-Za-z0-9-]+)\.with\.salt\.(.+)"), "list"),
    (re.compile(r"snapshot\.select\.statement\.overrides\.(.+)"), "string"),
]

# Engine-level Debezium properties a user may carry over from a Debezium configuration; they
# have no effect here because Spark's checkpoint and the sink replace Kafka Connect's.
IGNORED_PREFIXES = ("offset.", "key.converter", "value.converter", "header.converter")

CONNECTOR_CLASSES: dict[str, str] = {
    "postgres": "io.debezium.connector.postgresql.PostgresConnector",
    "mysql": "io.debezium.connector.mysql.MySqlConnector",
    "mariadb": "io.debezium.connector.mariadb.MariaDbConnector",
    "oracle": "io.debezium.connector.oracle.OracleConnector",
    "sqlserver": "io.debezium.connector.sqlserver.SqlServerConnector",
    "db2": "io.debezium.connector.db2.Db2Connector",
    "mongodb": "io.debezium.connector.mongodb.MongoDbConnector",
}
SHORT_ALIASES = {"postgresql": "postgres", "pg": "postgres", "mssql": "sqlserver", "mongo": "mongodb"}
IMPLEMENTED = {"postgres": POSTGRES}

EXCLUSIVE_PAIRS = [
    ("schema.include.list", "schema.exclude.list"),
    ("table.include.list", "table.exclude.list"),
    ("column.include.list", "column.exclude.list"),
    ("message.prefix.include.list", "message.prefix.exclude.list"),
]


def canonical_names(props: Mapping[str, Any]) -> dict[str, Any]:
    """Restore the case of known property names (Spark lower-cases data source option keys)."""
    known = {p.name.lower(): p.name for p in COMMON + [q for props_ in IMPLEMENTED.values() for q in props_]}
    return {known.get(str(k).lower(), str(k)): v for k, v in props.items()}


def connector_short_name(value: str) -> str | None:
    """`postgres` for `postgres`, `postgresql` or Debezium's PostgresConnector class; None if unknown."""
    v = value.strip()
    low = v.lower()
    low = SHORT_ALIASES.get(low, low)
    if low in CONNECTOR_CLASSES:
        return low
    for short, cls in CONNECTOR_CLASSES.items():
        if v == cls:
            return short
    return None


def is_secret(name: str) -> bool:
    last = name.rsplit(".", 1)[-1].lower()
    return any(w in last for w in SECRET_WORDS)


def mask_secrets(props: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of `props` with every password-like value replaced by asterisks."""
    return {k: (MASK if is_secret(k) and v not in (None, "") else v) for k, v in props.items()}


@dataclass
class ConnectorConfig:
    """Validated connector properties: typed values with Debezium's defaults filled in."""

    connector: str
    values: dict[str, Any]
    definitions: dict[str, Property]
    extra: dict[str, Any] = field(default_factory=dict)  # pattern properties, verbatim
    defaults: dict[str, Any] = field(default_factory=dict)  # parsed defaults of properties not set

    def __getitem__(self, name: str) -> Any:
        if name in self.values:
            return self.values[name]
        if name in self.defaults:
            return self.defaults[name]
        if name in self.definitions:
            return None
        raise KeyError(name)

    def get(self, name: str, default: Any = None) -> Any:
        try:
            value = self[name]
        except KeyError:
            return default
        return default if value is None else value

    def pattern_values(self, pattern: str) -> dict[str, Any]:
        """The pattern properties whose names match the regex `pattern`."""
        rx = re.compile(pattern)
        return {k: v for k, v in self.extra.items() if rx.fullmatch(k)}

    def as_properties(self) -> dict[str, str]:
        """Every explicitly set property as strings, the way Debezium would take them."""
        out: dict[str, str] = {}
        for k, v in {**self.values, **self.extra}.items():
            if isinstance(v, bool):
                out[k] = "true" if v else "false"
            elif isinstance(v, list):
                out[k] = ",".join(v)
            elif v is not None:
                out[k] = str(v)
        return out

    def masked(self) -> dict[str, Any]:
        return mask_secrets(self.as_properties())


def _parse(prop: Property, raw: Any) -> tuple[Any, ConfigError | None]:
    name = prop.name
    if raw is None:
        return None, None
    if prop.type == "int":
        if isinstance(raw, bool):
            return None, ConfigError(name, f"expected a whole number, got {raw!r}", f"for example {name}: {prop.default}")
        try:
            return int(str(raw).strip()), None
        except ValueError:
            return None, ConfigError(name, f"expected a whole number, got {raw!r}", f"for example {name}: {prop.default}")
    if prop.type == "boolean":
        if isinstance(raw, bool):
            return raw, None
        s = str(raw).strip().lower()
        if s in ("true", "false"):
            return s == "true", None
        return None, ConfigError(name, f"expected true or false, got {raw!r}", f"write {name}: true or {name}: false")
    if prop.type == "enum":
        s = str(raw).strip()
        low = s.lower()
        if low in prop.aliases:
            low = prop.aliases[low]
        if low in prop.allowed:
            return low, None
        return None, ConfigError(name, f"{s!r} is not allowed", "allowed values: " + ", ".join(prop.allowed))
    if prop.type == "list":
        items = raw if isinstance(raw, list) else str(raw).split(",")
        values = [str(i).strip() for i in items if str(i).strip()]
        if prop.allowed:
            bad = [v for v in values if v.lower() not in prop.allowed]
            if bad:
                return None, ConfigError(name, f"{', '.join(bad)} not allowed", "allowed values: " + ", ".join(prop.allowed))
            values = [v.lower() for v in values]
        if name.endswith((".include.list", ".exclude.list")) or name == "snapshot.include.collection.list":
            for v in values:
                try:
                    re.compile(v)
                except re.error as exc:
                    return None, ConfigError(name, f"{v!r} is not a valid regular expression: {exc}",
                                             "use anchored Java-style regexes such as public\\.orders")
        return values, None
    if isinstance(raw, (dict, list)):
        return None, ConfigError(name, f"expected a single value, got {type(raw).__name__}", "give a string")
    return str(raw), None


def _suggest(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]}?"
    return "see the connector's property list in the README"


def validate_connector(props: Mapping[str, Any]) -> ConnectorConfig:
    """Validate connector properties (the YAML `source:` block); raise ConfigErrors listing all problems."""
    errors: list[ConfigError] = []
    raw_class = props.get("connector.class")
    if raw_class in (None, ""):
        raise ConfigErrors([ConfigError("connector.class", "is required",
                                        "set it to postgres (or Debezium's class name)")])
    short = connector_short_name(str(raw_class))
    if short is None:
        raise ConfigErrors([ConfigError("connector.class", f"unknown connector {raw_class!r}",
                                        "use one of: " + ", ".join(CONNECTOR_CLASSES))])
    if short not in IMPLEMENTED:
        raise ConfigErrors([ConfigError(
            "connector.class", f"the {short} connector is not implemented in headwater yet",
            "implemented: " + ", ".join(IMPLEMENTED))])

    definitions = {p.name: p for p in COMMON + IMPLEMENTED[short]}
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    for name, raw in props.items():
        name = str(name)
        prop = definitions.get(name)
        if prop is None:
            pattern = next((t for rx, t in PATTERNS if rx.fullmatch(name)), None)
            if pattern is not None:
                value, err = _parse(Property(name, pattern), raw)
                if err:
                    errors.append(err)
                else:
                    extra[name] = value
                continue
            if name.startswith(IGNORED_PREFIXES):
                continue
            errors.append(ConfigError(name, "unknown property", _suggest(name, definitions)))
            continue
        if not prop.supported:
            errors.append(ConfigError(name, prop.doc or NOT_YET, "remove it from the configuration"))
            continue
        if name == "connector.class":
            values[name] = short
            continue
        value, err = _parse(prop, raw)
        if err:
            errors.append(err)
        else:
            values[name] = value

    for prop in definitions.values():
        if prop.required and values.get(prop.name) in (None, "", []) and \
                prop.name not in [e.property for e in errors]:
            errors.append(ConfigError(prop.name, "is required", f"add {prop.name}: <value> to the source block"))

    for a, b in EXCLUSIVE_PAIRS:
        if values.get(a) and values.get(b):
            errors.append(ConfigError(f"{a} / {b}", "cannot be used together", f"keep either {a} or {b}"))

    skipped = values.get("skipped.operations")
    if skipped and "none" in skipped and len(skipped) > 1:
        errors.append(ConfigError("skipped.operations", "'none' cannot be combined with other operations",
                                  "write none, or a list such as t,d"))

    _check_ranges(values, errors)
    if errors:
        raise ConfigErrors(errors)
    defaults = {p.name: _parse(p, p.default)[0] for p in definitions.values()
                if p.supported and p.default is not None and p.name not in values}
    return ConnectorConfig(short, values, {**definitions}, extra, defaults)


def _check_ranges(values: dict[str, Any], errors: list[ConfigError]) -> None:
    slot = values.get("slot.name")
    if slot is not None and not re.fullmatch(r"[a-z0-9_]{1,63}", slot):
        errors.append(ConfigError("slot.name", f"{slot!r} is not a valid replication slot name",
                                  "use 1 to 63 lower-case letters, digits and underscores"))
    prefix = values.get("topic.prefix")
    if prefix is not None and not re.fullmatch(r"[A-Za-z0-9._-]+", prefix):
        errors.append(ConfigError("topic.prefix", f"{prefix!r} has characters a topic name cannot hold",
                                  "use letters, digits, '.', '_' and '-'"))
    port = values.get("database.port")
    if port is not None and not 0 < port < 65536:
        errors.append(ConfigError("database.port", f"{port} is not a TCP port", "use a number from 1 to 65535"))
    for name in ("max.batch.size", "max.queue.size", "snapshot.fetch.size", "snapshot.max.threads",
                 "headwater.snapshot.chunk.rows", "headwater.stream.buffer.bytes", "headwater.max.batch.events"):
        if name in values and values[name] is not None and values[name] <= 0:
            errors.append(ConfigError(name, f"must be positive, got {values[name]}", "use a number above 0"))
    for name in ("heartbeat.interval.ms", "snapshot.delay.ms", "money.fraction.digits", "xmin.fetch.interval.ms",
                 "status.update.interval.ms", "slot.retry.delay.ms", "slot.max.retries"):
        if values.get(name) is not None and values[name] < 0:
            errors.append(ConfigError(name, f"must not be negative, got {values[name]}", "use 0 or more"))
    version = values.get("headwater.pgoutput.protocol.version")
    if version is not None and version not in (1, 2):
        errors.append(ConfigError("headwater.pgoutput.protocol.version", f"{version} is not supported",
                                  "use 1 or 2"))
