"""The binlog client: a thread on the driver reading the server's binlog into the shared `StreamBuffer`.

`BinlogReader` connects as a replica (`database.server.id`), asks for the binlog from a file and
position, or from the GTID state of the position (MariaDB: COM_BINLOG_DUMP with its connect state,
annotate events (with `include.query`) and GTIDs; MySQL: COM_BINLOG_DUMP_GTID with its GTID set,
`gtid.py`), with a heartbeat period so an idle stream still says where it is, and frames what comes:
each event kept (rows, TABLE_MAP, QUERY, and with `include.query` annotate / rows-query events) is kept raw, behind its
type byte (`framing.py`), grouped into transactions (GTID or BEGIN to XID or COMMIT; a DDL
statement is a transaction of its own). Rows events are the data messages, TABLE_MAP events the
layouts. The GTID state after each transaction is kept for the offsets (`gtid_after`: a snapshot of
the running state, `gtid.GtidTracker`, made text only where an offset needs it).

A lost connection is retried from the end of the last whole transaction received
(`errors.max.retries`, `retriable.restart.connector.wait.ms` apart); a position the server no
longer has (its binlog file purged) stops the reader with `PositionLost`.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
from dataclasses import dataclass

import pymysql

from headwater.connectors.binlog import framing as fr
from headwater.connectors.binlog.connection import ConnectionParams, clean, connect
from headwater.connectors.binlog.gtid import (
    COM_BINLOG_DUMP_GTID,
    GtidFormat,
    GtidTracker,
    MariaTracker,
    MySqlGtids,
    dump_gtid_payload,
)
from headwater.connectors.binlog.positions import BinlogPosition, split_pos, stream_pos
from headwater.connectors.common.txbuffer import StreamBuffer, Txn
from headwater.connectors.errors import ConnectError, PositionLost, SourceError

log = logging.getLogger("headwater.binlog")
unpack_header = fr.HEADER.unpack_from

COM_BINLOG_DUMP = 0x12
BINLOG_SEND_ANNOTATE_ROWS_EVENT = 2
HEARTBEAT_S = 1.0
FLUSH_EVERY = 512  # messages received before they are handed to the buffer (fewer lock round trips)
READ_SIZE = 1 << 20  # bytes asked of the socket at once
MAX_PACKET = 0xFFFFFF  # a payload this long continues in the next packet
FORGET_SLACK = 4096  # transactions trimmed from the buffer before their GTIDs are dropped
PURGED = 1236  # ER_MASTER_FATAL_ERROR_READING_BINLOG: the position asked for is gone


@dataclass
class Retry:
    """How a lost connection is retried: `errors.max.retries` (-1: forever), the wait between tries."""

    retries: int = -1
    wait_s: float = 10.0


class _Restart(Exception):
    """The planner asked for another position (or the reader is closing)."""


class Packets:
    """The replication stream's packets, read from the connection's socket a megabyte at a time (where
    pymysql makes two reads of its buffered file and a packet object for each) and split here; the
    payload of an error packet is raised as pymysql raises it."""

    def __init__(self, conn: pymysql.Connection):
        if conn._sock.gettimeout() != conn._read_timeout:
            conn._sock.settimeout(conn._read_timeout)
        self.rfile = conn._rfile  # (anything it holds already is read first)
        self.seq = conn._next_seq_id
        self.data = b""
        self.at = 0

    def buffered(self) -> bool:
        """Whether a whole packet is here without reading the socket."""
        left = len(self.data) - self.at
        return left >= 4 and left >= 4 + int.from_bytes(self.data[self.at:self.at + 3], "little")

    def _fill(self, need: int) -> None:
        """At least `need` bytes from `at` on."""
        while len(self.data) - self.at < need:
            chunk = self.rfile.read1(max(READ_SIZE, need))
            if not chunk:
                raise pymysql.err.OperationalError(2013, "Lost connection to server during query")
            self.data = self.data[self.at:] + chunk
            self.at = 0

    def next(self) -> bytes:
        data, at = self.data, self.at
        if len(data) - at >= 4:  # the usual case: a whole packet of one part here, not an error
            n = data[at] | data[at + 1] << 8 | data[at + 2] << 16
            end = at + 4 + n
            if end <= len(data) and n < MAX_PACKET and data[at + 3] == self.seq and n and data[at + 4] != 0xFF:
                self.seq = (self.seq + 1) & 255
                self.at = end
                return data[at + 4:end]
        return self._next()

    def _next(self) -> bytes:
        parts = []
        while True:
            self._fill(4)
            at = self.at
            n = int.from_bytes(self.data[at:at + 3], "little")
            seq = self.data[at + 3]
            if seq != self.seq:
                if seq == 0:  # MariaDB sends an error packet numbered 0 when it shuts down
                    raise pymysql.err.OperationalError(2013, "Lost connection to server during query")
                raise pymysql.err.InternalError(f"Packet sequence number wrong - got {seq} expected {self.seq}")
            self.seq = (seq + 1) % 256
            self._fill(4 + n)
            at = self.at
            parts.append(self.data[at + 4:at + 4 + n])
            self.at = at + 4 + n
            if n < MAX_PACKET:
                break
        payload = parts[0] if len(parts) == 1 else b"".join(parts)
        if payload[:1] == b"\xff":
            pymysql.err.raise_mysql_exception(payload)
        return payload


class BinlogReader:
    """Reads the binlog from a position into `buffer`, on a thread."""

    def __init__(self, params: ConnectionParams, server_id: int, gtids: GtidFormat, mariadb: bool,
                 buffer_bytes: int, retry: Retry, queries: bool = True):
        self.params = params
        self.queries = queries  # keep the statements of rows events (include.query): annotate / rows-query events
        self.server_id = server_id
        self.gtids = gtids
        self.mariadb = mariadb
        self.retry = retry
        self.buffer = StreamBuffer(buffer_bytes, fr.BinlogKinds())
        # a transaction (its begin stream position) -> GTID state after it, and its GTID and thread: for the
        # transactions in the buffer (those the planner trimmed are dropped in bulk, FORGET_SLACK at a time)
        self.gtid_after: dict[int, object] = {}
        self.tracker: GtidTracker | None = None  # the running GTID state of the connection (`gtid_text` reads it)
        self.txn_info: dict[int, tuple[str | None, int | None]] = {}
        self.error: BaseException | None = None
        self.want: BinlogPosition | None = None  # where the next connection starts
        self.generation = 0
        self.stopping = threading.Event()
        self.conn: pymysql.Connection | None = None
        self.thread: threading.Thread | None = None

    # ---- the planner's side (StreamReader)
    def start(self, at: BinlogPosition) -> None:
        self.restart(at)
        self.thread = threading.Thread(target=self._run, name="binlog-reader", daemon=True)
        self.thread.start()

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def request_position(self) -> None:
        """Nothing to ask: the server's heartbeats move `buffer.received` while the stream is idle."""

    def restart(self, at: BinlogPosition) -> None:
        buf = self.buffer
        with buf.cond:
            self.generation += 1
            buf.txns, buf.nbytes, buf.received, buf.head_layouts = [], 0, at.stream, {}
            self.gtid_after, self.txn_info = {}, {}
            self.want = BinlogPosition(at.file, at.pos, at.gtids)
            self._interrupt()
            buf.cond.notify_all()

    def gtid_text(self, xid: int, default: str = "") -> str:
        """The GTID state after transaction `xid` as text (`default` if it is not known)."""
        snapshot = self.gtid_after.get(xid)
        tracker = self.tracker
        return default if snapshot is None or tracker is None else tracker.text(snapshot)

    def close(self) -> None:
        self.stopping.set()
        with self.buffer.cond:
            self._interrupt()
            self.buffer.cond.notify_all()
        if self.thread is not None:
            self.thread.join(timeout=10)

    def _interrupt(self) -> None:
        conn = self.conn
        if conn is not None and conn._sock is not None:
            with contextlib.suppress(OSError):
                conn._sock.shutdown(socket.SHUT_RDWR)

    # ---- the thread
    def _run(self) -> None:
        failures = 0
        try:
            while not self.stopping.is_set():
                with self.buffer.cond:
                    gen, at = self.generation, self.want
                assert at is not None
                try:
                    self._stream(gen, at)
                except _Restart:
                    failures = 0
                except (pymysql.err.MySQLError, OSError, ConnectError) as exc:
                    if self.stopping.is_set():
                        return
                    with self.buffer.cond:
                        if gen != self.generation:
                            continue  # interrupted by a restart
                    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else 0
                    if code == PURGED:
                        raise PositionLost(f"the server no longer has binlog position {at.file}:{at.pos} "
                                           f"({clean(exc, self.params)})") from None
                    failures += 1
                    if 0 <= self.retry.retries < failures:
                        raise SourceError(f"lost the binlog connection ({self.params.where()}): "
                                          f"{clean(exc, self.params)}") from None
                    log.warning("binlog connection lost (%s); reconnecting in %.1f s",
                                clean(exc, self.params), self.retry.wait_s)
                    self._resume_after_loss(gen)
                    self.stopping.wait(self.retry.wait_s)
        except BaseException as exc:  # noqa: BLE001 - handed to the planner through check()
            self.error = exc
        finally:
            self._close_conn()
            with self.buffer.cond:
                self.buffer.cond.notify_all()

    def _resume_after_loss(self, gen: int) -> None:
        """Continue after the last whole transaction received (incomplete ones come again)."""
        buf = self.buffer
        with buf.cond:
            if gen != self.generation or self.want is None:
                return
            buf.reset_incomplete()
            last = buf.txns[-1] if buf.txns else None
            if last is not None and last.end_pos is not None:
                file, pos = split_pos(self.want.file, last.end_pos)
                self.want = BinlogPosition(file, pos, self.gtid_text(last.xid or 0, self.want.gtids))
            elif buf.received > self.want.stream:
                file, pos = split_pos(self.want.file, buf.received)
                self.want = BinlogPosition(file, pos, self.want.gtids)

    def _close_conn(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def _dump(self, at: BinlogPosition) -> pymysql.Connection:
        """A connection streaming the binlog from `at` (MariaDB: from its GTID state when it has one, as
        Debezium's MariaDB connector does; else from its file and position); notes whether events carry a
        checksum."""
        conn = connect(self.params, initial_statements=False, read_timeout=10 * HEARTBEAT_S)
        with conn.cursor() as cur:
            cur.execute("SELECT @@global.binlog_checksum")
            row = cur.fetchone()
            self.checksum = bool(row and row[0] and str(row[0]).upper() != "NONE")
            cur.execute("SET @master_binlog_checksum = @@global.binlog_checksum")
            cur.execute("SET @master_heartbeat_period = %s", (int(HEARTBEAT_S * 1e9),))
            if self.mariadb:
                cur.execute("SET @mariadb_slave_capability = 4")
            by_gtid = False
            by_gtid = self.mariadb and bool(at.gtids)
            if by_gtid:  # MariaDB finds the position of the GTID state itself (also on another server)
                cur.execute("SET @slave_connect_state = %s", (at.gtids,))
                cur.execute("SET @slave_gtid_strict_mode = 1")
            elif at.gtids and isinstance(self.gtids, MySqlGtids):  # MySQL too, from the set Debezium asks for
                cur.execute("SELECT @@global.gtid_executed, @@global.gtid_purged")
                executed, purged = cur.fetchone()
                gtid_set = self.gtids.dump_set(at.gtids, str(executed or ""), str(purged or ""))
                conn._execute_command(COM_BINLOG_DUMP_GTID, dump_gtid_payload(self.server_id, gtid_set))
                return conn
        file, pos = (b"", 4) if by_gtid else (at.file.encode(), at.pos)
        flags = BINLOG_SEND_ANNOTATE_ROWS_EVENT if self.mariadb and self.queries else 0
        payload = struct.pack("<IHI", pos, flags, self.server_id) + file
        conn._execute_command(COM_BINLOG_DUMP, payload)
        return conn

    def _stream(self, gen: int, at: BinlogPosition) -> None:
        self._close_conn()
        conn = self._dump(at)
        with self.buffer.cond:
            # close() sets `stopping` and then interrupts self.conn under this lock: a close while the
            # connection was being made found none to interrupt, and an idle stream would hold this
            # thread in a read (and close() in its join) until the join's timeout
            if gen != self.generation or self.stopping.is_set():
                conn.close()
                raise _Restart
            self.conn = conn
        file = at.file
        gtids = self.tracker = self.gtids.tracker(at.gtids)
        base = stream_pos(file, 0)  # the file's stream positions: base | position
        txn: Txn | None = None
        txn_gtid: str | None = None
        thread: int | None = None
        standalone = False  # the open transaction is one statement (no BEGIN)
        pending: list[tuple[int, bytes]] = []
        pending_data = pending_bytes = 0
        done: list[_Part] = []  # whole transactions received, handed on together when the socket has no more
        tail = 4 if self.checksum else 0  # the checksum after each event, cut off
        buf = self.buffer
        packets = Packets(conn)
        kept = fr.ROWS_EVENTS | {fr.TABLE_MAP} | ({fr.MARIADB_ANNOTATE_ROWS, fr.ROWS_QUERY} if self.queries else set())
        rows_events = fr.ROWS_EVENTS
        gtid_kinds = (fr.MARIADB_GTID, fr.GTID, fr.ANONYMOUS_GTID)
        type_bytes = [bytes((k,)) for k in range(256)]
        size_field = struct.Struct("<I").pack
        stopping = self.stopping.is_set
        add_ids = gtids.add_ids if isinstance(gtids, MariaTracker) else None
        txn_ids: tuple[int, int, int] | None = None  # the open transaction's MariaDB GTID as numbers
        quiet = 0  # events since the last look at `stopping`
        # `Packets.next` inlined (a packet of one part, whole in the chunk read, not an error): the
        # packet is src[po:end] (its OK byte, then the event), read in place where it is in the chunk
        chunk, pat, seq = packets.data, packets.at, packets.seq
        while True:
            left = len(chunk) - pat
            if left >= 4:
                n = chunk[pat] | chunk[pat + 1] << 8 | chunk[pat + 2] << 16
                whole = left >= 4 + n
            else:
                n, whole = 0, False
            if done:  # handed on when the socket has no more (or enough of them wait)
                if not whole or len(done) >= FLUSH_EVERY:
                    if stopping():
                        raise _Restart
                    self._flush(gen, done)
                    done = []
            else:
                quiet += 1
                if quiet >= 256:
                    quiet = 0
                    if stopping():
                        raise _Restart
            if whole and n and n < MAX_PACKET and chunk[pat + 3] == seq and chunk[pat + 4] != 0xFF:
                seq = (seq + 1) & 255
                src, po = chunk, pat + 4
                pat = end = po + n
            else:
                packets.at, packets.seq = pat, seq
                src = packets._next()
                chunk, pat, seq = packets.data, packets.at, packets.seq
                po, end = 0, len(src)
            if src[po] == 0xFE and end - po < 9:
                raise SourceError("the server ended the binlog stream")
            timestamp, kind, _, size, next_pos, _ = unpack_header(src, po + 1)
            start = base | (next_pos - size if next_pos else 4)
            if kind in kept:
                if txn is None:
                    continue  # (not inside an event group: nothing a connector captures)
                # framed: the type byte, then the event without its checksum, its size field saying so
                pending.append((start, type_bytes[kind] + src[po + 1:end] if not tail else
                                b"".join((type_bytes[kind], src[po + 1:po + 10], size_field(end - po - 5),
                                          src[po + 14:end - 4]))))
                pending_bytes += end - po - tail  # (the framed payload's size)
                if kind in rows_events:
                    pending_data += 1
                if len(pending) < FLUSH_EVERY:
                    continue
                ends = False
            elif kind == fr.XID:
                ends = True
            elif kind in gtid_kinds:
                if kind == fr.MARIADB_GTID:
                    domain, server, number, standalone = fr.mariadb_gtid_at(src, po + 1)
                    txn_gtid, txn_ids = f"{domain}-{server}-{number}", (domain, server, number)
                else:
                    txn_gtid, standalone = (fr.mysql_gtid(src[po + 1:end]) if kind == fr.GTID else None), True
                    txn_ids = None
                txn, thread = Txn(start, start, start, timestamp * 1_000_000), None
                continue
            elif kind == fr.QUERY:
                framed = type_bytes[kind] + src[po + 1:end] if not tail else \
                    b"".join((type_bytes[kind], src[po + 1:po + 10], size_field(end - po - 5), src[po + 14:end - 4]))
                q = fr.query(framed[1:])
                word = q.sql.strip().upper()
                if word == "BEGIN":
                    if txn is None:
                        txn, txn_gtid, txn_ids = Txn(start, start, start, timestamp * 1_000_000), None, None
                    standalone, thread = False, q.thread
                    continue
                if word in ("COMMIT", "ROLLBACK"):
                    ends = True
                else:
                    if txn is None:
                        txn, txn_gtid, txn_ids, standalone = \
                            Txn(start, start, start, timestamp * 1_000_000), None, None, True
                    pending.append((start, framed))
                    pending_bytes += len(framed)
                    ends = standalone
                    if not ends and len(pending) < FLUSH_EVERY:
                        continue
            elif kind == fr.ROTATE:
                file = fr.rotate_file(src[po + 1:end - tail])[0]
                base = stream_pos(file, 0)
                continue
            elif kind == fr.HEARTBEAT:
                if txn is None and next_pos:
                    if done:
                        self._flush(gen, done)
                        done = []
                    with buf.cond:
                        if gen != self.generation:
                            raise _Restart
                        buf.received = max(buf.received, base | next_pos)
                        buf.cond.notify_all()
                continue
            else:
                continue
            if txn is None:
                continue
            if ends:
                txn.commit_pos = start
                txn.end_pos = base | next_pos
                txn.commit_ts = timestamp * 1_000_000
                if txn_ids is not None and add_ids is not None:
                    add_ids(*txn_ids)
                elif txn_gtid is not None:
                    gtids.add(txn_gtid)
                done.append((txn, pending, pending_data, pending_bytes, (gtids.state(), txn_gtid, thread)))
            else:
                done.append((txn, pending, pending_data, pending_bytes, None))
            pending, pending_data, pending_bytes = [], 0, 0
            if not ends:  # a large transaction's part goes on po once
                self._flush(gen, done)
                done = []
            else:
                txn, txn_gtid, txn_ids, standalone, thread = None, None, None, False, None

    def _flush(self, gen: int, parts: list[_Part]) -> None:
        """Hand the messages of `parts` to the buffer, in one turn of its lock."""
        buf = self.buffer
        with buf.cond:
            while buf.full() and not self.stopping.is_set() and gen == self.generation:
                buf.cond.wait(0.5)
            if gen != self.generation or self.stopping.is_set():
                raise _Restart
            txns, gtid_after, txn_info = buf.txns, self.gtid_after, self.txn_info
            last = txns[-1] if txns else None
            added = 0
            for txn, msgs, ndata, size, ended in parts:
                if txn is not last:
                    txns.append(txn)
                    last = txn
                txn.msgs.extend(msgs)
                txn.n_data += ndata
                txn.nbytes += size
                added += size
                if ended is not None:
                    xid = txn.xid
                    assert txn.end_pos is not None and xid is not None
                    gtid_after[xid] = ended[0]
                    txn_info[xid] = ended[1:]
                    buf.received = txn.end_pos
            buf.add_bytes(added)
            if len(txn_info) > 2 * len(txns) + FORGET_SLACK:
                self._forget_trimmed()
            buf.cond.notify_all()

    def _forget_trimmed(self) -> None:
        """Drop the GTID states and GTIDs of transactions no longer in the buffer (the planner trimmed them:
        every position, slice and count that names them was made before); with the buffer's lock held."""
        held = {t.xid for t in self.buffer.txns}
        self.gtid_after = {x: v for x, v in self.gtid_after.items() if x in held}
        self.txn_info = {x: v for x, v in self.txn_info.items() if x in held}


# Messages of a transaction received, not yet in the buffer: the transaction, its messages, how many of
# them are data, their bytes, and (when the transaction is complete) the GTID state after it, its GTID
# and its thread. (A tuple: one is made for each transaction.)
_Part = tuple[Txn, list[tuple[int, bytes]], int, int, "tuple[object, str | None, int | None] | None"]


def current_position(conn: pymysql.Connection, gtid_query: str) -> BinlogPosition:
    """The server's binlog end (SHOW MASTER STATUS) and GTID state (`gtid_query`)."""
    with conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        row = cur.fetchone()
        if row is None:
            raise SourceError("SHOW MASTER STATUS returned nothing: the server does not write a binlog "
                              "(start it with log-bin)")
        cur.execute(gtid_query)
        g = cur.fetchone()
    return BinlogPosition(str(row[0]), int(row[1]), str(g[0] or "") if g else "")


def binlog_files(conn: pymysql.Connection) -> list[str]:
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [str(r[0]) for r in cur.fetchall()]

