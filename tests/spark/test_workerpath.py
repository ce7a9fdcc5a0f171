"""Spark's Python workers import the installed pyspark, not its zip, and only when it is the same one."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pyspark
import pytest
from pyspark.sql.datasource import DataSource, DataSourceReader

from headwater.spark.workerpath import SITE_DIR, installed_spark_zips, with_site_dir

LIB = Path(pyspark.__file__).parent / "python" / "lib"
ZIPS = sorted(str(p) for p in LIB.glob("*.zip"))


def test_drops_the_zips_of_the_installed_pyspark():
    assert any(z.endswith("pyspark.zip") for z in ZIPS)
    path = [*ZIPS, *sys.path]
    assert sorted(installed_spark_zips(path)) == ZIPS


def test_keeps_a_zip_of_another_spark_installation(tmp_path):
    other = tmp_path / "spark" / "python" / "lib"
    other.mkdir(parents=True)
    (other / "pyspark.zip").write_bytes(b"")
    path = [str(other / "pyspark.zip"), *sys.path]
    assert installed_spark_zips(path) == []


def test_site_dir_goes_first_once():
    assert with_site_dir(None) == SITE_DIR
    assert with_site_dir(os.pathsep.join(["/a", SITE_DIR, "/b"])) == os.pathsep.join([SITE_DIR, "/a", "/b"])


def _python(pythonpath: list[str], code: str) -> str:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(pythonpath))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout


def test_a_worker_started_the_way_spark_does_imports_compiled_pyspark():
    """Spark puts its zips first on the worker's PYTHONPATH and headwater's site directory after them:
    the worker must import pyspark from site-packages (where its bytecode is cached), not from the zip."""
    out = _python([*ZIPS, SITE_DIR], "import pyspark; print(pyspark.__file__)")
    assert ".zip" not in out and out.strip().endswith(os.path.join("pyspark", "__init__.py"))
    assert ".zip" in _python(ZIPS, "import pyspark; print(pyspark.__file__)")  # what it does without


def test_no_importer_of_the_dropped_zips_is_left_cached():
    """pyspark calls importlib.invalidate_caches() for every task: a zip importer left in the cache
    re-reads the zip's whole directory each time (~2.8 s of CPU per 1M-row snapshot)."""
    code = f"import sys; print([p for p in sys.path_importer_cache if p in {ZIPS!r}])"
    assert _python([*ZIPS, SITE_DIR], code).strip() == "[]"
    assert _python(ZIPS, code).strip() != "[]"  # what it does without


def test_the_sitecustomize_it_shadows_still_runs(tmp_path):
    (tmp_path / "sitecustomize.py").write_text("import builtins\nbuiltins.OTHER_SITE = 'ran'\n")
    out = _python([*ZIPS, SITE_DIR, str(tmp_path)], "print(OTHER_SITE)")
    assert out.strip() == "ran"


def origin() -> str:
    """Where this process imported pyspark from."""
    return "zip" if ".zip" in pyspark.__file__ else "site"


class Probe(DataSource):
    """schema() runs in Spark's data source planner worker, read() in a task worker."""

    @classmethod
    def name(cls) -> str:
        return "probe"

    def schema(self) -> str:
        return f"planner_{origin()} string"

    def reader(self, schema) -> DataSourceReader:
        return ProbeReader()


class ProbeReader(DataSourceReader):
    def read(self, partition) -> Iterator[tuple]:
        yield (origin(),)


@pytest.mark.spark
def test_spark_workers_import_compiled_pyspark(spark):
    """In a real Spark session made by headwater (the tests' shared one), the data source planner
    worker and the task worker both import pyspark from site-packages."""
    spark.dataSource.register(Probe)
    df = spark.read.format("probe").load()
    assert {"planner": df.columns[0], "task": df.collect()[0][0]} == {"planner": "planner_site", "task": "site"}
