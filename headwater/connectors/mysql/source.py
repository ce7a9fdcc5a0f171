"""The MySQL connector: the binlog source with MySQL's GTID sets (`uuid:interval`, filtered by
`gtid.source.includes`/`excludes`; a stored set resumes the stream by COM_BINLOG_DUMP_GTID, also on
another server of the cluster, and is checked against the server's executed and purged sets), its
privilege names and `source.connector` `mysql`.

Written to the spec (no MySQL server runs here): the GTID sets are unit-tested, the rest is the
binlog package that MariaDB verifies."""

from __future__ import annotations

import pymysql

from headwater.connectors.base import Offset
from headwater.connectors.binlog.connection import variables
from headwater.connectors.binlog.gtid import MySqlGtids
from headwater.connectors.binlog.source import BinlogSource
from headwater.connectors.common.signals import READ_ONLY
from headwater.connectors.errors import SourceError
from headwater.connectors.mysql.context import MySqlContext


class MySqlSource(BinlogSource):
    product = "MySQL"
    dbms = "mysql"
    monitor_privilege = "REPLICATION CLIENT"
    gtid_query = "SELECT @@global.gtid_executed"
    context_class = MySqlContext

    def gtid_format(self) -> MySqlGtids:
        return MySqlGtids(self.config.get("gtid.source.includes"), self.config.get("gtid.source.excludes"))

    def check_read_only(self, conn: pymysql.Connection) -> None:
        """Read-only incremental snapshots tell what a chunk's SELECT saw by the executed GTID set (MySQL has no
        binlog position of a consistent snapshot), so they need GTIDs, as Debezium's do."""
        mode = variables(conn, ("gtid_mode",)).get("gtid_mode", "OFF")
        if mode.upper() != "ON":
            raise SourceError(
                f"read-only incremental snapshots (read.only / {READ_ONLY}) need gtid_mode=ON "
                f"(the server has {mode}): set gtid_mode=ON and enforce_gtid_consistency=ON, or let "
                "incremental snapshots write watermarks to signal.data.collection"
            )

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
