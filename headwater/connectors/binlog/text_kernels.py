"""The binlog connectors' column-wise JSON kernels for the snapshot's text (`common/columnar.py`).

`BINLOG_KERNELS` adds TIMESTAMP to the common kinds: MariaDB and MySQL write a TIMESTAMP in the
session time zone (UTC for the snapshot) as 'YYYY-MM-DD HH:MM:SS[.fraction]', and Debezium's
snapshot value is its ISO form with the fraction's trailing zeros dropped ('...T...[.f]Z'); a zero
TIMESTAMP and anything else not of that form go through the converter.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from headwater.connectors.common.columnar import COMMON_KERNELS, TextKernel, join_parts
from headwater.events.arrays import lit

_TIMESTAMP = r"^[1-9]\d{3}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,6})?$"


def timestamp_json(values: pa.Array, _: int) -> tuple[pa.Array, pa.Array]:
    """A TIMESTAMP's text as Debezium's snapshot ZonedTimestamp JSON string; other values are slow."""
    iso = pc.utf8_replace_slice(values, 10, 11, "T")
    iso = pc.replace_substring_regex(iso, r"\.(\d*?)0+$", r".\1")  # the fraction without trailing zeros
    iso = pc.replace_substring_regex(iso, r"\.$", "")
    out = join_parts([b'"', iso.cast(pa.binary()), b'Z"'])
    slow = pc.invert(pc.fill_null(pc.match_substring_regex(values, _TIMESTAMP), lit(True)))
    return out, slow


BINLOG_KERNELS: dict[str, TextKernel] = {**COMMON_KERNELS, "timestamp": timestamp_json}
