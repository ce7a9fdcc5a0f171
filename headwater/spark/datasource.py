"""The `headwater` data source's class, light: what Spark's data source creation step imports.

Spark unpickles `HeadwaterDataSource` in the Python processes that create the source and ask its
schema (one process each at a query's start, on the first event's path): with the class in
`headwater.spark.source` each imported the connectors, the transformation chain, NumPy and Arrow
(~0.24 s) to answer `schema()`. Here the class needs PySpark's data source module alone; its reader
(`headwater.spark.source.HeadwaterStreamReader`) is imported when Spark asks for it, in the streaming
source runner. The schemas are copies of `headwater.events.batch.SPARK_SCHEMA_DDL` and
`headwater.spark.filesink.WRITTEN_SCHEMA_DDL`, and `SINK_OPTION` of `filesink`'s (a test keeps them equal).
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceStreamReader

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


class HeadwaterDataSource(DataSource):
    """`spark.readStream.format("headwater")`: change events from a headwater connector."""

    @classmethod
    def name(cls) -> str:
        return "headwater"

    def schema(self) -> str:
        layout = output_layout({k.lower(): v for k, v in self.options.items()})
        if layout == "table":
            raise ValueError(f"{OUTPUT_OPTION}=table takes the schema of the query: use "
                             "headwater.spark.tables.table_changes")
        return {"blocks": BLOCKS_SCHEMA_DDL, "files": FILES_SCHEMA_DDL}.get(layout, EVENTS_SCHEMA_DDL)

    def streamReader(self, schema) -> DataSourceStreamReader:
        from headwater.spark.source import HeadwaterStreamReader, connector_config

        config = connector_config(dict(self.options))  # refuse bad properties before the query starts
        if config.transforms.get("transforms") and output_layout({k.lower(): v for k, v in self.options.items()}) == "table":
            raise ValueError(f"{OUTPUT_OPTION}=table reads the row images of change events: transformations do "
                             "not apply to it; remove transforms from the properties of table_changes")
        return HeadwaterStreamReader(dict(self.options))
