"""A throwaway Spark standalone cluster (one master, N workers) from the pip-installed pyspark.

    with SparkCluster(workers=2) as cluster:
        spark.master = cluster.url      # spark://127.0.0.1:<port>

Daemons run with `SPARK_HOME` set to the pyspark package, on loopback, with their work and log
directories in a temporary directory that `stop()` removes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from headwater.devservers.common import free_port


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class SparkCluster:
    workers: int = 2
    cores_per_worker: int = 1
    memory_per_worker: str = "1g"
    port: int = 0
    root: Path | None = None
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def _root(self) -> Path:
        """`root` of a started cluster."""
        if self.root is None:
            raise RuntimeError("the Spark cluster is not started")
        return self.root

    def _env(self) -> dict[str, str]:
        return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable, "SPARK_LOG_DIR": str(self._root / "logs"),
                "SPARK_WORKER_DIR": str(self._root / "work"), "SPARK_NO_DAEMONIZE": "1"}

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self._root / f"{name}.log", "wb")  # noqa: SIM115 - the daemon writes to it until stop()
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=self._env(), start_new_session=True)
        self.procs.append(proc)
        return proc

    def start(self, timeout: float = 120) -> SparkCluster:
        self.root = Path(tempfile.mkdtemp(prefix="headwater-spark-"))
        (self.root / "logs").mkdir()
        (self.root / "work").mkdir()
        self.port = self.port or free_port()
        self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                    "--port", str(self.port), "--webui-port", str(free_port()))
        self._wait_for("master", "Starting Spark master", timeout)
        for i in range(self.workers):
            self._start(f"worker{i}", "org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                        "--cores", str(self.cores_per_worker), "--memory", self.memory_per_worker,
                        "--webui-port", str(free_port()), "--work-dir", str(self.root / "work" / f"w{i}"))
        for i in range(self.workers):
            self._wait_for(f"worker{i}", "Successfully registered with master", timeout)
        return self

    def _wait_for(self, name: str, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        log = self._root / f"{name}.log"
        while True:
            content = log.read_text(errors="replace") if log.exists() else ""
            if text in content:
                return
            if time.monotonic() > deadline or any(p.poll() is not None for p in self.procs):
                self.stop()
                raise RuntimeError(f"Spark {name} did not start:\n{content[-3000:]}")
            time.sleep(0.3)

    def stop(self) -> None:
        for p in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 15)
        for p in self.procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
        self.procs.clear()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
