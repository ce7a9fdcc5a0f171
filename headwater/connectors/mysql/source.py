"""The MySQL connector: the binlog source with MySQL's GTID sets (`uuid:interval`, filtered by
`gtid.source.includes`/`excludes`), its privilege names and `source.connector` `mysql`.

Written to the spec (no MySQL server runs here): the GTID sets are unit-tested, the rest is the
binlog package that MariaDB verifies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from headwater.connectors.binlog.gtid import GtidFormat, MySqlGtids
from headwater.connectors.binlog.records import BinlogContext, binlog_source_schema
from headwater.connectors.binlog.source import BinlogSource
from headwater.events.connect import Schema


@dataclass(frozen=True, kw_only=True)
class MySqlContext(BinlogContext):
    connector: ClassVar[str] = "mysql"
    source_schema: ClassVar[Schema] = binlog_source_schema("mysql")


class MySqlSource(BinlogSource):
    product = "MySQL"
    dbms = "mysql"
    monitor_privilege = "REPLICATION CLIENT"
    gtid_query = "SELECT @@global.gtid_executed"
    context_class = MySqlContext

    def gtid_format(self) -> GtidFormat:
        return MySqlGtids(self.config.get("gtid.source.includes"), self.config.get("gtid.source.excludes"))
