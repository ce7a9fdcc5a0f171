"""Positions in PostgreSQL's change stream and their form as offsets (plain JSON dicts).

A streaming position is `(lsn_commit, txId, msg)`: everything in transactions whose commit ended
at or before `lsn_commit` is delivered, plus the first `msg` data messages of the next transaction
(`txId`) when a batch ended inside it. Restarting replication at `lsn_commit` makes PostgreSQL send
exactly the transactions that commit after it, so the same position always means the same events.

The phases around these positions (`pending`, `completed`, `streaming`: the offset's `snapshot` key)
are the shared lifecycle's (connectors/common/phases.py). Offsets carry Debezium's names (`lsn`,
`lsn_commit`, `txId`, `ts_usec`) so a user can read them; `msg`, `last_commit_lsn`, `last_commit_ts`
and `heartbeat_ms` are headwater's own (`last_commit_lsn` and `last_commit_ts` make a batch read
again from this position yield the same `source.sequence` and message times). LSNs are ints here;
their text form is pgoutput's (`lsn_to_str`, `str_to_lsn`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StreamPosition:
    """Where the next batch starts in the change stream."""

    lsn_commit: int  # end LSN of the last fully delivered transaction (0 in an offset: the slot's position)
    txid: int | None = None  # transaction partly delivered, if any
    msg: int = 0  # data messages of `txid` already delivered
    lsn: int | None = None  # LSN of the last delivered event (information only)
    ts_usec: int | None = None  # commit time of the last delivered event (information only)
    last_commit_lsn: int | None = None  # commit LSN of the last delivered transaction, None before the first
    # (for source.sequence)
    last_commit_ts: int | None = None  # its commit time (the time of a non-transactional message after it)
    heartbeat_ms: int | None = None  # set when the batch ending here is a heartbeat

    def to_offset(self) -> dict[str, Any]:
        """The position's fields of a `streaming` offset (the phase and epoch are the lifecycle's)."""
        off: dict[str, Any] = {"lsn_commit": self.lsn_commit}
        if self.txid is not None and self.msg:
            off["txId"] = self.txid
            off["msg"] = self.msg
        if self.lsn is not None:
            off["lsn"] = self.lsn
        if self.ts_usec is not None:
            off["ts_usec"] = self.ts_usec
        off["last_commit_lsn"] = self.last_commit_lsn  # null too: no transaction since the snapshot
        if self.last_commit_ts is not None:
            off["last_commit_ts"] = self.last_commit_ts
        if self.heartbeat_ms is not None:
            off["heartbeat_ms"] = self.heartbeat_ms
        return off

    @classmethod
    def from_offset(cls, off: dict[str, Any]) -> StreamPosition:
        return cls(
            lsn_commit=int(off.get("lsn_commit") or 0),
            txid=off.get("txId") if off.get("msg") else None,
            msg=int(off.get("msg") or 0),
            lsn=off.get("lsn"),
            ts_usec=off.get("ts_usec"),
            # offsets written without it: the last commit is the one ending at lsn_commit
            last_commit_lsn=off["last_commit_lsn"] if "last_commit_lsn" in off else (off.get("lsn_commit") or None),
            last_commit_ts=off.get("last_commit_ts"),
            heartbeat_ms=off.get("heartbeat_ms"),
        )
