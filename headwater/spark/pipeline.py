"""A configuration file as a Spark Structured Streaming query: headwater source -> sink.

`start_query` builds the query, observed (`spark.observer`: Debezium's metrics in the metrics file
beside the checkpoint, `query_observer` gives them); `checkpoint_offsets` reads the positions Spark's
checkpoint holds (for `headwater status`).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from headwater.connectors.common.signals import CLI_FILE_NAME, with_cli_file
from headwater.connectors.history_file import HISTORY_FILE_NAME, with_history_file
from headwater.pipeline_config import PipelineConfig
from headwater.spark import classcache, gateway
from headwater.spark.observer import ObservedStream, observed_stream
from headwater.spark.workerpath import with_site_dir

SOURCE_NAME = "headwater"
MAX_BATCH_EVENTS = "headwater.max.batch.events"

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


# What a local small driver changes in the source (`source_options`): a batch of at most 100k change
# messages unless the configuration says otherwise. A batch's slices cross Spark's JVM several times
# over (the planned partitions, the task binary broadcast until the context cleaner drops it, each
# task's copy), the streaming source runner holds a batch's messages as Python objects while it cuts
# them into slices, and each task worker decodes a slice: on a 10M-row transaction, 100k instead of
# 200k took the tree's peak PSS from 976 to 903 MB (the JVM 439 -> 419, the source runner 167 -> 118,
# each task worker ~12 MB less), in two more interleaved pairs 1,026 -> 951 and 1,019 -> 948 MB, for ~4-9% more
# CPU (twice the micro-batches).
LOCAL_MAX_BATCH_EVENTS = 100_000


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
    from headwater.spark.source import register

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


def sink_path(cfg: PipelineConfig) -> str:
    """The file sink's directory as an absolute path: the same for the tasks that write and the driver."""
    assert cfg.sink.path is not None  # required for the file sinks (checked with the configuration)
    return str(Path(cfg.sink.path).expanduser().absolute())


def file_sink_options(cfg: PipelineConfig) -> dict[str, str]:
    """The options of the file sink of `cfg` (a type in `FILE_SINKS`)."""
    sink = cfg.sink
    if sink.type == "jsonl":
        if sink.json_options() is not None:
            return {}
        from headwater.events.formats.converters import specs_json
        from headwater.spark.sinks import CONVERTERS_OPTION

        return {CONVERTERS_OPTION: specs_json(sink.key_converter, sink.value_converter)}
    if sink.type == "parquet":
        return {"replace.null.with.default": "true" if sink.replace_null_with_default else "false"}
    return {"codec": sink.codec}


def source_options(cfg: PipelineConfig, parallelism: int, checkpoint: str) -> dict[str, str]:
    """The headwater source's options for `cfg`; a schema history (binlog connectors) is kept in the
    `checkpoint` directory unless the configuration names its file, and so is the file `headwater
    signal` writes to (connectors that take signals). The file sinks are written by the source's
    tasks (the `files` layout); the jdbc, delta and iceberg sinks read typed blocks, the console JSON. With
    a small local driver (`small_driver`) a batch takes `LOCAL_MAX_BATCH_EVENTS` change messages at most
    unless the source sets `headwater.max.batch.events`."""
    source = with_cli_file(with_history_file(cfg.source, Path(checkpoint) / HISTORY_FILE_NAME),
                           Path(checkpoint) / CLI_FILE_NAME)
    props = source.as_properties()
    if small_driver(cfg):
        props.setdefault(MAX_BATCH_EVENTS, str(LOCAL_MAX_BATCH_EVENTS))
    text = cfg.sink.json_options()
    opts = {
        "headwater.properties": json.dumps(props),
        "schemas.enable": "true" if (text.schemas_enable if text else cfg.sink.schemas_enable) else "false",
        "replace.null.with.default": "true" if (text.replace_null_with_default if text
                                                else cfg.sink.replace_null_with_default) else "false",
        "parallelism": str(parallelism),
    }
    if cfg.sink.type in FILE_SINKS:
        from headwater.spark.filesink import SINK_OPTION
        from headwater.spark.sinks import sink_spec

        opts["headwater.output"] = "files"
        opts[SINK_OPTION] = sink_spec(cfg.sink.type, sink_path(cfg), file_sink_options(cfg))
    else:
        opts["headwater.output"] = "blocks" if cfg.sink.type in ("jdbc", "delta", "iceberg") else "json"
    if cfg.spark.max_events_per_trigger:
        opts["maxEventsPerTrigger"] = str(cfg.spark.max_events_per_trigger)
    return opts


def start_query(spark, cfg: PipelineConfig, once: bool = False, console=None):
    """Start the streaming query for `cfg`; `once` processes what is available now, then stops."""
    parallelism = spark.sparkContext.defaultParallelism
    checkpoint = str(Path(cfg.spark.checkpoint).expanduser())
    # Debezium's metrics and the initial snapshot's notifications, counted on the driver (spark.observer)
    observed = observed_stream(spark, source_options(cfg, parallelism, checkpoint), checkpoint)
    df = observed.df
    sink = cfg.sink
    if sink.type in FILE_SINKS:
        from headwater.spark.filesink import FileBatches
        from headwater.spark.sinks import FILE_WRITERS

        # the source's tasks write the files; the driver commits each batch's
        writer = df.writeStream.foreachBatch(FileBatches(sink_path(cfg), FILE_WRITERS[sink.type].extension))
    elif sink.type == "jdbc":
        from headwater.sinks.jdbc.spark import jdbc_batches

        assert sink.jdbc is not None
        writer = df.writeStream.foreachBatch(jdbc_batches(sink.jdbc, cfg.name, parallelism))
    elif sink.lake is not None:  # delta, iceberg
        from headwater.spark.lakesink import lake_batch

        writer = df.writeStream.foreachBatch(lake_batch(sink.lake, checkpoint))
    else:
        from headwater.spark.console import console_batch

        writer = df.writeStream.foreachBatch(console_batch(console))
    writer = writer.option("checkpointLocation", checkpoint).queryName(f"headwater_{cfg.name}")
    writer = writer.trigger(availableNow=True) if once else writer.trigger(processingTime=cfg.spark.trigger_interval)
    try:
        query = writer.start()
    except BaseException:
        observed.close()
        raise
    observed.attach(query)
    _OBSERVED[str(query.runId)] = observed
    return query


_OBSERVED: dict[str, ObservedStream] = {}


def query_observer(query) -> ObservedStream | None:
    """The observer of a query `start_query` started (close it once the query has stopped)."""
    return _OBSERVED.get(str(query.runId))


def checkpoint_offsets(checkpoint: str | Path) -> dict[str, Any]:
    """The last committed and the last planned source offsets in a Spark checkpoint."""
    root = Path(checkpoint)

    def latest(d: Path) -> int | None:
        ids = [int(p.name) for p in d.glob("[0-9]*") if p.name.isdigit()] if d.exists() else []
        return max(ids) if ids else None

    def offset_of(batch: int) -> dict | None:
        lines = (root / "offsets" / str(batch)).read_text().splitlines()
        return json.loads(lines[2]) if len(lines) > 2 and lines[2] != "-" else None

    out: dict[str, Any] = {"checkpoint": str(root)}
    committed = latest(root / "commits")
    planned = latest(root / "offsets")
    if committed is not None:
        out["committed_batch"] = committed
        out["committed_offset"] = offset_of(committed)
    if planned is not None and planned != committed:
        out["planned_batch"] = planned
        out["planned_offset"] = offset_of(planned)
    return out
