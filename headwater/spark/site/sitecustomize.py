"""Run by every Python process Spark starts for headwater (this directory is on its PYTHONPATH).

It drops the pip-installed pyspark's own zips from `sys.path` (see `headwater.spark.workerpath`).
In Spark's Python workers (`python -m pyspark....`) it also makes the worker leave with its parent
(see `headwater.spark.workerlife`), say in one line, not PySpark's traceback, when the JVM was gone
before it could connect, and ignore SIGINT, as PySpark has the JVM do:
Ctrl-C on a terminal reaches the whole process group, and the worker's life is the JVM's business.
The workers that Spark's driver-side planners fork end after their one job
(`headwater.spark.workerlife`).
Then it runs the `sitecustomize` this one shadows, if there is one.
"""

import os
import signal
import sys
from importlib.machinery import PathFinder

try:
    from headwater.spark.workerpath import drop_installed_spark_zips
except ImportError:  # headwater is not importable by this interpreter: leave the path alone
    pass
else:
    drop_installed_spark_zips()

try:
    from headwater.spark.workerlife import (
        REUSED_PLANNERS,
        exit_after_job,
        exit_with_parent,
        is_spark_worker,
        quiet_when_jvm_gone,
    )
except ImportError:
    pass
else:
    if is_spark_worker(sys.orig_argv):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        exit_with_parent()
        quiet_when_jvm_gone()
        if os.environ.get(REUSED_PLANNERS) != "1":
            exit_after_job(sys.orig_argv)

_here = os.path.dirname(os.path.abspath(__file__))
_next = PathFinder.find_spec("sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
if _next is not None and _next.loader is not None:
    _next.loader.exec_module(sys.modules[__name__])
