"""PostgreSQL's own tools as the physical limits: COPY for a snapshot, pg_recvlogical for streaming.

- `copy_psql`: `psql -c "\\copy (SELECT * FROM t) TO '/dev/null'"` — COPY text through libpq
  into a file, in C.
- `copy_psycopg2`: `COPY (SELECT * FROM t) TO STDOUT` through psycopg2's `copy_expert` into a
  writer that only counts bytes (`bench.copy_worker`). The faster of the two is the snapshot limit.
- `copy_psql_parallel`: two psql `\\copy`s at once, each over half of the table's CTID range (what
  a parallel chunked snapshot does); shown for information, not the limit the targets use.
- `recvlogical_stream`: `pg_recvlogical --start -o proto_version=1 -o publication_names=...`
  on the slot created before the load, into /dev/null, until `--endpos` (the end of the load):
  how fast the server decodes the load with pgoutput and ships it — the limit for any client.
- `recvlogical_stream_v2`: the same with `proto_version=2, streaming=on` (in-progress
  transactions streamed; shown for information, as Debezium does not use it).
- `recvlogical_running`: the same pg_recvlogical as `recvlogical_stream`, already streaming into a
  pipe (read and dropped by the harness, each chunk timestamped) when the load commits: the limit
  for commit → the load's last change delivered. `recvlogical_running_v2`: the same with protocol 2
  and `streaming=on` (information).
- `recvlogical_latency`: pg_recvlogical with `test_decoding` (text, so each change can be read
  as it arrives) under the steady load: the latency floor of server-side decoding plus loopback.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime

from bench import data
from bench.cases import LatencyCase, RunningCase, SnapshotCase, StreamCase
from bench.measure import MeasuredProcess, Measurement, run_measured
from headwater.devservers.postgres import PostgresServer, pg_bindir


def _env(server: PostgresServer) -> dict[str, str]:
    return dict(os.environ, PGPASSWORD=server.password)


def _conn_args(server: PostgresServer) -> list[str]:
    return ["-h", "127.0.0.1", "-p", str(server.port), "-U", server.superuser]


def copy_psql(case: SnapshotCase) -> Measurement:
    out = case.workdir / "psql.out"
    sql = f"\\copy (SELECT * FROM {case.schema}.{case.table}) TO '/dev/null'"
    with open(out, "w") as f:
        res = run_measured([str(pg_bindir() / "psql"), "-X", *_conn_args(case.server), "-d", case.dbname,
                            "-v", "ON_ERROR_STOP=1", "-c", sql], env=_env(case.server), stdout=f,
                           stderr=subprocess.STDOUT, timeout=3600)
    text = out.read_text()
    m = re.search(r"COPY (\d+)", text)
    if res.returncode != 0 or not m:
        return Measurement.failed("copy-psql", text[-300:])
    return Measurement("copy-psql", rows=int(m.group(1)), seconds=res.seconds, data_bytes=case.data_bytes,
                       peak_rss_bytes=res.peak_rss_bytes, details={"tool": "psql \\copy to /dev/null", **res.memory()})


def copy_psql_parallel(case: SnapshotCase, ways: int = 2) -> Measurement:
    """`ways` psql \\copy processes at once, each over its own CTID range (a TID range scan)."""
    pages = int(case.server.query(f"SELECT relpages FROM pg_class WHERE oid = '{case.schema}.{case.table}'::regclass",
                                  case.dbname)[0][0])
    bounds = [pages * i // ways for i in range(ways)] + [None]
    psql = str(pg_bindir() / "psql")
    conn = " ".join(_conn_args(case.server))
    parts = []
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        cond = f"ctid >= '({lo},0)'" + (f" AND ctid < '({hi},0)'" if hi is not None else "")
        sql = f"\\copy (SELECT * FROM {case.schema}.{case.table} WHERE {cond}) TO '/dev/null'"
        parts.append(f'{psql} -X {conn} -d {case.dbname} -v ON_ERROR_STOP=1 -c "{sql}" &')
    script = " ".join(parts) + " wait"
    out = case.workdir / "psql-parallel.out"
    with open(out, "w") as f:
        res = run_measured(["/bin/sh", "-c", script], env=_env(case.server), stdout=f, stderr=subprocess.STDOUT,
                           timeout=3600)
    text = out.read_text()
    counts = [int(n) for n in re.findall(r"COPY (\d+)", text)]
    name = f"copy-psql x{ways}"
    if res.returncode != 0 or len(counts) != ways:
        return Measurement.failed(name, text[-300:])
    return Measurement(name, rows=sum(counts), seconds=res.seconds, data_bytes=case.data_bytes,
                       peak_rss_bytes=res.peak_rss_bytes,
                       details={"tool": f"{ways} x psql \\copy over CTID ranges, in parallel", "pages": pages,
                                **res.memory()})


def copy_psycopg2(case: SnapshotCase) -> Measurement:
    out = case.workdir / "copy_worker.out"
    sql = f"COPY (SELECT * FROM {case.schema}.{case.table}) TO STDOUT"
    with open(out, "w") as f:
        res = run_measured([sys.executable, "-m", "bench.copy_worker", case.server.dsn(case.dbname), sql],
                           stdout=f, stderr=subprocess.STDOUT, timeout=3600)
    try:
        got = json.loads(out.read_text().strip().splitlines()[-1])
    except (ValueError, IndexError):
        return Measurement.failed("copy-psycopg2", out.read_text()[-300:])
    if res.returncode != 0:
        return Measurement.failed("copy-psycopg2", out.read_text()[-300:])
    return Measurement(
        "copy-psycopg2", rows=got["rows"], seconds=res.seconds, data_bytes=case.data_bytes,
        first_to_last_seconds=got["ended"] - got["first"] if got["first"] else None,
        startup_seconds=got["first"] - res.launched if got["first"] else None,
        peak_rss_bytes=res.peak_rss_bytes,
        details={"copy_bytes_received": got["bytes"], "tool": "psycopg2 copy_expert, counting writer",
                 **res.memory()},
    )


def recvlogical_cmd(server: PostgresServer, dbname: str, slot: str, *options: str) -> list[str]:
    return [str(pg_bindir() / "pg_recvlogical"), *_conn_args(server), "-d", dbname, "--slot", slot,
            "--start", "--no-loop", "-F", "0", *options]


def _recvlogical_stream(case: StreamCase, name: str, *options: str) -> Measurement:
    log = case.workdir / "recvlogical.log"
    cmd = recvlogical_cmd(case.server, case.dbname, case.slot, *options, "-o",
                          f"publication_names={case.publication}", "--endpos", case.end_lsn, "-f", "/dev/null")
    with open(log, "w") as f:
        res = run_measured(cmd, env=_env(case.server), stderr=f, timeout=3600)
    flushed = case.server.query(
        f"SELECT confirmed_flush_lsn >= '{case.end_lsn}'::pg_lsn FROM pg_replication_slots "
        f"WHERE slot_name = '{case.slot}'", case.dbname)
    if res.returncode != 0 or not flushed or not flushed[0][0]:
        return Measurement.failed(name, f"exit {res.returncode}: {log.read_text()[-300:]}")
    return Measurement(name, rows=case.rows, seconds=res.seconds, data_bytes=case.data_bytes,
                       peak_rss_bytes=res.peak_rss_bytes,
                       details={"tool": f"pg_recvlogical pgoutput {' '.join(options)} -> /dev/null, --endpos",
                                "end_lsn": case.end_lsn, **res.memory()})


def recvlogical_stream(case: StreamCase) -> Measurement:
    """pgoutput protocol 1, as Debezium uses it: a transaction is sent once it has committed."""
    return _recvlogical_stream(case, "pg_recvlogical", "-o", "proto_version=1")


def recvlogical_stream_v2(case: StreamCase) -> Measurement:
    """pgoutput protocol 2 with `streaming=on`: large transactions are sent while in progress.

    The server then sends changes past logical_decoding_work_mem as it decodes them instead of
    spilling them to disk and replaying them at commit. A reader that uses streaming should be
    compared with this one.
    """
    return _recvlogical_stream(case, "pg_recvlogical v2", "-o", "proto_version=2", "-o", "streaming=on")


def recvlogical_running(case: RunningCase) -> Measurement:
    """pgoutput protocol 1, as Debezium uses it: the load is sent once it has committed (`_recvlogical_running`)."""
    return _recvlogical_running(case, "pg_recvlogical", "-o", "proto_version=1")


def recvlogical_running_v2(case: RunningCase) -> Measurement:
    """Protocol 2 with `streaming=on`: the server sends most of the load while it is in progress, so what is
    read after the commit is its tail (information: headwater reads so)."""
    return _recvlogical_running(case, "pg_recvlogical v2", "-o", "proto_version=2", "-o", "streaming=on")


def _recvlogical_running(case: RunningCase, name: str, *options: str) -> Measurement:
    """pg_recvlogical streaming `case.slot` into a pipe before the load commits.

    It cannot count the changes (pgoutput is binary), so the harness reads its output in chunks, each
    timestamped as it is read: the load's changes are the chunks read after the COMMIT was sent (a
    protocol-1 transaction is sent only once it has committed; the warm-up rows were all sent seconds
    before), and the run ends once the walsender has sent past the load's commit (`sent_lsn`) and the
    pipe has been quiet for a second.
    """
    cmd = recvlogical_cmd(case.server, case.dbname, case.slot, *options, "-o", f"publication_names={case.publication}",
                          "-f", "-")
    arrivals: list[tuple[float, int]] = []  # (time read, bytes)
    with open(case.workdir / "recvlogical.log", "w") as err:
        proc = MeasuredProcess(cmd, env=_env(case.server), stdout=subprocess.PIPE, stderr=err)

        def read() -> None:
            assert proc.proc.stdout is not None
            fd = proc.proc.stdout.fileno()
            while chunk := os.read(fd, 1 << 20):
                arrivals.append((time.time(), len(chunk)))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            case.run_load(lambda: bool(arrivals))
            assert case.commit is not None and case.end_lsn is not None
            why = _wait_sent(case, arrivals)
        finally:
            proc.signal(signal.SIGINT)
            res = proc.wait(timeout=30)
            reader.join(5.0)
    assert case.commit is not None
    load = load_chunks(arrivals, case.commit.commit_sent)
    if why or load is None:
        return Measurement.failed(name, why or "nothing arrived after the commit")
    first, last, nbytes = load
    return Measurement(name, rows=case.rows, seconds=last - case.commit.committed, first_to_last_seconds=last - first,
                       startup_seconds=first - case.commit.committed, peak_rss_bytes=res.peak_rss_bytes,
                       details={"tool": f"pg_recvlogical pgoutput {' '.join(options)} -> pipe, chunks timestamped",
                                "bytes_after_commit": nbytes, "warmup_events": case.warmup_rows,
                                "load_cpu_s": res.cpu_seconds_between(case.commit.committed, last),
                                "end_lsn": case.end_lsn, **res.memory()})


def load_chunks(arrivals: list[tuple[float, int]], since: float) -> tuple[float, float, int] | None:
    """The first and last read times and the bytes of the chunks read after `since` (None if none were)."""
    after = [(t, n) for t, n in arrivals if t >= since]
    if not after:
        return None
    return after[0][0], after[-1][0], sum(n for _, n in after)


def _wait_sent(case: RunningCase, arrivals: list[tuple[float, int]], quiet: float = 1.0,
               poll: float = 0.1) -> str:
    """Wait until the walsender has sent past `case.end_lsn` and nothing has been read for `quiet` seconds;
    returns why not ("" once it has)."""
    assert case.commit is not None and case.end_lsn is not None
    deadline = time.monotonic() + case.max_wait
    while time.monotonic() < deadline:
        time.sleep(poll)
        last = arrivals[-1][0]
        # the server is asked only once the pipe is quiet: no connections made while the load streams
        if last >= case.commit.commit_sent and time.time() - last >= quiet and \
                data.slot_sent(case.server, case.slot, case.end_lsn):
            return ""
    return f"the walsender had not sent up to {case.end_lsn} after {case.max_wait:.0f}s"


_QTY = re.compile(r"qty\[integer\]:(\d+)")
_TS = re.compile(r"ts\[timestamp with time zone\]:'([^']+)'")


def recvlogical_latency(case: LatencyCase) -> Measurement:
    log = case.workdir / "recvlogical.log"
    cmd = recvlogical_cmd(case.server, case.dbname, case.slot, "-f", "-")
    latencies: list[float] = []
    first_seen = threading.Event()
    sentinel = threading.Event()
    with open(log, "w") as err:
        proc = MeasuredProcess(cmd, env=_env(case.server), stdout=subprocess.PIPE, stderr=err)

        def read() -> None:
            assert proc.proc.stdout is not None
            for line in proc.proc.stdout:
                now = time.time()
                first_seen.set()
                if b" INSERT: " not in line:
                    continue
                text = line.decode()
                qty = int(_QTY.search(text).group(1))  # type: ignore[union-attr]
                if qty == data.LOAD:
                    ts = datetime.fromisoformat(_TS.search(text).group(1))  # type: ignore[union-attr]
                    latencies.append((now - ts.timestamp()) * 1000.0)
                elif qty == data.SENTINEL:
                    sentinel.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            case.run_load(first_seen.is_set)
            got_all = sentinel.wait(120.0)
        finally:
            proc.signal(signal.SIGINT)
            res = proc.wait(timeout=30)
            reader.join(5.0)
    m = case.latency_measurement("pg_recvlogical", latencies, res.peak_rss_bytes,
                                 tool="pg_recvlogical test_decoding -> pipe, timestamped per line", **res.memory())
    if not got_all:
        m.note = (m.note + "; " if m.note else "") + "sentinel never arrived"
    return m
