"""Spark's task workers run a full garbage collection after every task: keep the imports out of it.

A reused PySpark task worker (`spark.python.worker.reuse`, headwater's setting) calls `gc.collect()`
after each task (`pyspark.daemon`). A full collection walks every object the cyclic collector
tracks, and most of them in a worker that has read change events are the modules it imported on its
first task (pyarrow, numpy, pyspark's, headwater's own: ~60k objects): ~25-35 ms of CPU per task
here, measured alone, and three quarters of the task workers' samples (py-spy) under the latency
benchmark's load of 2,000 changes/s, more than reading and writing the events.

`settle()`, called as a task of headwater's ends, collects once and then freezes (`gc.freeze`) what
the process holds, when modules were imported since it last did: the collections after the later
tasks walk only what those tasks left. Frozen objects are still freed when nothing refers to them
any more; only a reference cycle among them would stay, so the task's garbage is collected first.
"""

from __future__ import annotations

import gc
import sys

_modules_frozen = 0  # the number of modules imported when this process last froze


def settle() -> None:
    """At the end of a task: freeze what the process holds if modules were imported since the last time."""
    global _modules_frozen
    modules = len(sys.modules)
    if modules > _modules_frozen:
        gc.collect()
        gc.freeze()
        _modules_frozen = modules
