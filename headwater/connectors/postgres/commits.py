"""The transactions the replication stream received, by xid, with their commit positions.

PostgreSQL writes a transaction's commit record before the committing backend leaves the proc array: for a
moment (longer when it waits for a synchronous standby, or is descheduled), the stream has the commit while
a snapshot taken then still counts the transaction as running. An incremental snapshot's window read under
such a snapshot would give rows as they were before changes the stream delivered before the window: the
window's snapshot is checked against this record (`connectors.postgres.incremental`). The reader adds every
transaction it receives (pgoutput's BEGIN, or a streamed transaction's commit: xid and commit LSN); the
record keeps the latest `KEEP` of them.
"""

from __future__ import annotations

from collections.abc import Iterable

KEEP = 1 << 16


class RecentCommits:
    """xid (modulo 2^32, as pgoutput gives it) -> the commit LSN of the latest transactions received."""

    def __init__(self, keep: int = KEEP):
        self.keep = keep
        self.by_xid: dict[int, int] = {}

    def add(self, xid: int, commit_lsn: int) -> None:
        by_xid = self.by_xid
        by_xid.pop(xid, None)  # (after a wraparound: the newest transaction of that xid)
        by_xid[xid] = commit_lsn
        if len(by_xid) > self.keep:
            del by_xid[next(iter(by_xid))]

    def committed_before(self, xids: Iterable[int], lsn: int) -> list[int]:
        """Those of `xids` whose commit the stream received before `lsn`."""
        by_xid = self.by_xid
        return sorted(x for x in xids if (at := by_xid.get(x)) is not None and at < lsn)
