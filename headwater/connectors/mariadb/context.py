"""The MariaDB connector's event context (`source.connector` `mariadb`, its `source` block's schema), apart from
the source: Spark's task workers unpickle it with every work unit, and importing it imports neither the
driver-side source nor what only the source needs (the DDL parser and sqlglot, the schema history)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from headwater.connectors.binlog.records import BinlogContext, binlog_source_schema
from headwater.events.connect import Schema


@dataclass(frozen=True, kw_only=True)
class MariaDbContext(BinlogContext):
    connector: ClassVar[str] = "mariadb"
    source_schema: ClassVar[Schema] = binlog_source_schema("mariadb")
