"""`headwater status` for the binlog connectors: the server's binlog end, the stored position, the lag.

The lag is what the server has written past the stored position: the bytes left in the stored
position's file and in every later binlog file (SHOW BINARY LOGS), and how many files later the
server's end is. A stored file the server no longer has (purged) is reported as such.
"""

from __future__ import annotations

from typing import Any

import pymysql

from headwater.connectors.base import Offset
from headwater.connectors.binlog.positions import BinlogPosition, file_index
from headwater.connectors.binlog.reader import current_position
from headwater.connectors.common.phases import phase


def binlog_status(conn: pymysql.Connection, gtid_query: str, offset: Offset | None) -> dict[str, Any]:
    """The server's binlog end and, for a stored `offset` with a binlog position, the lag behind it."""
    end = current_position(conn, gtid_query)
    out: dict[str, Any] = {"server_file": end.file, "server_pos": end.pos, "server_gtids": end.gtids or None}
    if not offset or "file" not in offset:
        return out
    stored = BinlogPosition.from_offset(offset)
    out.update(phase=phase(offset), stored_file=stored.file, stored_pos=stored.pos, stored_gtids=stored.gtids or None)
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        sizes = {str(row[0]): int(row[1]) for row in cur.fetchall()}
    if stored.file not in sizes:
        out["stored_file_purged"] = True
        return out
    later = sum(size for name, size in sizes.items() if file_index(name) > file_index(stored.file))
    out["lag_bytes"] = max(0, sizes[stored.file] - stored.pos) + later
    out["lag_files"] = file_index(end.file) - file_index(stored.file)
    return out
