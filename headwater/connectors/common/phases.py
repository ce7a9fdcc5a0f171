"""The snapshot -> stream lifecycle every connector shares: phases, epochs, `snapshot.mode`, lost positions.

Debezium drives a snapshot source and a streaming source from one coordinator; here that
coordinator is `SnapshotThenStream`, a `SourceConnector` whose offsets move through these phases
(the offset's `snapshot` key):

- `pending`: a snapshot is due and nothing was read yet;
- `chunks`: a snapshot read in several batches (`snapshot_batch`), one batch of its chunks per offset;
  the offset holds the snapshot's position and the fields the connector names the batch by. A
  connector that cannot go on with a snapshot after a restart (`holds_snapshot` false: its
  transaction is gone) takes it again from the start: the snapshot is due again;
- `completed`: the snapshot batch ran; streaming starts where the snapshot was consistent (a
  database that knows that position when the snapshot is due, as a trigger log's sequence or a
  binlog position read under the snapshot, keeps it in this offset: `snapshot_position`);
- `streaming`: the rest of the offset is the database's own stream position.

Each phase but `streaming` is a snapshot's (the observers count its batches as the snapshot's).
`epoch` counts snapshots, so a later re-snapshot (`snapshot.mode=always` at a restart, or
`when_needed` after the stored position was lost) is a new batch from `streaming` to `completed`.

`SnapshotMode` says what each `snapshot.mode` asks: whether a run with no stored offset snapshots
first, whether every start re-snapshots, whether a lost position is a new snapshot or an error,
and whether changes are streamed at all (`configuration_based`: from its own properties, for the
connectors that define them). A database fills in the hooks: prepare the database (and
name the tables it captures), plan a snapshot, the streaming side's `stream_latest`/`stream_plan`,
commit a position, and check that a stored position is still served. The lifecycle warns when the
table filters capture no table, naming the filters and the tables that are there.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import Offset, SourceConnector, WorkUnit
from headwater.connectors.common.incremental import OFFSET_KEYS, Incremental, without_heartbeat
from headwater.connectors.errors import PositionLost

log = logging.getLogger("headwater.connectors")

SNAPSHOT_PENDING = "pending"
SNAPSHOT_CHUNKS = "chunks"
SNAPSHOT_COMPLETED = "completed"
STREAMING = "streaming"

SHOWN_TABLES = 5  # tables named in the warning that the filters capture nothing


def phase(offset: Offset) -> str:
    """The offset's phase: `pending`, `chunks`, `completed` or `streaming` (an offset without one streams)."""
    return str(offset.get("snapshot", STREAMING))


def epoch(offset: Offset) -> int:
    """How many snapshots were taken up to the offset."""
    return int(offset.get("epoch", 0))


@dataclass(frozen=True)
class SnapshotMode:
    """What a `snapshot.mode` value asks of the phases (Debezium's Snapshotter)."""

    name: str
    snapshot_first: bool  # a run with no stored offset starts with a snapshot
    snapshot_on_restart: bool  # every start from a stored offset takes a new snapshot
    snapshot_when_lost: bool  # a lost stream position is a new snapshot rather than an error
    streams: bool  # changes are streamed after the snapshot


SNAPSHOT_MODES = {m.name: m for m in (
    SnapshotMode("initial", snapshot_first=True, snapshot_on_restart=False, snapshot_when_lost=False, streams=True),
    SnapshotMode("always", snapshot_first=True, snapshot_on_restart=True, snapshot_when_lost=True, streams=True),
    SnapshotMode("when_needed", snapshot_first=True, snapshot_on_restart=False, snapshot_when_lost=True,
                 streams=True),
    SnapshotMode("initial_only", snapshot_first=True, snapshot_on_restart=False, snapshot_when_lost=False,
                 streams=False),
    SnapshotMode("no_data", snapshot_first=False, snapshot_on_restart=False, snapshot_when_lost=False, streams=True),
    SnapshotMode("never", snapshot_first=False, snapshot_on_restart=False, snapshot_when_lost=False, streams=True),
    # a connector that keeps a schema history rebuilds it from the tables as they are (MySQL's binlog)
    SnapshotMode("recovery", snapshot_first=False, snapshot_on_restart=False, snapshot_when_lost=False,
                 streams=True),
)}


CONFIGURATION_BASED = "snapshot.mode.configuration.based."  # the prefix of configuration_based's properties


def configured_mode(config: ConnectorConfig) -> SnapshotMode:
    """`snapshot.mode=configuration_based` from its properties (Debezium's ConfigurationBasedSnapshotter,
    which asks for data at every start whatever the offsets): `snapshot.data` snapshots at every start,
    `snapshot.schema` without data a schema snapshot first, neither streams from the log's start;
    `start.stream` streams; `snapshot.on.data.error` snapshots again when the stored position is lost."""
    data, schema = config[CONFIGURATION_BASED + "snapshot.data"], config[CONFIGURATION_BASED + "snapshot.schema"]
    return SnapshotMode("configuration_based", snapshot_first=data or schema, snapshot_on_restart=data,
                        snapshot_when_lost=config[CONFIGURATION_BASED + "snapshot.on.data.error"],
                        streams=config[CONFIGURATION_BASED + "start.stream"])


def lost_message(why: str) -> str:
    """The error of a lost position under a mode that does not re-snapshot, with the fixes."""
    return (f"{why}; changes may have been lost. Re-snapshot with snapshot.mode=when_needed (or always), "
            "or drop the stored offsets (the Spark checkpoint) to start over")


class SnapshotThenStream(SourceConnector):
    """A connector that snapshots, then streams, through the phases `pending`, `completed`, `streaming`.

    Subclasses fill in the hooks below. The streaming hooks (`stream_latest`, `stream_plan`,
    `commit_position`) see and return only the database's own position fields: the phase and the
    epoch are added and removed here (right after a snapshot, the position is what
    `snapshot_position` gave: `{}` unless the database has one to keep).
    """

    TABLE_FILTERS: tuple[str, ...] = ("schema.include.list", "schema.exclude.list",
                                      "table.include.list", "table.exclude.list")
    """The properties that choose the captured tables, named when they capture none."""

    def __init__(self, config: ConnectorConfig):
        super().__init__(config)
        name = config["snapshot.mode"]
        if name == "configuration_based":
            self.snapshot_mode = configured_mode(config)
        elif name not in SNAPSHOT_MODES:
            raise ValueError(f"snapshot.mode={name!r} is not one of {', '.join(SNAPSHOT_MODES)}")
        else:
            self.snapshot_mode = SNAPSHOT_MODES[name]
        self.resnapshot = False  # the next batch is a new snapshot
        self.opened = False
        self.incremental: Incremental | None = None  # signals and incremental snapshots, when the connector has them
        self._warned_no_tables = False

    # ------------------------------------------------------------------ hooks
    @abstractmethod
    def prepare_database(self) -> Sequence[Any]:
        """Connect and check the database is set up for capture; the tables the filters capture."""

    @abstractmethod
    def visible_tables(self) -> list[str]:
        """The names of the tables the filters could choose from (for the warning that none is captured)."""

    @abstractmethod
    def check_position(self, offset: Offset) -> str | None:
        """None when the database still serves the stored position of `offset` (phase `completed` or
        `streaming`); else why not. A stream that has not begun may set up its position here."""

    @abstractmethod
    def new_stream_offset(self) -> Offset:
        """The position fields of a stream that starts without a snapshot (the log's current end)."""

    def snapshot_position(self, epoch: int) -> Offset:
        """The stream position where streaming after snapshot number `epoch` starts, when the database
        knows it before the snapshot is read (kept in the `completed` offset); `{}` when the database
        keeps it itself (PostgreSQL's slot). Asked again for one epoch, the same position."""
        return {}

    @abstractmethod
    def plan_snapshot(self, epoch: int) -> list[WorkUnit]:
        """The work units of snapshot number `epoch` (the same units when asked again for one epoch)."""

    def snapshot_batch(self, epoch: int, after: Offset | None, max_events: int | None) -> Offset | None:
        """For a snapshot read in several batches: the fields naming the batch of snapshot number `epoch`'s
        chunks after the chunk batch `after` (None: its first batch), kept in that batch's `chunks` offset;
        None when no chunk is left (a last, empty batch then moves to `completed`). The default reads the
        whole snapshot in one batch (`plan_snapshot`)."""
        return None

    def plan_snapshot_batch(self, end: Offset) -> list[WorkUnit]:
        """The work units of the chunk batch ending at the `chunks` offset `end` (none when its snapshot is
        no longer held: a batch replayed after a restart)."""
        raise NotImplementedError("a connector that gives snapshot batches plans them")

    def holds_snapshot(self, offset: Offset) -> bool:
        """Whether the snapshot of the `chunks` offset `offset` can go on from it (else it is taken again)."""
        return False

    def end_snapshot(self) -> None:  # noqa: B027 - optional hook
        """The snapshot batch is over (streaming is about to be planned): release what held it."""

    @abstractmethod
    def stream_latest(self, start: Offset, max_events: int) -> Offset | None:
        """The position fields of the end of the next streaming batch after `start`; None when nothing is new.
        Raises PositionLost when the database can no longer serve `start`."""

    @abstractmethod
    def stream_plan(self, start: Offset, end: Offset) -> list[WorkUnit]:
        """Work units covering the stream's (start, end]; raises PositionLost like `stream_latest`."""

    def stop_stream(self) -> None:  # noqa: B027 - optional hook
        """Stop reading the stream (its position was lost; a snapshot comes next)."""

    @abstractmethod
    def commit_position(self, end: Offset) -> None:
        """Tell the database everything up to the streaming offset `end` is durably processed."""

    # ------------------------------------------------------------------ the lifecycle
    def prepare(self) -> Sequence[Any]:
        """`prepare_database`, warning (once) when the filters capture no table."""
        tables = self.prepare_database()
        self.captured_tables = [str(t) for t in tables]
        if not tables and not self._warned_no_tables:
            self._warned_no_tables = True
            log.warning("%s", self._no_tables_message())
        return tables

    def _no_tables_message(self) -> str:
        filters = [f"{name}={','.join(self.config.get(name))}"
                   for name in self.TABLE_FILTERS if self.config.get(name)]
        visible = sorted(self.visible_tables())
        if visible:
            more = len(visible) - SHOWN_TABLES
            shown = ", ".join(visible[:SHOWN_TABLES]) + (f" and {more} more" if more > 0 else "")
            there = f"the database has {len(visible)} table{'s' if len(visible) != 1 else ''}: {shown}"
        else:
            there = "the database has no tables"
        chosen = f"the table filters ({'; '.join(filters)}) match" if filters else "there is"
        return f"{chosen} no table to capture; {there}. Nothing will be captured until a matching table exists"

    def initial_offset(self) -> Offset:
        if self.snapshot_mode.snapshot_first:
            return {"snapshot": SNAPSHOT_PENDING, "epoch": 0}
        return {"snapshot": STREAMING, **self.new_stream_offset(), "epoch": 0}

    def open(self, start: Offset) -> None:
        self.prepare()
        self.opened = True
        if self.snapshot_due(start) or not self.snapshot_mode.streams:
            return
        why = self.check_position(start)
        if why is not None:
            self.position_lost(why)
        elif self.snapshot_mode.snapshot_on_restart:
            self.resnapshot = True

    def _open_once(self, start: Offset) -> None:
        """Open at `start` before streaming, unless the caller did."""
        if not self.opened:
            self.open(start)

    def position_lost(self, why: str) -> None:
        """The stored position is no longer served: a new snapshot when the mode allows, else fail."""
        if self.snapshot_mode.snapshot_when_lost:
            log.warning("%s: taking a new snapshot (snapshot.mode=%s)", why, self.snapshot_mode.name)
            self.resnapshot = True
            return
        raise PositionLost(lost_message(why)) from None

    def latest_offset(self, start: Offset, max_events: int | None = None) -> Offset:
        n = epoch(start)
        if self.snapshot_due(start):
            return self._snapshot_offset(n + 1, None, max_events)
        if phase(start) == SNAPSHOT_CHUNKS:
            return self._snapshot_offset(n, start, max_events)
        if not self.snapshot_mode.streams:
            return start
        self.end_snapshot()  # the snapshot batch is over once the next batch is planned
        self._open_once(start)
        cap = self.config["headwater.max.batch.events"]
        here = position(start)

        def stream() -> Offset | None:
            if self.available_now and self.incremental is not None and self.incremental.window is not None:
                # a run to what is available now finishes an incremental snapshot: the end moves past
                # the watermarks of the chunk just read (and whatever was committed meanwhile)
                self.prepare_available_now()
            return self.stream_latest(here, min(max_events, cap) if max_events else cap)

        try:
            if self.incremental is not None:
                out = self.incremental.latest(start, here, stream,
                                              lambda end: {"snapshot": STREAMING, **end, "epoch": n}, max_events)
                return start if out is None else out
            end = stream()
        except PositionLost as exc:
            self.stop_stream()
            self.position_lost(str(exc))
            return self._snapshot_offset(n + 1, None, max_events)
        if end is None:
            return start
        return {"snapshot": STREAMING, **end, "epoch": n}

    def snapshot_due(self, offset: Offset) -> bool:
        return (phase(offset) == SNAPSHOT_PENDING or self.resnapshot
                or (phase(offset) == SNAPSHOT_CHUNKS and not self.holds_snapshot(offset)))

    def _snapshot_offset(self, epoch: int, after: Offset | None, max_events: int | None) -> Offset:
        """The offset of snapshot number `epoch`'s next batch after `after` (None: its first): a `chunks`
        offset while chunks are left, else the snapshot's end (`completed`)."""
        at = self.snapshot_position(epoch)
        batch = self.snapshot_batch(epoch, after, max_events)
        if batch is None:
            if after is not None:
                self.end_snapshot()  # every chunk was read: the last batch reads nothing
            return {"snapshot": SNAPSHOT_COMPLETED, **at, "epoch": epoch}
        return {"snapshot": SNAPSHOT_CHUNKS, **at, "epoch": epoch, **batch}

    def is_finished(self, offset: Offset) -> bool:
        """True past the snapshot when the mode streams nothing (`initial_only`)."""
        return not self.snapshot_mode.streams and phase(offset) not in (SNAPSHOT_PENDING, SNAPSHOT_CHUNKS)

    def plan(self, start: Offset, end: Offset) -> list[WorkUnit]:
        if phase(end) == SNAPSHOT_CHUNKS:
            units = self.plan_snapshot_batch(end)
            self.resnapshot = False
            return units
        if phase(end) == SNAPSHOT_COMPLETED and phase(start) == SNAPSHOT_CHUNKS and epoch(start) == epoch(end):
            return []  # the snapshot's last batch: its chunks were all read in the batches before
        if phase(end) == SNAPSHOT_COMPLETED and (phase(start) != SNAPSHOT_COMPLETED or epoch(start) != epoch(end)):
            units = self.plan_snapshot(epoch(end) or 1)
            self.resnapshot = False
            return units
        if phase(end) != STREAMING:
            return []
        self._open_once(start)
        first, last = position(start), position(end)
        try:
            chunk = [] if self.incremental is None else self.incremental.units(first, end, last)
            if self.incremental is not None and without_heartbeat(first) == last:
                return chunk  # a signal or a chunk with nothing new in the stream
            return self.stream_plan(first, last) + chunk
        except PositionLost as exc:
            raise PositionLost(lost_message(str(exc))) from None

    def commit(self, end: Offset) -> None:
        if phase(end) == STREAMING:
            self.commit_position(position(end))


def position(offset: Offset) -> Offset:
    """The database's position fields of an offset: `{}` before a snapshot, and after one (phase
    `completed`) those `snapshot_position` gave, `{}` when it gave none (never the incremental
    snapshot's and the signals' fields). Not for a `chunks` offset: its batch fields are the connector's."""
    if phase(offset) == SNAPSHOT_PENDING:
        return {}
    return {k: v for k, v in offset.items() if k not in _LIFECYCLE_KEYS}


_LIFECYCLE_KEYS = frozenset(("snapshot", "epoch", *OFFSET_KEYS))

