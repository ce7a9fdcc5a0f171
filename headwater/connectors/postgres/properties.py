"""The PostgreSQL connector's own properties (beyond the common ones in `headwater.config.common`).

Debezium's names, types and defaults; the `headwater.*` ones are headwater's own. Every one is
implemented by this connector, or refused by name with the reason.
"""

from __future__ import annotations

import re
from typing import Any

from headwater.config.errors import ConfigError
from headwater.config.properties import Property, prop
from headwater.config.validation import PropertySet
from headwater.connectors.common import signals

DEFINITIONS: list[Property] = [
    prop("plugin.name", "enum", "pgoutput", ("pgoutput",),
         why="only pgoutput is supported (decoderbufs and wal2json are not)"),
    prop("slot.name", default="debezium"),
    prop("slot.drop.on.stop", "boolean", False),
    prop("slot.max.retries", "int", 6, minimum=0),
    prop("slot.retry.delay.ms", "int", 10000, minimum=0),
    prop("slot.stream.params"),
    prop("publication.name", default="dbz_publication"),
    prop("publication.autocreate.mode", "enum", "all_tables", ("all_tables", "disabled", "filtered")),
    prop("replica.identity.autoset.values"),
    prop("database.hostname", required=True),
    prop("database.port", "int", 5432, minimum=1, maximum=65535, why="a TCP port"),
    prop("database.user", required=True),
    prop("database.password", "password"),
    prop("database.dbname", required=True),
    prop("database.sslmode", "enum", "prefer",
         ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")),
    prop("database.sslcert"),
    prop("database.sslkey"),
    prop("database.sslpassword", "password"),
    prop("database.sslrootcert"),
    prop("database.tcpKeepAlive", "boolean", True),
    prop("database.initial.statements"),
    prop("schema.include.list", "regexes"),
    prop("schema.exclude.list", "regexes"),
    prop("hstore.handling.mode", "enum", "json", ("json", "map")),
    prop("interval.handling.mode", "enum", "numeric", ("numeric", "string")),
    prop("money.fraction.digits", "int", 2, minimum=0),
    prop("include.unknown.datatypes", "boolean", False),
    prop("message.prefix.include.list", "regexes"),
    prop("message.prefix.exclude.list", "regexes"),
    prop("unavailable.value.placeholder", default="__debezium_unavailable_value"),
    prop("snapshot.mode", "enum", "initial",
         ("initial", "always", "never", "initial_only", "no_data", "when_needed"),
         aliases={"schema_only": "no_data"}),
    prop("status.update.interval.ms", "int", 10000, minimum=0),
    # With pgoutput, Debezium takes table schemas from the Relation messages whatever this says
    # (pgoutput messages never ask for a schema refresh), and so does headwater: both values behave alike.
    prop("schema.refresh.mode", "enum", "columns_diff", ("columns_diff", "columns_diff_exclude_unchanged_toast")),
    prop("flush.lsn.source", "boolean", True),
    prop("xmin.fetch.interval.ms", "int", 0, minimum=0, maximum=0,
         why="headwater does not read the slot's xmin (source.xmin stays null)"),
    # headwater's own: pgoutput protocol version (2 streams large in-progress transactions,
    # which headwater spills to disk)
    prop("headwater.pgoutput.protocol.version", "int", 2, minimum=1, maximum=2,
         doc="pgoutput protocol version: 1 or 2"),
    # the replication session's logical_decoding_work_mem (kB) when transactions stream in progress:
    # what the server still holds of a large transaction when it commits, sent only after it
    prop("headwater.pgoutput.decoding.work.mem.kb", "int", 8192, minimum=0,
         doc="logical_decoding_work_mem (kB) of the replication session under protocol 2 (0: the server's)"),
    *signals.PROPERTIES,
]


def check(values: dict[str, Any], errors: list[ConfigError]) -> None:
    """Checks of PostgreSQL's properties beyond their types and ranges."""
    slot = values.get("slot.name")
    if slot is not None and not re.fullmatch(r"[a-z0-9_]{1,63}", slot):
        errors.append(ConfigError("slot.name", f"{slot!r} is not a valid replication slot name",
                                  "use 1 to 63 lower-case letters, digits and underscores"))
    work_mem = values.get("headwater.pgoutput.decoding.work.mem.kb")
    if work_mem is not None and 0 < work_mem < 64:
        errors.append(ConfigError("headwater.pgoutput.decoding.work.mem.kb", f"{work_mem} kB is below PostgreSQL's "
                                  "minimum for logical_decoding_work_mem", "use 64 or more, or 0 for the server's own"))
    signals.check_properties(values, errors)


PROPERTIES = PropertySet(
    DEFINITIONS,
    exclusive=[("schema.include.list", "schema.exclude.list"),
               ("message.prefix.include.list", "message.prefix.exclude.list")],
    check=check,
)
