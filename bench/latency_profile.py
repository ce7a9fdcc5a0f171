"""Profile headwater's micro-batch cycle under the latency benchmark's steady load (PostgreSQL).

    python -m bench.latency_profile --rate 2000 [--seconds 25] [--warmup 10] [--checkout /work/main]
        [--py-spy OUT] [--label NAME] [--out FILE.jsonl] [--prop K=V] [--env K=V] [--conf K=V]

One fresh PostgreSQL server, one slot, the headwater latency contender (`bench/headwater_driver.py`
of `--checkout`, default this one) and the latency benchmark's load (`pgbench --rate`, warm-up first),
as `python -m bench --only pg_latency --contender headwater` runs them, plus what that leaves out:

- the CPU seconds of every process of the contender's tree (`bench.cpu.CpuLedger`, by role and the
  JVM's busiest threads) *during the load only* (the difference between a sample as the load starts and
  one as it ends), and PostgreSQL's (all its processes) over the same window;
- every micro-batch's rows and Spark's `durationMs` phases (when the checkout's driver records
  `cycles`), summarised as median and p90 of the batches with rows during the load;
- with `--py-spy OUT`, `py-spy record --subprocesses` over the contender's tree during the load (raw
  folded stacks in OUT; it slows what it samples: do not compare its latencies with other runs').

Prints one JSON document (and appends it as a line to `--out`). Compare two codes by running this alternately.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import data
from bench.cases import LatencyCase
from bench.cpu import CpuLedger
from bench.headwater_contenders import THIS, Checkout, properties
from bench.measure import percentiles, tree

FOLLOW_S = 0.25


def _postgres_cpu(server: Any) -> float:
    """CPU seconds of the server's processes (the postmaster and its children)."""
    pid_file = Path(server.root) / "data" / "postmaster.pid"
    root = int(pid_file.read_text().split()[0])
    ledger = CpuLedger(root)
    ledger.sample(tree(root))
    return ledger.total()


def _summary(cycles: list[dict[str, Any]], since: float, until: float) -> dict[str, Any]:
    """Median and p90 of each phase of the batches with rows that started within [since, until]."""
    busy = [c for c in cycles if c.get("rows") and since <= c.get("at", since) <= until]
    if not busy:
        return {}
    keys = sorted({k for c in busy for k in c if k != "at"})
    out: dict[str, Any] = {"batches": len(busy)}
    for k in keys:
        values = sorted(float(c.get(k, 0)) for c in busy)
        out[k] = {"p50": statistics.median(values), "p90": values[int(0.9 * (len(values) - 1))],
                  "mean": round(statistics.fmean(values), 1)}
    return out


def _run(a: argparse.Namespace, server: Any, work: Path) -> dict[str, Any]:
    """One profiled run on `server` (a fresh one with the table), files in `work`."""
    checkout = Checkout.at(a.checkout) if a.checkout else THIS
    data.create_table(server)
    slot = "latprof"
    data.create_slot(server, slot)
    case = LatencyCase(server, a.rate, a.seconds, work, slot, warmup_seconds=a.warmup)
    props = {**properties(case, slot, "no_data"), **dict(p.split("=", 1) for p in a.prop)}
    (work / "props.json").write_text(json.dumps(props))
    ready = work / "ready"
    result = work / "result.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [checkout.python, str(checkout.driver), str(work / "props.json"), str(result), "--runner", "spark",
           "--mode", "latency", "--ready-file", str(ready), "--workdir", str(work / "latency"),
           "--max-wait", str(a.warmup + a.seconds + 600)]
    for c in a.conf:
        cmd += ["--conf", c]
    with open(work / "driver.log", "w") as log:
        proc = subprocess.Popen(cmd, cwd=work, stdout=log, stderr=subprocess.STDOUT,
                                env={**env, "PYSPARK_PYTHON": checkout.python, **dict(e.split("=", 1) for e in a.env)})
    ledger = CpuLedger(proc.pid)
    stop = threading.Event()

    def follow() -> None:  # keep every process of the tree in the ledger, as the benchmark does
        while not stop.is_set():
            ledger.sample(tree(proc.pid), threads=True)
            stop.wait(FOLLOW_S)

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    try:
        deadline = time.monotonic() + 300
        while not ready.exists():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("headwater did not stream: " + (work / "driver.log").read_text()[-3000:])
            data.insert_marker(server, data.WARMUP)
            time.sleep(0.25)
        if a.warmup > 0:
            data.steady_load(server, a.rate, a.warmup, work, kind=data.WARMUP)
        ledger.sample(tree(proc.pid), threads=True)
        before_roles, before_threads = ledger.by_role(), ledger.jvm_threads(20)
        pg_before = _postgres_cpu(server)
        spy = None
        if a.py_spy:
            beside = Path(sys.executable).with_name("py-spy")  # (installed in this interpreter's environment)
            spy = subprocess.Popen([str(beside) if beside.exists() else "py-spy", "record", "--subprocesses", "--nonblocking", "--format", "raw",
                                    "--rate", "50", "--duration", str(int(a.seconds)), "--pid", str(proc.pid),
                                    "--output", a.py_spy], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        started = time.time()
        load = data.steady_load(server, a.rate, a.seconds, work)
        ended = time.time()
        ledger.sample(tree(proc.pid), threads=True)
        after_roles, after_threads = ledger.by_role(), ledger.jvm_threads(20)
        pg_cpu = _postgres_cpu(server) - pg_before
        data.insert_marker(server, data.SENTINEL)
        if spy is not None:
            spy.wait(timeout=120)
        proc.wait(timeout=300)
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
    got = json.loads(result.read_text())
    lat = got.get("latencies_ms", [])
    cpu = {k: round(v - before_roles.get(k, 0.0), 2) for k, v in after_roles.items()}
    threads = {k: round(v - before_threads.get(k, 0.0), 2) for k, v in after_threads.items()}
    tenth = max(1, len(lat) // 10)
    return {
        "label": a.label or str(checkout.driver.parents[1]),
        "rate": a.rate, "rate_achieved": round(load.rate_achieved, 1), "load_rows": load.rows,
        "received": len(lat), "latency_ms": {k: round(v, 1) for k, v in percentiles(lat).items()},
        "p99_ms_by_tenth": [round(percentiles(lat[i:i + tenth]).get("p99", 0.0)) for i in range(0, len(lat), tenth)],
        "cpu_s_load": dict(sorted(cpu.items(), key=lambda kv: -kv[1])),
        "cpu_s_load_total": round(sum(cpu.values()), 2),
        "jvm_threads_load": dict(sorted(threads.items(), key=lambda kv: -kv[1])[:10]),
        "postgres_cpu_s_load": round(pg_cpu, 2),
        "cycles": _summary(got.get("cycles", []), started, ended),
        "error": got.get("error"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.latency_profile", description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=2000.0)
    ap.add_argument("--seconds", type=float, default=25.0)
    ap.add_argument("--warmup", type=float, default=10.0)
    ap.add_argument("--checkout", default=None, help="another checkout's headwater (its .venv and driver)")
    ap.add_argument("--py-spy", default=None, metavar="OUT", help="record the tree with py-spy into OUT (raw)")
    ap.add_argument("--label", default=None)
    ap.add_argument("--out", default=None, help="append the result as one JSON line to this file")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                    help="a Spark setting passed to the driver (repeatable)")
    ap.add_argument("--prop", action="append", default=[], metavar="KEY=VALUE",
                    help="a connector property added to the benchmark's (repeatable)")
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="an environment variable of the contender's process (repeatable)")
    a = ap.parse_args(argv)
    server = data.new_server()
    work = Path(tempfile.mkdtemp(prefix="headwater-latprof-"))
    try:
        out = _run(a, server, work)
    finally:
        try:
            for s in data.slots(server):
                data.drop_slot(server, s)
        except Exception:
            pass
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out, indent=1))
    if a.out:
        with open(a.out, "a") as f:
            f.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
