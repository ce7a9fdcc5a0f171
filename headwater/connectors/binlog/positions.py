"""Binlog positions: the stream's ordered integers and the offsets stored between batches.

A binlog position is a file and a byte position in it; `stream_pos` orders them as one integer
(the file's sequence number in the high 32 bits), which is what the shared buffer and planner
compare. `BinlogPosition` is an offset, named like Debezium's MySQL offsets: `file` and `pos`
where a restart begins (the start of the first transaction not wholly delivered), `gtids` the GTID
state of everything delivered, and, when a batch ends inside a transaction, `event` (how many of
its rows events were delivered, Debezium's "events to skip") with the transaction's own positions.
"""

from __future__ import annotations

from dataclasses import dataclass

from headwater.connectors.base import Offset

FILE_SHIFT = 32


def file_index(file: str) -> int:
    """The sequence number of a binlog file (`binlog.000042` -> 42)."""
    _, _, suffix = file.rpartition(".")
    if not suffix.isdigit():
        raise ValueError(f"{file!r} is not a binlog file name (base.NNNNNN)")
    return int(suffix)


def stream_pos(file: str, pos: int) -> int:
    """A file and position as one ordered integer."""
    return file_index(file) << FILE_SHIFT | pos


def split_pos(file_like: str, value: int) -> tuple[str, int]:
    """The file (named like `file_like`) and position of a stream integer."""
    base, _, suffix = file_like.rpartition(".")
    index = value >> FILE_SHIFT
    return f"{base}.{index:0{len(suffix)}d}", value & ((1 << FILE_SHIFT) - 1)


@dataclass(frozen=True)
class BinlogPosition:
    """Everything before `file`/`pos` is delivered; with `event`, also the first `event` rows events of
    the transaction beginning at stream position `txn` and committing at `commit`."""

    file: str
    pos: int
    gtids: str = ""
    event: int = 0
    txn: int | None = None
    commit: int | None = None
    heartbeat_ms: int | None = None

    @property
    def stream(self) -> int:
        return stream_pos(self.file, self.pos)

    def to_offset(self) -> Offset:
        off: Offset = {"file": self.file, "pos": self.pos, "gtids": self.gtids or None}
        if self.event:
            off.update(event=self.event, txn=self.txn, commit=self.commit)
        if self.heartbeat_ms is not None:
            off["heartbeat_ms"] = self.heartbeat_ms
        return off

    @classmethod
    def from_offset(cls, off: Offset) -> BinlogPosition:
        return cls(str(off["file"]), int(off["pos"]), off.get("gtids") or "", int(off.get("event", 0)),
                   off.get("txn"), off.get("commit"), off.get("heartbeat_ms"))
