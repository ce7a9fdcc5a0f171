"""One table's changes as typed columns, from the rows of the `headwater` streaming source.

    changes = table_changes(df, properties, "public.customers")

gives one row per change event of that table: the row image (`after`, or `before` for a delete)
as columns typed by `headwater.events.arrow`, as the `headwater-parquet` sink types them (Decimal
-> decimal, MicroTimestamp -> timestamp, Date -> date, ...), plus `_op`, `_change_type`,
`_commit_version`, `_commit_timestamp` and `_source_ts_ms`. The column types come from the
connector (`SourceConnector.table_schema`): the table's row schema as its events carry it for the
same properties (column filters, name adjustment and type handling modes included), read once
when the query is defined. A delete's row is its `before` image: under REPLICA IDENTITY DEFAULT
only the key columns are set. Tombstones and truncates carry no row image and are left out. A
column whose Arrow type Spark cannot hold is given as text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson
import pyarrow as pa

from headwater.connectors.registry import create_source, validate_connector
from headwater.events.arrow import META, Column, RowImages, arrow_type, json_text

ROW_OPS = ("c", "u", "d", "r")


def table_row_schema(properties: Mapping[str, Any], table: str) -> tuple[str, dict]:
    """The topic of `table` ('schema.table') and the Connect schema (JSON form) of its row image,
    from the connector the properties name."""
    connector = create_source(validate_connector(properties))
    try:
        return connector.table_schema(table)
    finally:
        connector.close()


def spark_columns(row_schema: dict) -> tuple[list[Column], Any]:
    """Converters of the row's columns (those Spark cannot hold become text) and the Spark schema."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    columns: list[Column] = []
    fields = []
    for f in row_schema.get("fields", []):
        typ, fn = arrow_type(f)
        try:
            spark_type = from_arrow_type(typ)
        except Exception:  # a type Spark has no equivalent for: its JSON text
            typ, spark_type = pa.string(), from_arrow_type(pa.string())
            fn = json_text
        columns.append((f["field"], typ, fn))
        fields.append(StructField(f["field"], spark_type, True))
    for name, typ in META:
        fields.append(StructField(name, from_arrow_type(typ), True))
    return columns, StructType(fields)


def table_changes(df, properties: Mapping[str, Any], table: str):
    """`df` (rows of the `headwater` source) narrowed to `table`'s change events, as typed columns."""
    from pyspark.sql import functions as F

    topic, row = table_row_schema(properties, table)
    columns, spark_schema = spark_columns(row)

    def convert(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            images = RowImages(row, True, columns)
            cols = batch.to_pydict()
            for value, op, change, version, ts in zip(cols["value"], cols["op"], cols["_change_type"],
                                                      cols["_commit_version"], cols["_commit_timestamp"],
                                                      strict=True):
                record = orjson.loads(value)
                payload = record["payload"] if "payload" in record and "schema" in record else record
                images.add(payload, op, change, version, ts)
            yield from images.table().to_batches()

    picked = (df.where((F.col("topic") == topic) & F.col("value").isNotNull() & F.col("op").isin(*ROW_OPS))
              .select("value", "op", "_change_type", "_commit_version", "_commit_timestamp"))
    return picked.mapInArrow(convert, spark_schema)
