"""One table's changes as typed columns, straight from the `headwater` streaming source.

    changes = table_changes(spark, properties, "public.customers")

gives a stream of one row per change event of that table: the row image (`after`, or `before` for a delete)
as columns typed by `headwater.events.arrow`, as the `headwater-parquet` sink types them (Decimal
-> decimal, MicroTimestamp -> timestamp, Date -> date, ...), plus `_op`, `_change_type`,
`_commit_version`, `_commit_timestamp` and `_source_ts_ms`. The column types come from the
connector (`SourceConnector.table_schema`): the table's row schema as its events carry it for the
same properties (column filters, name adjustment and type handling modes included), read once
when the query is defined and handed to the source (`headwater.output=table`), which makes these
rows from its typed blocks: no JSON between the connector and the query. A delete's row is its `before` image: under REPLICA IDENTITY DEFAULT
only the key columns are set. Tombstones and truncates carry no row image and are left out. A
column whose Arrow type Spark cannot hold is given as text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from headwater.connectors.registry import create_source, validate_connector
from headwater.spark.columns import spark_columns
from headwater.spark.source import OUTPUT_OPTION, PROPERTIES_OPTION, ROW_SCHEMA_OPTION, TOPIC_OPTION


def table_row_schema(properties: Mapping[str, Any], table: str) -> tuple[str, dict]:
    """The topic of `table` ('schema.table') and the Connect schema (JSON form) of its row image,
    from the connector the properties name."""
    connector = create_source(validate_connector(properties))
    try:
        return connector.table_schema(table)
    finally:
        connector.close()


def table_changes(spark, properties: Mapping[str, Any], table: str, **options: str):
    """A stream of `table`'s change events ('schema.table') as typed columns, from the `headwater`
    source over the connector `properties` name (`options`: more reader options, such as
    `maxEventsPerTrigger`). The source builds the rows itself from its typed blocks."""
    topic, row = table_row_schema(properties, table)
    _, spark_schema = spark_columns(row)
    return (spark.readStream.format("headwater").schema(spark_schema)
            .option(PROPERTIES_OPTION, json.dumps(dict(properties)))
            .option(OUTPUT_OPTION, "table").option(TOPIC_OPTION, topic).option(ROW_SCHEMA_OPTION, json.dumps(row))
            .options(**options).load())
