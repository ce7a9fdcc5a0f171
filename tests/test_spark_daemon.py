"""headwater's Python worker daemon: workers import the installed pyspark, and only when it is the same one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark

from headwater.spark.daemon import installed_spark_zips

LIB = Path(pyspark.__file__).parent / "python" / "lib"


def test_drops_the_zips_of_the_installed_pyspark():
    zips = sorted(str(p) for p in LIB.glob("*.zip"))
    assert any(z.endswith("pyspark.zip") for z in zips)
    path = [*zips, *sys.path]
    assert sorted(installed_spark_zips(path)) == zips


def test_keeps_a_zip_of_another_spark_installation(tmp_path):
    other = tmp_path / "spark" / "python" / "lib"
    other.mkdir(parents=True)
    (other / "pyspark.zip").write_bytes(b"")
    path = [str(other / "pyspark.zip"), *sys.path]
    assert installed_spark_zips(path) == []


def test_a_worker_started_through_it_imports_compiled_pyspark():
    """Spark's way of starting it: `python -m headwater.spark.daemon MODULE` with the zips first on PYTHONPATH;
    the module run must see pyspark from site-packages (so its bytecode is cached), not from the zip."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in sorted(LIB.glob("*.zip"))))
    code = ("import runpy, sys\n"
            "runpy.run_module = lambda *a, **k: print(__import__('pyspark').__file__)\n"
            "from headwater.spark import daemon\n"
            "daemon.main()\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert ".zip" not in out and out.strip().endswith(os.path.join("pyspark", "__init__.py"))
