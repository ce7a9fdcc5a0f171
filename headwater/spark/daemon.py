"""Spark's Python worker daemon, importing pyspark from its installed package instead of pyspark.zip.

Spark starts every Python worker daemon with `$SPARK_HOME/python/lib/pyspark.zip` first on
PYTHONPATH. Python cannot cache bytecode for modules imported from a zip, so each daemon (Spark
starts one per kind of worker: tasks, data source planning, the streaming source and sink
runners, writers) compiles pyspark from source again: on a 2-core machine that was 1-2 s of CPU
per daemon and most of the first micro-batch (py-spy, see the README's benchmark notes).

With a pip-installed pyspark, SPARK_HOME *is* the installed package, so the zip holds the very
files that are importable, already compiled, from site-packages. This module drops the zips from
`sys.path` in that case only (a zip that belongs to another Spark installation is left alone)
and then runs `pyspark.daemon` exactly as Spark would. `headwater.spark.pipeline` sets
`spark.python.daemon.module` to this module unless the configuration names another.
"""

from __future__ import annotations

import os
import runpy
import sys
from importlib.machinery import PathFinder


def installed_spark_zips(path: list[str]) -> list[str]:
    """The zips on `path` from the `python/lib` of the pyspark package importable without them
    (pyspark.zip, and py4j's zip when py4j is installed as well)."""
    zips = [p for p in path if p.endswith(".zip")]
    rest = [p for p in path if p not in zips]
    spec = PathFinder.find_spec("pyspark", rest)
    if not zips or spec is None or not spec.submodule_search_locations:
        return []
    lib = os.path.join(os.path.realpath(list(spec.submodule_search_locations)[0]), "python", "lib")
    drop = []
    for z in zips:
        if os.path.realpath(os.path.dirname(z)) != lib:
            continue
        name = "py4j" if os.path.basename(z).startswith("py4j") else "pyspark"
        if name == "pyspark" or PathFinder.find_spec(name, rest) is not None:
            drop.append(z)
    return drop


def main() -> None:
    for entry in installed_spark_zips(sys.path):
        sys.path.remove(entry)
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
