"""The `source` block of Debezium's change events: the fields every connector has, then its own.

Debezium's `source` struct starts with the same fields for every connector (`version`,
`connector`, `name`, `ts_ms`, `snapshot`, `db`, `sequence`, `ts_us`, `ts_ns`); each connector adds
its tail (PostgreSQL: `schema`, `table`, `txId`, `lsn`, `xmin`, `origin`, `origin_lsn`; MySQL:
`table`, `server_id`, `gtid`, `file`, `pos`, `row`, `thread`, `query`). `source_schema` builds
the struct's schema; `SourceInfo` serializes the block from a template: constant JSON pieces
between named slots (`str`), filled per event or per transaction (see `SourceTemplate`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import orjson

from headwater import __version__
from headwater.events.connect import INT64, STRING, Schema, primitive, struct

SOURCE_VERSION = f"headwater-{__version__}"

SNAPSHOT_MARKERS = "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"

COMMON_FIELDS: tuple[tuple[str, Schema], ...] = (
    ("version", primitive(STRING)),
    ("connector", primitive(STRING)),
    ("name", primitive(STRING)),
    ("ts_ms", primitive(INT64)),
    ("snapshot", Schema(STRING, optional=True, name="io.debezium.data.Enum", version=1,
                        parameters=(("allowed", SNAPSHOT_MARKERS),), default="false")),
    ("db", primitive(STRING)),
    ("sequence", primitive(STRING, optional=True)),
    ("ts_us", primitive(INT64, optional=True)),
    ("ts_ns", primitive(INT64, optional=True)),
)

Piece = bytes | str  # constant JSON, or the name of a slot


def source_schema(name: str, tail: Sequence[tuple[str, Schema]]) -> Schema:
    """A connector's `source` struct schema: the common fields, then its `tail`."""
    return struct(name, [*COMMON_FIELDS, *tail], version=1)


def time_values(ts_us: int) -> dict[str, bytes]:
    """The JSON of the `ts_ms`/`ts_us`/`ts_ns` slots for a time in microseconds."""
    return {"ts_ms": b"%d" % (ts_us // 1000), "ts_us": b"%d" % ts_us, "ts_ns": b"%d" % (ts_us * 1000)}


class SourceTemplate:
    """A `source` block's JSON with some slots filled: constant pieces around the open slots.

    `render(values)` gives the JSON with the open slots' JSON values, in slot order."""

    __slots__ = ("open", "pieces")

    def __init__(self, pieces: Sequence[Piece], values: Mapping[str, bytes]):
        parts = [b""]
        names: list[str] = []
        for piece in pieces:
            if isinstance(piece, bytes):
                parts[-1] += piece
            elif piece in values:
                parts[-1] += values[piece]
            else:
                names.append(piece)
                parts.append(b"")
        self.pieces = tuple(parts)
        self.open = tuple(names)

    def render(self, *values: bytes) -> bytes:
        """The JSON, with `values` in the open slots (as many as `open` names)."""
        out = [self.pieces[0]]
        for value, piece in zip(values, self.pieces[1:], strict=True):
            out += (value, piece)
        return b"".join(out)


class SourceInfo:
    """The `source` blocks of one connector configuration: the common head and a connector's tail."""

    def __init__(self, connector: str, server_name: str, db: str, streamed_null: bool = False):
        """`streamed_null`: a streamed event's `snapshot` ("false") is written null, as JsonConverter
        writes Debezium's Struct (which holds null there) with `replace.null.with.default=false`."""
        self.streamed_null = streamed_null
        self._head = (b'{"version":' + orjson.dumps(SOURCE_VERSION) + b',"connector":' + orjson.dumps(connector)
                      + b',"name":' + orjson.dumps(server_name) + b',"ts_ms":')
        self._db = orjson.dumps(db)

    def pieces(self, snapshot: str, tail: Sequence[Piece], db: str | None = None) -> list[Piece]:
        """The block as pieces: the common fields (slots `ts_ms`, `sequence` (JSON: a string or
        null), `ts_us`, `ts_ns`; `db` the connector's database unless given, as MySQL's per table),
        then the connector's `tail` (pieces that start with `,` and end with `}`)."""
        db_json = self._db if db is None else orjson.dumps(db)
        marker = b"null" if snapshot == "false" and self.streamed_null else orjson.dumps(snapshot)
        return [self._head, "ts_ms", b',"snapshot":' + marker + b',"db":' + db_json
                + b',"sequence":', "sequence", b',"ts_us":', "ts_us", b',"ts_ns":', "ts_ns", *tail]
