"""The benchmark of one large transaction into a consumer already streaming (`pg_stream_running`): the drivers'
goal, the measurement from the commit, and the pg_recvlogical limit on a real server with a small load."""

from __future__ import annotations

import json

import pytest

from bench import data
from bench.cases import RunningCase, wait_until_streaming
from bench.headwater_driver import Goal
from bench.measure import ProcessResult
from bench.pg_baselines import load_chunks, recvlogical_running, recvlogical_running_v2


def test_goal_waits_for_the_expect_file_then_skips_the_warmup_events(tmp_path):
    expect, ready = tmp_path / "expect.json", tmp_path / "ready"
    goal = Goal(0, str(expect), str(ready))
    out = {"count": 0}
    assert not goal.reached(out, 1.0) and not ready.exists()
    out["count"] = 3  # warm-up events; the harness has not said how many there will be
    assert not goal.reached(out, 2.0) and ready.exists()
    expect.write_text(json.dumps({"skip": 4, "expect": 10}))
    out["count"] = 4
    assert not goal.reached(out, 3.0) and "load_first" not in out and out["skip"] == 4
    out["count"] = 9
    assert not goal.reached(out, 4.0) and out["load_first"] == 4.0
    out["count"] = 14
    assert goal.reached(out, 5.0) and out["load_first"] == 4.0


def test_goal_without_a_file_is_the_expected_count():
    goal = Goal(5)
    assert not goal.reached({"count": 4}, 1.0)
    assert goal.reached({"count": 5}, 2.0)


def test_wait_until_streaming_counts_the_rows_it_inserted():
    answers = iter([False, False, False, True])
    inserted: list[int] = []
    assert wait_until_streaming(lambda: next(answers), lambda: inserted.append(1), 5.0) == 3 == len(inserted)
    with pytest.raises(TimeoutError):
        wait_until_streaming(lambda: False, lambda: None, 0.0)


def test_load_chunks_are_those_read_after_the_commit_was_sent():
    arrivals = [(1.0, 10), (2.0, 10), (5.0, 100), (5.5, 200), (6.0, 50)]
    assert load_chunks(arrivals, 5.0) == (5.0, 6.0, 350)
    assert load_chunks(arrivals, 7.0) is None


def test_measured_from_the_commit_without_the_warmup_events(tmp_path):
    case = RunningCase(server=None, rows=100, workdir=tmp_path, slot="s")  # type: ignore[arg-type]
    case.warmup_rows = 3
    case.commit = data.Commit(first_id=4, started=100.0, commit_sent=104.0, committed=104.5)
    res = ProcessResult(0, launched=90.0, ended=110.0, peak_rss_bytes=1, sampled_peak_bytes=1, maxrss_bytes=1,
                        largest_hwm_bytes=1, cpu_timeline=[(100.0, 5.0), (104.4, 6.0), (105.0, 6.5), (106.4, 8.0),
                                                           (106.6, 8.5)])
    m = case.measurement("x", res, {"first": 95.0, "load_first": 105.0, "last": 106.5, "count": 103})
    assert m.ok and m.rows == 100
    assert m.seconds == pytest.approx(2.0) and m.startup_seconds == pytest.approx(0.5)
    assert m.first_to_last_seconds == pytest.approx(1.5)
    assert m.details["launch_to_first_event_s"] == 5.0 and m.details["warmup_events"] == 3
    assert m.details["load_cpu_s"] == pytest.approx(2.0)  # the samples last taken by the commit and the last event
    short = case.measurement("x", res, {"first": 95.0, "load_first": 105.0, "last": 106.5, "count": 102})
    assert short.status == "failed"


@pytest.mark.parametrize("contender", [recvlogical_running, recvlogical_running_v2])
def test_recvlogical_limit_measures_the_load_after_its_warmup(bench_db, tmp_path, contender):
    data.create_slot(bench_db, "bench_running_test")
    case = RunningCase(bench_db, 2000, tmp_path, "bench_running_test", warmup_seconds=1, warmup_rate=100)
    m = contender(case)
    assert m.ok, m.note
    assert case.commit is not None
    warmups = bench_db.query(f"SELECT count(*) FROM {data.TABLE} WHERE id < {case.commit.first_id}", data.DBNAME)
    assert case.warmup_rows == warmups[0][0] > 1  # the markers until it streamed, then a second at 100/s
    count = bench_db.query(f"SELECT count(*) FROM {data.TABLE} WHERE id >= {case.commit.first_id}", data.DBNAME)
    assert count[0][0] == 2000
    assert json.loads(case.expect_file.read_text()) == {"skip": case.warmup_rows, "expect": 2000}
    if contender is recvlogical_running:  # protocol 1 sends it all after the commit: every insert is at least
        assert m.details["bytes_after_commit"] > 2000 * 70  # its 41-character name and 29-character timestamp
    assert m.startup_seconds is not None and m.seconds is not None and m.startup_seconds <= m.seconds
