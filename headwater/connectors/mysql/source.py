"""The MySQL connector: the binlog source with MySQL's GTID sets (`uuid:interval`, filtered by
`gtid.source.includes`/`excludes`; a stored set resumes the stream by COM_BINLOG_DUMP_GTID, also on
another server of the cluster, and is checked against the server's executed and purged sets), its
privilege names and `source.connector` `mysql`.

Written to the spec (no MySQL server runs here): the GTID sets are unit-tested, the rest is the
binlog package that MariaDB verifies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from headwater.connectors.base import Offset
from headwater.connectors.binlog.gtid import MySqlGtids
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

    def gtid_format(self) -> MySqlGtids:
        return MySqlGtids(self.config.get("gtid.source.includes"), self.config.get("gtid.source.excludes"))

    def position_unavailable(self, offset: Offset) -> str | None:
        """With GTIDs in the offset, whether the server (this one or another of the cluster) still holds every
        transaction after the stored set, as Debezium decides it (`MySqlGtids.lost`); else the binlog file."""
        if not offset.get("gtids"):
            return super().position_unavailable(offset)
        executed, purged = self._query("SELECT @@global.gtid_executed, @@global.gtid_purged")[0]
        try:
            return self.gtid_format().lost(str(offset["gtids"]), str(executed or ""), str(purged or ""))
        except ValueError as exc:
            return f"the stored offset's GTIDs cannot be read: {exc}"
