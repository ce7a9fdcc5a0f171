"""The MySQL connector's properties: the binlog connectors' (MySQL spells `database.ssl.mode` `disabled`,
`preferred`, `required`, `verify_ca`, `verify_identity`)."""

from __future__ import annotations

from headwater.connectors.binlog.properties import property_set

PROPERTIES = property_set(("disabled", "preferred", "required", "verify_ca", "verify_identity"))
