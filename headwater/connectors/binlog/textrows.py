"""A SELECT's rows as the server sends them (the text protocol), read in bulk and cut into columns with numpy.

PyMySQL reads a result set row by row in Python: a packet object per row and a `str` per value, about
half of a snapshot's CPU. `read_text_rows` sends the query on a PyMySQL connection, reads the column
descriptions through PyMySQL, then takes the row packets straight from the socket a megabyte at a time
into one buffer, noting where each row starts (one short Python step per row, the only per-row work on
the reading side). `TextRows` keeps that buffer and pickles as it (about the size of the rows as text):
`columns()` walks every row at once, one numpy step per column (each value is a length-encoded string,
or 0xFB for NULL), and makes each column one Arrow array over the buffer: `string` for text, `binary`
for a column of the binary character set (as PyMySQL decodes: a BINARY/BLOB/BIT/spatial value is bytes,
every other value text in the connection's character set, utf8mb4). `tuples()` gives the rows exactly as
a PyMySQL cursor does with `snapshot.TEXT_VALUES` (str, bytes, None), for the row-wise paths. Pickled,
the buffer is compressed with zstd.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pymysql
from pymysql.connections import TEXT_TYPES, FieldDescriptorPacket
from pymysql.constants import COMMAND, FIELD_TYPE

from headwater.events.arrays import byte_spans

READ_SIZE = 1 << 20  # bytes asked of the socket at once
MAX_PACKET = 0xFFFFFF  # a payload this long continues in the next packet
BINARY_CHARSET = 63
COMPRESS_FROM = 64 << 10  # bytes of rows from which a pickled TextRows is compressed


@dataclass
class TextRows:
    """Rows of a result set: `data` holds them as sent (with the packet headers between them), `starts` each
    row's first byte; `binary[j]`: column j's values are bytes (else text)."""

    data: bytes | bytearray
    starts: np.ndarray  # int64, one per row, increasing
    binary: tuple[bool, ...]

    def __len__(self) -> int:
        return len(self.starts)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a chunk for a Spark executor) with the buffer compressed (zstd: ~2.5x on text rows, which
        Spark's JVM holds for every partition of a batch at once)."""
        data = self.data
        if len(data) < COMPRESS_FROM:
            return {**self.__dict__, "data": bytes(data), "size": None}
        return {**self.__dict__, "data": pa.compress(data, codec="zstd", asbytes=True), "size": len(data)}

    def __setstate__(self, state: dict[str, Any]) -> None:
        size = state.pop("size")
        if size is not None:
            state["data"] = pa.decompress(state["data"], size, codec="zstd", asbytes=True)
        self.__dict__.update(state)

    def slice(self, start: int, stop: int) -> TextRows:
        """Rows [start, stop) (the same buffer)."""
        return TextRows(self.data, self.starts[start:stop], self.binary)

    def _walk(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per column, each row's value offset, length and NULL flag ((columns, rows) arrays); the buffer as uint8."""
        buf = np.frombuffer(self.data, dtype=np.uint8)
        n, ncols = len(self.starts), len(self.binary)
        offsets = np.empty((ncols, n), dtype=np.int64)
        lengths = np.empty((ncols, n), dtype=np.int64)
        nulls = np.empty((ncols, n), dtype=bool)
        pos = self.starts.copy()
        for j in range(ncols):
            first = buf[pos]
            if (first < 0xFB).all():  # (the common case: no NULL, every value shorter than 251 bytes)
                offsets[j] = pos + 1
                lengths[j] = first
                nulls[j] = False
                pos = offsets[j] + lengths[j]
                continue
            first = first.astype(np.int64)
            null = first == 0xFB
            length = np.where(first < 0xFB, first, 0)
            prefix = np.ones(n, dtype=np.int64)
            for marker, size in ((0xFC, 2), (0xFD, 3), (0xFE, 8)):
                wide = first == marker
                if wide.any():
                    at = pos[wide]
                    value = np.zeros(len(at), dtype=np.int64)
                    for b in range(size):
                        value |= buf[at + 1 + b].astype(np.int64) << (8 * b)
                    length[wide] = value
                    prefix[wide] = 1 + size
            offsets[j] = np.where(null, pos + 1, pos + prefix)
            lengths[j] = length
            nulls[j] = null
            pos = offsets[j] + length
        return offsets, lengths, nulls, buf

    def columns(self) -> list[pa.Array]:
        """Every column as one Arrow array: `string` (text) or `binary`, NULL as null. ValueError: text that is
        not UTF-8."""
        offsets, lengths, nulls, _ = self._walk()
        return [spans if b else spans.cast(pa.string())
                for j, b in enumerate(self.binary)
                for spans in (byte_spans(self.data, offsets[j], lengths[j], nulls[j]),)]

    def tuples(self, ncols: int | None = None) -> list[tuple[Any, ...]]:
        """The rows (their first `ncols` columns) as a PyMySQL cursor gives them: str, bytes or None."""
        columns = self.columns()[:ncols]
        return list(zip(*(c.to_pylist() for c in columns), strict=True)) if columns else [() for _ in self.starts]


def _is_binary(field: FieldDescriptorPacket) -> bool:
    """Whether PyMySQL gives this column's values as bytes (a text type of the binary character set)."""
    return field.type_code != FIELD_TYPE.JSON and field.type_code in TEXT_TYPES and field.charsetnr == BINARY_CHARSET


def read_text_rows(conn: pymysql.Connection, sql: str, args: Sequence[Any] | None = None) -> TextRows:
    """Run the SELECT `sql` (with `args` as a PyMySQL cursor binds them) and read all its rows."""
    return RowStream(conn, sql, args).take()


class RowStream:
    """The rows of the SELECT `sql` read as the server sends them (unbuffered), `take(n)` at a time. The
    connection is busy until they are all taken (`done`) or the rest is read and dropped (`drain`)."""

    def __init__(self, conn: pymysql.Connection, sql: str, args: Sequence[Any] | None = None):
        if args:
            sql = sql % tuple(conn.escape(a) for a in args)
        self.conn = conn
        conn._execute_command(COMMAND.COM_QUERY, sql)
        head = conn._read_packet()
        self.packets: RowPackets | None = None
        self.binary: tuple[bool, ...] = ()
        if head.is_ok_packet():  # not a result set
            return
        ncols = head.read_length_encoded_integer()
        fields = [conn._read_packet(FieldDescriptorPacket) for _ in range(ncols)]
        if not conn._read_packet().is_eof_packet():
            raise pymysql.err.InternalError("Protocol error, expecting EOF after the column descriptions")
        self.binary = tuple(_is_binary(f) for f in fields)
        self.packets = RowPackets(conn._rfile, conn._next_seq_id)

    @property
    def done(self) -> bool:
        """Every row was taken: the connection is free."""
        return self.packets is None or self.packets.done

    def take(self, limit: int | None = None) -> TextRows:
        """The next `limit` rows (fewer at the end; None: all that are left)."""
        packets = self.packets
        if packets is None:
            return TextRows(b"", np.zeros(0, dtype=np.int64), self.binary)
        buf, starts = packets.take(limit)
        if packets.done:
            self.conn._next_seq_id = packets.seq
        return TextRows(buf, np.array(starts, dtype=np.int64), self.binary)

    def drain(self, step: int = 10_000) -> None:
        """Read the rows left and drop them (the connection can run another query then)."""
        while not self.done:
            self.take(step)


_HEADER = struct.Struct("<I").unpack_from  # a packet header: the payload's length (24 bits), its sequence id
MIN_ROW = 9  # a shorter packet may be the EOF that ends the rows (0xFE first): looked at one by one


def _row_packets(rfile: Any, seq: int) -> tuple[bytearray, list[int], int]:
    """All the row packets up to the result set's closing EOF: the buffer, each row's start, the next sequence id."""
    packets = RowPackets(rfile, seq)
    buf, starts = packets.take()
    return buf, starts, packets.seq


class RowPackets:
    """A result set's row packets read from the socket's file `rfile` (the next packet's sequence id `seq`),
    `take(n)` rows at a time; `done` once the rows taken reach the result set's closing EOF.

    The rows received are walked with the fewest steps per row (a row is its packet's length, one step
    per row being the only per-row work on the reading side); their sequence ids and first bytes (an
    error packet's 0xFF) are then checked at once, before more is read. What the walk leaves (a packet
    not all received, a short one that may be the EOF, a row of 16 MiB or more) is taken one by one.
    Rows are walked past the `n` taken (to the end of what was received, and at least one more row or
    the EOF: so `done` is known when the last row is taken); they are taken from the buffer later."""

    def __init__(self, rfile: Any, seq: int):
        self.rfile = rfile
        self.seq = seq  # the next packet's sequence id
        self.buf = bytearray()  # from the first row not taken
        self.starts: list[int] = []  # each walked row's first byte in `buf` (none taken)
        self.at = 0  # where the next packet to walk starts
        self.ended = False  # the EOF was read (the rows walked are the last)

    @property
    def done(self) -> bool:
        return self.ended and not self.starts

    def take(self, limit: int | None = None) -> tuple[bytearray, list[int]]:
        """The next `limit` rows (None: all that are left): a buffer and each row's start in it."""
        if not self.ended and (limit is None or len(self.starts) <= limit):
            self._read(limit)
        starts = self.starts
        if limit is None or len(starts) <= limit:  # (the EOF was read: these are the last rows)
            buf, self.buf, self.starts, self.at = self.buf, bytearray(), [], 0
            return buf, starts
        cut = starts[limit] - 4  # the next row's packet: the rows walked past the limit stay
        buf = self.buf[:cut]
        del self.buf[:cut]
        self.starts = [s - cut for s in starts[limit:]]
        self.at -= cut
        return buf, starts[:limit]

    def _read(self, limit: int | None) -> None:
        """Walk rows until more than `limit` are walked (None: to the EOF)."""
        rfile, buf, starts, at, seq = self.rfile, self.buf, self.starts, self.at, self.seq
        append = starts.append
        checked = len(starts)
        while limit is None or len(starts) <= limit:
            stop = len(buf) - 4  # (the last place a header may start)
            while at <= stop:  # the walk: whole packets of MIN_ROW bytes to less than MAX_PACKET
                n = buf[at] | buf[at + 1] << 8 | buf[at + 2] << 16  # (~20 % cheaper than a struct's unpack)
                if n < MIN_ROW or n == MAX_PACKET or at + n > stop:
                    break
                append(at + 4)
                at += n + 4
            if checked < len(starts):
                seq = _check_rows(buf, starts, checked, seq)
                checked = len(starts)
                if limit is not None and len(starts) > limit:
                    break
            if len(buf) < at + 4:
                _fill(rfile, buf)
                continue
            header, = _HEADER(buf, at)
            n = header & MAX_PACKET
            if len(buf) < at + 4 + n or not n:
                if not n:
                    raise pymysql.err.InternalError("an empty packet in a result set")
                _fill(rfile, buf)
                continue
            if header >> 24 != seq:
                raise pymysql.err.InternalError(f"Packet sequence number wrong - got {header >> 24} expected {seq}")
            seq = (seq + 1) & 255
            if n < MIN_ROW and buf[at + 4] == 0xFE:  # EOF: the end of the rows
                if len(buf) > at + 4 + n:
                    raise pymysql.err.InternalError("data after the end of a result set")
                del buf[at:]
                self.ended = True
                break
            if buf[at + 4] == 0xFF:
                pymysql.err.raise_mysql_exception(bytes(buf[at + 4:at + 4 + n]))
            if n == MAX_PACKET:  # a row of 16 MiB or more: its next packets continue it (their headers dropped)
                end = at + 4 + n
                while True:
                    while len(buf) < end + 4:
                        _fill(rfile, buf)
                    header, = _HEADER(buf, end)
                    more = header & MAX_PACKET
                    if header >> 24 != seq:
                        raise pymysql.err.InternalError(
                            f"Packet sequence number wrong - got {header >> 24} expected {seq}")
                    seq = (seq + 1) & 255
                    del buf[end:end + 4]
                    while len(buf) < end + more:
                        _fill(rfile, buf)
                    end += more
                    if more < MAX_PACKET:
                        break
                append(at + 4)
                at = end
            else:
                append(at + 4)
                at += 4 + n
            checked = len(starts)
        self.at, self.seq = at, seq


def _check_rows(buf: bytearray, starts: list[int], first: int, seq: int) -> int:
    """Check the walked rows from `starts[first]` on: each packet's sequence id follows the one before (the
    first `seq`) and none is an error packet (raised as PyMySQL raises it); the next sequence id."""
    at = np.array(starts[first:], dtype=np.int64)
    view = np.frombuffer(buf, dtype=np.uint8)  # (a view: gone before the buffer grows again)
    got = view[at - 1]  # the header's last byte
    want = (seq + np.arange(len(at))) & 255
    wrong = got != want
    error = view[at] == 0xFF
    del view
    bad = np.flatnonzero(wrong | error)
    if len(bad):
        i = int(bad[0])
        if wrong[i]:
            raise pymysql.err.InternalError(f"Packet sequence number wrong - got {got[i]} expected {want[i]}")
        row = int(at[i])
        pymysql.err.raise_mysql_exception(bytes(buf[row:row + (_HEADER(buf, row - 4)[0] & MAX_PACKET)]))
    return int(seq + len(at)) & 255


def _fill(rfile: Any, buf: bytearray) -> None:
    chunk = rfile.read1(READ_SIZE)
    if not chunk:
        raise pymysql.err.OperationalError(2013, "Lost connection to server during query")
    buf += chunk
