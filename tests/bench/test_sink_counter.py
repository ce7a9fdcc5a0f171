"""The benchmark's count of a sink file's events: lines that are not tombstones, in chunks, in a process of its own."""

from __future__ import annotations

import time

from bench.sink_counter import SinkCounter, count_events


def test_events_counted_across_chunk_boundaries(tmp_path):
    path = tmp_path / "batch.jsonl"
    lines = [b'{"topic":"t","key":{"id":1},"value":null}\n' if i % 3 == 0 else b'{"topic":"t","key":{"id":1},"value":{}}\n'
             for i in range(1000)]
    path.write_bytes(b"".join(lines))
    for chunk in (1, 5, 16, 4096, 1 << 22):  # a tombstone's end split every which way
        assert count_events(path, chunk) == 1000 - 334


def test_incremental_events_counted_across_chunk_boundaries(tmp_path):
    path = tmp_path / "batch.jsonl"
    lines = [b'{"topic":"t","key":{"id":1},"value":{"source":{"snapshot":"incremental"}}}\n' if i % 4 == 0
             else b'{"topic":"t","key":{"id":1},"value":{"source":{"snapshot":"false"}}}\n' for i in range(1000)]
    path.write_bytes(b"".join(lines))
    for chunk in (1, 7, 4096, 1 << 22):
        assert count_events(path, chunk, incremental=True) == 250


def test_the_counting_process_returns_each_file_once_in_order(tmp_path):
    files = []
    for i in range(5):
        files.append(tmp_path / f"part-{i} x.jsonl")  # a space in the name: the count is the last field
        files[-1].write_bytes(b'{"value":{}}\n' * (i + 1) + b'{"value":null}\n' * i)
    counter = SinkCounter()
    got: list[tuple[str, int]] = []
    for f in files[:3]:
        counter.count(f)
    deadline = time.time() + 30
    while len(got) < 3 and time.time() < deadline:
        got += counter.counted()
        time.sleep(0.01)
    for f in files[3:]:
        counter.count(f)
    got += counter.finish()
    assert got == [(f.name, i + 1) for i, f in enumerate(files)]
    assert counter.proc.returncode == 0
