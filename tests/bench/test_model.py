"""The benchmark model's targets: the memory target is the process tree's PSS, not its RSS sum."""

from __future__ import annotations

from bench.measure import Measurement
from bench.model import Target


def test_the_memory_target_reads_the_trees_pss() -> None:
    target = Target("peak memory (PSS) ≤ 1 GB", "peak_pss_bytes", 1e9)
    forked = Measurement("headwater", rows=1, seconds=1.0, peak_rss_bytes=1_200_000_000,
                         details={"sampled_tree_pss_peak_bytes": 960_000_000})
    assert target.check(forked, {}) == "met"
    forked.details["sampled_tree_pss_peak_bytes"] = 1_020_000_000
    assert target.check(forked, {}) == "missed"
    assert target.check(Measurement("headwater", rows=1, seconds=1.0, peak_rss_bytes=1), {}) == "no data"
