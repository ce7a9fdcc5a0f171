"""The messages of a connector's change stream as the shared buffer and planner see them.

A message is its stream position and its raw payload; `MessageKinds` tells a connector's data
messages (changes) and table layouts apart by their first byte; `InTxn` is a position
inside a transaction; a `Segment` is a run of one transaction's messages inside a slice (work units
that carry them pickle them by column, `SegmentsByColumn`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, NamedTuple, Protocol


@dataclass
class Segment:
    """A run of one transaction's messages inside a slice."""

    xid: int | None
    begin_pos: int
    commit_pos: int
    end_pos: int | None  # set when the transaction ends in this segment
    commit_ts: int
    transactional: bool
    begin: bool  # the transaction starts in this segment
    commit: bool  # the transaction ends in this segment
    count: int  # messages (data, layouts and others) in the slice
    counters: dict | None = None  # transaction metadata counters at the segment's start



_SEGMENT_FIELDS = tuple(f.name for f in fields(Segment))


class SegmentsByColumn:
    """Pickles a work unit's `segments` as one list per field of `Segment`: a slice of single-row
    transactions holds one segment per transaction, and pickled one object at a time they cost ~3.5
    µs each on the driver and ~5 µs to unpickle in the task (as columns: ~0.5 µs each way)."""

    segments: list[Segment]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        segments = state.pop("segments")
        state["segment_columns"] = [[getattr(seg, name) for seg in segments] for name in _SEGMENT_FIELDS]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        columns = state.pop("segment_columns")
        self.__dict__.update(state)
        self.segments = [Segment(*values) for values in zip(*columns, strict=True)]


Message = tuple[int, bytes]  # (stream position of the message, raw payload)
Layouts = Mapping[int, bytes]  # layout id -> the layout message in force


class MessageKinds(Protocol):
    """How to tell a connector's raw messages apart: by their first byte, the message's kind (a
    reader whose messages do not start with one puts it there as it frames them). The buffer and
    the planner test it inline, so telling kinds apart costs no call per message."""

    data_kinds: frozenset[int]  # the kinds of changes (they count towards batch sizes and positions)
    layout_kind: int  # the kind of table layouts

    def layout_id(self, payload: bytes) -> int:
        """The id of the table layout a layout message describes."""
        ...


class InTxn(NamedTuple):
    """A position inside a transaction: its first `n` data messages are delivered."""

    xid: int
    n: int
    commit: int | None  # the transaction's commit position, when the position knows it
