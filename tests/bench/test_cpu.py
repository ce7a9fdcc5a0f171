"""The CPU ledger of a measured process tree: roles from command lines, time per role."""

from __future__ import annotations

import sys

from bench.cpu import jvm_thread_role, python_module
from bench.measure import run_measured


def test_roles_from_command_lines():
    assert python_module(["python", "-m", "pyspark.daemon", "pyspark.worker"]) == "pyspark.worker daemon"
    assert python_module(["python", "-u", "-m", "pyspark.sql.streaming.python_streaming_source_runner"]) \
        == "pyspark.sql.streaming.python_streaming_source_runner"
    assert python_module(["python", "script.py"]) is None
    assert jvm_thread_role("Executor task l") == "jvm tasks"
    assert jvm_thread_role("C2 CompilerThre") == "jvm jit"
    assert jvm_thread_role("Thread-3") == "jvm other"


def test_cpu_of_a_child_is_charged_to_its_module():
    # the measured process (the root: "driver") starts a child that burns 0.5 s of CPU in `-m timeit`
    burn = ["-m", "timeit", "-n", "1", "-r", "1", "-s", "import time", "t = time.process_time()",
            "while time.process_time() - t < 0.5: pass"]
    spin = f"import subprocess; subprocess.run([{sys.executable!r}, *{burn!r}])"
    res = run_measured([sys.executable, "-c", spin], timeout=60)
    assert res.returncode == 0
    assert res.cpu_s_by_role.get("timeit", 0) > 0.3
    assert "driver" in res.cpu_s_by_role


def test_a_child_the_jvm_is_starting_is_not_a_second_jvm(monkeypatch):
    """posix_spawn's child shares the JVM's memory until it runs its program: its PSS is the JVM's, so it is
    named apart (and left out of the memory sums) while its command line is still java's."""
    import bench.cpu as cpu

    ledger = cpu.CpuLedger(1)
    ledger.roles[10] = "jvm"
    monkeypatch.setattr(cpu, "cmdline", lambda pid: ["/usr/lib/jvm/bin/java", "-cp", "x", "Main"])
    assert ledger.role(11, 10) == cpu.SPAWNING
    assert ledger.role(12, 1) == "jvm"  # a JVM whose parent is no JVM (spark-submit's)
    monkeypatch.setattr(cpu, "cmdline", lambda pid: ["python", "-m", "pyspark.daemon"])
    assert ledger.role(11, 10) == "pyspark.worker daemon"  # once it runs its program
