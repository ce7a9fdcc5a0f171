"""The messages of a connector's change stream as the shared buffer and planner see them.

A message is its stream position and its raw payload; `MessageKinds` tells a connector's data
messages (changes) and table layouts apart by their first byte; `InTxn` is a position
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
