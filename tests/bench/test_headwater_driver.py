"""The benchmark driver's count of a sink file's events: lines that are not tombstones, in chunks."""

from __future__ import annotations

from bench.headwater_driver import _count_events


def test_events_counted_across_chunk_boundaries(tmp_path):
    path = tmp_path / "batch.jsonl"
    lines = [b'{"topic":"t","key":{"id":1},"value":null}\n' if i % 3 == 0 else b'{"topic":"t","key":{"id":1},"value":{}}\n'
             for i in range(1000)]
    path.write_bytes(b"".join(lines))
    for chunk in (1, 5, 16, 4096, 1 << 22):  # a tombstone's end split every which way
        assert _count_events(path, chunk) == 1000 - 334


def test_incremental_events_counted_across_chunk_boundaries(tmp_path):
    path = tmp_path / "batch.jsonl"
    lines = [b'{"topic":"t","key":{"id":1},"value":{"source":{"snapshot":"incremental"}}}\n' if i % 4 == 0
             else b'{"topic":"t","key":{"id":1},"value":{"source":{"snapshot":"false"}}}\n' for i in range(1000)]
    path.write_bytes(b"".join(lines))
    for chunk in (1, 7, 4096, 1 << 22):
        assert _count_events(path, chunk, incremental=True) == 250
