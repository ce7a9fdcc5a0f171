"""Run by every Python process Spark starts for headwater (this directory is on its PYTHONPATH).

It drops the pip-installed pyspark's own zips from `sys.path` (see `headwater.spark.workerpath`),
then runs the `sitecustomize` this one shadows, if there is one.
"""

import os
import sys
from importlib.machinery import PathFinder

try:
    from headwater.spark.workerpath import drop_installed_spark_zips
except ImportError:  # headwater is not importable by this interpreter: leave the path alone
    pass
else:
    drop_installed_spark_zips()

_here = os.path.dirname(os.path.abspath(__file__))
_next = PathFinder.find_spec("sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != _here])
if _next is not None and _next.loader is not None:
    _next.loader.exec_module(sys.modules[__name__])
