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
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence

POLL_S = 1.0
ORPHANED_EXIT_STATUS = 1


def is_spark_worker(argv: Sequence[str]) -> bool:
    """True for the command line of a Python worker Spark starts: `python -m pyspark.<module>`
    (`pyspark.daemon`, `pyspark.worker`, `pyspark.sql.streaming.python_streaming_source_runner`, ...)."""
    args = iter(argv[1:])
    for arg in args:  # the interpreter's options, up to what it runs
        if arg == "-m":
            return next(args, "").startswith("pyspark.")
        if arg in ("-W", "-X"):
            next(args, None)
        elif arg in ("-c", "-") or not arg.startswith("-"):
            return False
    return False


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
