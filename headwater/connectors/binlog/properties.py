"""The properties the MySQL and MariaDB connectors share (beyond the common ones in `headwater.config.common`).

The schema history's own (`include.schema.changes`, `schema.history.internal.*`,
`inconsistent.schema.handling.mode`) are in `history_properties` and included here.

Debezium's names, types and defaults for its binlog connectors. Every property here is implemented,
or refused by name with the reason (as for PostgreSQL). `property_set(ssl_modes)` is one
connector's `PropertySet`: MySQL and MariaDB differ only in the spelling of `database.ssl.mode`.
"""

from __future__ import annotations

from collections.abc import Sequence

from headwater.config.properties import Property, prop, refuse
from headwater.config.validation import PropertySet
from headwater.connectors.binlog import history_properties
from headwater.connectors.common import signals
from headwater.connectors.common.phases import CONFIGURATION_BASED

SNAPSHOT_MODES = ("initial", "initial_only", "when_needed", "never", "no_data", "recovery", "always",
                  "configuration_based")
LOCKING_MODES = ("minimal", "extended", "none")
PYMYSQL = "headwater reads the database through PyMySQL, not a JDBC driver"

DEFINITIONS: list[Property] = [
    prop("database.hostname", required=True),
    prop("database.port", "int", 3306, minimum=1, maximum=65535, why="a TCP port"),
    prop("database.user", required=True),
    prop("database.password", "password"),
    prop("database.server.id", "int", required=True, minimum=1, maximum=4294967295,
         doc="the replication client id, unique among the server's replicas"),
    prop("database.include.list", "regexes"),
    prop("database.exclude.list", "regexes"),
    prop("table.ignore.builtin", "boolean", True),
    prop("database.initial.statements", doc="';'-separated statements run on every non-binlog connection"),
    prop("connect.timeout.ms", "int", 30000, minimum=1),
    prop("snapshot.mode", "enum", "initial", SNAPSHOT_MODES,
         aliases={"schema_only": "no_data", "schema_only_recovery": "recovery"}),
    prop(CONFIGURATION_BASED + "snapshot.data", "boolean", False,
         doc="configuration_based: snapshot the tables' rows at every start"),
    prop(CONFIGURATION_BASED + "snapshot.schema", "boolean", False,
         doc="configuration_based: without snapshot.data, the schema only (first start), rebuilt at a restart"),
    prop(CONFIGURATION_BASED + "start.stream", "boolean", False, doc="configuration_based: stream changes"),
    prop(CONFIGURATION_BASED + "snapshot.on.data.error", "boolean", False,
         doc="configuration_based: a new snapshot when the stored binlog position is gone"),
    prop(CONFIGURATION_BASED + "snapshot.on.schema.error", "boolean", False,
         doc="configuration_based: accepted; a schema history that is missing is rebuilt from the tables as "
             "they are in every mode (with a warning)"),
    prop("snapshot.locking.mode", "enum", None, LOCKING_MODES,
         why="minimal_percona needs Percona Server's backup locks, which headwater does not take",
         doc="Debezium's locking snapshot when set; not set: MariaDB takes the lock-free parallel snapshot "
             "(lockfree.py), MySQL Debezium's minimal"),
    prop("snapshot.lock.timeout.ms", "int", 10000, minimum=1,
         doc="how long the snapshot waits for its global read lock (lock_wait_timeout)"),
    prop("include.query", "boolean", False),
    prop("bigint.unsigned.handling.mode", "enum", "long", ("long", "precise")),
    prop("time.precision.mode", "enum", "adaptive_time_microseconds", ("adaptive_time_microseconds", "connect"),
         why="Debezium's binlog connectors take adaptive_time_microseconds or connect"),
    prop("enable.time.adjuster", "boolean", True),
    prop("unavailable.value.placeholder", default="__debezium_unavailable_value",
         doc="the value of a BLOB/TEXT column a binlog_row_image=NOBLOB image leaves out (hex:<digits> for raw bytes)"),
    prop("headwater.schema.history.file",
         doc="the file the schema history is kept in, beside the offsets (`headwater run` uses "
             "<checkpointLocation>/schema_history.jsonl, the engine <offset file>.schema_history.jsonl; a bare "
             "Spark source needs it set; an engine without an offset file reads the tables as they are)"),
    prop("event.deserialization.failure.handling.mode", "enum", "fail", ("fail",),
         why="headwater stops at a binlog event it cannot read; warn and ignore are not implemented"),
    refuse("connector.adapter", "the connector is chosen by connector.class", "connector.class: mysql or mariadb"),
    refuse("database.protocol", PYMYSQL),
    refuse("database.jdbc.driver", PYMYSQL),
    refuse("connect.keep.alive", "headwater reconnects the binlog client itself after a lost connection",
           "errors.max.retries and retriable.restart.connector.wait.ms"),
    refuse("connect.keep.alive.interval.ms", "headwater reconnects the binlog client itself after a lost connection",
           "errors.max.retries and retriable.restart.connector.wait.ms"),
    refuse("min.row.count.to.stream.results", "snapshot chunks are always streamed from the server",
           "headwater.snapshot.chunk.rows sets the rows per chunk"),
    refuse("snapshot.tables.order.by.row.count"),
    refuse("binlog.buffer.size"),
    refuse("include.schema.comments"),
    refuse("database.ssl.keystore"),
    refuse("database.ssl.keystore.password"),
    refuse("database.ssl.truststore"),
    refuse("database.ssl.truststore.password"),
    *signals.PROPERTIES,
]


def property_set(ssl_modes: tuple[str, ...], own: Sequence[Property] = ()) -> PropertySet:
    """One binlog connector's properties and its `own`; `ssl_modes[0]`, no TLS, is the only `database.ssl.mode`
    implemented."""
    ssl = prop("database.ssl.mode", "enum", ssl_modes[0], ssl_modes[:1],
               why=f"TLS to the database is not built yet ({', '.join(ssl_modes[1:])} are Debezium's other values)")
    return PropertySet([*DEFINITIONS, *history_properties.DEFINITIONS, ssl, *own],
                       exclusive=[("database.include.list", "database.exclude.list"),
                                  ("gtid.source.includes", "gtid.source.excludes")],
                       check=signals.check_properties)


GTID_SOURCES = [prop("gtid.source.includes", "regexes"), prop("gtid.source.excludes", "regexes")]
