"""The MariaDB connector: the binlog source with MariaDB's GTIDs (`domain-server-sequence`), its privilege
names and `source.connector` `mariadb`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from headwater.connectors.binlog.gtid import GtidFormat, MariaGtids
from headwater.connectors.binlog.records import BinlogContext, binlog_source_schema
from headwater.connectors.binlog.source import BinlogSource
from headwater.events.connect import Schema


@dataclass(frozen=True, kw_only=True)
class MariaDbContext(BinlogContext):
    connector: ClassVar[str] = "mariadb"
    source_schema: ClassVar[Schema] = binlog_source_schema("mariadb")


class MariaDbSource(BinlogSource):
    product = "MariaDB"
    dbms = "mariadb"
    monitor_privilege = "BINLOG MONITOR"
    gtid_query = "SELECT @@global.gtid_binlog_pos"
    context_class = MariaDbContext

    def gtid_format(self) -> GtidFormat:
        return MariaGtids()
