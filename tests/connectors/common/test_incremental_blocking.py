"""The shared side of a blocking snapshot read in several batches, without a database: `Incremental.latest`
asks the connector's `blocking_batch` for the batch after a signalled or running blocking snapshot, keeps
the stream where it paused while one is left, and streams again (letting go of the snapshot) once none is."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.connectors.common import incremental as inc
from headwater.connectors.registry import validate_connector

SIGNAL = {"id": "b1", "tables": ["public.t"], "statements": {"public.t": "SELECT * FROM public.t"}}


class Hooks:
    """A connector whose blocking snapshot has `chunks` chunks, `per_batch` a batch (None: one batch)."""

    def __init__(self, chunks: int, per_batch: int | None):
        self.chunks, self.per_batch = chunks, per_batch
        self.asked: list[tuple[dict[str, Any], dict[str, Any] | None, int | None]] = []
        self.ended = 0

    def blocking_batch(self, snapshot: dict[str, Any], after: dict[str, Any] | None,
                       max_events: int | None) -> dict[str, Any] | None:
        self.asked.append((snapshot, after, max_events))
        if self.per_batch is None:
            return {} if after is None else None
        lo = 0 if after is None else after["chunk_range"][1]
        if lo >= self.chunks:
            return None
        return {"token": "tk", "chunk_range": [lo, min(self.chunks, lo + self.per_batch)]}

    def blocking_units(self, blocking: dict[str, Any], at: dict[str, Any]) -> list[Any]:
        return [("chunks", tuple(blocking.get("chunk_range", ())), at["lsn"])]

    def end_blocking(self) -> None:
        self.ended += 1

    def end_window(self, window: Any) -> None:
        pass


def _incremental(hooks: Hooks) -> inc.Incremental:
    config = validate_connector({"connector.class": "postgres", "database.hostname": "h", "database.user": "u",
                                 "database.dbname": "d", "topic.prefix": "p"})
    return inc.Incremental(config, hooks)  # type: ignore[arg-type]


def _run(incremental: inc.Incremental, start: dict[str, Any], streamed: list[int],
         max_events: int | None = 7, new: bool = True) -> dict[str, Any] | None:
    def stream() -> dict[str, Any] | None:
        streamed.append(1)
        return {"lsn": 20} if new else None

    def position(o: dict[str, Any]) -> dict[str, Any]:
        return {k: o[k] for k in ("lsn", "heartbeat_ms") if k in o}

    return incremental.latest(start, position(start), stream, lambda p: {"snapshot": "streaming", **p, "epoch": 1},
                              max_events)


def test_a_blocking_snapshot_spans_batches_while_chunks_are_left_then_streaming_resumes():
    hooks = Hooks(chunks=5, per_batch=2)
    incremental = _incremental(hooks)
    streamed: list[int] = []
    files = {inc.FILE_POSITIONS: {"/s.jsonl": 12}}
    state = inc.State((inc.Collection("public.u"),), ["3"], ["9"], "s1", paused=True).to_offset()  # (no window)
    start: dict[str, Any] = {"snapshot": "streaming", "lsn": 10, "heartbeat_ms": 5, "epoch": 1, **state, **files,
                             inc.BLOCKING_PENDING: SIGNAL}
    ends = []
    while True:
        end = _run(incremental, start, streamed)
        assert end is not None
        if not end.get(inc.BLOCKING):
            break
        ends.append(end)
        # the stream stays where it paused (without the heartbeat), the incremental snapshot's state and the
        # signal files' positions ride along, the signal's fields are kept beside the connector's
        assert end["lsn"] == 10 and "heartbeat_ms" not in end and inc.BLOCKING_PENDING not in end
        assert inc.State.from_offset(end) == inc.State.from_offset(state) and end[inc.FILE_POSITIONS] == {"/s.jsonl": 12}
        assert {k: end[inc.BLOCKING][k] for k in inc.BLOCKING_SIGNAL} == SIGNAL
        assert incremental.units({"lsn": 10}, end, {"lsn": 10}) == [
            ("chunks", tuple(end[inc.BLOCKING]["chunk_range"]), 10)]
        assert not streamed and hooks.ended == 0
        start = end
    assert [e[inc.BLOCKING]["chunk_range"] for e in ends] == [[0, 2], [2, 4], [4, 5]]
    assert [after for _, after, _ in hooks.asked] == [None, *(e[inc.BLOCKING] for e in ends)]
    assert all(snapshot == SIGNAL and max_events == 7 for snapshot, _, max_events in hooks.asked)
    # none left: the snapshot is let go and the batch streams from where the stream paused
    assert streamed == [1] and hooks.ended == 1
    assert end["lsn"] == 20 and inc.BLOCKING not in end and inc.BLOCKING_PENDING not in end
    assert inc.State.from_offset(end) == inc.State.from_offset(state)


def test_a_one_batch_blocking_snapshot_keeps_the_signals_fields_only():
    """PostgreSQL's: the first batch gives no fields of its own, the next one streams."""
    hooks = Hooks(chunks=0, per_batch=None)
    incremental = _incremental(hooks)
    streamed: list[int] = []
    first = _run(incremental, {"snapshot": "streaming", "lsn": 10, "epoch": 1, inc.BLOCKING_PENDING: SIGNAL},
                 streamed)
    assert first is not None and first[inc.BLOCKING] == SIGNAL and not streamed
    assert incremental.units({"lsn": 10}, first, {"lsn": 10}) == [("chunks", (), 10)]
    after = _run(incremental, first, streamed)
    assert after is not None and inc.BLOCKING not in after and after["lsn"] == 20
    assert streamed == [1] and hooks.ended == 1


@pytest.mark.parametrize("running", [False, True])
def test_no_batch_left_streams_at_once(running):
    """A blocking snapshot with nothing to read (or an offset whose batch was its last) streams in the same
    batch."""
    hooks = Hooks(chunks=0, per_batch=2)
    incremental = _incremental(hooks)
    streamed: list[int] = []
    field = {inc.BLOCKING: {**SIGNAL, "token": "tk", "chunk_range": [0, 0]}} if running else {
        inc.BLOCKING_PENDING: SIGNAL}
    end = _run(incremental, {"snapshot": "streaming", "lsn": 10, "epoch": 1, **field}, streamed)
    assert end is not None and inc.BLOCKING not in end and end["lsn"] == 20 and streamed == [1]
    assert hooks.asked[0][1] == (field[inc.BLOCKING] if running else None)


def test_the_last_batch_leaves_the_blocking_snapshot_even_when_nothing_is_new():
    """Nothing streamed since the pause: the batch after the last one still moves the offset off the blocking
    snapshot (an empty batch), else the engine would ask again from an offset naming a snapshot let go."""
    hooks = Hooks(chunks=2, per_batch=2)
    incremental = _incremental(hooks)
    streamed: list[int] = []
    last = _run(incremental, {"snapshot": "streaming", "lsn": 10, "epoch": 1, inc.BLOCKING_PENDING: SIGNAL}, streamed)
    assert last is not None and last[inc.BLOCKING]["chunk_range"] == [0, 2]
    end = _run(incremental, last, streamed, new=False)
    assert end == {"snapshot": "streaming", "lsn": 10, "epoch": 1} and streamed == [1] and hooks.ended == 1
    assert incremental.units({"lsn": 10}, end, {"lsn": 10}) == []
    assert _run(incremental, end, streamed, new=False) is None  # then nothing to do, as usual


def test_status_shows_a_blocking_snapshot():
    assert inc.status({"lsn": 1}) == {}
    assert inc.status({inc.BLOCKING_PENDING: SIGNAL}) == {
        "blocking_snapshot": "signalled", "blocking_snapshot_signal": "b1", "blocking_snapshot_tables": "public.t"}
    running = inc.status({inc.BLOCKING: {**SIGNAL, "token": "tk", "chunk_range": [4, 6]},
                          **inc.State((inc.Collection("public.u"),), None, None, "s1").to_offset()})
    assert running["blocking_snapshot"] == "running" and running["blocking_snapshot_chunks"] == "[4, 6)"
    assert running["incremental_snapshot"] == "running"  # (an incremental snapshot waits meanwhile)


class Failing(Hooks):
    """A connector whose blocking snapshot meets a query error: planning the batch after `at` (`where`
    "batch"), or planning the units of the batch at `at` (`where` "units")."""

    def __init__(self, at: int, where: str):
        super().__init__(chunks=6, per_batch=2)
        self.at, self.where = at, where
        self.failed = False

    def blocking_batch(self, snapshot: dict[str, Any], after: dict[str, Any] | None,
                       max_events: int | None) -> dict[str, Any] | None:
        lo = 0 if after is None else after["chunk_range"][1]
        if self.where == "batch" and lo == self.at and not self.failed:
            self.asked.append((snapshot, after, max_events))
            self.failed = True
            raise inc.BlockingAbandoned("Table 'db.t' doesn't exist", "db.t")
        return super().blocking_batch(snapshot, after, max_events)

    def blocking_units(self, blocking: dict[str, Any], at: dict[str, Any]) -> list[Any]:
        if self.where == "units" and blocking["chunk_range"][0] == self.at and not self.failed:
            self.failed = True
            raise inc.BlockingAbandoned("Unknown column 'nope' in 'SELECT'", "db.t")
        return super().blocking_units(blocking, at)


@pytest.mark.parametrize(("at", "where"), [(0, "batch"), (4, "batch"), (0, "units"), (2, "units")])
def test_a_query_error_abandons_the_blocking_snapshot_and_streaming_resumes_where_it_paused(at, where, caplog):
    """Debezium's coordinator: the error is logged at WARN and streaming resumes from where it paused; the
    batches read before stay as they were (their rows delivered), the snapshot is let go, no batch reads
    again."""
    hooks = Failing(at, where)
    incremental = _incremental(hooks)
    streamed: list[int] = []
    start: dict[str, Any] = {"snapshot": "streaming", "lsn": 10, "epoch": 1, inc.BLOCKING_PENDING: SIGNAL}
    read: list[Any] = []
    caplog.set_level("WARNING", logger="headwater.incremental")
    end: dict[str, Any] = start
    for _ in range(10):
        out = _run(incremental, start, streamed)
        assert out is not None
        end = out
        read += incremental.units({"lsn": 10}, end, {"lsn": 10})
        if not end.get(inc.BLOCKING):
            break
        assert end["lsn"] == 10 and not streamed
        start = end
    assert end["lsn"] == 20 and streamed == [1] and inc.BLOCKING_PENDING not in end
    # the batch that streams again says it was abandoned, and at which table (for the notifications' ABORTED)
    assert end[inc.BLOCKING_ABANDONED] == {"id": "b1", "tables": ["public.t"], "table": "db.t"}
    # let go when streaming resumes (and, failing in its units, at once too)
    assert hooks.ended == (1 if where == "batch" else 2)
    assert read == [("chunks", (lo, lo + 2), 10) for lo in range(0, at, 2)]  # the batches before the error's
    warned = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and "Error while executing requested blocking snapshot b1" in warned[0].getMessage()
    assert ("doesn't exist" if where == "batch" else "Unknown column") in warned[0].getMessage()
    assert len(hooks.asked) == at // 2 + 1  # never asked past the error
    # a new blocking snapshot (even with the same id) runs again
    again = _run(incremental, {**end, inc.BLOCKING_PENDING: SIGNAL}, streamed)
    assert again is not None and again[inc.BLOCKING]["chunk_range"] == [0, 2]
    assert inc.BLOCKING_ABANDONED not in again


def test_a_snapshot_abandoned_at_its_first_batch_leaves_the_offset_even_when_nothing_is_new():
    """Else the signalled snapshot would stay in the offset and be tried (and warned of) at every poll."""
    incremental = _incremental(Failing(0, "batch"))
    streamed: list[int] = []
    end = _run(incremental, {"snapshot": "streaming", "lsn": 10, "epoch": 1, inc.BLOCKING_PENDING: SIGNAL}, streamed,
               new=False)
    assert end == {"snapshot": "streaming", "lsn": 10, "epoch": 1,
                   inc.BLOCKING_ABANDONED: {"id": "b1", "tables": ["public.t"], "table": "db.t"}}
    assert _run(incremental, end, streamed, new=False) is None
