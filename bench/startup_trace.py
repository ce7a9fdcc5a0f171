"""Where a stream's first event after launch goes: a `/proc` trace of the process tree, process by process.

    python -m bench.startup_trace [--singles N] [--rounds R] [--checkout DIR ...] [--interval S]

Loads N single-row transactions (default 100,000, as `pg_stream_singles`) into a fresh PostgreSQL
server, once per run into a slot of its own made before the load, then launches
`bench/headwater_driver.py` (the real pipeline into the jsonl sink on `local[2]`, `snapshot.mode:
no_data`) of each checkout (default this one) in turn, R rounds interleaved, while sampling `/proc`
every `--interval` seconds. For each run it prints every process of the tree: when it started (from
`/proc/PID/stat`, seconds after launch), its role (`bench.cpu`'s names), and its CPU time when last
seen; and the first event's time after launch (the driver's own result). Nothing is written but the
table; the server and its files are removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench import data
from bench.cpu import SPAWNING, TICKS, CpuLedger

BOOT = time.time() - float(Path("/proc/uptime").read_text().split()[0])


def start_time(pid: int) -> float | None:
    """A process's start as epoch seconds (`/proc/PID/stat` field 22, clock ticks after boot)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return BOOT + int(text[text.rindex(")") + 2:].split()[19]) / TICKS


def children(pid: int) -> list[int]:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []
    out: list[int] = []
    for tid in tasks:
        with contextlib.suppress(OSError):
            out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
    return out


@dataclass
class Seen:
    pid: int
    started: float
    cpu: float = 0.0
    last: float = 0.0


def trace(argv: list[str], env: dict[str, str], interval: float, log: Path) -> tuple[float, dict[int, Seen], CpuLedger]:
    """Run `argv` to its end, sampling its process tree every `interval` s: (launch time, the processes, their roles)."""
    with open(log, "w") as out:
        launched = time.time()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)
    ledger = CpuLedger(proc.pid)
    seen: dict[int, Seen] = {}
    while proc.poll() is None:
        todo, tree, now = [proc.pid], [], time.time()
        while todo:
            pid = todo.pop()
            tree.append(pid)
            todo += children(pid)
        ledger.sample(tree)
        for pid in tree:
            if pid not in ledger.seconds:
                continue
            s = seen.get(pid)
            if s is None:
                started = start_time(pid)
                if started is None:
                    continue
                s = seen[pid] = Seen(pid, started)
            s.cpu, s.last = ledger.seconds[pid], now
        time.sleep(interval)
    return launched, seen, ledger


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--singles", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--checkout", action="append", default=[], help="a headwater checkout (its .venv, its driver)")
    ap.add_argument("--interval", type=float, default=0.02)
    args = ap.parse_args()
    checkouts = [Path(c).resolve() for c in args.checkout] or [Path(__file__).resolve().parents[1]]
    server = data.new_server()
    work = data.workdir("startup-trace-")
    try:
        data.create_table(server)
        for r in range(args.rounds):
            for checkout in checkouts:
                slot = f"trace_{r}_{checkouts.index(checkout)}"
                data.create_slot(server, slot)
                data.load_single_row_transactions(server, args.singles)
                props = {"connector.class": "postgres", **server.connector_properties(data.DBNAME),
                         "topic.prefix": "bench", "table.include.list": data.TABLE if "." in data.TABLE
                         else f"public.{data.TABLE}", "slot.name": slot, "publication.name": data.PUBLICATION,
                         "publication.autocreate.mode": "disabled", "snapshot.mode": "no_data"}
                run_dir = work / slot
                run_dir.mkdir()
                (run_dir / "props.json").write_text(json.dumps(props))
                python = str(checkout / ".venv" / "bin" / "python")
                env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
                env["PYSPARK_PYTHON"] = python
                load = os.getloadavg()[0]
                launched, seen, ledger = trace([python, str(checkout / "bench" / "headwater_driver.py"),
                                        str(run_dir / "props.json"), str(run_dir / "result.json"),
                                        "--workdir", str(run_dir / "spark"), "--expect", str(args.singles)],
                                       env, args.interval, run_dir / "log")
                res = json.loads((run_dir / "result.json").read_text())
                report(checkout, r, launched, seen, ledger, res, load)
                data.drop_slot(server, slot)
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def report(checkout: Path, r: int, launched: float, seen: dict[int, Seen], ledger: CpuLedger, res: dict,
           load: float) -> None:
    first = res.get("first")
    print(f"\n{checkout} round {r + 1} (1-min load {load:.2f}): first event "
          f"{(first - launched) if first else float('nan'):.2f} s, last {(res.get('last') or launched) - launched:.2f} s"
          f", session ready {(res.get('spark_started') or launched) - launched:.2f} s, {res.get('count')} events"
          + (f", error {res['error']}" if res.get("error") else ""))
    for c in res.get("cycles", [])[:4]:  # the first micro-batches: rows, start after launch, Spark's phases (ms)
        print(f"  batch of {c.get('rows')} rows at {c['at'] - launched:.2f} s: "
              + ", ".join(f"{k} {v}" for k, v in c.items() if k not in ("rows", "at")))
    print(f"  {'start s':>8} {'seen to':>8} {'cpu s':>6}  role")
    for s in sorted(seen.values(), key=lambda s: s.started):
        role = ledger.roles.get(s.pid, "?")
        if role in (SPAWNING, "jspawnhelper", "bash", "dirname", "readlink", "chmod", "ps", "setsid") and s.cpu < 0.05:
            continue
        print(f"  {s.started - launched:8.2f} {s.last - launched:8.2f} {s.cpu:6.2f}  {role} [{s.pid}]")
    sys.stdout.flush()


if __name__ == "__main__":
    sys.exit(main())
