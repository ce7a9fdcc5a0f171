"""The properties every connector has (Debezium's common source-connector properties), and their checks.

Each is implemented by every connector headwater has, or refused by name with the reason and what
to use instead: headwater accepts nothing it ignores.
"""

from __future__ import annotations

import re
from typing import Any

from headwater.config.errors import ConfigError
from headwater.config.properties import NOT_YET, Property, prop, refuse

BATCH_INSTEAD = "headwater.max.batch.events (or spark.maxEventsPerTrigger) bounds a batch"
BUFFER_INSTEAD = "headwater.stream.buffer.bytes bounds what the change-log reader holds"

COMMON: list[Property] = [
    prop("name", doc="connector name"),
    prop("connector.class", required=True, doc="short name (postgres, mysql, ...) or Debezium's class name"),
    prop("tasks.max", "int", 1, minimum=1, maximum=1,
         why="one reader owns the change log (Debezium's PostgreSQL connector also runs one task); "
             "snapshot chunks are read in parallel by Spark"),
    prop("topic.prefix", required=True, doc="namespace of topic and schema names"),
    prop("topic.delimiter", default="."),
    prop("topic.transaction", default="transaction"),
    prop("topic.heartbeat.prefix", default="__debezium-heartbeat"),
    prop("topic.naming.strategy", "enum", "io.debezium.schema.SchemaTopicNamingStrategy",
         ("io.debezium.schema.SchemaTopicNamingStrategy",),
         why="headwater names topics as Debezium's default strategy does"),
    prop("tombstones.on.delete", "boolean", True),
    prop("skipped.operations", "list", "t", allowed=("c", "u", "d", "t", "none")),
    prop("skip.messages.without.change", "boolean", False),
    prop("provide.transaction.metadata", "boolean", False),
    prop("extended.headers.enabled", "boolean", True,
         doc="Debezium 3's __debezium.context.* headers (connector, task and run) on every data change record"),
    prop("heartbeat.interval.ms", "int", 0, minimum=0),
    prop("heartbeat.action.query"),
    prop("errors.max.retries", "int", -1, minimum=-1),
    prop("retriable.restart.connector.wait.ms", "int", 10000, minimum=0),
    prop("event.processing.failure.handling.mode", "enum", "fail", ("fail",),
         why="headwater stops at an event it cannot process; warn and skip are not implemented"),
    prop("schema.name.adjustment.mode", "enum", "none", ("none", "avro", "avro_unicode")),
    prop("field.name.adjustment.mode", "enum", "none", ("none", "avro", "avro_unicode")),
    prop("binary.handling.mode", "enum", "bytes", ("bytes", "base64", "base64-url-safe", "hex")),
    prop("decimal.handling.mode", "enum", "precise", ("precise", "double", "string")),
    prop("time.precision.mode", "enum", "adaptive", ("adaptive", "adaptive_time_microseconds", "connect", "isostring",
                                                     "microseconds", "nanoseconds")),
    prop("table.include.list", "regexes"),
    prop("table.exclude.list", "regexes"),
    prop("column.include.list", "regexes"),
    prop("column.exclude.list", "regexes"),
    prop("column.propagate.source.type", "regexes"),
    prop("datatype.propagate.source.type", "regexes"),
    prop("message.key.columns"),
    prop("snapshot.include.collection.list", "regexes"),
    prop("snapshot.select.statement.overrides", "list"),
    # headwater's own, for every connector: the bounds of a batch and of the change-log reader's
    # buffer, and the size of snapshot chunks
    prop("headwater.stream.buffer.bytes", "int", 256 * 1024 * 1024, minimum=1,
         doc="memory the driver-side change-log reader may buffer before it stops reading"),
    prop("headwater.max.batch.events", "int", 200_000, minimum=1,
         doc="the most change messages one batch takes (bounds the driver's memory; maxEventsPerTrigger may lower it)"),
    prop("headwater.snapshot.chunk.rows", "int", 200_000, minimum=1,
         doc="target rows per snapshot chunk (one chunk = one Spark partition)"),
    # Kafka Connect's batching and queueing between the connector and its poll loop: none here.
    refuse("max.batch.size", "a Kafka Connect poll batch; a headwater batch is a Spark micro-batch", BATCH_INSTEAD),
    refuse("max.queue.size", "there is no queue between the connector and Kafka Connect", BUFFER_INSTEAD),
    refuse("max.queue.size.in.bytes", "there is no queue between the connector and Kafka Connect", BUFFER_INSTEAD),
    refuse("poll.interval.ms", "there is no poll loop; the trigger decides when a batch runs",
           "spark.trigger.interval in the spark section"),
    refuse("topic.cache.size", "headwater keeps no bounded topic-name cache for it to size",
           "remove it from the configuration"),
    refuse("custom.metric.tags", "headwater exposes no JMX metrics to tag", "remove it from the configuration"),
    refuse("snapshot.delay.ms", "the snapshot starts with the first batch",
           "start the pipeline later"),
    refuse("snapshot.fetch.size", "snapshot chunks are streamed with COPY, not fetched in pages",
           "headwater.snapshot.chunk.rows sets the rows per chunk"),
    refuse("snapshot.max.threads", "snapshot chunks are Spark partitions, read in parallel by Spark",
           "headwater.snapshot.chunk.rows, and the cores in spark.master"),
    refuse("snapshot.lock.timeout.ms", "the snapshot takes no table locks (it reads one exported snapshot)",
           "remove it from the configuration"),
    prop("notification.enabled.channels", "list", [], ("log", "sink"),
         why="jmx: headwater has no JMX; `headwater status` shows the last notifications"),
    prop("notification.sink.topic.name", doc="the topic of the notification records (channel sink)"),
    prop("headwater.metrics.port", "int", 0, minimum=0, maximum=65535,
         doc="the port of the Prometheus endpoint of a running pipeline; 0: no endpoint"),
    prop("headwater.metrics.host", default="127.0.0.1", doc="the address the Prometheus endpoint listens on"),
    # Debezium features headwater has not built yet.
    *[refuse(n) for n in (
        "signal.data.collection", "signal.enabled.channels", "signal.kafka.topic",
        "signal.kafka.groupid", "signal.kafka.bootstrap.servers", "signal.kafka.poll.timeout.ms",
        "incremental.snapshot.chunk.size", "incremental.snapshot.watermarking.strategy",
        "incremental.snapshot.allow.schema.changes", "converters",
        "kafka.consumer.offset.commit.enabled", "snapshot.custom.class",
    )],
]

# Families of Debezium and Kafka Connect property names refused by prefix: (prefix, why, instead).
REFUSED_PREFIXES: list[tuple[str, str, str]] = [
    ("offset.", "Spark's checkpoint (or the engine's offset store) keeps the positions",
     "remove it from the configuration"),
    ("key.converter", "headwater writes Debezium's JSON itself", "sink.schemas.enable chooses schemas or not"),
    ("value.converter", "headwater writes Debezium's JSON itself", "sink.schemas.enable chooses schemas or not"),
    ("header.converter", "headwater writes Debezium's JSON itself", "remove it from the configuration"),
    ("signal.consumer.", NOT_YET, "remove it from the configuration"),
]

# Names Debezium had before 2.0: (old name, its name now).
RENAMED: dict[str, str] = {
    "database.server.name": "topic.prefix",
    "schema.whitelist": "schema.include.list",
    "schema.blacklist": "schema.exclude.list",
    "table.whitelist": "table.include.list",
    "table.blacklist": "table.exclude.list",
    "column.whitelist": "column.include.list",
    "column.blacklist": "column.exclude.list",
    "heartbeat.topics.prefix": "topic.heartbeat.prefix",
    "toasted.value.placeholder": "unavailable.value.placeholder",
    "sanitize.field.names": "field.name.adjustment.mode (and schema.name.adjustment.mode)",
}

EXCLUSIVE_PAIRS: list[tuple[str, str]] = [
    ("table.include.list", "table.exclude.list"),
    ("column.include.list", "column.exclude.list"),
]


def check(values: dict[str, Any], errors: list[ConfigError]) -> None:
    """Checks of the common properties beyond their types and ranges."""
    prefix = values.get("topic.prefix")
    if prefix is not None and not re.fullmatch(r"[A-Za-z0-9._-]+", prefix):
        errors.append(ConfigError("topic.prefix", f"{prefix!r} has characters a topic name cannot hold",
                                  "use letters, digits, '.', '_' and '-'"))
    if "sink" in (values.get("notification.enabled.channels") or []) and not values.get("notification.sink.topic.name"):
        errors.append(ConfigError("notification.sink.topic.name", "the notification channel sink needs a topic",
                                  "for example notification.sink.topic.name: io.debezium.notification"))
    skipped = values.get("skipped.operations")
    if skipped and "none" in skipped and len(skipped) > 1:
        errors.append(ConfigError("skipped.operations", "'none' cannot be combined with other operations",
                                  "write none, or a list such as t,d"))
