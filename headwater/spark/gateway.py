"""Starting Spark's JVM with its standard error passed through a filter that drops its start-up chatter.

PySpark starts the driver JVM (`spark-submit`) with the driver's own stderr. Spark's launcher
always adds `--add-modules=jdk.incubator.vector`, and for it the JVM prints
`WARNING: Using incubator modules: jdk.incubator.vector` at start: no JVM option silences that
line. PySpark also counts as Spark's shell, for which Spark prints `Setting default log level to
"WARN"` and how to change it with `System.err` (a log4j level for the shell's logger,
org.apache.spark.repl.Main, did not silence them). `launch` starts the JVM as PySpark would
(PySpark's `launch_gateway`, with the same configuration on the command line), but with its
stderr a pipe: a thread forwards every line to this process's stderr except the `CHATTER` lines.
The Python workers Spark starts inherit that pipe, so their errors pass through it too.

`numpy_converters_asked_about_numpy_only` keeps PySpark's py4j converters of NumPy values from
importing pandas into the driver: PySpark asks them about every argument of every call to the JVM,
and each asks `pyspark.testing.utils` whether NumPy is installed, a module that imports pandas (and
probes for grpc, kafka, ...) when it loads: ~40 MB of the driver's memory. Wrapped, they are asked
only about NumPy objects (which exist only once NumPy is imported), and convert them as before.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Mapping
from typing import IO

CHATTER = (
    b"WARNING: Using incubator modules: jdk.incubator.vector",
    # Spark prints these with System.err, not through log4j, whatever the logging configuration
    b'Setting default log level to "',
    b"To adjust logging level use sc.setLogLevel(newLevel).",
)


def launch(options: Mapping[str, str]) -> None:
    """Start the JVM for a SparkSession built with `options`, unless this process has one already."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None:
        return
    conf = SparkConf(loadDefaults=False)
    for key, value in options.items():
        conf.set(key, value)
    gateway = launch_gateway(conf, popen_kwargs={"stderr": subprocess.PIPE})
    threading.Thread(target=forward, args=(gateway.proc.stderr, 2), name="headwater-jvm-stderr",
                     daemon=True).start()
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)


def forward(stream: IO[bytes], fd: int) -> None:
    """Copy `stream` to `fd` line by line, without the `CHATTER` lines, until it ends."""
    for line in iter(stream.readline, b""):
        if line.rstrip().startswith(CHATTER):
            continue
        try:
            while line:
                line = line[os.write(fd, line):]
        except OSError:  # nowhere to write to any more: keep reading, so the JVM never blocks
            pass


class NumpyOnly:
    """A py4j input converter of PySpark's for NumPy values, asked only about NumPy objects."""

    def __init__(self, inner):
        self.inner = inner

    def can_convert(self, obj) -> bool:
        return type(obj).__module__ == "numpy" and self.inner.can_convert(obj)

    def convert(self, obj, gateway_client):
        return self.inner.convert(obj, gateway_client)


def numpy_converters_asked_about_numpy_only() -> None:
    """Wrap PySpark's NumPy converters among py4j's input converters in `NumpyOnly` (once)."""
    import pyspark.sql.types  # noqa: F401 - registers PySpark's converters
    from py4j import protocol

    protocol.INPUT_CONVERTER[:] = [
        NumpyOnly(c) if type(c).__name__ in ("NumpyArrayConverter", "NumpyScalarConverter")
        and type(c).__module__ == "pyspark.sql.types" else c
        for c in protocol.INPUT_CONVERTER]
