"""Spark's Python workers end with the process that started them.

The driver JVM starts Python workers (the data source lookup and planning daemons, the streaming
source runner that holds the replication connection, the daemons that fork task workers). When
`headwater run` is killed (SIGKILL, a timeout), the JVM exits as its stdin closes and most workers
notice their closed socket; but a worker busy in Python code does not read that socket (a
streaming source runner waiting to retry a database it cannot reach), and was seen alive, orphaned
and still retrying, an hour later. `exit_with_parent`, called from the workers' sitecustomize,
starts a thread that ends the process as soon as its parent is gone: the parent process id changes
when the parent exits and the process is re-parented (to init, or a subreaper). Processes forked
from a worker (a daemon's task workers) get a thread of their own.

PR_SET_PDEATHSIG would not do: it fires when the parent *thread* that started the process exits,
and the JVM starts workers from pool threads that may end while the JVM lives on.

`exit_after_job`, called from the same sitecustomize, makes the workers forked by the daemons of
Spark's driver-side planners (`ONE_JOB_WORKERS`: the data source lookup, creation and read planning,
which a query needs when it starts) exit once they have answered, instead of waiting, idle, to be
reused: with `spark.python.worker.reuse` (which the task workers need) Spark kept each of them alive
for a minute after its last job, ~30-50 MB each. Spark checks that an idle worker is alive before it
reuses one, and forks a new one from the daemon when it is not. `REUSED_PLANNERS`=1 in the JVM's
environment keeps Spark's reuse (the tests' shared session, which starts hundreds of queries).
`quiet_when_jvm_gone`, also from the sitecustomize, keeps a worker whose JVM end went away under it
(Ctrl-C right after a query began: the streaming source runner connects to a socket the JVM has
already removed, or finds it closed as the query stops while the runner starts) from printing
PySpark's traceback: it exits with status 1 and prints nothing. The driver says why it stopped; a
line from the worker would only repeat it, and could come after the driver's last line ("done"),
since nothing orders the two processes' output. Any other uncaught error keeps its traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO

POLL_S = 1.0
ORPHANED_EXIT_STATUS = 1
REUSED_PLANNERS = "HEADWATER_PLANNERS_REUSED"  # "1" in the JVM's environment: Spark's own reuse of them
ONE_JOB_WORKERS = ("pyspark.sql.worker.lookup_data_sources", "pyspark.sql.worker.create_data_source",
                   "pyspark.sql.worker.plan_data_source_read")


def run_module(argv: Sequence[str]) -> list[str] | None:
    """The module a Python command line runs (`python [options] -m MODULE ARGS...`) and its arguments;
    None when it runs a script, a command or nothing."""
    args = list(argv[1:])
    i = 0
    while i < len(args):  # the interpreter's options, up to what it runs
        arg = args[i]
        if arg == "-m":
            return args[i + 1:] or None
        if arg in ("-W", "-X"):
            i += 1
        elif arg in ("-c", "-") or not arg.startswith("-"):
            return None
        i += 1
    return None


def is_spark_worker(argv: Sequence[str]) -> bool:
    """True for the command line of a Python worker Spark starts: `python -m pyspark.<module>`
    (`pyspark.daemon`, `pyspark.worker`, `pyspark.sql.streaming.python_streaming_source_runner`, ...)."""
    run = run_module(argv)
    return run is not None and run[0].startswith("pyspark.")


def exit_with_parent(poll_s: float = POLL_S) -> None:
    """End this process (and each process forked from it) within `poll_s` seconds of its parent."""
    _watch_parent(poll_s)
    os.register_at_fork(after_in_child=lambda: _watch_parent(poll_s))


def _watch_parent(poll_s: float) -> None:
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os._exit(ORPHANED_EXIT_STATUS)

    threading.Thread(target=watch, name="headwater-exit-with-parent", daemon=True).start()


def daemon_worker_module(argv: Sequence[str]) -> str | None:
    """The worker module of a PySpark daemon's command line (`python -m pyspark.daemon MODULE`;
    `pyspark.worker` when it names none), None for any other command line."""
    run = run_module(argv)
    if run is None or run[0] != "pyspark.daemon":
        return None
    return run[1] if len(run) > 1 else "pyspark.worker"


def exit_after_job(argv: Sequence[str]) -> bool:
    """In the daemon of a worker module of `ONE_JOB_WORKERS`, have every worker it forks end its process
    once its job is answered (see the module's docstring); whether this is such a daemon."""
    module = daemon_worker_module(argv)
    if module not in ONE_JOB_WORKERS:
        return False
    os.register_at_fork(after_in_child=lambda: _end_after_main(module))
    return True


def _end_after_main(module: str) -> None:
    """In a forked worker, before the daemon imports `module` and runs its `main`: wrap that `main`."""
    worker = importlib.import_module(module)
    worker.main = _once(worker.main)  # type: ignore[attr-defined]


def _once(main: Callable[[IO, IO], None]) -> Callable[[IO, IO], None]:
    def run(infile: IO, outfile: IO) -> None:
        main(infile, outfile)  # an error leaves as PySpark's own code has it (the worker is not reused)
        outfile.flush()  # the answer, up to PySpark's end-of-stream mark, is with the JVM
        os._exit(0)

    return run


JVM_GONE_EXIT_STATUS = 1


def jvm_gone(exc: BaseException) -> bool:
    """True for the errors of a worker whose JVM end closed or removed its socket: PySpark's
    `CANNOT_OPEN_SOCKET`, or the socket broken or at its end while the worker talked to the JVM."""
    condition = getattr(exc, "getCondition", None)
    if callable(condition) and condition() == "CANNOT_OPEN_SOCKET":
        return True
    return isinstance(exc, (BrokenPipeError, ConnectionResetError, EOFError))


def quiet_when_jvm_gone() -> None:
    """Make an uncaught `CANNOT_OPEN_SOCKET` error (the JVM's socket gone) end the process silently."""
    previous = sys.excepthook

    def hook(kind, exc, tb) -> None:
        if jvm_gone(exc):
            os._exit(JVM_GONE_EXIT_STATUS)
        previous(kind, exc, tb)

    sys.excepthook = hook
