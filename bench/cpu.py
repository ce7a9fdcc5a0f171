"""CPU time of a measured process tree, by what each process (and each JVM thread) does.

`CpuLedger.sample(pids)` reads, for every process of the tree, its user + system CPU time from
`/proc/PID/stat` and names its role from its command line: `driver` (the contender's own process),
`jvm` (a `java` process; its threads are split into `jvm tasks` (Spark's executor task threads),
`jvm jit` (the compilers) and `jvm gc` by `/proc/PID/task/TID/comm`, and `jvm other`, the rest),
and for a Python process the module it runs (`python -m M` -> `M`; PySpark's daemons, `python -m
pyspark.daemon W`, are `W daemon`, and the workers they fork `W`: `pyspark.worker` are Spark's task
workers). The ledger keeps each process's and thread's latest figure, so a process that has exited
keeps what it had used when last sampled (it loses at most one sampling interval). `by_role()` sums
them: the profile the benchmarks record beside each run (`cpu_s_by_role` in a measurement's
details), so that "CPU per event by process" is read from the same run as the wall times.
"""

from __future__ import annotations

import os

TICKS = os.sysconf("SC_CLK_TCK")

SPAWNING = "jvm spawning"  # a process the JVM is starting, which still shares the JVM's memory (not counted)
JVM_THREADS = (("Executor task", "jvm tasks"), ("C2 Compiler", "jvm jit"), ("C1 Compiler", "jvm jit"),
               ("GC Thread", "jvm gc"), ("G1 ", "jvm gc"), ("VM Thread", "jvm gc"))


def stat_cpu(path: str) -> tuple[float, int] | None:
    """(user + system CPU seconds, parent pid) from a `/proc/.../stat` file, None if it is gone."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after "pid (comm) "
    return (int(fields[11]) + int(fields[12])) / TICKS, int(fields[1])


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def python_module(argv: list[str]) -> str | None:
    """The module of `python ... -m MODULE`, None for anything else; for PySpark's daemon
    (`-m pyspark.daemon WORKER_MODULE`), `WORKER_MODULE daemon`."""
    for i, arg in enumerate(argv[:-1]):
        if arg == "-m":
            module = argv[i + 1]
            if module == "pyspark.daemon":
                return f"{argv[i + 2] if len(argv) > i + 2 else 'pyspark.worker'} daemon"
            return module
    return None


def jvm_thread_role(comm: str) -> str:
    for prefix, role in JVM_THREADS:
        if comm.startswith(prefix):
            return role
    return "jvm other"


class CpuLedger:
    """The latest CPU seconds of every process (and JVM thread) seen in a tree rooted at `root`."""

    def __init__(self, root: int):
        self.root = root
        self.roles: dict[int, str] = {}
        self.seconds: dict[int, float] = {}
        self.threads: dict[tuple[int, int], tuple[str, float]] = {}
        self.final: set[int] = set()  # processes whose role cannot change any more
        self.names: dict[tuple[int, int], str] = {}  # JVM threads' names (the kernel keeps 15 characters)

    def role(self, pid: int, parent: int) -> str:
        if pid == self.root:
            return "driver"
        argv = cmdline(pid)
        if argv and os.path.basename(argv[0]).startswith("java"):
            # a JVM's child that is still java is one the JVM is starting (posix_spawn: it shares the
            # JVM's memory until it runs its program); it is named again once it has
            return SPAWNING if self.roles.get(parent) == "jvm" else "jvm"
        module = python_module(argv)
        if module is None:
            return os.path.basename(argv[0]) if argv else "?"
        if self.roles.get(parent) == module and module.endswith(" daemon"):  # forked from a daemon
            return module.removesuffix(" daemon")
        return module

    def sample(self, pids: list[int], threads: bool = False) -> None:
        """Record the CPU time of `pids`; with `threads`, of each JVM thread too (one read per thread)."""
        for pid in pids:
            got = stat_cpu(f"/proc/{pid}/stat")
            if got is None:
                continue
            seconds, parent = got
            if pid not in self.final:  # a process forked to run a launcher script may exec java later
                self.roles[pid] = self.role(pid, parent)
                if pid == self.root or self.roles[pid] == "jvm" or python_module(cmdline(pid)) is not None:
                    self.final.add(pid)
            self.seconds[pid] = seconds
            if threads and self.roles[pid] == "jvm":
                self._sample_threads(pid)

    def _sample_threads(self, pid: int) -> None:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return
        for tid in tids:
            got = stat_cpu(f"/proc/{pid}/task/{tid}/stat")
            if got is None:
                continue
            key = (pid, int(tid))
            if key not in self.names:
                try:
                    with open(f"/proc/{pid}/task/{tid}/comm") as f:
                        self.names[key] = f.read().strip()
                except OSError:
                    continue
            self.threads[key] = (jvm_thread_role(self.names[key]), got[0])

    def total(self) -> float:
        """CPU seconds of every process seen, summed."""
        return sum(self.seconds.values())

    def by_process(self, values: dict[int, int]) -> dict[str, int]:
        """`values` (a figure per process id, e.g. its memory) summed by the processes' roles."""
        out: dict[str, int] = {}
        for pid, v in values.items():
            role = self.roles.get(pid, "?")
            out[role] = out.get(role, 0) + v
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def by_role(self) -> dict[str, float]:
        """CPU seconds per role. A JVM whose threads were sampled is split into `jvm tasks`, `jvm jit` and
        `jvm gc` by its threads, and `jvm other`: the rest of the process's time (other threads, and
        threads that ended between samples)."""
        out: dict[str, float] = {}
        split: dict[int, float] = {}
        for (pid, _), (role, seconds) in self.threads.items():
            if role != "jvm other":
                out[role] = out.get(role, 0.0) + seconds
                split[pid] = split.get(pid, 0.0) + seconds
        for pid, seconds in self.seconds.items():
            role = self.roles[pid]
            if role == "jvm" and pid in split:
                role, seconds = "jvm other", max(0.0, seconds - split[pid])
            out[role] = out.get(role, 0.0) + seconds
        return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}

    def jvm_threads(self, top: int = 8) -> dict[str, float]:
        """The JVM threads that used the most CPU, by name with its digits dropped (`GC Thread#`)."""
        out: dict[str, float] = {}
        for key, (_, seconds) in self.threads.items():
            name = "".join(c for c in self.names[key] if not c.isdigit())
            out[name] = out.get(name, 0.0) + seconds
        return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1])[:top]}
