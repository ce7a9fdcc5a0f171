"""The lock-free parallel snapshot, simulated (common/chunkmerge.py, common/chunkprogress.py), no server.

A table over a small key space takes random transactions of inserts, updates, deletes and key changes
on the same keys; its log numbers them 1, 2, ... (every row change of a transaction shares its
position). Each chunk is read by a SELECT somewhere in a random window [low, high] (one point for the
whole SELECT, or one per row) and merged with the window's changes. Checked: (a) each merged chunk is
the table's rows of its range at its high; (b) the snapshot records followed by the filtered stream,
replayed in order, give exactly the table's final state, every streamed change meeting the row it
changes (no insert onto a present key, no delete or update of a row that is not there as its
before-image says: nothing doubled, nothing lost); (c) the same after a crash, through the JSON offset:
the chunks not recorded are read again, some recorded ones too (a replayed batch), and copies of a chunk
may reach the consumer twice."""

from __future__ import annotations

import json
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.connectors.common.chunkmerge import Change, merge_chunk
from headwater.connectors.common.chunkprogress import Progress, StreamFilter
from headwater.connectors.common.snapshot import KeyRange

KEYS = 8  # keys 0..7: small, so that changes keep hitting the same keys
TABLE = "db.t"
Row = tuple[int, str]


@dataclass
class History:
    changes: list[Change[Row]]
    states: list[dict[int, str]]  # states[p]: the table once every change at a position <= p is applied

    @property
    def end(self) -> int:
        return len(self.states) - 1

    def window(self, low: int, high: int) -> list[Change[Row]]:
        return [c for c in self.changes if low < c.position <= high]


@st.composite
def histories(draw: st.DrawFn) -> History:
    table: dict[int, str] = {}
    states, changes = [dict(table)], []
    for pos in range(1, draw(st.integers(0, 30)) + 1):
        for i in range(draw(st.integers(1, 3))):
            value = f"{pos}.{i}"
            present, absent = sorted(table), [k for k in range(KEYS) if k not in table]
            kind = draw(st.sampled_from(["insert", "update", "delete", "key change"]))
            if kind == "insert" or not present:
                if not absent:
                    continue
                k = draw(st.sampled_from(absent))
                changes.append(Change(pos, None, (k, value)))
                table[k] = value
            elif kind == "update":
                k = draw(st.sampled_from(present))
                changes.append(Change(pos, (k, table[k]), (k, value)))
                table[k] = value
            elif kind == "delete" or not absent:
                k = draw(st.sampled_from(present))
                changes.append(Change(pos, (k, table.pop(k)), None))
            else:
                old, new = draw(st.sampled_from(present)), draw(st.sampled_from(absent))
                changes.append(Change(pos, (old, table[old]), (new, value)))
                del table[old]
                table[new] = value
        states.append(dict(table))
    return History(changes, states)


@st.composite
def chunk_spans(draw: st.DrawFn) -> list[KeyRange]:
    bounds = sorted(draw(st.lists(st.integers(-1, KEYS), unique=True, max_size=4)))
    edges: list[tuple[int, ...] | None] = [None, *((b,) for b in bounds), None]
    return [KeyRange(lo, hi) for lo, hi in zip(edges, edges[1:], strict=False)]


@dataclass
class Read:
    """One read of a chunk: its window and the point (per key) at which the SELECT saw each row."""

    low: int
    high: int
    seen_at: list[int]  # by key


@st.composite
def reads(draw: st.DrawFn, first: int, last: int) -> Read:
    low = draw(st.integers(first, last))
    high = draw(st.integers(low, last))
    if draw(st.booleans()):  # one consistent view
        seen_at = [draw(st.integers(low, high))] * KEYS
    else:  # each row at its own point (READ COMMITTED, or a scan racing writers)
        seen_at = draw(st.lists(st.integers(low, high), min_size=KEYS, max_size=KEYS))
    return Read(low, high, seen_at)


def inside(span: KeyRange, k: int) -> bool:
    return (span.lo is None or span.lo[0] <= k) and (span.hi is None or k < span.hi[0])


def at_position(history: History, span: KeyRange, p: int) -> list[Row]:
    return sorted((k, v) for k, v in history.states[p].items() if inside(span, k))


def read_chunk(history: History, span: KeyRange, read: Read) -> list[Row]:
    """The SELECT's rows (each key as of its point), merged with the window's changes."""
    rows = [(k, history.states[read.seen_at[k]][k]) for k in range(KEYS)
            if inside(span, k) and k in history.states[read.seen_at[k]]]
    return merge_chunk(rows, history.window(read.low, read.high), span, low=read.low, high=read.high,
                       row_key=lambda r: (r[0],))


def replay(consumer: dict[int, str], history: History, progress: Progress, *, strict: bool) -> None:
    """The stream from where it starts, through the filter, applied to `consumer`; `strict`: each change
    must find the row it changes exactly as its before-image says (no change twice, none missing)."""
    keep = StreamFilter(progress).keep
    for change in history.window(progress.stream_start(), history.end):
        before, after = change.before, change.after
        if before is not None and after is not None and before[0] == after[0]:
            if keep(TABLE, (before[0],), change.position):
                assert not strict or consumer.get(before[0]) == before[1]
                consumer[after[0]] = after[1]
            continue
        if before is not None and keep(TABLE, (before[0],), change.position):
            assert consumer.pop(before[0], None) == before[1] or not strict
        if after is not None and keep(TABLE, (after[0],), change.position):
            assert not strict or after[0] not in consumer
            consumer[after[0]] = after[1]


@settings(max_examples=500, deadline=None)
@given(data=st.data(), history=histories(), spans=chunk_spans())
def test_chunks_and_stream_give_the_table(data: st.DataObject, history: History, spans: list[KeyRange]) -> None:
    progress = Progress({TABLE: spans})
    consumer: dict[int, str] = {}
    for i, span in enumerate(spans):
        read = data.draw(reads(0, history.end))
        merged = read_chunk(history, span, read)
        assert merged == at_position(history, span, read.high)  # (a)
        progress.finish(TABLE, i, read.low, read.high)
        for k, v in merged:
            assert k not in consumer  # every key in one chunk only
            consumer[k] = v
    replay(consumer, history, progress, strict=True)  # (b)
    assert consumer == history.states[-1]


@settings(max_examples=500, deadline=None)
@given(data=st.data(), history=histories(), spans=chunk_spans())
def test_after_a_crash_chunks_read_again(data: st.DataObject, history: History, spans: list[KeyRange]) -> None:
    crash = data.draw(st.integers(0, history.end))
    progress = Progress({TABLE: spans})
    copies: list[list[Row]] = []  # the chunk copies that reached the consumer, in the order they were read
    highs: dict[int, list[int]] = {i: [] for i in range(len(spans))}  # recorded highs, by chunk
    delivered = {i: False for i in range(len(spans))}

    def read_and_record(i: int, read: Read, last: bool) -> None:
        """Read chunk i; record its high (or crash first, if not `last`); deliver its copy or not."""
        merged = read_chunk(history, spans[i], read)
        if not last and not data.draw(st.booleans()):
            return  # crashed before recording the high: the copy went nowhere
        current.finish(TABLE, i, read.low, read.high)
        highs[i].append(read.high)
        if data.draw(st.booleans()) or (last and not delivered[i]):
            copies.append(merged)
            delivered[i] = True

    current = progress
    for i in range(len(spans)):  # before the crash
        if data.draw(st.booleans()):
            read_and_record(i, data.draw(reads(0, crash)), last=False)
    current = Progress.from_json(json.loads(json.dumps(progress.to_json())))  # (c) restored from the offset
    assert [i for _, i, _ in current.remaining()] == [i for i in range(len(spans)) if not highs[i]]
    for i in range(len(spans)):  # after: what remains, and some done chunks again (a replayed batch)
        if not highs[i] or not delivered[i] or data.draw(st.booleans()):
            read_and_record(i, data.draw(reads(crash, history.end)), last=True)
    assert current.done
    assert [c.high for c in current.tables[TABLE]] == [min(highs[i]) for i in range(len(spans))]

    consumer: dict[int, str] = {}
    for copy in copies:
        consumer.update(copy)
    replay(consumer, history, current, strict=False)
    assert consumer == history.states[-1]
