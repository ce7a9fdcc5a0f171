"""Decoder for PostgreSQL's built-in ``pgoutput`` logical replication messages (protocol 1 and 2).

The wire format is described in the PostgreSQL manual, "Logical Replication Message Formats".
Each payload (the body of one XLogData copy message, as psycopg2 returns it with
``decode=False``) is exactly one message; `decode` turns it into one of the typed, immutable
message classes below, `peek` and `peek_xid` look at a payload's kind, relation and transaction
id without decoding tuples.

The decoder is stateless. Between Stream Start and Stream Stop (protocol 2, ``streaming 'on'``)
the Relation, Type, Insert, Update, Delete, Truncate and Message messages carry the streamed
transaction's xid right after the type byte; the caller tracks the blocks and passes
``in_stream=True`` for the messages inside one (Origin, which pgoutput may send first inside a
block, carries no xid).

Tuple data (`TupleData`) is a plain tuple with one value per column:

- ``None`` for SQL NULL (``n``);
- the `UNCHANGED_TOAST` sentinel for an unchanged out-of-line TOASTed value (``u``), sent in
  the new tuple of an UPDATE that did not change it; the value itself is not in the WAL;
- ``str`` for a value in text format (``t``), decoded from UTF-8 (the validation is the cost
  of guaranteeing text is text);
- ``bytes`` for a value in binary format (``b``, with ``binary 'true'``), the type's ``send``
  representation. Text is never ``bytes``, so ``isinstance(value, bytes)`` tells a binary
  column from a text one and the all-text case needs no extra per-column marker.

Every malformed payload raises `ProtocolError` (a ``ValueError``) naming the message type, the
field and the byte offset: unknown type bytes, truncation, trailing bytes, bad column kinds,
negative or overlong lengths, invalid UTF-8 and out-of-range flag values. Enumerated fields are
checked strictly (flags that PostgreSQL only ever sends as 0 or 1, the replica identity letter,
truncate options), so a decoded message always re-encodes to exactly the bytes it came from.

Timestamps are microseconds since 2000-01-01 00:00 UTC as sent; the ``*_unix_us`` properties
give microseconds since the Unix epoch. LSNs are ints; `lsn_to_str`/`str_to_lsn` convert to and
from PostgreSQL's ``X/X`` text form.
"""

from __future__ import annotations

import re
from struct import Struct
from struct import unpack_from as _unpack_from
from typing import Any, Literal, NamedTuple, TypeAlias, overload

from headwater.connectors.common.java import MICROS_PER_DAY
from headwater.connectors.postgres.pgvalues import PG_EPOCH_DAYS

__all__ = [
    "PG_EPOCH_OFFSET_US", "UNCHANGED_TOAST", "STREAM_XID_KINDS", "ProtocolError", "Value", "TupleData",
    "Column", "Begin", "Commit", "Origin", "Relation", "Type", "Insert", "Update", "Delete",
    "Truncate", "LogicalMessage", "StreamStart", "StreamStop", "StreamCommit", "StreamAbort",
    "Message", "decode", "peek", "peek_xid", "lsn_to_str", "str_to_lsn", "pg_to_unix_us",
    "BEGIN", "COMMIT", "STREAM_START", "STREAM_COMMIT", "STREAM_ABORT",
]

PG_EPOCH_OFFSET_US = PG_EPOCH_DAYS * MICROS_PER_DAY
"""Microseconds from 1970-01-01 to 2000-01-01 (PostgreSQL's epoch), both UTC."""

STREAM_XID_KINDS = frozenset("RYIUDTM")
"""Message kinds that carry the transaction id after the type byte inside a stream block."""


class ProtocolError(ValueError):
    """A payload that is not a well-formed pgoutput message.

    ``message_type`` (e.g. ``"Insert"``), ``field`` and ``offset`` (bytes from the start of the
    payload) say where the problem was found; the text says what it is.
    """

    def __init__(self, text: str, message_type: str | None = None, field: str | None = None,
                 offset: int | None = None) -> None:
        super().__init__(text)
        self.message_type = message_type
        self.field = field
        self.offset = offset


class _UnchangedToast:
    """Type of `UNCHANGED_TOAST`; one instance, which survives pickling and copying."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"

    def __reduce__(self) -> str:
        return "UNCHANGED_TOAST"


UNCHANGED_TOAST = _UnchangedToast()
"""Value of a column whose TOASTed value did not change (kind ``u``); it is not in the message."""

Value: TypeAlias = str | bytes | None | _UnchangedToast
TupleData: TypeAlias = tuple[Value, ...]


def pg_to_unix_us(pg_us: int) -> int:
    """PostgreSQL microseconds since 2000-01-01 UTC -> microseconds since 1970-01-01 UTC."""
    return pg_us + PG_EPOCH_OFFSET_US


# ---------------------------------------------------------------------------------------------
# Message classes. Each has a property `kind` (its type byte as a one-character str).
# `xid` on data messages is the streamed transaction's id inside a stream block, else None.


class Begin(NamedTuple):
    """``B``: a (non-streamed) transaction begins; its changes follow, then `Commit`."""

    final_lsn: int
    commit_ts: int
    xid: int

    @property
    def kind(self) -> Literal["B"]:
        return "B"

    @property
    def commit_ts_unix_us(self) -> int:
        return self.commit_ts + PG_EPOCH_OFFSET_US


class Commit(NamedTuple):
    """``C``: the transaction begun by the last `Begin` committed (flags are always 0)."""

    commit_lsn: int
    end_lsn: int
    commit_ts: int

    @property
    def kind(self) -> Literal["C"]:
        return "C"

    @property
    def commit_ts_unix_us(self) -> int:
        return self.commit_ts + PG_EPOCH_OFFSET_US


class Origin(NamedTuple):
    """``O``: the transaction came from replication origin ``name`` (LSN on the origin server)."""

    origin_lsn: int
    name: str

    @property
    def kind(self) -> Literal["O"]:
        return "O"


class Column(NamedTuple):
    """One column of a `Relation`; ``is_key`` marks replica identity (key) columns."""

    is_key: bool
    name: str
    type_oid: int
    type_modifier: int


class Relation(NamedTuple):
    """``R``: a table's description, sent before its first change (and again after DDL).

    ``replica_identity`` is ``"d"`` (default: primary key), ``"n"`` (nothing), ``"f"`` (full)
    or ``"i"`` (an index); ``namespace`` is empty for ``pg_catalog``.
    """

    xid: int | None
    oid: int
    namespace: str
    name: str
    replica_identity: str
    columns: tuple[Column, ...]

    @property
    def kind(self) -> Literal["R"]:
        return "R"


class Type(NamedTuple):
    """``Y``: a non-built-in data type used by a following `Relation`."""

    xid: int | None
    oid: int
    namespace: str
    name: str

    @property
    def kind(self) -> Literal["Y"]:
        return "Y"


class Insert(NamedTuple):
    """``I``: a row was inserted; ``new`` is the row."""

    xid: int | None
    relation_oid: int
    new: TupleData

    @property
    def kind(self) -> Literal["I"]:
        return "I"


class Update(NamedTuple):
    """``U``: a row was updated.

    ``old_kind`` is ``"K"`` when ``old`` holds only the old key (replica identity default/index
    and the key changed; non-key columns are None), ``"O"`` when it is the whole old row
    (replica identity full), or None when there is no old tuple. Columns of ``new`` may be
    `UNCHANGED_TOAST`.
    """

    xid: int | None
    relation_oid: int
    old_kind: str | None
    old: TupleData | None
    new: TupleData

    @property
    def kind(self) -> Literal["U"]:
        return "U"


class Delete(NamedTuple):
    """``D``: a row was deleted; ``old`` is its key (``old_kind`` ``"K"``) or row (``"O"``)."""

    xid: int | None
    relation_oid: int
    old_kind: str
    old: TupleData

    @property
    def kind(self) -> Literal["D"]:
        return "D"


class Truncate(NamedTuple):
    """``T``: tables were truncated together; ``options`` bit 1 CASCADE, bit 2 RESTART IDENTITY."""

    xid: int | None
    options: int
    relation_oids: tuple[int, ...]

    @property
    def kind(self) -> Literal["T"]:
        return "T"

    @property
    def cascade(self) -> bool:
        return bool(self.options & 1)

    @property
    def restart_identity(self) -> bool:
        return bool(self.options & 2)


class LogicalMessage(NamedTuple):
    """``M``: ``pg_logical_emit_message``; a non-transactional one arrives outside any transaction."""

    xid: int | None
    transactional: bool
    lsn: int
    prefix: str
    content: bytes

    @property
    def kind(self) -> Literal["M"]:
        return "M"


class StreamStart(NamedTuple):
    """``S``: a block of a large in-progress transaction's changes follows (protocol 2)."""

    xid: int
    first_segment: bool

    @property
    def kind(self) -> Literal["S"]:
        return "S"


class StreamStop(NamedTuple):
    """``E``: the current stream block ended."""

    @property
    def kind(self) -> Literal["E"]:
        return "E"


class StreamCommit(NamedTuple):
    """``c``: the streamed transaction ``xid`` committed (flags are always 0)."""

    xid: int
    commit_lsn: int
    end_lsn: int
    commit_ts: int

    @property
    def kind(self) -> Literal["c"]:
        return "c"

    @property
    def commit_ts_unix_us(self) -> int:
        return self.commit_ts + PG_EPOCH_OFFSET_US


class StreamAbort(NamedTuple):
    """``A``: streamed transaction ``xid`` aborted (``subxid == xid``) or one of its subtransactions."""

    xid: int
    subxid: int

    @property
    def kind(self) -> Literal["A"]:
        return "A"


Message: TypeAlias = (Begin | Commit | Origin | Relation | Type | Insert | Update | Delete | Truncate
                      | LogicalMessage | StreamStart | StreamStop | StreamCommit | StreamAbort)

# ---------------------------------------------------------------------------------------------
# Decoding

_NAMES = {
    66: "Begin", 67: "Commit", 79: "Origin", 82: "Relation", 89: "Type", 73: "Insert", 85: "Update",
    68: "Delete", 84: "Truncate", 77: "Message", 83: "Stream Start", 69: "Stream Stop",
    99: "Stream Commit", 65: "Stream Abort",
}

_U16 = Struct(">H").unpack_from
_U32 = Struct(">I").unpack_from
_U32U32 = Struct(">II").unpack_from
_I32 = Struct(">i").unpack_from
_KIND_LEN = Struct(">Bi").unpack_from  # a column's kind byte and Int32 length
_U64 = Struct(">Q").unpack_from
_COL_TAIL = Struct(">Ii").unpack_from  # type oid, type modifier
_MSG_HEAD = Struct(">BQ").unpack_from  # flags, lsn
_TRUNC_HEAD = Struct(">iB").unpack_from  # nrelations, options

_new = tuple.__new__


def _error(kind: str, field: str, offset: int, problem: str) -> ProtocolError:
    return ProtocolError(f"pgoutput {kind}: {field} at byte offset {offset}: {problem}",
                         kind, field, offset)


def _need(buf: bytes, pos: int, n: int, kind: str, field: str) -> None:
    """Raise unless ``n`` bytes are available at ``pos``."""
    if pos + n > len(buf):
        raise _error(kind, field, pos, f"truncated: needs {n} bytes, {len(buf) - pos} left")


def _finish(buf: bytes, pos: int, kind: str) -> None:
    """Raise if anything follows the end of the message at ``pos``."""
    if pos != len(buf):
        raise _error(kind, "end of message", pos, f"{len(buf) - pos} trailing bytes")


def _cstring(buf: bytes, pos: int, kind: str, field: str) -> tuple[str, int]:
    """A NUL-terminated UTF-8 string at ``pos`` and the offset after its terminator."""
    end = buf.find(b"\0", pos)
    if end < 0:
        raise _error(kind, field, pos, "unterminated string (no NUL before the end)")
    try:
        return buf[pos:end].decode(), end + 1
    except UnicodeDecodeError as exc:
        raise _error(kind, field, pos + exc.start, "invalid UTF-8") from None


def _flag(value: int, kind: str, field: str, offset: int) -> bool:
    if value > 1:
        raise _error(kind, field, offset, f"flag is {value}, expected 0 or 1")
    return value == 1


def _head(buf: bytes, in_stream: bool, kind: str, with_oid: bool) -> tuple[int | None, int, int]:
    """(xid or None, relation oid or 0, offset after them) for the xid-carrying kinds."""
    if in_stream:
        if with_oid:
            _need(buf, 1, 8, kind, "xid and relation oid")
            xid, oid = _U32U32(buf, 1)
            return xid, oid, 9
        _need(buf, 1, 4, kind, "xid")
        return _U32(buf, 1)[0], 0, 5
    if with_oid:
        _need(buf, 1, 4, kind, "relation oid")
        return None, _U32(buf, 1)[0], 5
    return None, 0, 1


def _tuple(buf: bytes, pos: int, kind: str, field: str) -> tuple[TupleData, int]:
    """TupleData at ``pos`` (Int16 column count, then the columns) and the offset after it."""
    size = len(buf)
    if pos + 2 > size:
        raise _error(kind, f"{field} column count", pos, f"truncated: needs 2 bytes, {size - pos} left")
    ncols = _U16(buf, pos)[0]
    pos += 2
    values: list[Value] = []
    append = values.append
    col = 0
    try:
        for col in range(ncols):
            if pos + 5 <= size:  # room for a kind byte and a length: read both at once
                k, n = _KIND_LEN(buf, pos)
            else:
                k = buf[pos]  # IndexError when the columns ran out
                n = -1
                if k == 116 or k == 98:
                    raise _error(kind, f"{field} column {col} length", pos + 1,
                                 f"truncated: needs 4 bytes, {size - pos - 1} left")
            if k == 116:  # 't': text
                start = pos + 5
                end = start + n
                if n < 0 or end > size:
                    raise _bad_length(kind, f"{field} column {col} length", pos + 1, n, size - start)
                append(buf[start:end].decode())
                pos = end
            elif k == 110:  # 'n': null
                append(None)
                pos += 1
            elif k == 117:  # 'u': unchanged TOAST
                append(UNCHANGED_TOAST)
                pos += 1
            elif k == 98:  # 'b': binary
                start = pos + 5
                end = start + n
                if n < 0 or end > size:
                    raise _bad_length(kind, f"{field} column {col} length", pos + 1, n, size - start)
                append(buf[start:end])
                pos = end
            else:
                raise _error(kind, f"{field} column {col} kind", pos,
                             f"unknown column kind {k:#04x} (expected n, u, t or b)")
    except IndexError:
        raise _error(kind, f"{field} column {col} kind", pos,
                     f"truncated: {ncols} columns announced, {col} present") from None
    except UnicodeDecodeError as exc:
        raise _error(kind, f"{field} column {col} text value", pos + 5 + exc.start, "invalid UTF-8") from None
    return tuple(values), pos


def _bad_length(kind: str, field: str, offset: int, n: int, left: int) -> ProtocolError:
    problem = f"negative length {n}" if n < 0 else f"length {n} runs past the end ({left} bytes left)"
    return _error(kind, field, offset, problem)


def _fixed(layout: tuple[tuple[str, int], ...]) -> tuple[int, tuple[tuple[str, int], ...]]:
    return sum(n for _, n in layout), layout


# The fixed-size messages' bodies after the type byte (`unpack_from(payload, 1)`); the replication
# reader frames the stream with the same structs.
BEGIN = Struct(">QqI")
"""Begin: final_lsn, commit_ts (PostgreSQL's epoch), xid."""
_BEGIN_LAYOUT = _fixed((("type", 1), ("final_lsn", 8), ("commit_ts", 8), ("xid", 4)))
COMMIT = Struct(">BQQq")
"""Commit: flags, commit_lsn, end_lsn, commit_ts."""
_COMMIT_LAYOUT = _fixed((("type", 1), ("flags", 1), ("commit_lsn", 8), ("end_lsn", 8), ("commit_ts", 8)))
STREAM_START = Struct(">IB")
"""Stream Start: xid, first_segment."""
_SSTART_LAYOUT = _fixed((("type", 1), ("xid", 4), ("first_segment", 1)))
_SSTOP_LAYOUT = _fixed((("type", 1),))
STREAM_COMMIT = Struct(">IBQQq")
"""Stream Commit: xid, flags, commit_lsn, end_lsn, commit_ts."""
_SCOMMIT_LAYOUT = _fixed((("type", 1), ("xid", 4), ("flags", 1), ("commit_lsn", 8), ("end_lsn", 8),
                          ("commit_ts", 8)))
STREAM_ABORT = Struct(">II")
"""Stream Abort: xid, subtransaction xid."""
_SABORT_LAYOUT = _fixed((("type", 1), ("xid", 4), ("subxid", 4)))


def _check_fixed(buf: bytes, kind: str, total_layout: tuple[int, tuple[tuple[str, int], ...]]) -> None:
    total, layout = total_layout
    size = len(buf)
    if size == total:
        return
    if size > total:
        raise _error(kind, "end of message", total, f"{size - total} trailing bytes")
    off = 0
    for name, n in layout:
        if off + n > size:
            raise _error(kind, name, off, f"truncated: needs {n} bytes, {size - off} left")
        off += n


def _begin(buf: bytes, in_stream: bool) -> Begin:
    _check_fixed(buf, "Begin", _BEGIN_LAYOUT)
    return _new(Begin, BEGIN.unpack_from(buf, 1))


def _commit(buf: bytes, in_stream: bool) -> Commit:
    _check_fixed(buf, "Commit", _COMMIT_LAYOUT)
    flags, commit_lsn, end_lsn, ts = COMMIT.unpack_from(buf, 1)
    if flags:
        raise _error("Commit", "flags", 1, f"flags are {flags}, expected 0")
    return _new(Commit, (commit_lsn, end_lsn, ts))


def _origin(buf: bytes, in_stream: bool) -> Origin:
    _need(buf, 1, 8, "Origin", "origin_lsn")
    name, pos = _cstring(buf, 9, "Origin", "name")
    _finish(buf, pos, "Origin")
    return _new(Origin, (_U64(buf, 1)[0], name))


def _relation(buf: bytes, in_stream: bool) -> Relation:
    kind = "Relation"
    xid, oid, pos = _head(buf, in_stream, kind, True)
    namespace, pos = _cstring(buf, pos, kind, "namespace")
    name, pos = _cstring(buf, pos, kind, "relation name")
    _need(buf, pos, 3, kind, "replica identity and column count")
    ident = buf[pos]
    if ident not in b"dnfi":
        raise _error(kind, "replica identity", pos, f"unknown replica identity {ident:#04x}")
    ncols = _U16(buf, pos + 1)[0]
    pos += 3
    columns = []
    for i in range(ncols):
        _need(buf, pos, 1, kind, f"column {i} flags")
        is_key = _flag(buf[pos], kind, f"column {i} flags", pos)
        col_name, pos = _cstring(buf, pos + 1, kind, f"column {i} name")
        _need(buf, pos, 8, kind, f"column {i} type oid and modifier")
        type_oid, typmod = _COL_TAIL(buf, pos)
        pos += 8
        columns.append(_new(Column, (is_key, col_name, type_oid, typmod)))
    _finish(buf, pos, kind)
    return _new(Relation, (xid, oid, namespace, name, chr(ident), tuple(columns)))


def _type(buf: bytes, in_stream: bool) -> Type:
    xid, oid, pos = _head(buf, in_stream, "Type", True)
    namespace, pos = _cstring(buf, pos, "Type", "namespace")
    name, pos = _cstring(buf, pos, "Type", "type name")
    _finish(buf, pos, "Type")
    return _new(Type, (xid, oid, namespace, name))


def _insert(buf: bytes, in_stream: bool) -> Insert:
    pos = 9 if in_stream else 5
    if len(buf) <= pos or buf[pos] != 78:  # no room for the header, or no 'N': say which
        _head(buf, in_stream, "Insert", True)
        _need(buf, pos, 1, "Insert", "tuple marker")
        raise _error("Insert", "tuple marker", pos, f"expected 'N', got {buf[pos]:#04x}")
    new, end = _tuple(buf, pos + 1, "Insert", "new tuple")
    if end != len(buf):
        _finish(buf, end, "Insert")
    if in_stream:
        return _new(Insert, (*_U32U32(buf, 1), new))
    return _new(Insert, (None, _U32(buf, 1)[0], new))


def _update(buf: bytes, in_stream: bool) -> Update:
    xid, oid, pos = _head(buf, in_stream, "Update", True)
    _need(buf, pos, 1, "Update", "tuple marker")
    marker = buf[pos]
    old_kind = old = None
    if marker == 75 or marker == 79:  # 'K' or 'O'
        old_kind = chr(marker)
        old, pos = _tuple(buf, pos + 1, "Update", "old tuple")
        _need(buf, pos, 1, "Update", "new tuple marker")
        marker = buf[pos]
    if marker != 78:
        raise _error("Update", "tuple marker", pos, f"expected 'K', 'O' or 'N', got {marker:#04x}")
    new, pos = _tuple(buf, pos + 1, "Update", "new tuple")
    _finish(buf, pos, "Update")
    return _new(Update, (xid, oid, old_kind, old, new))


def _delete(buf: bytes, in_stream: bool) -> Delete:
    xid, oid, pos = _head(buf, in_stream, "Delete", True)
    _need(buf, pos, 1, "Delete", "tuple marker")
    marker = buf[pos]
    if marker != 75 and marker != 79:
        raise _error("Delete", "tuple marker", pos, f"expected 'K' or 'O', got {marker:#04x}")
    old, pos = _tuple(buf, pos + 1, "Delete", "old tuple")
    _finish(buf, pos, "Delete")
    return _new(Delete, (xid, oid, chr(marker), old))


def _truncate(buf: bytes, in_stream: bool) -> Truncate:
    kind = "Truncate"
    xid, _, pos = _head(buf, in_stream, kind, False)
    _need(buf, pos, 5, kind, "relation count and options")
    count, options = _TRUNC_HEAD(buf, pos)
    if count < 0:
        raise _error(kind, "relation count", pos, f"negative count {count}")
    if options > 3:
        raise _error(kind, "options", pos + 4, f"unknown option bits {options:#04x}")
    pos += 5
    if len(buf) - pos != 4 * count:
        problem = f"{count} relation oids announced, {len(buf) - pos} bytes follow"
        raise _error(kind, "relation oids", pos, problem)
    oids = _unpack_from(f">{count}I", buf, pos)
    return _new(Truncate, (xid, options, oids))


def _message(buf: bytes, in_stream: bool) -> LogicalMessage:
    kind = "Message"
    xid, _, pos = _head(buf, in_stream, kind, False)
    _need(buf, pos, 9, kind, "flags and lsn")
    flags, lsn = _MSG_HEAD(buf, pos)
    transactional = _flag(flags, kind, "flags", pos)
    prefix, pos = _cstring(buf, pos + 9, kind, "prefix")
    _need(buf, pos, 4, kind, "content length")
    n = _I32(buf, pos)[0]
    if n < 0 or pos + 4 + n > len(buf):
        raise _bad_length(kind, "content length", pos, n, len(buf) - pos - 4)
    _finish(buf, pos + 4 + n, kind)
    return _new(LogicalMessage, (xid, transactional, lsn, prefix, buf[pos + 4:]))


def _stream_start(buf: bytes, in_stream: bool) -> StreamStart:
    _check_fixed(buf, "Stream Start", _SSTART_LAYOUT)
    xid, first = STREAM_START.unpack_from(buf, 1)
    return _new(StreamStart, (xid, _flag(first, "Stream Start", "first_segment", 5)))


_STREAM_STOP = _new(StreamStop, ())


def _stream_stop(buf: bytes, in_stream: bool) -> StreamStop:
    _check_fixed(buf, "Stream Stop", _SSTOP_LAYOUT)
    return _STREAM_STOP


def _stream_commit(buf: bytes, in_stream: bool) -> StreamCommit:
    _check_fixed(buf, "Stream Commit", _SCOMMIT_LAYOUT)
    xid, flags, commit_lsn, end_lsn, ts = STREAM_COMMIT.unpack_from(buf, 1)
    if flags:
        raise _error("Stream Commit", "flags", 5, f"flags are {flags}, expected 0")
    return _new(StreamCommit, (xid, commit_lsn, end_lsn, ts))


def _stream_abort(buf: bytes, in_stream: bool) -> StreamAbort:
    _check_fixed(buf, "Stream Abort", _SABORT_LAYOUT)
    return _new(StreamAbort, STREAM_ABORT.unpack_from(buf, 1))


_DECODERS: dict[int, Any] = {
    66: _begin, 67: _commit, 79: _origin, 82: _relation, 89: _type, 73: _insert, 85: _update,
    68: _delete, 84: _truncate, 77: _message, 83: _stream_start, 69: _stream_stop,
    99: _stream_commit, 65: _stream_abort,
}


def _unknown(buf: bytes) -> ProtocolError:
    if not buf:
        return ProtocolError("pgoutput: type at byte offset 0: empty payload", None, "type", 0)
    return ProtocolError(f"pgoutput: type at byte offset 0: unknown message type {buf[0]:#04x}"
                         f" ({chr(buf[0])!r})", None, "type", 0)


def decode(payload: bytes | bytearray | memoryview, in_stream: bool = False) -> Message:
    """Decode one pgoutput message.

    ``in_stream`` must be true for messages between Stream Start and Stream Stop (their data,
    relation, type and message messages carry an xid). Raises `ProtocolError` for anything that
    is not exactly one well-formed message.
    """
    if type(payload) is not bytes:
        payload = bytes(payload)
    fn = _DECODERS.get(payload[0] if payload else -1)
    if fn is None:
        raise _unknown(payload)
    return fn(payload, in_stream)


_OID_KINDS = frozenset(b"IUDR")


def peek(payload: bytes, in_stream: bool = False) -> tuple[str, int | None]:
    """(kind, relation oid) without decoding: the oid for Insert/Update/Delete/Relation, else None.

    Only the type byte and the oid are checked; `decode` validates the rest.
    """
    kind = payload[0] if payload else -1
    if kind not in _DECODERS:
        raise _unknown(payload)
    if kind not in _OID_KINDS:
        return chr(kind), None
    pos = 5 if in_stream else 1
    if len(payload) < pos + 4:
        name = _NAMES[kind]
        raise _error(name, "relation oid", pos, f"truncated: needs 4 bytes, {len(payload) - pos} left")
    return chr(kind), _U32(payload, pos)[0]


_XID_AT_1 = frozenset(b"ScA")
_STREAMED_XID_AT_1 = _XID_AT_1 | frozenset(map(ord, STREAM_XID_KINDS))


def peek_xid(payload: bytes, in_stream: bool = False) -> int | None:
    """The transaction id a message carries, without decoding it, or None if it carries none.

    Begin, Stream Start, Stream Commit and Stream Abort always carry one; inside a stream block
    (``in_stream``) so do Relation, Type, Insert, Update, Delete, Truncate and Message.
    """
    kind = payload[0] if payload else -1
    if kind not in _DECODERS:
        raise _unknown(payload)
    if kind in (_STREAMED_XID_AT_1 if in_stream else _XID_AT_1):
        pos = 1
    elif kind == 66:
        pos = 17
    else:
        return None
    if len(payload) < pos + 4:
        raise _error(_NAMES[kind], "xid", pos, f"truncated: needs 4 bytes, {len(payload) - pos} left")
    return _U32(payload, pos)[0]


# ---------------------------------------------------------------------------------------------
# LSNs

_LSN_RE = re.compile(r"([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})")


def lsn_to_str(lsn: int | None) -> str | None:
    """64-bit LSN -> PostgreSQL's text form, e.g. ``0/16B3748``; None stays None."""
    if lsn is None:
        return None
    if not 0 <= lsn < 1 << 64:
        raise ValueError(f"LSN out of range: {lsn}")
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


@overload
def str_to_lsn(text: str) -> int: ...
@overload
def str_to_lsn(text: None) -> None: ...
def str_to_lsn(text: str | None) -> int | None:
    """PostgreSQL's text form of an LSN (``0/16B3748``) -> 64-bit int; None (SQL NULL) stays None."""
    if text is None:
        return None
    m = _LSN_RE.fullmatch(text)
    if m is None:
        raise ValueError(f"not an LSN: {text!r}")
    return int(m.group(1), 16) << 32 | int(m.group(2), 16)
