"""The daemon that forks Spark's task workers imports what they will import, before it forks them.

Spark forks its Python task workers from a daemon (`python -m pyspark.daemon`), which imports only
pyspark: each worker then imported pyarrow, numpy and headwater's source and connector by itself, ~40
MB of private memory per worker and ~0.5 s of CPU each at the start of a query. `headwater run` names
those modules in `PRELOAD_ENV` (for the task workers, `spark.executorEnv` too); the `sitecustomize` of
`headwater/spark/site` calls `preload` in every process Spark starts, and the task workers' daemon
(and no other process) imports them: the workers it forks share those pages with it.

PySpark imports a worker's module only after the fork because pyarrow and pandas may start threads
when imported, and a forked child has only the thread that forked. What these modules start is fork
safe: pyarrow starts jemalloc's background thread, whose fork handlers leave the child a working
allocator; numpy's OpenBLAS starts its thread pool and re-creates it in a forked child; Arrow re-creates
its own thread pools after a fork. A module that fails to import is left for the worker to import (and
to report).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence

from headwater.spark.workerlife import daemon_worker_module

PRELOAD_ENV = "HEADWATER_WORKER_PRELOAD"
TASK_WORKER = "pyspark.worker"


def task_modules(connector: str) -> list[str]:
    """The modules a task worker of a query on the headwater source with connector `connector` imports
    first: the source and the file sinks, and the connector's source module (with what it imports)."""
    from headwater.connectors.registry import lookup

    entry = lookup(connector)
    own = [entry.source.partition(":")[0]] if entry.source else []
    return ["headwater.spark.source", "headwater.spark.sinks", *own]


def is_task_daemon(argv: Sequence[str]) -> bool:
    """True for the command line of the daemon that forks Spark's task workers
    (`python -m pyspark.daemon [pyspark.worker]`; the planners' daemons name their own modules)."""
    return daemon_worker_module(argv) == TASK_WORKER


def preload(argv: Sequence[str]) -> list[str]:
    """In the task workers' daemon, import the modules `PRELOAD_ENV` names (comma-separated); the names
    of those imported."""
    names = [n for n in os.environ.get(PRELOAD_ENV, "").split(",") if n]
    if not names or not is_task_daemon(argv):
        return []
    done = []
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the worker imports it again and reports what is wrong
            continue
        done.append(name)
    return done
