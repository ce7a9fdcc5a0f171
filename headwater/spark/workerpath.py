"""Spark's Python workers import pyspark from its installed package instead of pyspark.zip.

Spark starts every Python worker (task workers, data source lookup and planning, the streaming
source and sink runners, writers) with `$SPARK_HOME/python/lib/pyspark.zip` first on PYTHONPATH.
Python cannot cache bytecode for modules imported from a zip, so each of them compiled pyspark
from source again: ~1.3 s of CPU per process on a 2-core machine, most of the first micro-batch
(py-spy, see the README's benchmark notes).

With a pip-installed pyspark, SPARK_HOME *is* the installed package, so the zip holds the very
files that are importable, already compiled, from site-packages. `headwater.spark.pipeline` puts
`SITE_DIR` on the PYTHONPATH Spark passes to its workers; Python imports the `sitecustomize` there
at start-up, which calls `drop_installed_spark_zips()`: the zips go from `sys.path` in that case
only (a zip that belongs to another Spark installation is left alone).
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import PathFinder
from pathlib import Path

SITE_DIR = str(Path(__file__).with_name("site"))


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


def drop_installed_spark_zips() -> None:
    for entry in installed_spark_zips(sys.path):
        sys.path.remove(entry)
        # the zip's importer, cached while this very module was looked for: else every
        # importlib.invalidate_caches() (pyspark calls it for each task) re-reads the zip's directory
        sys.path_importer_cache.pop(entry, None)


def with_site_dir(pythonpath: str | None) -> str:
    """`pythonpath` with `SITE_DIR` first (once)."""
    parts = [p for p in (pythonpath or "").split(os.pathsep) if p and p != SITE_DIR]
    return os.pathsep.join([SITE_DIR, *parts])
