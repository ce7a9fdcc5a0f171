"""The `headwater` source's output layouts (`headwater.output`) and their schemas: light, for the data
source's class (`headwater.spark.datasource`) and its reader (`headwater.spark.source`) alike.

The schemas are copies of `headwater.events.batch.SPARK_SCHEMA_DDL` and
`headwater.spark.filesink.WRITTEN_SCHEMA_DDL`, and `SINK_OPTION` of `filesink`'s: importing those
modules imports NumPy and Arrow (a test keeps the copies equal).
"""

from __future__ import annotations

OUTPUT_OPTION = "headwater.output"
TOPIC_OPTION = "headwater.topic"
ROW_SCHEMA_OPTION = "headwater.row.schema"
SINK_OPTION = "headwater.sink"  # = headwater.spark.filesink.SINK_OPTION
OUTPUT_LAYOUTS = ("json", "blocks", "table", "files")
BLOCKS_SCHEMA_DDL = "topic STRING, block BINARY"
EVENTS_SCHEMA_DDL = (  # = headwater.events.batch.SPARK_SCHEMA_DDL
    "topic STRING, key STRING, value STRING, op STRING, "
    "headers ARRAY<STRUCT<key: STRING, value: STRING>>, _change_type STRING, "
    "_commit_version BIGINT, _commit_timestamp TIMESTAMP"
)
FILES_SCHEMA_DDL = "written STRING, facts STRING"  # = headwater.spark.filesink.WRITTEN_SCHEMA_DDL


def output_layout(options: dict[str, str]) -> str:
    """The `headwater.output` option, checked."""
    layout = str(options.get(OUTPUT_OPTION, "json")).lower()
    if layout not in OUTPUT_LAYOUTS:
        raise ValueError(f"{OUTPUT_OPTION}={layout!r} is not a layout of the headwater source: use one of "
                         f"{', '.join(OUTPUT_LAYOUTS)}")
    if layout == "table" and not (options.get(TOPIC_OPTION) and options.get(ROW_SCHEMA_OPTION)):
        raise ValueError(f"{OUTPUT_OPTION}=table needs {TOPIC_OPTION} and {ROW_SCHEMA_OPTION}: "
                         "use headwater.spark.tables.table_changes")
    if layout == "files" and not options.get(SINK_OPTION):
        raise ValueError(f"{OUTPUT_OPTION}=files needs {SINK_OPTION}, the file sink to write: "
                         "use headwater.spark.sinks.sink_spec")
    return layout
