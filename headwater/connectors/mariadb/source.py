"""The MariaDB connector: the binlog source with MariaDB's GTIDs (`domain-server-sequence`), its privilege
names and `source.connector` `mariadb`."""

from __future__ import annotations

from headwater.connectors.binlog.gtid import GtidFormat, MariaGtids
from headwater.connectors.binlog.source import BinlogSource
from headwater.connectors.mariadb.context import MariaDbContext


class MariaDbSource(BinlogSource):
    product = "MariaDB"
    dbms = "mariadb"
    monitor_privilege = "BINLOG MONITOR"
    gtid_query = "SELECT @@global.gtid_binlog_pos"
    context_class = MariaDbContext

    def gtid_format(self) -> GtidFormat:
        return MariaGtids()
