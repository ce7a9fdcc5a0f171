"""An interleaved A/B of headwater's memory on Spark: variants of the pipeline on one load, each process's peak PSS.

    .venv/bin/python -m bench.memory_ab {stream|snapshot} [--rows N] [--rounds R]
        --variant 'NAME [KEY=VALUE ...]' --variant ...

Each variant runs `bench/headwater_driver.py` (the real pipeline into the jsonl sink on `local[2]`, as the
`pg_stream_*` and `pg_snapshot*` benchmarks run it) in rounds, the variants' order reversed every other
round, all on the same data: `stream` loads the rows in one transaction once, after a slot per run was
made, so every run consumes the very same changes from its own slot; `snapshot` loads the table once and
each run snapshots it. A variant's KEY=VALUE pairs are: `env.NAME=V` (the environment of the run, which
Spark's JVM and Python workers inherit), `spark.*=V` (a Spark setting, the configuration's `spark.conf`),
`prop.NAME=V` (a connector property) and `checkout=DIR` (run another checkout's driver with its `.venv`).

Every run prints one JSON line: its rate (launch -> last row, and first -> last), its CPU (`sampled_tree_cpu_s`)
and its memory (`bench.measure`: the tree's peak PSS and each process's own peak); all lines go to
`bench/results/memory-ab-<time>.json` as well.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench import data
from bench.headwater_contenders import DRIVER, Checkout
from bench.measure import MeasuredProcess
from bench.report import RESULTS_DIR
from headwater.devservers.postgres import PostgresServer


@dataclass
class Variant:
    name: str
    env: dict[str, str] = field(default_factory=dict)
    conf: dict[str, str] = field(default_factory=dict)
    props: dict[str, str] = field(default_factory=dict)
    checkout: Checkout | None = None

    @classmethod
    def parse(cls, text: str) -> Variant:
        name, *pairs = shlex.split(text)
        v = cls(name)
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep:
                raise SystemExit(f"variant {name}: {pair!r} is not KEY=VALUE")
            if key.startswith("env."):
                v.env[key[4:]] = value
            elif key.startswith("spark."):
                v.conf[key] = value
            elif key.startswith("prop."):
                v.props[key[5:]] = value
            elif key == "checkout":
                v.checkout = Checkout.at(value)
            else:
                raise SystemExit(f"variant {name}: {key!r} is none of env.*, spark.*, prop.*, checkout")
        return v


def run_one(server: PostgresServer, variant: Variant, slot: str, mode: str, rows: int, workdir: Path) -> dict:
    """One run of `variant` on `slot` (`mode`: `no_data` to stream it, `initial` to snapshot the table)."""
    workdir.mkdir(parents=True, exist_ok=True)
    props = {"connector.class": "postgres", **server.connector_properties(data.DBNAME), "topic.prefix": "bench",
             "table.include.list": f"public.{data.TABLE}", "slot.name": slot, "publication.name": data.PUBLICATION,
             "publication.autocreate.mode": "disabled", "snapshot.mode": mode, **variant.props}
    props_file, result = workdir / "props.json", workdir / "result.json"
    props_file.write_text(json.dumps(props))
    checkout = variant.checkout or Checkout(sys.executable, DRIVER)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = [checkout.python, str(checkout.driver), str(props_file), str(result), "--runner", "spark", "--workdir",
           str(workdir / "spark"), "--expect", str(rows), "--max-wait", str(max(600.0, rows / 2000))]
    for k, v in variant.conf.items():
        cmd += ["--conf", f"{k}={v}"]
    with open(workdir / "log", "w") as log:
        proc = MeasuredProcess(cmd, cwd=workdir, stdout=log, stderr=subprocess.STDOUT,
                               env={**env, "PYSPARK_PYTHON": checkout.python, **variant.env})
        res = proc.wait(timeout=max(600.0, rows / 2000) + 120)
    try:
        got = json.loads(result.read_text())
    except (OSError, ValueError):
        got = {"error": f"no result (exit {res.returncode})"}
    shutil.rmtree(workdir / "spark", ignore_errors=True)  # the sink's files (GBs for 10M rows); the log stays
    out = {"variant": variant.name, "count": got.get("count"), "error": got.get("error"),
           "rows_per_s": round(rows / (got["last"] - res.launched)) if got.get("last") else None,
           "steady_rows_per_s": round(rows / (got["last"] - got["first"])) if got.get("last") and got.get("first")
           and got["last"] > got["first"] else None,
           "startup_s": round(got["first"] - res.launched, 2) if got.get("first") else None,
           "pss_mb": res.pss_peak_bytes >> 20, "rss_mb": res.peak_rss_bytes >> 20,
           "tree_cpu_s": round(res.tree_cpu_seconds, 1), "pss_mb_by_role_at_peak": res.pss_mb_by_role_at_peak,
           "pss_mb_peak_by_process": res.pss_mb_peak_by_process, "cpu_s_by_role": res.cpu_s_by_role,
           "loadavg": os.getloadavg()[0]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=("stream", "snapshot"))
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variant", action="append", required=True, help="'NAME [KEY=VALUE ...]' (repeatable)")
    args = ap.parse_args(argv)
    variants = [Variant.parse(v) for v in args.variant]
    order = [(r, v) for r in range(args.rounds) for v in (variants if r % 2 == 0 else variants[::-1])]
    work = data.workdir("memory-ab-")
    out_path = RESULTS_DIR / time.strftime("memory-ab-%Y%m%dT%H%M%SZ.json", time.gmtime())
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    lines: list[dict] = []
    server = data.new_server()
    try:
        if args.kind == "stream":
            data.create_table(server)
            slots = [f"ab_{i}" for i in range(len(order))]
            for slot in slots:
                data.create_slot(server, slot)
            data.load_one_transaction(server, args.rows)
        else:
            data.load_snapshot_table(server, args.rows)
            slots = [f"ab_{i}" for i in range(len(order))]
        for i, ((rnd, variant), slot) in enumerate(zip(order, slots, strict=True)):
            line = {"round": rnd, **run_one(server, variant, slot, "no_data" if args.kind == "stream" else "initial",
                                             args.rows, work / f"run{i}")}
            lines.append(line)
            print(json.dumps(line), flush=True)
            out_path.write_text(json.dumps({"argv": argv, "kind": args.kind, "rows": args.rows, "runs": lines},
                                           indent=1))
            data.drop_slot(server, slot)
    finally:
        for s in data.slots(server):
            data.drop_slot(server, s)
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(f"written to {out_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
