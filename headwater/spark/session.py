"""The SparkSession of a pipeline, and starting it early: the driver's JVM launched while the rest of
the configuration is validated.

Light on purpose (no connector, no transformation chain, no NumPy or Arrow): `headwater run` and the
benchmark's driver import it first and launch the JVM (`EarlySession`, from the file's `name`,
`sink.type` and `spark` block alone) before they import and validate the rest of the configuration,
which then runs while the JVM starts (~0.3-0.4 s of imports that came before the launch). A
configuration found invalid is still refused with exit status 2 naming the property; the JVM started
for it is stopped first.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from headwater.spark import classcache, gateway
from headwater.spark.workerpath import with_site_dir

if TYPE_CHECKING:
    from headwater.pipeline_config import PipelineConfig

# Spark's JVMs share the cores with the Python workers, and their JIT compilers were the largest
# part of their CPU at start-up. The optimizing one (C2) paid while the JVM converted every event
# (Arrow -> rows -> Arrow: C1's code made that 2.7x dearer), but the source's tasks now write the
# file sinks themselves and the JVM does next to nothing per event: with C1 alone a 1M-row
# transaction on local[2] took ~17% less CPU in all (JIT 2.9 -> 1.2 s, the tasks' JVM work no
# dearer) and a 100-event stream's first event came ~1 s sooner; on a standalone cluster (2 workers
# on the same machine) executors with C1 alone cut a 1M-row snapshot's JIT CPU from ~15 to ~10 s.
JIT_OPTIONS = ("-XX:TieredStopAtLevel=1",)

# A local driver JVM whose query writes a file sink holds no events: the source's tasks write them,
# and the JVM carries a batch's planned slices (compressed) and a null row per event. Spark needs a
# heap of at least 450 MB (its reserved memory, 300 MB, times 1.5); the serial collector with a
# bounded young generation keeps what is committed near what is live (a 10M-row transaction: the
# JVM's PSS ~0.75 -> ~0.45 GB), where G1 let its heap grow to ~650 MB and kept ~60 MB for itself; a
# 32 MB young generation (was 96) took ~30-40 MB off the JVM's PSS at the same CPU (1M-row transaction).
# A larger batch (headwater.max.batch.events) needs a larger heap: set spark.driver.memory (or a
# collector in spark.driver.extraJavaOptions), and headwater leaves the heap and the collector to
# Spark and Java.
SMALL_DRIVER_MEMORY = "512m"
ARROW_POOL = "system"  # ARROW_DEFAULT_MEMORY_POOL of the pipeline's Python processes (see spark_session)
SMALL_DRIVER_JAVA_OPTIONS = ("-XX:+UseSerialGC", "-Xms64m", "-Xmn32m", "-XX:MinHeapFreeRatio=5",
                             "-XX:MaxHeapFreeRatio=20",
                             # NIO caches a direct buffer per thread as large as its largest write
                             "-Djdk.nio.maxCachedBufferSize=1048576")




def small_driver(cfg: PipelineConfig) -> bool:
    """Whether `cfg` runs on a local master whose driver JVM holds no events (a file sink) and whose
    memory the configuration leaves to headwater (no `spark.driver.memory`, no collector named in
    `spark.driver.extraJavaOptions`): the JVM then gets `SMALL_DRIVER_MEMORY` and
    `SMALL_DRIVER_JAVA_OPTIONS`, and a batch `LOCAL_MAX_BATCH_EVENTS` at most."""
    conf = cfg.spark.conf
    return (cfg.spark.master.startswith("local") and cfg.sink.type in FILE_SINKS
            and "spark.driver.memory" not in conf and "GC" not in conf.get("spark.driver.extraJavaOptions", ""))


def spark_session(cfg: PipelineConfig, dump_classes_to: str | None = None, debug: bool = False):
    """A SparkSession for `cfg` (Python workers run this interpreter). The driver JVM maps the
    class archive of `headwater.spark.classcache` (building it in the background when missing);
    `dump_classes_to` makes the JVM write a new one there as it exits instead. Spark logs errors
    only, and neither Spark's nor Java's start-up lines; with `debug`, warnings too, with every
    line Spark and Java print, and the stack traces of a failed query's loggers."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if cfg.spark.master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers import the installed, compiled pyspark, not pyspark.zip (see headwater.spark.workerpath)
    # and allocate Arrow's memory with malloc: mimalloc, pyarrow's default here, kept the pages of every
    # batch a process had decoded (a 1M-row transaction: task workers ~330 -> ~235 MB, the source
    # runner ~140 -> ~75 MB of PSS, no more CPU); jemalloc took ~20 MB less in a snapshot task but
    # ~30 MB more in a streaming one
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", ARROW_POOL)
    os.environ["PYTHONPATH"] = with_site_dir(os.environ.get("PYTHONPATH"))
    from pyspark.sql import SparkSession

    log4j = Path(__file__).with_name("log4j2.properties")
    log_level = "warn" if debug else "error"
    logging_java = [f"-Dlog4j.configurationFile=file:{log4j}", f"-Dheadwater.log.level={log_level}",
                    f"-Dheadwater.log.failures={log_level if debug else 'off'}"]
    driver_java = list(logging_java)
    if dump_classes_to:
        driver_java.append(f"-XX:ArchiveClassesAtExit={dump_classes_to}")
    elif mapped := classcache.java_options():
        driver_java.append(mapped)
    else:
        classcache.build_in_background()
    conf = dict(cfg.spark.conf)
    small_jvm = small_driver(cfg)
    driver_java.extend(JIT_OPTIONS)
    executor_java = [*logging_java, *JIT_OPTIONS]
    if conf.get("spark.executor.extraJavaOptions"):  # the user's own options come after headwater's
        executor_java.append(conf.pop("spark.executor.extraJavaOptions"))
    if small_jvm:
        driver_java.extend(SMALL_DRIVER_JAVA_OPTIONS)
        conf["spark.driver.memory"] = SMALL_DRIVER_MEMORY
    if conf.get("spark.driver.extraJavaOptions"):  # the user's own options come after headwater's
        driver_java.append(conf.pop("spark.driver.extraJavaOptions"))
    options = {
        "spark.master": cfg.spark.master,
        "spark.app.name": cfg.spark.app_name or f"headwater-{cfg.name}",
        "spark.driver.extraJavaOptions": " ".join(driver_java),
        "spark.executor.extraJavaOptions": " ".join(executor_java),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "4",
        # Spark 4.3 checks an Arrow batch's size after every row it adds when this is below
        # INT_MAX, and for the headers column (an array of structs) each check walks the whole
        # batch: quadratic, 16 s of JVM CPU per 1M events into a Python sink. Batches stay
        # bounded by spark.sql.execution.arrow.maxRecordsPerBatch (10,000 rows).
        "spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1),
        # local paths (the checkpoint's offset and commit logs) without Hadoop's .crc sidecar
        # files: each log write was ~0.13 s of every micro-batch under load, now ~0.07 s; the
        # logs are still written to a temporary file and renamed into place (atomic)
        "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
        "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
        **checkpoint_options(cfg.spark.checkpoint, conf),
        "spark.ui.enabled": "false",
        "spark.sql.streaming.stopGracefullyOnShutdown": "true",
        "spark.executorEnv.PYSPARK_PYTHON": sys.executable,
        "spark.executorEnv.PYTHONPATH": with_site_dir(None),
        "spark.executorEnv.ARROW_DEFAULT_MEMORY_POOL": os.environ["ARROW_DEFAULT_MEMORY_POOL"],
        "spark.python.worker.reuse": "true",
        # the JVM talks to its Python workers over Unix domain sockets instead of TCP on loopback:
        # every micro-batch ~50 ms shorter (a trivial Python source: 210 -> 150 ms a batch)
        "spark.python.unix.domain.socket.enabled": "true",
        **conf,
    }
    gateway.numpy_converters_asked_about_numpy_only()  # no pandas in the driver (headwater.spark.gateway)
    if not debug:
        gateway.launch(options)  # the JVM's stderr without its start-up chatter
    builder = SparkSession.builder
    for k, v in options.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(log_level.upper())
    from headwater.spark.datasource import register

    register(spark)
    return spark


# Spark writes a checkpoint's logs through Hadoop's FileContext, whose local file system, without
# Hadoop's native library (pyspark ships none), forks a process for every symbolic-link check of a
# rename (`readlink`) and every permission it sets (`chmod`): ~10 processes forked by the JVM per
# micro-batch (strace), which made each of the two log writes of a batch 25-230 ms under load. Through
# the FileSystem API the same logs are written to a temporary file and renamed into place (rename(2):
# atomic on a local file system) with one fork per file (its `chmod`): a trivial query's log writes
# took 7 and 5 ms instead of 25 and 25 (medians).
LOCAL_CHECKPOINT_FILE_MANAGER = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"


def checkpoint_options(checkpoint: str, conf: dict[str, str]) -> dict[str, str]:
    """Spark settings for a checkpoint at `checkpoint` (with the user's Spark settings `conf`): a local
    one is written through Hadoop's FileSystem API (`LOCAL_CHECKPOINT_FILE_MANAGER`); elsewhere (HDFS,
    object stores) Spark chooses."""
    scheme = urlparse(checkpoint).scheme or urlparse(conf.get("spark.hadoop.fs.defaultFS", "file:///")).scheme
    if scheme != "file":
        return {}
    return {"spark.sql.streaming.checkpointFileManagerClass": LOCAL_CHECKPOINT_FILE_MANAGER}


FILE_SINKS = ("jsonl", "parquet", "avro")  # written by the source's own tasks (its `files` layout)


def early_view(data: Any) -> SimpleNamespace | None:
    """What `spark_session` reads of a configuration (`name`, `sink.type`, the `spark` block), from the
    file's YAML document `data` before it is validated; None when that part is not valid itself (the
    validation then reports it, and the JVM starts after it as before)."""
    from pydantic import ValidationError

    from headwater.config.errors import ConfigError
    from headwater.config.pipeline_file import SparkConfig, resolve_env

    if not isinstance(data, dict):
        return None
    errors: list[ConfigError] = []
    part = resolve_env({k: data.get(k) for k in ("name", "sink", "spark")}, "", errors)
    name, sink, block = part["name"], part["sink"], part["spark"]
    if errors or not isinstance(name, str) or not name or not isinstance(sink, dict) \
            or not isinstance(sink.get("type"), str) or not isinstance(block, dict | None):
        return None
    try:
        spark = SparkConfig.model_validate(block or {})
    except ValidationError:
        return None
    return SimpleNamespace(name=name, sink=SimpleNamespace(type=sink["type"]), spark=spark)


def same_session(view: SimpleNamespace, cfg: PipelineConfig) -> bool:
    """Whether the session started from `view` is the one `cfg` asks for."""
    return view.name == cfg.name and view.sink.type == cfg.sink.type and view.spark == cfg.spark


class EarlySession:
    """`spark_session` started in a thread from the file's document `data` (`early_view`), so that the
    JVM starts while this thread imports and validates the rest. `get(cfg)` waits for it (raising
    what starting it raised); `stop()` waits for it and stops it (the configuration was refused). The
    thread imports nothing before it launches the JVM but PySpark and `headwater.spark.gateway`;
    with an `early_view` of None it does nothing, and `get` starts the session there and then."""

    def __init__(self, data: Any, debug: bool = False) -> None:
        self.debug = debug
        self.view = early_view(data)
        self.spark: Any = None
        self.error: BaseException | None = None
        self.thread: threading.Thread | None = None
        if self.view is not None:
            self.thread = threading.Thread(target=self._start, name="headwater-spark-session", daemon=True)
            self.thread.start()

    def _start(self) -> None:
        try:
            self.spark = spark_session(self.view, debug=self.debug)  # type: ignore[arg-type]
        except BaseException as exc:  # raised in the caller's thread by `get`
            self.error = exc

    def _wait(self) -> None:
        if self.thread is not None:
            while self.thread.is_alive():  # in slices: the caller's signal handlers run meanwhile
                self.thread.join(0.1)

    def get(self, cfg: PipelineConfig):
        """The session for the validated `cfg`."""
        self._wait()
        if self.error is not None:
            raise self.error
        if self.spark is not None and self.view is not None and same_session(self.view, cfg):
            return self.spark
        self.stop()
        return spark_session(cfg, debug=self.debug)

    def stop(self) -> None:
        """Stop the session started early, if any (once it is up: a JVM stopped while it starts could
        be left running)."""
        self._wait()
        spark, self.spark = self.spark, None
        if spark is not None:
            spark.stop()
