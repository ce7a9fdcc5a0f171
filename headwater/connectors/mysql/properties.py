"""The MySQL connector's properties: the binlog connectors', `gtid.source.includes`/`excludes` (source UUIDs
of MySQL's GTID sets), and MySQL's spelling of `database.ssl.mode` (`disabled`, `preferred`, `required`,
`verify_ca`, `verify_identity`)."""

from __future__ import annotations

from headwater.connectors.binlog.properties import GTID_SOURCES, property_set

PROPERTIES = property_set(("disabled", "preferred", "required", "verify_ca", "verify_identity"), GTID_SOURCES)
