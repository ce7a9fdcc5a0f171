"""The `headwater-parquet` sink: one Parquet dataset per topic, the row image as typed columns.

Each data event becomes one row: the `after` image (the `before` image for deletes) as columns
typed from the event's Kafka Connect schema (Decimal -> decimal128, MicroTimestamp -> timestamp,
Date -> date32, ...), plus `_op`, `_change_type`, `_commit_version`, `_commit_timestamp` and
`_source_ts_ms`. Tombstones are skipped (the delete before them carries the key). Events of
other topics (transaction metadata, heartbeats, logical messages) keep their payload's fields.
Files go to `<path>/<topic>/batch-<id>-part-<n>.parquet` with the same exactly-once commit as
the JSON-lines sink. The source must write schemas (`schemas.enable`), which `headwater run` sets.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import uuid
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from headwater.spark.sinks import TMP, FileCommit, FileSink, FileStreamWriter, _partition_id

EPOCH_DATE = dt.date(1970, 1, 1)
META = [("_op", pa.string()), ("_change_type", pa.string()), ("_commit_version", pa.int64()),
        ("_commit_timestamp", pa.timestamp("us", tz="UTC")), ("_source_ts_ms", pa.int64())]


def arrow_type(schema: dict) -> tuple[pa.DataType, Any]:
    """Arrow type for a Connect schema (JSON form), and a function from JSON value to Arrow value."""
    name, t = schema.get("name"), schema["type"]
    def ident(v):
        return v

    if name in ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date"):
        return pa.date32(), lambda v: EPOCH_DATE + dt.timedelta(days=v)
    if name == "io.debezium.time.MicroTimestamp":
        return pa.timestamp("us"), ident
    if name in ("io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp"):
        return pa.timestamp("ms"), ident
    if name == "io.debezium.time.NanoTimestamp":
        return pa.timestamp("ns"), ident
    if name == "io.debezium.time.MicroTime":
        return pa.time64("us"), ident
    if name in ("io.debezium.time.Time", "org.apache.kafka.connect.data.Time"):
        return pa.time32("ms"), ident
    if name == "io.debezium.time.ZonedTimestamp":
        return pa.timestamp("us", tz="UTC"), _zoned
    if name == "org.apache.kafka.connect.data.Decimal":
        params = schema.get("parameters") or {}
        scale = int(params.get("scale", 0))
        precision = int(params.get("connect.decimal.precision", 38))
        if 0 < precision <= 38 and scale <= precision:
            return pa.decimal128(precision, scale), lambda v: _decimal(v, scale)
        return pa.string(), lambda v: str(_decimal(v, scale))
    simple = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
              "float": pa.float32(), "double": pa.float64(), "boolean": pa.bool_(), "string": pa.string()}
    if t in simple:
        return simple[t], ident
    if t == "bytes":
        return pa.binary(), lambda v: base64.b64decode(v) if isinstance(v, str) else v
    if t == "array":
        item_t, item_f = arrow_type(schema["items"])
        return pa.list_(item_t), lambda v: [None if x is None else item_f(x) for x in v]
    if t == "map":
        kt, kf = arrow_type(schema["keys"])
        vt, vf = arrow_type(schema["values"])
        return pa.map_(kt, vt), lambda v: [(kf(k), None if x is None else vf(x)) for k, x in v.items()]
    if t == "struct":
        fields = [(f["field"], *arrow_type(f)) for f in schema["fields"]]
        typ = pa.struct([(n, ft) for n, ft, _ in fields])
        return typ, lambda v: {n: (None if v.get(n) is None else fn(v[n])) for n, _, fn in fields}
    return pa.string(), lambda v: v if isinstance(v, str) else orjson.dumps(v).decode()


def _decimal(b64: str, scale: int) -> decimal.Decimal:
    unscaled = int.from_bytes(base64.b64decode(b64), "big", signed=True)
    return decimal.Decimal(unscaled).scaleb(-scale)


def _zoned(v: str) -> dt.datetime:
    return dt.datetime.fromisoformat(v.replace("Z", "+00:00"))


def row_schema(value_schema: dict) -> tuple[dict, bool]:
    """The schema of the row image inside an envelope (or the whole payload for other records)."""
    fields = {f["field"]: f for f in value_schema.get("fields", [])}
    if "after" in fields and "before" in fields:
        return fields["after"], True
    return value_schema, False


class RowImages:
    """Rows of one topic as typed Arrow columns: the row image of each event plus the META columns.

    `schema` is the row's Connect schema (the envelope's `after`, or the whole payload for other
    records, as `envelope` says); `columns` may replace the converters (name, Arrow type, function)."""

    def __init__(self, schema: dict, envelope: bool, columns: list[tuple[str, pa.DataType, Any]] | None = None):
        self.envelope = envelope
        self.columns = columns if columns is not None else [(f["field"], *arrow_type(f))
                                                            for f in schema.get("fields", [])]
        self.data: dict[str, list] = defaultdict(list)

    def add(self, payload: dict, op: str | None, change: str | None, version: int, ts) -> None:
        if self.envelope:
            image = payload.get("before") if op == "d" else payload.get("after")
            image = image or {}
            src_ts = (payload.get("source") or {}).get("ts_ms")
        else:
            image, src_ts = payload, None
        for name, _, fn in self.columns:
            v = image.get(name)
            self.data[name].append(None if v is None else fn(v))
        for name, v in zip(("_op", "_change_type", "_commit_version", "_commit_timestamp", "_source_ts_ms"),
                           (op, change, version, ts, src_ts), strict=True):
            self.data[name].append(v)

    def table(self) -> pa.Table:
        arrays, names = [], []
        for name, typ, _ in self.columns:
            arrays.append(pa.array(self.data[name], type=typ))
            names.append(name)
        for name, typ in META:
            arrays.append(pa.array(self.data[name], type=typ))
            names.append(name)
        return pa.Table.from_arrays(arrays, names=names)


def safe_dir(topic: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in topic)


class ParquetStreamWriter(FileStreamWriter):
    """Writes one Parquet file per topic per partition per batch."""

    extension = ".parquet"

    def write(self, iterator: Iterator[pa.RecordBatch]) -> FileCommit:
        pid = _partition_id()
        tables: dict[str, RowImages] = {}
        rows = 0
        for batch in iterator:
            cols = batch.to_pydict()
            for topic, value, op, change, version, ts in zip(
                    cols["topic"], cols["value"], cols["op"], cols["_change_type"], cols["_commit_version"],
                    cols["_commit_timestamp"], strict=True):
                if value is None:
                    continue
                record = orjson.loads(value)
                if "schema" not in record:
                    raise ValueError("the headwater-parquet sink needs events written with schemas.enable=true")
                t = tables.get(topic)
                if t is None:
                    t = tables[topic] = RowImages(*row_schema(record["schema"]))
                t.add(record["payload"], op, change, version, ts)
                rows += 1
        files = []
        tmpdir = self.root / TMP
        tmpdir.mkdir(parents=True, exist_ok=True)
        for topic, t in tables.items():
            tmp = tmpdir / f"{uuid.uuid4().hex}.parquet.tmp"
            pq.write_table(t.table(), tmp)
            files.append((str(tmp), safe_dir(topic)))
        return FileCommit(pid, files, rows)


class ParquetSink(FileSink):
    """`df.writeStream.format("headwater-parquet").option("path", ...)`."""

    writer = ParquetStreamWriter

    @classmethod
    def name(cls) -> str:
        return "headwater-parquet"
