"""What one contender's run measured, and how a child process is timed and its memory taken.

Every contender runs in a child process of its own, so that its peak memory is its own and not
that of the harness or of an earlier contender. `MeasuredProcess` starts the child and, while it
runs, samples every `SAMPLE_INTERVAL` seconds from /proc the resident memory of the child and of
all its descendants (summed: `sampled_peak_bytes`) and each process's own high-water mark
(`VmHWM`, kept by the kernel, exact since the process's exec). The reported peak is the larger of
the sampled tree sum and the largest high-water mark: exact for a single process (Debezium's JVM
lives inside one Python process), a sampled sum for a tree (Spark's JVM and its Python workers).
That sum counts a page shared by several processes (Spark forks its Python workers from daemons)
once per process, so it overstates a tree; the tree's proportional set size (PSS, from
/proc/PID/smaps_rollup, each shared page divided among its sharers) is sampled every
`PSS_EVERY` samples and recorded beside it (`sampled_tree_pss_peak_bytes`), with its split by the
processes' roles at the peak (`pss_mb_by_role_at_peak`), and each process's own peak PSS, split into
anonymous and file-backed memory (`pss_mb_peak_by_process`: what each process of the tree needed at
its worst, whenever that was).

`ru_maxrss` from `os.wait4` is recorded too (`maxrss_bytes`) but not used: Linux carries the
parent's resident size over fork into the child's maxrss, so for a small tool it shows the
harness's ~35 MB rather than the tool's own. The database server's memory is never counted: it is
the same server for every contender of a benchmark. The child's CPU time from `os.wait4` (user +
system, with the descendants it waited for) is recorded as `wait4_cpu_s`, and the whole tree's as
`sampled_tree_cpu_s` (each process's own CPU as last sampled, summed: a process's last interval
before it exits is lost; Spark's JVM and Python workers, which `wait4` does not count, are in it): on a
loaded machine they compare two contenders better than their wall times. That sampled CPU time is
split by the role of each process and JVM thread too (`bench.cpu`: `cpu_s_by_role` in the details).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from bench.cpu import SPAWNING, CpuLedger

SAMPLE_INTERVAL = 0.05
PSS_EVERY = 10  # smaps_rollup walks page tables: read it every tenth sample only
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

OK = "ok"
NOT_MEASURED = "not measured yet"
SKIPPED = "skipped"
FAILED = "failed"


@dataclass
class Measurement:
    """The result of one contender on one benchmark.

    `seconds` is the headline wall time: from the moment the harness launched the contender to
    the moment the last row was delivered (or the process ended, for a tool that writes to
    /dev/null). Rates derived from it include the contender's start-up; `first_to_last_seconds`
    (when known) is the steady part alone. `data_bytes` is the size of the rows moved, counted
    the same way for every contender of a benchmark (the COPY text size of the table's rows), so
    MB/s is comparable across contenders; what the contender itself wrote is in `details`.
    """

    contender: str
    status: str = OK
    note: str = ""
    rows: int | None = None
    seconds: float | None = None
    first_to_last_seconds: float | None = None
    startup_seconds: float | None = None
    data_bytes: int | None = None
    peak_rss_bytes: int | None = None
    latency_ms: dict[str, float] | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == OK

    @property
    def rows_per_s(self) -> float | None:
        if not self.ok or not self.rows or not self.seconds:
            return None
        return self.rows / self.seconds

    @property
    def steady_rows_per_s(self) -> float | None:
        if not self.ok or not self.rows or not self.first_to_last_seconds:
            return None
        return self.rows / self.first_to_last_seconds

    @property
    def mb_per_s(self) -> float | None:
        if not self.ok or not self.data_bytes or not self.seconds:
            return None
        return self.data_bytes / self.seconds / 1e6

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["rows_per_s"] = self.rows_per_s
        out["steady_rows_per_s"] = self.steady_rows_per_s
        out["mb_per_s"] = self.mb_per_s
        return out

    @classmethod
    def not_measured(cls, contender: str, note: str = "") -> Measurement:
        return cls(contender, status=NOT_MEASURED, note=note)

    @classmethod
    def skipped(cls, contender: str, note: str) -> Measurement:
        return cls(contender, status=SKIPPED, note=note)

    @classmethod
    def failed(cls, contender: str, note: str) -> Measurement:
        return cls(contender, status=FAILED, note=note)


def from_event_times(name: str, res: ProcessResult, times: dict[str, Any], rows: int, data_bytes: int | None,
                     since: float | None = None, **details: Any) -> Measurement:
    """The Measurement of a child that reported its own event times.

    `times` holds epoch seconds `first` and `last` (first and last row delivered), `count` (rows
    delivered) and optionally `error` and `timed_out`, as a contender's child writes them to a
    JSON file (`bench/debezium_driver.py` does). Times are measured from `since` (the epoch time
    the measured work began), by default `res.launched`. Fewer rows than `rows`, an error or a
    time-out make it a failed Measurement (with the figures kept in `details`).
    """
    start = res.launched if since is None else since
    count = int(times.get("count") or 0)
    details = {"events": count, "exit_code": res.returncode, "wall_until_process_exit_s": res.seconds,
               **res.memory(), **details}
    if times.get("error") or times.get("timed_out") or count < rows or not times.get("last") or not times.get("first"):
        why = times.get("error") or ("timed out" if times.get("timed_out") else "")
        m = Measurement.failed(name, f"{count} of {rows} rows; {why}".strip("; "))
        m.details = details
        return m
    return Measurement(
        name, rows=count, seconds=times["last"] - start, first_to_last_seconds=times["last"] - times["first"],
        startup_seconds=times["first"] - start, data_bytes=data_bytes, peak_rss_bytes=res.peak_rss_bytes,
        details=details,
    )


def percentiles(values_ms: list[float]) -> dict[str, float]:
    """p50/p90/p99/max/mean (nearest rank) of a list of latencies in milliseconds, and their count."""
    if not values_ms:
        return {"count": 0}
    xs = sorted(values_ms)
    n = len(xs)

    def rank(q: float) -> float:
        return xs[min(n - 1, max(0, int(q * n + 0.999999) - 1))]

    return {"count": n, "p50": rank(0.50), "p90": rank(0.90), "p99": rank(0.99), "max": xs[-1],
            "mean": sum(xs) / n}


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    out.extend(int(x) for x in f.read().split())
            except OSError:
                pass
    except OSError:
        pass
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE_SIZE
    except (OSError, IndexError, ValueError):
        return 0


PSS_FIELDS = ("Pss", "Pss_Anon", "Pss_File")


def _pss(pid: int) -> tuple[int, int, int]:
    """`pid`'s proportional set size in bytes, and its anonymous and file-backed parts (zeros if it is gone)."""
    got = dict.fromkeys(PSS_FIELDS, 0)
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                name, _, rest = line.partition(":")
                if name in got:
                    got[name] = int(rest.split()[0]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return got["Pss"], got["Pss_Anon"], got["Pss_File"]


def _hwm(pid: int) -> int:
    """The kernel's resident high-water mark of `pid` (VmHWM), in bytes."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


def tree(pid: int) -> list[int]:
    """`pid` and all its descendants right now."""
    out, todo, seen = [], [pid], set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        out.append(p)
        todo.extend(_children(p))
    return out


def tree_rss(pid: int) -> int:
    """Resident memory of `pid` and all its descendants right now, in bytes."""
    return sum(_rss(p) for p in tree(pid))


@dataclass
class ProcessResult:
    """How a measured child process ended."""

    returncode: int
    launched: float
    ended: float
    peak_rss_bytes: int
    sampled_peak_bytes: int
    maxrss_bytes: int
    largest_hwm_bytes: int
    pss_peak_bytes: int = 0
    cpu_seconds: float = 0.0  # user + system CPU of the child and the descendants it waited for (wait4)
    tree_cpu_seconds: float = 0.0  # each process of the tree's own CPU, as last sampled, summed
    cpu_s_by_role: dict[str, float] = field(default_factory=dict)
    jvm_cpu_s_by_thread: dict[str, float] = field(default_factory=dict)
    pss_mb_by_role_at_peak: dict[str, int] = field(default_factory=dict)
    # each process's own peak PSS: "<role> <pid>" -> {"pss": MB, "anon": MB, "file": MB} at that peak
    pss_mb_peak_by_process: dict[str, dict[str, int]] = field(default_factory=dict)
    cpu_timeline: list[tuple[float, float]] = field(default_factory=list, repr=False)  # (epoch, tree CPU s) samples

    @property
    def seconds(self) -> float:
        return self.ended - self.launched

    def cpu_seconds_between(self, start: float, end: float) -> float | None:
        """The tree's CPU seconds between two epoch times, from the last samples taken by each (None before the
        first sample): what a phase of the run cost, which a busy machine does not inflate as it does wall time."""
        at_start = [cpu for t, cpu in self.cpu_timeline if t <= start]
        at_end = [cpu for t, cpu in self.cpu_timeline if t <= end]
        if not at_start or not at_end:
            return None
        return at_end[-1] - at_start[-1]

    def memory(self) -> dict[str, Any]:
        """The memory figures behind `peak_rss_bytes`, for a Measurement's details."""
        return {"sampled_tree_peak_bytes": self.sampled_peak_bytes, "largest_vmhwm_bytes": self.largest_hwm_bytes,
                "wait4_maxrss_bytes": self.maxrss_bytes, "sampled_tree_pss_peak_bytes": self.pss_peak_bytes,
                "wait4_cpu_s": round(self.cpu_seconds, 3), "sampled_tree_cpu_s": round(self.tree_cpu_seconds, 3),
                "cpu_s_by_role": self.cpu_s_by_role, "jvm_cpu_s_by_thread": self.jvm_cpu_s_by_thread,
                "pss_mb_by_role_at_peak": self.pss_mb_by_role_at_peak,
                "pss_mb_peak_by_process": self.pss_mb_peak_by_process}


class MeasuredProcess:
    """A child process whose wall time and peak memory (itself plus descendants) are measured.

    `launched` is the epoch time taken just before the process was created: contenders that
    report their own event times (epoch seconds, same clock) measure from it.
    """

    def __init__(self, cmd: list[str], *, cwd: str | Path | None = None, env: dict[str, str] | None = None,
                 stdout: int | IO[Any] | None = subprocess.DEVNULL, stderr: int | IO[Any] | None = None,
                 stdin: int | IO[Any] | None = subprocess.DEVNULL) -> None:
        self.cmd = cmd
        self._sampled_peak = 0
        self._pss_peak = 0
        self._pss_at_peak: dict[str, int] = {}
        self._pss_peak_of: dict[int, tuple[int, int, int]] = {}  # pid -> its (pss, anon, file) at its own peak
        self._hwm: dict[int, int] = {}
        self._cpu_timeline: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self.launched = time.time()
        self.proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=stdout, stderr=stderr, stdin=stdin)
        self.cpu = CpuLedger(self.proc.pid)
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        self.result: ProcessResult | None = None
        _LIVE.add(self)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _sample(self) -> None:
        n = 0
        while not self._stop.is_set():
            pids = tree(self.proc.pid)
            self._sampled_peak = max(self._sampled_peak, sum(_rss(p) for p in pids))
            self.cpu.sample(pids, threads=n % PSS_EVERY == 0)
            self._cpu_timeline.append((time.time(), self.cpu.total()))
            if n % PSS_EVERY == 0:
                # (a process the JVM is starting shares its memory: counting it would count the JVM twice)
                parts = {p: _pss(p) for p in pids if self.cpu.roles.get(p) != SPAWNING}
                each = {p: v[0] for p, v in parts.items()}
                if sum(each.values()) > self._pss_peak:
                    self._pss_peak = sum(each.values())
                    self._pss_at_peak = self.cpu.by_process(each)
                for p, v in parts.items():
                    if v[0] > self._pss_peak_of.get(p, (0, 0, 0))[0]:
                        self._pss_peak_of[p] = v
            n += 1
            for p in pids:
                self._hwm[p] = max(self._hwm.get(p, 0), _hwm(p))
            self._stop.wait(SAMPLE_INTERVAL)

    def signal(self, sig: int = signal.SIGTERM) -> None:
        """Send `sig` to the child (only while it has not been reaped)."""
        if self.result is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)

    def wait(self, timeout: float | None = None, kill_on_timeout: bool = True) -> ProcessResult:
        """Reap the child (killing it after `timeout` seconds if asked) and return what it used."""
        if self.result is not None:
            return self.result
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                break
            if deadline is not None and time.monotonic() > deadline:
                if not kill_on_timeout:
                    raise TimeoutError(f"{self.cmd[0]} still running after {timeout}s")
                self.signal(signal.SIGTERM)
                time.sleep(2.0)
                self.signal(signal.SIGKILL)
                deadline = None
            time.sleep(0.01)
        ended = time.time()
        _LIVE.discard(self)
        self._stop.set()
        self._sampler.join()
        code = os.waitstatus_to_exitcode(status)
        self.proc.returncode = code
        maxrss = usage.ru_maxrss * 1024
        hwm = max(self._hwm.values(), default=0)
        peak = max(self._sampled_peak, hwm) if hwm else maxrss
        self.result = ProcessResult(code, self.launched, ended, peak, self._sampled_peak, maxrss, hwm, self._pss_peak,
                                    usage.ru_utime + usage.ru_stime, self.cpu.total(), self.cpu.by_role(),
                                    self.cpu.jvm_threads(), {k: v >> 20 for k, v in self._pss_at_peak.items()},
                                    self._peaks_by_process(), self._cpu_timeline)
        return self.result

    def _peaks_by_process(self) -> dict[str, dict[str, int]]:
        """Each process's own peak PSS (MB, with its anonymous and file-backed parts), largest first."""
        ranked = sorted(self._pss_peak_of.items(), key=lambda kv: -kv[1][0])
        return {f"{self.cpu.roles.get(pid, '?')} {pid}": {"pss": pss >> 20, "anon": anon >> 20, "file": file >> 20}
                for pid, (pss, anon, file) in ranked}


_LIVE: set[MeasuredProcess] = set()


def stop_all_live() -> None:
    """Terminate (then kill) every measured child still running: used when the harness is interrupted."""
    for proc in list(_LIVE):
        with contextlib.suppress(Exception):
            proc.wait(timeout=0.0)


def run_measured(cmd: list[str], *, timeout: float | None = None, **kwargs: Any) -> ProcessResult:
    """Run `cmd` to completion as a `MeasuredProcess`."""
    return MeasuredProcess(cmd, **kwargs).wait(timeout)


def loadavg() -> float:
    """The 1-minute load average: how busy the shared machine was (recorded with each run)."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError):
        return float("nan")
