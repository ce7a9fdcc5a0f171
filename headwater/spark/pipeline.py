"""A configuration file as a Spark Structured Streaming query: headwater source -> sink.

`start_query` builds the query, observed (`spark.observer`: Debezium's metrics in the metrics file
beside the checkpoint, `query_observer` gives them); `checkpoint_offsets` reads the positions Spark's
checkpoint holds (for `headwater status`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from headwater.connectors.common.signals import CLI_FILE_NAME, with_cli_file
from headwater.connectors.history_file import HISTORY_FILE_NAME, with_history_file
from headwater.pipeline_config import PipelineConfig
from headwater.spark.observer import ObservedStream, observed_stream
from headwater.spark.session import (  # noqa: F401 - the session's settings, here as before
    ARROW_POOL,
    FILE_SINKS,
    JIT_OPTIONS,
    LOCAL_CHECKPOINT_FILE_MANAGER,
    SMALL_DRIVER_JAVA_OPTIONS,
    SMALL_DRIVER_MEMORY,
    checkpoint_options,
    small_driver,
    spark_session,
)

SOURCE_NAME = "headwater"
MAX_BATCH_EVENTS = "headwater.max.batch.events"

# What a local small driver changes in the source (`source_options`): a batch of at most 100k change
# messages unless the configuration says otherwise. A batch's slices cross Spark's JVM several times
# over (the planned partitions, the task binary broadcast until the context cleaner drops it, each
# task's copy), the streaming source runner holds a batch's messages as Python objects while it cuts
# them into slices, and each task worker decodes a slice: on a 10M-row transaction, 100k instead of
# 200k took the tree's peak PSS from 976 to 903 MB (the JVM 439 -> 419, the source runner 167 -> 118,
# each task worker ~12 MB less), in two more interleaved pairs 1,026 -> 951 and 1,019 -> 948 MB, for ~4-9% more
# CPU (twice the micro-batches).
LOCAL_MAX_BATCH_EVENTS = 100_000


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
