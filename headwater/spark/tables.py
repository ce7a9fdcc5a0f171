"""One table's changes as typed columns, from the rows of the `headwater` streaming source.

    changes = table_changes(df, properties, "public.customers")

gives one row per change event of that table: the row image (`after`, or `before` for a delete)
as columns typed the way the `headwater-parquet` sink types them (Decimal -> decimal, MicroTimestamp
-> timestamp, Date -> date, ...), plus `_op`, `_change_type`, `_commit_version`,
`_commit_timestamp` and `_source_ts_ms`. The column types come from the table's definition in the
database, read once when the query is defined, exactly as the connector builds the event schema
for the same properties (column filters, name adjustment and type handling modes included).
A delete's row is its `before` image: under REPLICA IDENTITY DEFAULT only the key columns are set.
Tombstones and truncates carry no row image and are left out. A column whose Arrow type Spark
cannot hold is given as text.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import orjson
import pyarrow as pa

from headwater.config.properties import validate_connector
from headwater.connectors.common.records import table_records as table_events
from headwater.connectors.postgres.catalog import read_table
from headwater.connectors.postgres.connection import ConnectionParams, connect
from headwater.connectors.postgres.records import EventContext
from headwater.spark.parquet import META, RowImages, arrow_type

ROW_OPS = ("c", "u", "d", "r")


def table_row_schema(properties: Mapping[str, Any], table: str) -> tuple[str, dict]:
    """The topic of `table` ('schema.table') and the Connect schema (JSON form) of its row image."""
    cfg = validate_connector(properties)
    schema, _, name = table.rpartition(".")
    conn = connect(ConnectionParams.from_config(cfg))
    try:
        found = read_table(conn, schema or "public", name)
    finally:
        conn.close()
    events = table_events(EventContext.from_config(cfg), found, found.columns, streaming=True)
    return events.topic, events.value_schema.to_json()


def spark_columns(row_schema: dict) -> tuple[list[tuple[str, pa.DataType, Any]], Any]:
    """Converters of the row's columns (those Spark cannot hold become text) and the Spark schema."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    columns, fields = [], []
    for f in row_schema.get("fields", []):
        typ, fn = arrow_type(f)
        try:
            spark_type = from_arrow_type(typ)
        except Exception:  # a type Spark has no equivalent for: its JSON text
            typ, spark_type = pa.string(), from_arrow_type(pa.string())
            fn = _text
        columns.append((f["field"], typ, fn))
        fields.append(StructField(f["field"], spark_type, True))
    for name, typ in META:
        fields.append(StructField(name, from_arrow_type(typ), True))
    return columns, StructType(fields)


def _text(v: Any) -> str:
    return v if isinstance(v, str) else orjson.dumps(v).decode()


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
