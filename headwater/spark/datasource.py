"""The `headwater` data source's class, light: what Spark's data source creation step imports.

Spark unpickles `HeadwaterDataSource` in the Python processes that create the source and ask its
schema (one process each at a query's start, on the first event's path): with the class in
`headwater.spark.source` each imported the connectors, the transformation chain, NumPy and Arrow
(~0.24 s) to answer `schema()`. Here the class needs PySpark's data source module alone; its reader
(`headwater.spark.source.HeadwaterStreamReader`) is imported when Spark asks for it, in the streaming
source runner. The layouts and their schemas are `headwater.spark.layouts`'.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceStreamReader

from headwater.spark.layouts import (
    BLOCKS_SCHEMA_DDL,
    EVENTS_SCHEMA_DDL,
    FILES_SCHEMA_DDL,
    OUTPUT_OPTION,
    output_layout,
)


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


def register(spark) -> None:
    """Register the `headwater` source and the headwater sinks with a SparkSession."""
    from headwater.spark.sinks import register_sinks

    spark.dataSource.register(HeadwaterDataSource)
    register_sinks(spark)
