"""`bench.snapshot_tasks`: a snapshot's task work run in-process reads every row and writes its lines."""

from __future__ import annotations

from bench import data
from bench.snapshot_tasks import one_round, snapshot_properties


def test_one_round_reads_every_partition_and_writes_each_event(bench_db, tmp_path):
    bench_db.execute(f"INSERT INTO {data.TABLE} {data.row_select('1', '3000')}", data.DBNAME)
    events, cpu, wall = one_round(snapshot_properties(bench_db), tmp_path, "snapshot_tasks_test")
    assert events == 3000 and cpu > 0 and wall > 0
    lines = [line for f in (tmp_path / "sink" / "_tmp").iterdir() for line in f.read_bytes().splitlines()]
    assert len(lines) == 3000 and all(b'"op":"r"' in line for line in lines)
