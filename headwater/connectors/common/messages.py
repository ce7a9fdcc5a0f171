"""The messages of a connector's change stream as the shared buffer and planner see them.

A message is its stream position and its raw payload; `MessageKinds` tells a connector's data
messages (changes) and table layouts apart without parsing them further; `InTxn` is a position
inside a transaction; a `Segment` is a run of one transaction's messages inside a slice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple, Protocol


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



Message = tuple[int, bytes]  # (stream position of the message, raw payload)
Layouts = Mapping[int, bytes]  # layout id -> the layout message in force


class MessageKinds(Protocol):
    """How to tell a connector's raw messages apart."""

    def is_data(self, payload: bytes) -> bool:
        """Whether the message is a change (it counts towards batch sizes and positions)."""
        ...

    def layout_id(self, payload: bytes) -> int | None:
        """The id of the table layout the message describes, None when it is not a layout."""
        ...


class InTxn(NamedTuple):
    """A position inside a transaction: its first `n` data messages are delivered."""

    xid: int
    n: int
    commit: int | None  # the transaction's commit position, when the position knows it
