"""Spark's Python workers end with their parent (no server, no Spark: real processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from headwater.spark.workerlife import daemon_worker_module, is_spark_worker

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


def test_daemons_are_known_by_their_worker_module():
    assert daemon_worker_module(["python", "-m", "pyspark.daemon", "pyspark.sql.worker.create_data_source"]) \
        == "pyspark.sql.worker.create_data_source"
    assert daemon_worker_module(["python", "-m", "pyspark.daemon"]) == "pyspark.worker"
    assert daemon_worker_module(["python", "-m", "pyspark.worker"]) is None
    assert daemon_worker_module(["python", "script.py"]) is None


# a daemon of a one-job worker module forks a child that runs the module's (wrapped) main and then would
# print "reused": it must end after main, with main's output flushed
ONE_JOB = """
import io, os, sys, types
from headwater.spark import workerlife
module = types.ModuleType("pyspark.sql.worker.create_data_source")
module.main = lambda infile, outfile: outfile.write(b"answer")
sys.modules[module.__name__] = module
assert workerlife.exit_after_job(["python", "-m", "pyspark.daemon", module.__name__])
assert not workerlife.exit_after_job(["python", "-m", "pyspark.daemon", "pyspark.worker"])
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    out = os.fdopen(w, "wb")
    sys.modules[module.__name__].main(None, out)
    out.write(b" reused")
    out.flush()
    os._exit(3)
os.close(w)
print(os.read(r, 100).decode(), os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def test_a_one_job_worker_ends_once_it_has_answered():
    run = subprocess.run([sys.executable, "-c", ONE_JOB], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["answer", "0"]


JVM_GONE = """
import sys
from headwater.spark.workerlife import quiet_when_jvm_gone
quiet_when_jvm_gone()
from pyspark.errors import PySparkRuntimeError
if sys.argv[1] == "socket":
    raise PySparkRuntimeError(errorClass="CANNOT_OPEN_SOCKET", messageParameters={"errors": "gone"})
if sys.argv[1] == "pipe":
    raise BrokenPipeError(32, "Broken pipe")
raise ValueError("something else")
"""


def test_a_worker_that_finds_the_jvm_gone_ends_silently():
    gone = subprocess.run([sys.executable, "-c", JVM_GONE, "socket"], capture_output=True, text=True, timeout=60)
    assert gone.returncode == 1 and gone.stderr == ""
    pipe = subprocess.run([sys.executable, "-c", JVM_GONE, "pipe"], capture_output=True, text=True, timeout=60)
    assert pipe.returncode == 1 and pipe.stderr == ""
    other = subprocess.run([sys.executable, "-c", JVM_GONE, "other"], capture_output=True, text=True, timeout=60)
    assert other.returncode == 1 and "Traceback" in other.stderr and "ValueError: something else" in other.stderr
