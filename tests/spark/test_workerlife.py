"""Spark's Python workers end with their parent (no server, no Spark: real processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from headwater.spark.workerlife import is_spark_worker

# a parent that starts a child calling exit_with_parent, prints the child's pid once the child is
# watching, and dies at once
PARENT = """
import subprocess, sys, os
child = subprocess.Popen([sys.executable, "-c",
    "from headwater.spark.workerlife import exit_with_parent; import time; exit_with_parent(0.1); "
    "print('watching', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
child.stdout.readline()
print(child.pid, flush=True)
os._exit(0)
"""


def test_spark_workers_are_known_by_their_command_line():
    assert is_spark_worker(["/venv/bin/python", "-m", "pyspark.daemon", "pyspark.sql.worker.lookup_data_sources"])
    assert is_spark_worker(["python", "-m", "pyspark.sql.streaming.python_streaming_source_runner"])
    assert not is_spark_worker(["python", "-m", "headwater.spark.classcache", "--build", "x.jsa"])
    assert not is_spark_worker(["python", "-m", "headwater.cli.main", "run", "c.yaml"])
    assert is_spark_worker(["python", "-X", "importtime", "-m", "pyspark.worker"])
    assert not is_spark_worker(["python", "script.py", "-m", "pyspark.daemon"])  # the script's own arguments
    assert not is_spark_worker(["python", "-c", "pass", "-m", "pyspark.daemon"])


def test_an_orphaned_worker_exits():
    parent = subprocess.run([sys.executable, "-c", PARENT], stdout=subprocess.PIPE, text=True, timeout=60,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    child = int(parent.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(f"/proc/{child}"):
        time.sleep(0.1)
    alive = os.path.exists(f"/proc/{child}")
    if alive:
        os.kill(child, 9)
    assert not alive, "the child outlived its parent by 10 s"
