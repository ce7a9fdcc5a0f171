"""Where a stream's first event after launch goes: a `/proc` trace of the process tree, process by process.

    python -m bench.startup_trace [--source postgres|mariadb ...] [--singles N | --snapshot N] [--rounds R]
        [--checkout DIR ...] [--interval S]

PostgreSQL (the default): loads N single-row transactions (default 100,000, as `pg_stream_singles`)
into a fresh PostgreSQL server, once per run into a slot of its own made before the load, and streams
them with `snapshot.mode: no_data`. MariaDB (`--source mariadb`, the MariaDB benchmarks' set-up:
`bench.mariadb_data` and `bench.headwater_contenders.mariadb_properties`): loads the N single-row
transactions once into a fresh MariaDB server, and every run streams them from the oldest binlog
(`snapshot.mode: never`, as `mariadb_stream_singles`); with `--snapshot N`, N rows in one transaction
instead, each run taking them as the default (lock-free) initial snapshot (as `mariadb_snapshot`).
`--source` twice traces both, interleaved. Each round launches `bench/headwater_driver.py` (the real
pipeline into the jsonl sink on `local[2]`) of each source and each checkout (default this one) in
turn, while sampling `/proc` every `--interval` seconds. For each run it prints every process of the
tree: when it started (from `/proc/PID/stat`, seconds after launch), its role (`bench.cpu`'s names),
and its CPU time when last seen; the first micro-batches (rows, start, Spark's phases); and the first
event's time after launch (the driver's own result). At the end, per source and checkout, the median
over the rounds of each step: the session ready, the first process of each of Spark's Python roles
(data source lookup, creation, streaming source runner, read planning, task workers), the first and
last events, and the CPU of the whole tree. Nothing is written but the table; the servers and their
files are removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
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


STEPS = (("session ready", None), ("data source lookup", "pyspark.sql.worker.lookup_data_sources"),
         ("creation", "pyspark.sql.worker.create_data_source"),
         ("streaming source runner", "pyspark.sql.streaming.python_streaming_source_runner"),
         ("read planning", "pyspark.sql.worker.plan_data_source_read"), ("task workers", "pyspark.worker"),
         ("first event", None), ("last event", None), ("CPU of the tree (s)", None))


class PostgresRuns:
    """PostgreSQL: per run, a slot of its own made before the run's load of single-row transactions."""

    name = "postgres"

    def __init__(self, singles: int) -> None:
        self.rows = singles
        self.server = data.new_server()
        data.create_table(self.server)
        self.slot: str | None = None

    def props(self, key: str) -> dict[str, str]:
        self.slot = key
        data.create_slot(self.server, key)
        data.load_single_row_transactions(self.server, self.rows)
        return {"connector.class": "postgres", **self.server.connector_properties(data.DBNAME),
                "topic.prefix": "bench", "table.include.list": data.TABLE if "." in data.TABLE
                else f"public.{data.TABLE}", "slot.name": key, "publication.name": data.PUBLICATION,
                "publication.autocreate.mode": "disabled", "snapshot.mode": "no_data"}

    def done(self) -> None:
        if self.slot is not None:
            data.drop_slot(self.server, self.slot)
            self.slot = None

    def stop(self) -> None:
        self.server.stop()


class MariaDBRuns:
    """MariaDB: one server and one load for every run (each reads the same binlog, or the same table)."""

    name = "mariadb"

    def __init__(self, singles: int, snapshot: int, work: Path) -> None:
        from bench import mariadb_data as md
        from bench.headwater_contenders import mariadb_properties

        self.rows = snapshot or singles
        self.server = md.new_server()
        try:
            (md.load_rows if snapshot else md.load_singles)(self.server, self.rows)
            if snapshot:
                self.server.execute(f"ANALYZE TABLE {md.TABLE}", md.DBNAME)
            case = md.SnapshotCase(self.server, self.rows, 0, work)  # its server, database and table
            self._props = mariadb_properties(case, "initial" if snapshot else "never")
        except BaseException:
            self.server.stop()
            raise

    def props(self, key: str) -> dict[str, str]:
        return self._props

    def done(self) -> None:
        pass

    def stop(self) -> None:
        self.server.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--source", action="append", choices=("postgres", "mariadb"), default=[],
                    help="the database (default postgres); given twice, both, interleaved")
    ap.add_argument("--singles", type=int, default=100_000)
    ap.add_argument("--snapshot", type=int, default=0, help="MariaDB: an initial snapshot of N rows instead")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--checkout", action="append", default=[], help="a headwater checkout (its .venv, its driver)")
    ap.add_argument("--interval", type=float, default=0.02)
    args = ap.parse_args()
    checkouts = [Path(c).resolve() for c in args.checkout] or [Path(__file__).resolve().parents[1]]
    work = data.workdir("startup-trace-")
    sources: list[PostgresRuns | MariaDBRuns] = []
    steps: dict[tuple[str, Path], list[dict[str, float]]] = {}
    try:
        for name in args.source or ["postgres"]:
            sources.append(PostgresRuns(args.singles) if name == "postgres"
                           else MariaDBRuns(args.singles, args.snapshot, work))
        for r in range(args.rounds):
            for source in sources:
                for i, checkout in enumerate(checkouts):
                    key = f"trace_{source.name}_{r}_{i}"
                    try:
                        got = run(checkout, r, source.props(key), work / key, source.rows, args.interval,
                                  source.name)
                    finally:
                        source.done()
                    steps.setdefault((source.name, checkout), []).append(got)
        summary(steps)
    finally:
        for source in sources:
            source.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


def run(checkout: Path, r: int, props: dict, run_dir: Path, expect: int, interval: float,
        source: str) -> dict[str, float]:
    """One traced run of `checkout`'s driver on `props` until `expect` events, reported: its steps' times."""
    run_dir.mkdir()
    (run_dir / "props.json").write_text(json.dumps(props))
    python = str(checkout / ".venv" / "bin" / "python")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYSPARK_PYTHON"] = python
    load = os.getloadavg()[0]
    launched, seen, ledger = trace([python, str(checkout / "bench" / "headwater_driver.py"),
                                    str(run_dir / "props.json"), str(run_dir / "result.json"),
                                    "--workdir", str(run_dir / "spark"), "--expect", str(expect)],
                                   env, interval, run_dir / "log")
    res = json.loads((run_dir / "result.json").read_text())
    report(checkout, r, launched, seen, ledger, res, load, source)
    return step_times(launched, seen, ledger, res)


def step_times(launched: float, seen: dict[int, Seen], ledger: CpuLedger, res: dict) -> dict[str, float]:
    """Seconds after launch of each of `STEPS`: the session ready, the first process of each role, the first and
    last events; and the CPU seconds of the whole process tree."""
    out: dict[str, float] = {}
    for step, role in STEPS:
        if role is not None:
            starts = [s.started for s in seen.values() if ledger.roles.get(s.pid) == role]
            at = min(starts) if starts else None
        elif step.startswith("CPU"):
            out[step] = ledger.total()
            continue
        else:
            at = res.get({"session ready": "spark_started", "first event": "first", "last event": "last"}[step])
        if at is not None:
            out[step] = at - launched
    return out


def summary(steps: dict[tuple[str, Path], list[dict[str, float]]]) -> None:
    """Per source and checkout, each step's median seconds after launch over the rounds (and every round's)."""
    print("\nsteps, seconds after launch (the CPU in seconds): median (each round)")
    for (source, checkout), runs in steps.items():
        print(f"  {source} {checkout}:")
        for step, _ in STEPS:
            times = [r[step] for r in runs if step in r]
            if times:
                print(f"    {step:<24} {statistics.median(times):6.2f}  ({', '.join(f'{t:.2f}' for t in times)})")
    sys.stdout.flush()


def report(checkout: Path, r: int, launched: float, seen: dict[int, Seen], ledger: CpuLedger, res: dict,
           load: float, source: str) -> None:
    first = res.get("first")
    print(f"\n{source} {checkout} round {r + 1} (1-min load {load:.2f}): first event "
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
