"""The contract every connector implements (the registry of connectors is `connectors.registry`).

A connector has two halves:

- a `SourceConnector`, the driver-side half, which owns the log connection (replication slot,
  binlog, ...), decides where each batch of work begins and ends as plain JSON positions
  ("offsets", named like Debezium's), and tells the database a position is consumed only when
  the caller says it is durably processed (`commit`);
- `WorkUnit`s, picklable pieces of one batch (a snapshot chunk, a slice of the change log), whose
  `read()` turns them into batches of events (`events.batch.Events`) anywhere: in the same process for the embedded engine,
  or in a Spark executor.

Reading the same (start, end] range twice yields the same events, so a batch replayed after a
crash repeats itself exactly; that and an idempotent sink make delivery exactly-once.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

from headwater.config.properties import ConnectorConfig
from headwater.events.batch import Events

Offset = dict[str, Any]


class WorkUnit(ABC):
    """A picklable piece of a batch; `read()` may run in another process. A unit of a blocking snapshot that met
    a query error and ended there (its rows read before stay delivered) sets `abandoned` to its table's name, for
    the snapshot's notifications (`observe.observer`: its runner reads it once `read()` is over)."""

    abandoned: str | None = None

    @abstractmethod
    def read(self) -> Iterator[Events]:
        """The unit's events, in order, as batches of bounded size."""

    def describe(self) -> str:
        return type(self).__name__


class SourceConnector(ABC):
    """The driver-side half of a connector."""

    def __init__(self, config: ConnectorConfig):
        self.config = config
        self.captured_tables: list[str] = []  # the captured tables' names (schema.table), once open
        self.available_now = False  # the caller runs to what is available now (prepare_available_now)

    @abstractmethod
    def initial_offset(self) -> Offset:
        """The position before anything was read (a snapshot, if one is due, comes first)."""

    @abstractmethod
    def open(self, start: Offset) -> None:
        """Connect, and acknowledge `start` to the database: everything up to it is durable."""

    @abstractmethod
    def latest_offset(self, start: Offset, max_events: int | None = None) -> Offset:
        """The end of the next batch after `start` (equal to `start` when there is nothing new)."""

    @abstractmethod
    def plan(self, start: Offset, end: Offset) -> list[WorkUnit]:
        """Work units covering (start, end]; the same range always yields the same events."""

    @abstractmethod
    def commit(self, end: Offset) -> None:
        """Everything up to `end` is durably processed: the database may release it."""

    def prepare_available_now(self) -> None:  # noqa: B027 - optional hook
        """Fix the end of an 'everything available now' run to what the source holds now (the caller sets
        `available_now`; a connector may call this again to move that end, see `common.phases`)."""

    def snapshot_due(self, offset: Offset) -> bool:
        """True when the next batch after `offset` (at which the connector is open) is a snapshot."""
        return False

    def snapshot_scans(self) -> bool:
        """True when the connector's snapshot reads the tables' rows (False: the schema only)."""
        return True

    def schema_snapshot_at_open(self, offset: Offset) -> bool:
        """True when opening at `offset`, with no snapshot due, read the tables' schema again (Debezium's
        schema-only snapshot at every start, as `snapshot.mode=recovery` takes on the binlog connectors)."""
        return False

    def is_finished(self, offset: Offset) -> bool:
        """True when nothing will ever follow `offset` (initial_only after its snapshot)."""
        return False

    @abstractmethod
    def table_schema(self, table: str) -> tuple[str, dict]:
        """The topic of `table`'s change events and the Connect schema (JSON form) of its row image
        (the envelope's `before` and `after`), as the events carry them for this configuration."""

    def status(self, offset: Offset | None) -> dict[str, Any]:
        """Positions and lag, for `headwater status`."""
        return {}

    @abstractmethod
    def close(self) -> None:
        """Release connections (and, where configured, drop the slot)."""

