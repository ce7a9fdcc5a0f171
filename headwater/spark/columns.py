"""A row's Connect schema as Spark columns: the Arrow types of `events.arrow`, where Spark has them.

`spark_columns` gives the converters of the row's columns (name, Arrow type, JSON-form value ->
Arrow value; a column whose Arrow type Spark cannot hold becomes its JSON text) and the Spark
schema of the rows (those columns, then the change columns of `events.arrow.META`).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from headwater.events.arrow import META, Column, arrow_type, json_text


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
