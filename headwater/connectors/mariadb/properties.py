"""The MariaDB connector's properties: the binlog connectors' (MariaDB's driver spells `database.ssl.mode`
`disable`, `trust`, `verify-ca`, `verify-full`)."""

from __future__ import annotations

from headwater.connectors.binlog.properties import property_set

PROPERTIES = property_set(("disable", "trust", "verify-ca", "verify-full"))
