"""The codec: what the shared transaction buffer and streaming planner know of a connector's stream.

Neither the buffer nor the planner parses a message. `messages.MessageKinds` names, by a raw
message's first byte, the kinds of data messages (those that may produce events: batch sizes and
positions count these) and the kind of table layouts (pgoutput's RELATION, the binlog's TABLE_MAP,
a trigger log's table description), and reads a layout's id. Every other message (pgoutput's TYPE
or ORIGIN, say) travels with its transaction untouched.

`StreamCodec` adds what the planner delegates to the connector: reading and making its stream
positions (the planner needs only an ordered commit position and "the first n data messages of
transaction x"), checking the layouts a batch uses against the catalog, making a slice's work
unit, counting a transaction's events for the transaction-metadata counters, and heartbeat units.
`StreamReader` is what the planner needs of the connector's reader thread (its buffer, its error,
asking the server for its position, restarting at a position), and `Retrying` runs a catalog
operation again after a lost connection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from headwater.connectors.base import WorkUnit
from headwater.connectors.common.messages import InTxn, Layouts, Message, MessageKinds, Segment
from headwater.connectors.common.txbuffer import StreamBuffer, Txn

P = TypeVar("P")
P_contra = TypeVar("P_contra", contravariant=True)
T = TypeVar("T")


class StreamCodec(MessageKinds, Protocol[P]):
    """A connector's side of the streaming planner, over its position type `P`."""

    # ---- positions: everything in transactions whose commit ends at or before `commit(pos)` is
    # delivered, and with `in_txn(pos)` also the first data messages of the next transaction
    def commit(self, pos: P) -> int:
        ...

    def in_txn(self, pos: P) -> InTxn | None:
        ...

    def last_commit(self, pos: P) -> int | None:
        """The end of the last transaction delivered (the context of the next slice's first event)."""
        ...

    def heartbeat_ms(self, pos: P) -> int | None:
        """The heartbeat's time when the batch ending at `pos` carries one."""
        ...

    def after(self, txn: Txn) -> P:
        """The position after the whole of `txn`."""
        ...

    def inside(self, before: P, txn: Txn, n: int) -> P:
        """The position `n` data messages into `txn`, everything before it delivered up to `before`."""
        ...

    def idle(self, start: P, commit: int) -> P:
        """`start` moved on to `commit`, with no transaction in between."""
        ...

    def with_heartbeat(self, pos: P, heartbeat_ms: int) -> P:
        ...

    # ---- driver-side work
    def check_layouts(self, head: Layouts, changed: list[bytes]) -> None:
        """Bring the catalog up to date with the layouts in force before a batch (`head`) and
        the layout messages inside it, in stream order."""
        ...

    def slice(self, layouts: Layouts, segments: list[Segment], msgs: list[Message],
              last_commit: int | None) -> WorkUnit:
        """The work unit decoding `msgs` (the messages of `segments`, in order), with `layouts`
        in force at their start and `last_commit` the end of the last transaction before them."""
        ...

    def count(self, counters: dict, txn: Txn, msgs: list[Message], layouts: Layouts) -> dict:
        """Transaction-metadata counters (opaque JSON; `{}` at a transaction's start) after the
        events of `msgs`, a run of `txn`'s messages with `layouts` in force at its start."""
        ...

    def heartbeat(self, pos: P) -> WorkUnit:
        """The work unit of the heartbeat carried by the batch ending at `pos`."""
        ...


class StreamReader(Protocol[P_contra]):
    """The driver-side reader filling a `StreamBuffer` (a replication connection, a binlog client)."""

    @property
    def buffer(self) -> StreamBuffer:
        ...

    def check(self) -> None:
        """Raise the reader's error, if it stopped on one."""
        ...

    def request_position(self) -> None:
        """Ask the server where it is now, so `buffer.received` catches up when nothing happens."""
        ...

    def restart(self, at: P_contra) -> None:
        """Forget the buffer and read again from `at`."""
        ...


class Retrying(Protocol):
    """Runs a catalog operation again after the connection it used was lost."""

    def __call__(self, what: str, fn: Callable[[], T]) -> T:
        ...
