"""Calling one contender: the row recorded instead of running it, one run, the best of several runs."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from typing import Any

from bench.measure import Measurement, loadavg
from bench.model import Contender, Progress


def pending(c: Contender) -> Measurement | None:
    """The row to record instead of running `c` (placeholder or skipped), or None to run it."""
    if c.placeholder:
        return Measurement.not_measured(c.name)
    why = c.skip()
    if why:
        return Measurement.skipped(c.name, why)
    return None


def call(c: Contender, case: Any, progress: Progress) -> Measurement:
    """Run one contender on `case`, turning an exception into a failed Measurement."""
    progress(f"  {c.name} ...")
    before = loadavg()
    started = time.time()
    try:
        m = c.run(case)
    except Exception as exc:
        m = Measurement.failed(c.name, f"{type(exc).__name__}: {exc}")
        m.details["traceback"] = traceback.format_exc()
    m.details.setdefault("loadavg_1m_before", before)
    m.details.setdefault("loadavg_1m_after", loadavg())
    m.details.setdefault("harness_seconds", time.time() - started)
    progress(f"  {c.name}: {m.status}" + (f", {m.rows_per_s:,.0f} rows/s" if m.rows_per_s else "")
             + (f", p99 {m.latency_ms['p99']:,.0f} ms" if m.latency_ms and "p99" in m.latency_ms else "")
             + (f" ({m.note})" if m.note else ""))
    return m


def call_best(c: Contender, make_case: Callable[[int], Any], progress: Progress) -> Measurement:
    """Run `c` `c.repeat` times on `make_case(i)` and keep the fastest successful run."""
    runs = [call(c, make_case(i), progress) for i in range(c.repeat)]
    if len(runs) == 1:
        return runs[0]
    good = [m for m in runs if m.ok and m.seconds]
    best = min(good, key=lambda m: m.seconds or 0.0) if good else runs[-1]
    best.details["runs_seconds"] = [m.seconds for m in runs]
    best.details["best_of"] = len(runs)
    return best
