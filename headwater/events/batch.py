"""A columnar batch of change events: what connectors produce and the Spark source hands to Spark.

One row per event, in the layout of ARCHITECTURE.md: `topic`, `key` and `value` (Debezium JSON
text, `value` null for a tombstone), `op`, `headers`, and Spark's change-feed columns
`_change_type`, `_commit_version` and `_commit_timestamp`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from headwater.events.arrays import int32_array, int64_array, string_array, string_scalar, utf8_view
from headwater.events.changes import CHANGE_TYPES
from headwater.events.headers import kept_tiling
from headwater.events.pieces import Part, check_utf8, join_pieces
from headwater.events.typed import TypedEvents

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))

ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()),
    ("key", pa.string()),
    ("value", pa.string()),
    ("op", pa.string()),
    ("headers", HEADER_TYPE),
    ("_change_type", pa.string()),
    ("_commit_version", pa.int64()),
    ("_commit_timestamp", pa.timestamp("us", tz="UTC")),
])

SPARK_SCHEMA_DDL = (
    "topic STRING, key STRING, value STRING, op STRING, "
    "headers ARRAY<STRUCT<key: STRING, value: STRING>>, _change_type STRING, "
    "_commit_version BIGINT, _commit_timestamp TIMESTAMP"
)

@dataclass
class Event:
    """One change event as a row (used by the embedded engine's iterator)."""

    topic: str
    key: str | None
    value: str | None
    op: str | None
    headers: list[tuple[str, str]] | None
    change_type: str | None
    commit_version: int
    commit_ts_us: int

    def key_json(self):
        import orjson

        return None if self.key is None else orjson.loads(self.key)

    def value_json(self):
        import orjson

        return None if self.value is None else orjson.loads(self.value)


@dataclass
class EventBatch:
    """Events as columns; `append` one at a time, then `to_arrow()` or iterate `rows()`."""

    topic: list[str] = field(default_factory=list)
    key: list[str | None] = field(default_factory=list)  # JSON text
    value: list[str | None] = field(default_factory=list)
    op: list[str | None] = field(default_factory=list)
    headers: list[list[tuple[str, str]] | None] = field(default_factory=list)
    commit_version: list[int] = field(default_factory=list)
    commit_ts_us: list[int] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.topic)

    def append(self, topic: str, key: str | None, value: str | None, op: str | None,
               commit_version: int, commit_ts_us: int,
               headers: list[tuple[str, str]] | None = None) -> None:
        self.topic.append(topic)
        self.key.append(key)
        self.value.append(value)
        self.op.append(op)
        self.headers.append(headers)
        self.commit_version.append(commit_version)
        self.commit_ts_us.append(commit_ts_us)

    def rows(self) -> Iterator[Event]:
        for i in range(len(self.topic)):
            op = self.op[i]
            key, value, headers = self.key[i], self.value[i], self.headers[i]
            yield Event(self.topic[i], key, value, op, headers,
                        CHANGE_TYPES.get(op) if op is not None and value is not None else None,
                        self.commit_version[i], self.commit_ts_us[i])

    def to_arrow(self) -> pa.RecordBatch:
        ops = self.op
        change = [CHANGE_TYPES.get(o) if o is not None and v is not None else None
                  for o, v in zip(ops, self.value, strict=True)]
        headers = None
        if any(h for h in self.headers):
            headers = pa.array([[{"key": k, "value": v} for k, v in h] if h else None for h in self.headers],
                               type=HEADER_TYPE)
        else:
            headers = pa.nulls(len(ops), type=HEADER_TYPE)
        return pa.RecordBatch.from_arrays([
            string_array(self.topic),
            string_array(self.key),
            string_array(self.value),
            string_array(ops),
            headers,
            string_array(change),
            int64_array(np.array(self.commit_version, dtype=np.int64)),
            int64_array(np.array(self.commit_ts_us, dtype=np.int64)).cast(pa.timestamp("us", tz="UTC")),
        ], schema=ARROW_SCHEMA)


@dataclass
class ArrowEvents:
    """Events already built as an Arrow record batch (column-wise snapshot blocks)."""

    batch: pa.RecordBatch

    def __len__(self) -> int:
        return self.batch.num_rows

    def to_arrow(self) -> pa.RecordBatch:
        return self.batch

    def rows(self) -> Iterator[Event]:
        b = self.batch
        cols = [b.column(i).to_pylist() if i != 4 else [] for i in range(6)]  # headers: below
        versions = b.column(6).to_pylist()
        ts = b.column(7).cast(pa.int64()).to_pylist()
        headers = b.column(4)
        valid = headers.is_valid().to_pylist()
        offsets = headers.offsets.to_pylist()
        # the entries once, as (name, JSON text) pairs; each row's headers are a slice of them
        pairs = list(zip(headers.values.field("key").to_pylist(), headers.values.field("value").to_pylist(),
                         strict=True)) if headers.null_count < len(headers) else []
        for i in range(b.num_rows):
            yield Event(cols[0][i], cols[1][i], cols[2][i], cols[3][i],
                        pairs[offsets[i]:offsets[i + 1]] if valid[i] else None,
                        cols[5][i], versions[i], ts[i])


def insert_batch(topic: str, op: str, key: pa.Array | None, value: pa.Array, version: int | np.ndarray,
                 ts_us: int | np.ndarray, headers: pa.Array | None = None) -> pa.RecordBatch:
    """JSON rows of one topic and op whose key (None: every row's null) and value are given (text)."""
    n = len(value)
    return pa.RecordBatch.from_arrays([
        pa.repeat(string_scalar(topic), n),
        key if key is not None else pa.nulls(n, pa.string()),
        value,
        pa.repeat(string_scalar(op), n),
        headers if headers is not None else pa.nulls(n, HEADER_TYPE),
        pa.repeat(string_scalar(CHANGE_TYPES[op]), n),
        int64_array(np.broadcast_to(version, n)),
        int64_array(np.broadcast_to(ts_us, n)).cast(pa.timestamp("us", tz="UTC")),
    ], schema=ARROW_SCHEMA)


@dataclass
class PieceEvents:
    """`length` events of one topic and op (a snapshot block's, or a streamed run of inserts') whose key
    and value JSON are still parts (`events.pieces`): the `jsonl` sink joins them straight into its lines
    (one copy of their bytes); `to_arrow` joins them into JSON rows for anything else. `utf8`: the parts
    are known to be valid UTF-8 (else the joined text is checked)."""

    topic: str
    op: str
    key: list[Part] | None  # None: every row's key null
    value: list[Part]
    length: int
    version: int | np.ndarray  # every row's, or each row's (int64)
    ts_us: int | np.ndarray  # every row's, or each row's (int64)
    utf8: bool
    headers: pa.Array | None = None  # HEADER_TYPE; None: every row's are `shared_headers`
    shared_headers: pa.Array | None = None  # the entries of every row's headers (None: every row's null)
    _joined: pa.RecordBatch | None = field(default=None, init=False, repr=False, compare=False)

    def __len__(self) -> int:
        return self.length

    def text(self, parts: list[Part]) -> pa.Array:
        """`parts` joined, as text."""
        joined = join_pieces(parts, self.length)
        return utf8_view(joined) if self.utf8 else check_utf8(joined)

    def header_column(self) -> pa.Array | None:
        """The JSON rows' `headers` column (None: every row's null)."""
        if self.headers is not None or self.shared_headers is None or not len(self.shared_headers):
            return self.headers
        k = len(self.shared_headers)
        offsets = int32_array(np.arange(self.length + 1, dtype=np.int64) * k)
        return pa.ListArray.from_arrays(offsets, kept_tiling(self.shared_headers, self.length)).cast(HEADER_TYPE)

    def to_arrow(self) -> pa.RecordBatch:
        if self._joined is None:
            self._joined = insert_batch(self.topic, self.op, self.text(self.key) if self.key is not None else None,
                                        self.text(self.value), self.version, self.ts_us, self.header_column())
        return self._joined

    def rows(self) -> Iterator[Event]:
        return ArrowEvents(self.to_arrow()).rows()


# what a work unit yields: JSON text rows (len(), to_arrow() and rows()), or typed blocks (typed output)
Events = EventBatch | ArrowEvents | PieceEvents | TypedEvents

