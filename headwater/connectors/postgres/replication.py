"""The driver-side replication reader: one thread reads the slot into the shared transaction buffer.

The buffer (`common.txbuffer.StreamBuffer`) tells pgoutput's messages apart through `PGOUTPUT`.
The thread does only framing: it looks at each pgoutput message's type byte and, for BEGIN,
COMMIT and the v2 stream messages, a few integers (with the decoder's structs, `pgoutput.BEGIN`
and the like). Data messages stay raw bytes; decoding them
into events is the executors' work. Transactions enter the buffer in commit order. Messages of
v2 streamed (in-progress) transactions are spilled to disk until their stream commit, so a huge
transaction never fills memory; the in-memory buffer is bounded (`headwater.stream.buffer.bytes`)
by not reading further, and the thread keeps sending status updates while it waits. A streamed
transaction looks exactly like the same transaction under protocol 1: its BEGIN position is its
first change kept, and one left with no change (all in aborted subtransactions) is dropped.

The flush LSN sent to the server is only ever what the caller confirmed (`confirm`): the slot
never moves past what the sink has durably committed (the stream is read through libpq directly,
see `connection.CopyBothStream`, because psycopg2 moves it on by itself). The write LSN sent is
what was received. A walsender that is shutting down waits for a flush position beyond that, so
when the server insists on replies the reader closes the connection instead, and reconnects.

A lost connection is retried per `errors.max.retries` (`retriable.restart.connector.wait.ms`
apart), restarting from the end of the last complete transaction received; a slot that is gone
or invalidated is reported at once (`SlotLost`), as are refused credentials.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import shutil
import struct
import tempfile
import threading
import time
import uuid

import psycopg2

from headwater.connectors.common.txbuffer import Spill, StreamBuffer, Txn
from headwater.connectors.postgres.commits import RecentCommits
from headwater.connectors.postgres.connection import (
    XLOGDATA_PAYLOAD,
    ConnectError,
    ConnectionParams,
    CopyBothStream,
    SlotLost,
    SourceError,
    XLogData,
    connect_replication,
)
from headwater.connectors.postgres.pgoutput import (
    BEGIN,
    COMMIT,
    PG_EPOCH_OFFSET_US,
    STREAM_ABORT,
    STREAM_COMMIT,
    STREAM_XID_KINDS,
)
from headwater.connectors.postgres.positions import StreamPosition

log = logging.getLogger("headwater.postgres")

_U32 = struct.Struct(">I")
_U64 = struct.Struct(">Q")
DRAIN = 4096  # messages of a stream block spilled in one go (see `_spill_block`)
DATA_KINDS = frozenset(b"IUDTM")
_STREAM_XID_BYTES = frozenset(map(ord, STREAM_XID_KINDS))  # the type bytes of pgoutput.STREAM_XID_KINDS
SHUTDOWN_ASK_S = 0.5  # requests for a reply this soon after the last answer ...
SHUTDOWN_ASKS = 3  # ... this many times in a row: the walsender is shutting down


class PgoutputKinds:
    """pgoutput's message kinds for the shared buffer and planner: INSERT, UPDATE, DELETE, TRUNCATE and
    logical MESSAGE are data; a RELATION is a layout, its id the relation's oid."""

    data_kinds = DATA_KINDS
    layout_kind = 0x52  # R

    def layout_id(self, payload: bytes) -> int:
        return _U32.unpack_from(payload, 1)[0]


PGOUTPUT = PgoutputKinds()


class ReplicationReader:
    """Reads the slot on a background thread into a `StreamBuffer`."""

    def __init__(self, params: ConnectionParams, slot: str, publication: str, *, proto_version: int = 2,
                 buffer_bytes: int = 256 << 20, status_interval_s: float = 10.0, max_retries: int = -1,
                 retry_wait_s: float = 10.0, flush_enabled: bool = True, extra_options: dict | None = None,
                 spill_dir: str | None = None, server_version: int = 150000, slot_retries: int = 6,
                 slot_retry_delay_s: float = 10.0, decoding_work_mem_kb: int = 0):
        self.params = params
        self.slot = slot
        self.publication = publication
        self.proto_version = proto_version
        self.status_interval_s = status_interval_s
        self.max_retries = max_retries
        self.retry_wait_s = retry_wait_s
        self.flush_enabled = flush_enabled
        self.extra_options = dict(extra_options or {})
        self.server_version = server_version
        self.slot_retries = slot_retries
        self.slot_retry_delay_s = slot_retry_delay_s
        self.decoding_work_mem_kb = decoding_work_mem_kb
        self.buffer = StreamBuffer(buffer_bytes, PGOUTPUT)
        # the reader's own directory is made at its first spill (a reader that never spills, or is never
        # closed, leaves nothing behind)
        self.spill_dir = spill_dir or os.path.join(tempfile.gettempdir(), f"headwater-spill-{uuid.uuid4().hex}")
        self.confirmed = 0
        self._sent_confirmed = -1
        self.error: BaseException | None = None
        self.connected = False
        self._stop = threading.Event()
        self._want_reply = threading.Event()
        self._thread: threading.Thread | None = None
        self._start_lsn = 0
        self._streamed = False  # the current connection got as far as streaming
        self.messages_received = 0
        self.commits = RecentCommits()  # the transactions received: xid -> commit LSN
        self.retries = 0  # reconnections after a lost connection
        self.spill_files = 0  # streamed transactions spilled to disk
        self.spilled_bytes = 0  # bytes written to spill files (of committed and aborted ones)
        self._own_spill_dir = spill_dir is None
        self.backend_pids: list[int] = []  # walsender processes this reader connected to
        self.last_commit_ts: int | None = None  # commit time of the last transaction received

    # ---- control, from the planner's thread
    def start(self, start_lsn: int, last_commit_ts: int | None = None) -> None:
        """Read from `start_lsn`, the end of a transaction committed at `last_commit_ts`."""
        self._start_lsn = start_lsn
        self.last_commit_ts = last_commit_ts
        self.confirmed = max(self.confirmed, start_lsn)
        self.buffer.received = start_lsn
        self._thread = threading.Thread(target=self._run, name="headwater-replication", daemon=True)
        self._thread.start()

    def restart(self, at: StreamPosition) -> None:
        """Stop, forget the buffer, and read again from `at`."""
        self.stop()
        self._stop = threading.Event()
        self.buffer = StreamBuffer(self.buffer.limit, PGOUTPUT)
        self.error = None
        self.start(at.lsn_commit, at.last_commit_ts)

    def confirm(self, lsn: int) -> None:
        """Everything committing at or before `lsn` is durably processed."""
        if lsn > self.confirmed:
            self.confirmed = lsn
            self._want_reply.set()

    def request_position(self) -> None:
        """Ask the server for a keepalive now, so `buffer.received` catches up when idle."""
        self._want_reply.set()

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    def stop(self) -> None:
        self._stop.set()
        with self.buffer.cond:
            self.buffer.cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=30)
        for t in self.buffer.txns:
            if t.spill is not None:
                t.spill.discard()

    def close(self) -> None:
        """Stop, and remove the spill directory when it is the reader's own."""
        self.stop()
        if self._own_spill_dir:
            shutil.rmtree(self.spill_dir, ignore_errors=True)

    # ---- the thread
    def _options(self) -> dict[str, str]:
        opts = {"proto_version": str(self.proto_version), "publication_names": self.publication}
        if self.server_version >= 140000:
            opts["messages"] = "true"
        if self.proto_version >= 2:
            opts["streaming"] = "on"
        opts.update(self.extra_options)
        return opts

    def _settings(self) -> dict[str, str]:
        """The replication session's settings: with transactions streamed in progress, a small
        logical_decoding_work_mem makes the server send a large one in smaller blocks, so that less of
        it is left to decode and send after its commit (the server's default, 64 MB, held about half of
        a 1M-row transaction until then; headwater spills the blocks to disk as they come)."""
        if self.decoding_work_mem_kb and self._options().get("streaming") == "on":
            return {"logical_decoding_work_mem": f"{self.decoding_work_mem_kb}kB"}
        return {}

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            try:
                self._stream()
                return
            except SourceError as exc:
                if not isinstance(exc, ConnectError):
                    self.connected = False
                    self.error = exc
                    return
                err: BaseException = exc
            except (psycopg2.OperationalError, psycopg2.InterfaceError) as exc:
                fatal = _fatal_stream_error(exc, self.slot)
                if fatal is not None:
                    self.connected = False
                    self.error = fatal
                    return
                err = exc
            except BaseException as exc:  # protocol errors, bugs: fatal, reported to the planner
                self.connected = False
                self.error = exc
                return
            self.connected = False
            if self._stop.is_set():
                return
            if self._streamed:
                failures = 0  # the connection worked: count failures anew
            failures += 1
            text = str(err).strip()
            # never connected: Debezium's slot.max.retries bound the first connection; once one was
            # made, a lost connection is retried per errors.max.retries
            had = bool(self.backend_pids)
            limit, setting, wait_s = ((self.max_retries, "errors.max.retries", self.retry_wait_s) if had
                                      else (self.slot_retries, "slot.max.retries", self.slot_retry_delay_s))
            what = "replication connection lost" if had else "replication connection could not be opened"
            if 0 <= limit < failures:
                self.error = SourceError(
                    f"{what} and gave up after {failures - 1} retries ({setting}={limit}): "
                    f"{text or type(err).__name__}")
                return
            self.retries += 1
            log.warning("%s (%s); retrying in %.1fs (attempt %d)", what,
                        text.splitlines()[0] if text else type(err).__name__, wait_s, failures)
            self.buffer.reset_incomplete()
            self._stop.wait(wait_s)

    def _stream(self) -> None:
        self._streamed = False
        conn = connect_replication(self.params, self._settings())
        self.backend_pids.append(conn.get_backend_pid())
        try:
            cur = conn.cursor()
            start = self.buffer.resume_pos(max(self.confirmed, self._start_lsn))
            self._start_replication(cur, start)
            self.connected = True
            self._streamed = True
            self._loop(CopyBothStream(conn))
        finally:
            self.connected = False
            with contextlib.suppress(Exception):
                conn.close()

    def _start_replication(self, cur, start: int) -> None:
        """START_REPLICATION; a slot still held by a connection that is going away is retried
        quickly, a slot held by someone else `slot.max.retries` times `slot.retry.delay.ms` apart."""
        deadline = time.monotonic() + max(5.0, self.slot_retries * self.slot_retry_delay_s)
        while True:
            try:
                cur.start_replication(slot_name=self.slot, decode=False, start_lsn=start,
                                      options=self._options(), status_interval=max(1.0, self.status_interval_s))
                return
            except psycopg2.errors.ObjectInUse:
                if time.monotonic() > deadline or self._stop.is_set():
                    raise SourceError(f"replication slot {self.slot!r} is in use by another process "
                                      f"(gave up after {self.slot_retries} retries); is another connector "
                                      "using the same slot.name?") from None
                self._stop.wait(0.2)
            except psycopg2.ProgrammingError as exc:
                fatal = _fatal_stream_error(exc, self.slot)
                raise fatal or SourceError(
                    f"cannot start replication on slot {self.slot!r}: {str(exc).strip()}") from None

    def _feedback(self, stream: CopyBothStream, reply: bool = False) -> None:
        """A status update: flush (the slot's confirmed position) is only what the caller confirmed;
        write is what was received, which lets the server's walsender finish a fast shutdown."""
        confirmed = self.confirmed
        flush = confirmed if self.flush_enabled else 0
        stream.send_status(max(stream.wal_end, confirmed), flush, reply=reply)
        self._sent_confirmed = confirmed

    def _loop(self, stream: CopyBothStream) -> None:
        spills: dict[int, Spill] = {}
        try:
            self._receive(stream, spills)
        finally:
            for sp in spills.values():
                sp.discard()

    def _receive(self, stream: CopyBothStream, spills: dict[int, Spill]) -> None:
        buf = self.buffer
        current: Txn | None = None
        block: Spill | None = None  # the streamed transaction whose block is being received
        self._sent_confirmed = -1
        last_feedback = time.monotonic()
        answered, insisted = 0.0, 0  # when a server request for a reply was last answered; how often in a row
        fd = stream.fd
        pending: XLogData | None = None  # a message read by `_spill_block` and not handled yet
        while not self._stop.is_set():
            now = time.monotonic()
            if stream.reply_requested:
                # A walsender asks for replies at most every wal_sender_timeout / 2, except when it is
                # shutting down: then it asks again right after each reply, until the client's flush
                # position reaches what it sent. That position is not ours to confirm, so let the
                # server go: close the connection (and reconnect as after any lost connection).
                insisted = insisted + 1 if now - answered < SHUTDOWN_ASK_S else 0
                if insisted >= SHUTDOWN_ASKS:
                    raise psycopg2.OperationalError("the server is shutting down (its walsender waits for a flush "
                                                    "position beyond what was processed): closed the connection")
                answered = now
            if self._want_reply.is_set() or stream.reply_requested or self.confirmed != self._sent_confirmed \
                    or now - last_feedback > self.status_interval_s:
                reply = self._want_reply.is_set()
                self._want_reply.clear()
                self._feedback(stream, reply=reply)
                last_feedback = now
            if buf.full():
                with buf.cond:
                    buf.cond.wait(timeout=min(1.0, self.status_interval_s))
                continue
            msg, pending = (pending, None) if pending is not None else (stream.read(), None)
            if msg is None:
                if current is None and block is None and stream.wal_end > buf.received:
                    with buf.cond:
                        buf.received = max(buf.received, stream.wal_end)
                        buf.cond.notify_all()
                if not stream.reply_requested:
                    select.select([fd], [], [], 0.2)
                continue
            self.messages_received += 1
            p = msg.payload
            kind = p[0]
            lsn = msg.data_start
            if block is not None and kind != 0x45:
                # inside a v2 stream block: data, relation, type and message messages carry the
                # (sub)transaction's xid after the type byte; origin messages do not
                if kind in _STREAM_XID_BYTES:
                    block.add(lsn, _U32.unpack_from(p, 1)[0], strip_stream_xid(p))
                else:
                    block.add(lsn, block.xid, p)
                pending = self._spill_block(stream, block)
                continue
            if kind == 0x42:  # B
                final_lsn, ts, xid = BEGIN.unpack_from(p, 1)
                current = Txn(xid, lsn, final_lsn, ts + PG_EPOCH_OFFSET_US)
                with buf.cond:
                    self.commits.add(xid, final_lsn)
                    buf.txns.append(current)
                    buf.cond.notify_all()
            elif kind == 0x43:  # C
                _, commit_lsn, end_lsn, ts = COMMIT.unpack_from(p, 1)
                if current is None or current.commit_pos != commit_lsn:
                    raise SourceError(f"pgoutput COMMIT at {commit_lsn} does not match the open transaction")
                with buf.cond:
                    current.end_pos = end_lsn
                    buf.received = max(buf.received, end_lsn)
                    buf.cond.notify_all()
                current = None
                self.last_commit_ts = ts + PG_EPOCH_OFFSET_US
            elif kind == 0x53:  # S stream start
                xid = _U32.unpack_from(p, 1)[0]
                block = spills.get(xid)
                if block is None:
                    os.makedirs(self.spill_dir, mode=0o700, exist_ok=True)
                    block = spills[xid] = Spill(self.spill_dir, xid, PGOUTPUT)
                    self.spill_files += 1
            elif kind == 0x45:  # E stream stop
                block = None
            elif kind == 0x63:  # c stream commit
                xid, _, commit_lsn, end_lsn, ts = STREAM_COMMIT.unpack_from(p, 1)
                sp = spills.pop(xid, None)
                if sp is None:
                    raise SourceError(f"pgoutput stream commit for unknown transaction {xid}")
                sp.seal()
                self.spilled_bytes += sp.size
                n_data, first = sp.scan()
                with buf.cond:
                    self.commits.add(xid, commit_lsn)
                    if first is not None:  # it kept a change
                        self.last_commit_ts = ts + PG_EPOCH_OFFSET_US
                        buf.txns.append(Txn(xid, first, commit_lsn, ts + PG_EPOCH_OFFSET_US, end_pos=end_lsn, spill=sp,
                                            n_data=n_data))
                    else:  # nothing left once aborted subtransactions are gone: protocol 1 sends nothing
                        sp.discard()
                    buf.received = max(buf.received, end_lsn)
                    buf.cond.notify_all()
            elif kind == 0x41:  # A stream abort
                xid, subxid = STREAM_ABORT.unpack_from(p, 1)
                sp = spills.get(xid)
                if sp is not None:
                    if subxid == xid:
                        self.spilled_bytes += sp.size
                        sp.discard()
                        del spills[xid]
                    else:
                        sp.aborted_subxids.add(subxid)
            elif current is not None:
                with buf.cond:
                    current.msgs.append((lsn, p))
                    current.nbytes += len(p)
                    buf.add_bytes(len(p))
                    if kind in DATA_KINDS:
                        current.n_data += 1
                    buf.cond.notify_all()
            elif kind == 0x4D:  # M outside a transaction: a non-transactional logical message
                # its LSN is the end of its WAL record: restarting there skips it, and nothing after;
                # its time is the last commit's (as Debezium's), so a replay gives the same events
                ts_us = self.last_commit_ts if self.last_commit_ts is not None else time.time_ns() // 1000
                t = Txn(None, lsn, lsn, ts_us, end_pos=lsn,
                        msgs=[(lsn, p)], n_data=1, nbytes=len(p), transactional=False)
                with buf.cond:
                    buf.txns.append(t)
                    buf.add_bytes(len(p))
                    buf.received = max(buf.received, lsn)
                    buf.cond.notify_all()
            elif kind in b"RYO":
                # relation/type/origin outside a transaction: keep with the next one via head state
                if kind == 0x52:
                    with buf.cond:
                        if buf.txns:
                            last = buf.txns[-1]
                            last.msgs.append((lsn, p))
                        else:
                            buf.head_layouts[_U32.unpack_from(p, 1)[0]] = p
            else:
                raise SourceError(f"unexpected pgoutput message {chr(kind)!r} at LSN {lsn} outside a transaction")


    def _spill_block(self, stream: CopyBothStream, block: Spill) -> XLogData | None:
        """The messages of a stream block that the connection holds already, straight into its spill
        file (no object per message, the xid field skipped rather than cut out); at most `DRAIN` of
        them, and none after a request for a reply, so the loop's status updates and stop come in
        time. Returns the first message that is not the block's (its stream stop), if read."""
        read, add_split, add = stream.read_raw, block.add_split, block.add
        at, xid_kinds, u32, u64 = XLOGDATA_PAYLOAD, _STREAM_XID_BYTES, _U32.unpack_from, _U64.unpack_from
        n = 0
        try:
            while n < DRAIN and not stream.reply_requested:
                raw = read()
                if raw is None:
                    return None
                kind = raw[at]
                if kind == 0x45:  # E stream stop (counted where it is handled)
                    return XLogData(u64(raw, 1)[0], raw[at:])
                lsn = u64(raw, 1)[0]
                if kind in xid_kinds:
                    add_split(lsn, u32(raw, at + 1)[0], raw[at:at + 1], memoryview(raw)[at + 5:])
                else:
                    add(lsn, block.xid, raw[at:])
                n += 1
            return None
        finally:
            self.messages_received += n


def _fatal_stream_error(exc: BaseException, slot: str) -> SourceError | None:
    """The error as a non-retriable SourceError when reconnecting cannot help (the slot is gone or
    invalidated, the user lost its rights), else None."""
    text = str(exc).strip()
    if isinstance(exc, psycopg2.errors.UndefinedObject) and "slot" in text:
        return SlotLost(f"replication slot {slot!r} does not exist any more ({text.splitlines()[0]})")
    if isinstance(exc, psycopg2.errors.ObjectNotInPrerequisiteState) and "slot" in text:
        return SlotLost(f"replication slot {slot!r} can no longer be read: {' '.join(text.split())} -- the WAL "
                        "it needed was removed (max_slot_wal_keep_size), so changes were lost")
    if isinstance(exc, psycopg2.errors.UndefinedFile) and "WAL" in text:
        return SlotLost(f"replication slot {slot!r} needs WAL that was removed: {text.splitlines()[0]}")
    if isinstance(exc, (psycopg2.errors.InsufficientPrivilege, psycopg2.errors.InvalidAuthorizationSpecification,
                        psycopg2.errors.InvalidPassword)):
        return SourceError(f"the replication connection was refused: {text.splitlines()[0] if text else exc!r}")
    return None


def strip_stream_xid(payload: bytes) -> bytes:
    """A streamed message without its xid field, so it decodes like a v1 message."""
    return payload[:1] + payload[5:]
