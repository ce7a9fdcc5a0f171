"""The MariaDB connector's properties: the binlog connectors' (MariaDB's driver spells `database.ssl.mode`
`disable`, `trust`, `verify-ca`, `verify-full`). MariaDB's GTIDs name a domain and a server, not a source
UUID: `gtid.source.includes`/`excludes` are refused."""

from __future__ import annotations

from headwater.config.properties import refuse
from headwater.connectors.binlog.properties import property_set

WHY = "MariaDB's GTID positions are one GTID per replication domain; headwater keeps every domain's"

PROPERTIES = property_set(("disable", "trust", "verify-ca", "verify-full"),
                          [refuse("gtid.source.includes", WHY), refuse("gtid.source.excludes", WHY)])
