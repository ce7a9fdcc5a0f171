"""The shared snapshot -> stream lifecycle (common/phases.py), driven through a fake connector: no server."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import Offset, WorkUnit
from headwater.connectors.common.phases import (
    SNAPSHOT_CHUNKS,
    SNAPSHOT_COMPLETED,
    SNAPSHOT_PENDING,
    STREAMING,
    SnapshotThenStream,
)
from headwater.connectors.errors import PositionLost
from headwater.events.batch import Events

MODES = ["initial", "always", "never", "initial_only", "no_data", "when_needed"]


class Unit(WorkUnit):
    def __init__(self, what: str):
        self.what = what

    def read(self) -> Iterator[Events]:
        return iter(())


def fake_config(mode: str, props: dict[str, Any] | None = None) -> ConnectorConfig:
    """Validated properties as the lifecycle reads them (lists as lists)."""
    values = {"snapshot.mode": mode, "headwater.max.batch.events": 200_000, **(props or {})}
    return ConnectorConfig("fake", values, definitions={})


class FakeSource(SnapshotThenStream):
    """A database whose log is a counter: `log_end` changes exist, `served_from` is the oldest position it
    still serves; `snapshot_kept` says whether the point a snapshot was consistent at is still served."""

    def __init__(self, mode: str | ConnectorConfig = "initial", tables: tuple[str, ...] = ("public.t",),
                 visible: tuple[str, ...] = ("public.t",), props: dict[str, Any] | None = None):
        super().__init__(mode if isinstance(mode, ConnectorConfig) else fake_config(mode, props))
        self.tables, self.visible = list(tables), list(visible)
        self.log_end = 0
        self.served_from = 0
        self.snapshot_kept = True
        self.snapshots: list[int] = []
        self.committed: list[Offset] = []
        self.stopped = 0

    def prepare_database(self) -> list[str]:
        return self.tables

    def visible_tables(self) -> list[str]:
        return self.visible

    def table_schema(self, table: str) -> tuple[str, dict]:
        return f"fake.{table}", {"type": "struct", "fields": []}

    def check_position(self, offset: Offset) -> str | None:
        pos = offset.get("pos")
        if pos is None:  # right after a snapshot, or a stream not begun
            kept = offset["snapshot"] == STREAMING or self.snapshot_kept
            return None if kept else "the snapshot's position is gone"
        return None if pos >= self.served_from else f"position {pos} is gone"

    def new_stream_offset(self) -> Offset:
        return {"pos": None}

    def plan_snapshot(self, epoch: int) -> list[WorkUnit]:
        self.snapshots.append(epoch)
        return [Unit(f"snapshot {epoch}")]

    def stream_latest(self, start: Offset, max_events: int) -> Offset | None:
        pos = self._start(start)
        if pos < self.served_from:
            raise PositionLost(f"position {pos} is gone")
        end = min(self.log_end, pos + max_events)
        return {"pos": end} if end > pos else None

    def stream_plan(self, start: Offset, end: Offset) -> list[WorkUnit]:
        return [Unit(f"stream {self._start(start)}..{end['pos']}")]

    def _start(self, start: Offset) -> int:
        """Where a batch from `start` begins: its position, or where the log is served from."""
        pos = start.get("pos")
        return self.served_from if pos is None else int(pos)

    def stop_stream(self) -> None:
        self.stopped += 1

    def commit_position(self, end: Offset) -> None:
        self.committed.append(end)

    def close(self) -> None:
        pass


def batch(src: FakeSource, start: Offset) -> tuple[Offset, list[str]]:
    """One batch as the engine runs it: the end after `start`, its units' names, the commit."""
    end = src.latest_offset(start)
    if end == start:
        return end, []
    units = [u.what for u in src.plan(start, end) if isinstance(u, Unit)]
    src.commit(end)
    return end, units


def restart(mode: str, stored: Offset, **state: Any) -> FakeSource:
    src = FakeSource(mode)
    for k, v in state.items():
        setattr(src, k, v)
    src.open(stored)
    return src


# ------------------------------------------------------------------------ the first run


@pytest.mark.parametrize("mode", MODES)
def test_first_run(mode):
    src = FakeSource(mode)
    start = src.initial_offset()
    assert not src.is_finished(start)
    src.open(start)
    end, units = batch(src, start)
    if mode in ("never", "no_data"):
        assert start == {"snapshot": STREAMING, "pos": None, "epoch": 0}
        assert (end, units) == (start, [])  # nothing in the log yet
        src.log_end = 3
        assert batch(src, end) == ({"snapshot": STREAMING, "pos": 3, "epoch": 0}, ["stream 0..3"])
        assert not src.is_finished(end)
        return
    assert start == {"snapshot": SNAPSHOT_PENDING, "epoch": 0}
    assert (end, units) == ({"snapshot": SNAPSHOT_COMPLETED, "epoch": 1}, ["snapshot 1"])
    assert src.committed == []  # a snapshot has no stream position to commit
    src.log_end = 2
    after, units = batch(src, end)
    if mode == "initial_only":
        assert (after, units) == (end, []) and src.is_finished(end)
        return
    assert (after, units) == ({"snapshot": STREAMING, "pos": 2, "epoch": 1}, ["stream 0..2"])
    assert src.committed == [{"pos": 2}]
    assert not src.is_finished(after)


# ------------------------------------------------------------------------ restarts


STREAMED = {"snapshot": STREAMING, "pos": 5, "epoch": 1}
SNAPSHOTTED = {"snapshot": SNAPSHOT_COMPLETED, "epoch": 1}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stored", [STREAMED, SNAPSHOTTED], ids=["streaming", "completed"])
def test_restart_with_position_served(mode, stored):
    src = restart(mode, stored, log_end=7)
    end, units = batch(src, stored)
    if mode == "always":  # a new snapshot at every start
        assert (end, units) == ({"snapshot": SNAPSHOT_COMPLETED, "epoch": 2}, ["snapshot 2"])
        assert batch(src, end)[0] == {"snapshot": STREAMING, "pos": 7, "epoch": 2}
    elif mode == "initial_only":
        assert (end, units) == (stored, []) and src.is_finished(stored)  # nothing is streamed, ever
    else:
        first = stored.get("pos") or 0
        assert (end, units) == ({"snapshot": STREAMING, "pos": 7, "epoch": 1}, [f"stream {first}..7"])


@pytest.mark.parametrize("mode", MODES)
def test_restart_pending(mode):
    """A stored `pending` offset (a snapshot never finished) snapshots whatever the mode."""
    src = restart(mode, {"snapshot": SNAPSHOT_PENDING, "epoch": 0})
    assert batch(src, {"snapshot": SNAPSHOT_PENDING, "epoch": 0})[1] == ["snapshot 1"]


# ------------------------------------------------------------------------ lost positions


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("stored", [STREAMED, SNAPSHOTTED], ids=["streaming", "completed"])
def test_position_lost_before_streaming(mode, stored, caplog):
    caplog.set_level(logging.WARNING, logger="headwater")
    why = "position 5 is gone" if stored is STREAMED else "the snapshot's position is gone"
    lost = {"served_from": 6, "log_end": 9, "snapshot_kept": False}
    if mode in ("initial", "never", "no_data"):
        with pytest.raises(PositionLost, match=rf"{why}; changes may have been lost.*when_needed"):
            restart(mode, stored, **lost)
        return
    src = restart(mode, stored, **lost)
    end, units = batch(src, stored)
    if mode == "initial_only":  # streams nothing, so it has no position to lose
        assert (end, units) == (stored, [])
        return
    assert (end, units) == ({"snapshot": SNAPSHOT_COMPLETED, "epoch": 2}, ["snapshot 2"])
    assert f"{why}: taking a new snapshot" in caplog.text
    src.served_from = 9  # the new snapshot is consistent with the log's end
    src.log_end = 10
    assert batch(src, end) == ({"snapshot": STREAMING, "pos": 10, "epoch": 2}, ["stream 9..10"])


@pytest.mark.parametrize("mode", ["initial", "when_needed", "always"])
def test_position_lost_mid_stream(mode):
    src = restart(mode, STREAMED, log_end=7)
    end, _ = batch(src, STREAMED)
    if mode == "always":  # its start's snapshot first
        end, _ = batch(src, end)
    assert end["pos"] == 7
    src.served_from = 8  # the log is gone while the connector runs
    src.log_end = 9
    if mode == "initial":
        with pytest.raises(PositionLost, match="position 7 is gone; changes may have been lost"):
            src.latest_offset(end)
        return
    again = src.latest_offset(end)
    n = end["epoch"] + 1
    assert again == {"snapshot": SNAPSHOT_COMPLETED, "epoch": n} and src.stopped == 1
    assert [u.what for u in src.plan(end, again) if isinstance(u, Unit)] == [f"snapshot {n}"]


def test_position_lost_while_planning_fails():
    """The batch's end was fixed: its changes cannot be read, whatever the mode."""
    src = restart("when_needed", STREAMED, log_end=7)

    def lost(start: Offset, end: Offset) -> list[WorkUnit]:
        raise PositionLost("position 5 is gone")

    src.stream_plan = lost  # type: ignore[method-assign]
    with pytest.raises(PositionLost, match="changes may have been lost"):
        src.plan(STREAMED, {**STREAMED, "pos": 7})


# ------------------------------------------------------------------------ epochs


def test_epochs_count_snapshots():
    src = FakeSource("always")
    start = src.initial_offset()
    src.open(start)
    end, _ = batch(src, start)
    src.log_end = 1
    end, _ = batch(src, end)
    for n in (2, 3):  # each start re-snapshots: a new epoch, from `streaming` to `completed`
        src = restart("always", end, log_end=end["pos"])
        end, units = batch(src, end)
        assert (end, units) == ({"snapshot": SNAPSHOT_COMPLETED, "epoch": n}, [f"snapshot {n}"])
        src.log_end += 1
        end, _ = batch(src, end)
        assert end == {"snapshot": STREAMING, "pos": src.log_end, "epoch": n}


def test_same_epoch_is_planned_once_per_batch():
    """A replayed snapshot batch (same start and end) plans that epoch's snapshot again."""
    src = FakeSource("initial")
    start = src.initial_offset()
    end = src.latest_offset(start)
    src.plan(start, end)
    src.plan(start, end)
    assert src.snapshots == [1, 1]
    assert src.plan(end, end) == []  # no new epoch between two `completed` offsets


def test_max_events_caps_a_streaming_batch():
    src = restart("initial", STREAMED, log_end=100)
    assert src.latest_offset(STREAMED, max_events=10) == {"snapshot": STREAMING, "pos": 15, "epoch": 1}


def test_unknown_mode_is_refused():
    """A mode a connector's properties allow but the lifecycle does not know fails at once."""
    config = fake_config("initial")
    config.values["snapshot.mode"] = "schema_only_recovery"
    with pytest.raises(ValueError, match="schema_only_recovery"):
        FakeSource(config)


# ------------------------------------------------------------------------ no table captured


def test_filters_matching_no_table_warn_once(caplog):
    caplog.set_level(logging.WARNING, logger="headwater")
    visible = tuple(f"public.t{i}" for i in range(8))
    src = FakeSource("initial", tables=(), visible=visible, props={"table.include.list": ["public.orders", "public.x.*"]})
    src.open(src.initial_offset())
    src.prepare()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "the table filters (table.include.list=public.orders,public.x.*) match no table to capture; "
        "the database has 8 tables: public.t0, public.t1, public.t2, public.t3, public.t4 and 3 more. "
        "Nothing will be captured until a matching table exists"]


def test_no_table_at_all_warns(caplog):
    caplog.set_level(logging.WARNING, logger="headwater")
    src = FakeSource("initial", tables=(), visible=())
    src.open(src.initial_offset())
    assert "there is no table to capture; the database has no tables." in caplog.text


def test_captured_tables_do_not_warn(caplog):
    caplog.set_level(logging.WARNING, logger="headwater")
    src = FakeSource("initial", props={"table.include.list": ["public.t"]})
    src.open(src.initial_offset())
    assert caplog.records == []


class PositionedSnapshots(FakeSource):
    """A database that knows where streaming after a snapshot starts when the snapshot is due (a trigger
    log's sequence): the log's end then."""

    def snapshot_position(self, epoch: int) -> Offset:
        return {"pos": self.log_end}


def test_snapshot_position_is_kept_in_the_completed_offset():
    src = PositionedSnapshots()
    src.log_end = 5  # changes before the snapshot: the snapshot holds them
    start = src.initial_offset()
    src.open(start)
    end, units = batch(src, start)
    assert end == {"snapshot": SNAPSHOT_COMPLETED, "pos": 5, "epoch": 1} and units == ["snapshot 1"]
    src.log_end = 8
    end, units = batch(src, end)  # streaming starts at the snapshot's position, not where the log is served from
    assert end == {"snapshot": STREAMING, "pos": 8, "epoch": 1} and units == ["stream 5..8"]


# ------------------------------------------------------------------------ a snapshot in batches


class BatchedSnapshots(PositionedSnapshots):
    """A database whose snapshot of `chunks` chunks is read `per_batch` at a time in a transaction held in the
    process (`held`: its token); a restart loses it."""

    chunks, per_batch = 5, 2

    def __init__(self, mode: str = "initial"):
        super().__init__(mode)
        self.held: str | None = None
        self.ended = 0

    def snapshot_position(self, epoch: int) -> Offset:
        if self.held is None or not self.held.startswith(f"{epoch}:"):
            self.held = f"{epoch}:{id(self)}"
        return super().snapshot_position(epoch)

    def snapshot_batch(self, epoch: int, after: Offset | None, max_events: int | None) -> Offset | None:
        lo = 0 if after is None else after["to"]
        return None if lo >= self.chunks else {"token": self.held, "from": lo, "to": min(self.chunks, lo + self.per_batch)}

    def holds_snapshot(self, offset: Offset) -> bool:
        return offset.get("token") == self.held

    def plan_snapshot_batch(self, end: Offset) -> list[WorkUnit]:
        if not self.holds_snapshot(end):
            return []
        return [Unit(f"chunk {i}") for i in range(end["from"], end["to"])]

    def end_snapshot(self) -> None:
        self.ended += 1
        self.held = None


def test_a_snapshot_in_batches_goes_through_chunks_to_completed():
    src = BatchedSnapshots()
    src.log_end = 5
    start = src.initial_offset()
    src.open(start)
    seen: list[str] = []
    offsets: list[Offset] = []
    while not offsets or offsets[-1]["snapshot"] != SNAPSHOT_COMPLETED:
        assert src.snapshot_due(start) is (start["snapshot"] == SNAPSHOT_PENDING)
        end, units = batch(src, start)
        assert not src.is_finished(end) or end["snapshot"] == SNAPSHOT_COMPLETED
        offsets.append(end)
        seen += units
        start = end
    assert seen == [f"chunk {i}" for i in range(5)]
    assert [(o["snapshot"], o.get("from"), o.get("to")) for o in offsets] == [
        (SNAPSHOT_CHUNKS, 0, 2), (SNAPSHOT_CHUNKS, 2, 4), (SNAPSHOT_CHUNKS, 4, 5), (SNAPSHOT_COMPLETED, None, None)]
    assert all(o["pos"] == 5 and o["epoch"] == 1 for o in offsets)
    assert offsets[-1] == {"snapshot": SNAPSHOT_COMPLETED, "pos": 5, "epoch": 1}
    assert src.ended == 1 and src.held is None  # let go once the last chunk batch is over
    src.log_end = 7
    assert batch(src, start) == ({"snapshot": STREAMING, "pos": 7, "epoch": 1}, ["stream 5..7"])


def test_a_snapshot_in_batches_interrupted_is_taken_again():
    """After a restart the held snapshot is gone: a replayed batch reads nothing, the snapshot is due (a new
    epoch, from its first chunk) and the stored position is not checked meanwhile."""
    first = BatchedSnapshots()
    start = first.initial_offset()
    first.open(start)
    one, _ = batch(first, start)
    two = first.latest_offset(one)  # planned, not committed: the process dies
    src = BatchedSnapshots()
    src.snapshot_kept = False  # (a stored position would be checked: it is not)
    src.open(one)
    assert src.snapshot_due(one) and not src.is_finished(one)
    assert src.plan(one, two) == []  # the replayed batch
    end, units = batch(src, two)
    assert end["snapshot"] == SNAPSHOT_CHUNKS and end["epoch"] == 2 and units == ["chunk 0", "chunk 1"]
    assert not src.snapshot_due(end)
