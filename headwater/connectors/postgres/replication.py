"""The driver-side replication reader: one thread reads the slot into an ordered buffer.

The thread does only framing: it looks at each pgoutput message's type byte and, for BEGIN,
COMMIT and the v2 stream messages, a few integers. Data messages stay raw bytes; decoding them
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

import bisect
import contextlib
import logging
import os
import select
import shutil
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import psycopg2

from headwater.connectors.postgres.connection import (
    ConnectError,
    ConnectionParams,
    CopyBothStream,
    SlotLost,
    SourceError,
    connect_replication,
)
from headwater.connectors.postgres.positions import PG_EPOCH_US, StreamPosition

log = logging.getLogger("headwater.postgres")

_BEGIN = struct.Struct(">QqI")  # final_lsn, commit ts, xid
_COMMIT = struct.Struct(">BQQq")  # flags, commit_lsn, end_lsn, commit ts
_STREAM_COMMIT = struct.Struct(">IBQQq")  # xid, flags, commit_lsn, end_lsn, ts
_U32 = struct.Struct(">I")
_SPILL = struct.Struct("<QII")  # lsn, xid, length
DATA_KINDS = frozenset(b"IUDTM")
STREAM_XID_KINDS = frozenset(b"RYIUDTM")
LAYOUT_KINDS = frozenset(b"RY")
SHUTDOWN_ASK_S = 0.5  # requests for a reply this soon after the last answer ...
SHUTDOWN_ASKS = 3  # ... this many times in a row: the walsender is shutting down


@dataclass
class Txn:
    """One transaction (or one non-transactional logical message) in commit order."""

    xid: int | None
    begin_lsn: int
    commit_lsn: int
    commit_ts: int  # Unix microseconds
    end_lsn: int | None = None  # set when COMMIT arrived
    msgs: list[tuple[int, bytes]] = field(default_factory=list)  # (lsn, payload), minus trimmed prefix
    first_index: int = 0  # data messages trimmed off the front
    n_data: int = 0  # data messages received (including trimmed ones)
    nbytes: int = 0
    spill: Spill | None = None
    transactional: bool = True

    @property
    def complete(self) -> bool:
        return self.end_lsn is not None

    def messages(self) -> Iterator[tuple[int, bytes]]:
        if self.spill is not None:
            yield from self.spill.read()
        else:
            yield from self.msgs


class Spill:
    """An in-progress streamed transaction's messages on disk (protocol v2).

    Messages of aborted subtransactions are left out when read, except RELATION and TYPE
    messages: pgoutput sends a relation's layout once per streamed transaction, so the one sent
    inside a subtransaction that later aborted still describes the changes that follow it.

    `scan()` (once the transaction committed) counts the data messages and notes a checkpoint
    every `CHECKPOINT_EVERY` of them (file offset, relations sent before it), so that a batch
    starting deep inside the transaction seeks there instead of reading the file from its start.
    """

    CHECKPOINT_EVERY = 1024

    def __init__(self, directory: str, xid: int):
        fd, self.path = tempfile.mkstemp(prefix=f"xid{xid}-", suffix=".spill", dir=directory)
        self.file = os.fdopen(fd, "wb", buffering=1 << 20)
        self.xid = xid
        self.aborted_subxids: set[int] = set()
        self.size = 0  # bytes written
        # (data messages before it, file offset, RELATION payloads sent before it), from scan()
        self.checkpoints: list[tuple[int, int, dict[int, bytes]]] = [(0, 0, {})]
        self.relations: dict[int, bytes] = {}  # RELATION payloads sent in the whole transaction

    def add(self, lsn: int, xid: int, payload: bytes) -> None:
        self.file.write(_SPILL.pack(lsn, xid, len(payload)))
        self.file.write(payload)
        self.size += _SPILL.size + len(payload)

    def seal(self) -> None:
        self.file.close()

    def _records(self, offset: int = 0) -> Iterator[tuple[int, int, bytes]]:
        """(file offset, lsn, payload) of the messages kept, from `offset` on."""
        aborted = self.aborted_subxids
        with open(self.path, "rb", buffering=1 << 20) as f:
            f.seek(offset)
            pos = offset
            while True:
                head = f.read(_SPILL.size)
                if not head:
                    return
                lsn, xid, n = _SPILL.unpack(head)
                payload = f.read(n)
                here, pos = pos, pos + _SPILL.size + n
                if xid not in aborted or payload[0] in LAYOUT_KINDS:
                    yield here, lsn, payload

    def read(self) -> Iterator[tuple[int, bytes]]:
        for _, lsn, payload in self._records():
            yield lsn, payload

    def read_from(self, index: int) -> tuple[int, dict[int, bytes], Iterator[tuple[int, bytes]]]:
        """The messages from the last checkpoint at or before data message `index` (0-based): the
        checkpoint's data message count, the relations sent before it, and the messages."""
        i = bisect.bisect_right(self.checkpoints, index, key=lambda c: c[0]) - 1
        n, offset, relations = self.checkpoints[i]
        return n, relations, ((lsn, p) for _, lsn, p in self._records(offset))

    def scan(self) -> tuple[int, int | None]:
        """The number of data messages kept, and the LSN of the first: where protocol 1 (and so
        Debezium) puts the BEGIN, which PostgreSQL 15 sends just before the first change it outputs."""
        n, first = 0, None
        relations: dict[int, bytes] = {}
        checkpoints = [(0, 0, {})]
        every = self.CHECKPOINT_EVERY
        for offset, lsn, p in self._records():
            kind = p[0]
            if kind in DATA_KINDS:
                if n and n % every == 0:
                    shared = checkpoints[-1][2]
                    checkpoints.append((n, offset, shared if shared == relations else dict(relations)))
                if first is None:
                    first = lsn
                n += 1
            elif kind == 0x52:
                relations[_U32.unpack_from(p, 1)[0]] = p
        self.checkpoints, self.relations = checkpoints, relations
        return n, first

    def discard(self) -> None:
        try:
            self.file.close()
        finally:
            with contextlib.suppress(OSError):
                os.unlink(self.path)


class StreamBuffer:
    """Transactions received and not yet handed out, in commit order, with a byte bound."""

    def __init__(self, limit_bytes: int):
        self.cond = threading.Condition()
        self.txns: list[Txn] = []
        self.nbytes = 0
        self.limit = limit_bytes
        self.received_lsn = 0  # every transaction committing before this has been received
        self.head_relations: dict[int, bytes] = {}  # RELATION payloads as of the buffer's head
        self.peak_nbytes = 0  # high-water mark of `nbytes`

    def full(self) -> bool:
        return self.nbytes >= self.limit

    def add_bytes(self, n: int) -> None:
        self.nbytes += n
        if self.nbytes > self.peak_nbytes:
            self.peak_nbytes = self.nbytes

    def reset_incomplete(self) -> None:
        """Forget transactions not complete (after a lost connection: they will come again)."""
        with self.cond:
            keep = [t for t in self.txns if t.complete]
            for t in self.txns:
                if not t.complete:
                    self.nbytes -= t.nbytes
            self.txns = keep

    def resume_lsn(self, committed: int) -> int:
        """Where a reconnect should start: the end of the last complete transaction held."""
        with self.cond:
            ends = [t.end_lsn for t in self.txns if t.complete]
            return max([committed, *ends])

    def trim(self, upto: StreamPosition) -> None:
        """Drop what lies at or before `upto` (it has been handed out)."""
        with self.cond:
            done = 0  # complete transactions at the head that end by `upto` (dropped at once at the end)
            for t in self.txns:
                if not (t.complete and t.end_lsn <= upto.lsn_commit):
                    break
                done += 1
                if t.spill is not None:
                    self.head_relations.update(t.spill.relations)
                    t.spill.discard()
                else:
                    self._absorb_relations(t.msgs)
                self.nbytes -= t.nbytes
            del self.txns[:done]
            t = self.txns[0] if self.txns else None
            if t is not None and upto.txid is not None and t.xid == upto.txid and t.spill is None:
                drop = upto.msg - t.first_index
                if drop > 0:
                    cut, seen = 0, 0
                    for i, (_, p) in enumerate(t.msgs):
                        if p[0] in DATA_KINDS:
                            seen += 1
                            cut = i + 1
                            if seen == drop:
                                break
                    gone = t.msgs[:cut]
                    self._absorb_relations(gone)
                    freed = sum(len(p) for _, p in gone)
                    t.msgs = t.msgs[cut:]
                    t.first_index += seen
                    t.nbytes -= freed
                    self.nbytes -= freed
            self.cond.notify_all()

    def _absorb_relations(self, msgs) -> None:
        for _, p in msgs:
            if p[:1] == b"R":
                self.head_relations[_U32.unpack_from(p, 1)[0]] = p


class ReplicationReader:
    """Reads the slot on a background thread into a `StreamBuffer`."""

    def __init__(self, params: ConnectionParams, slot: str, publication: str, *, proto_version: int = 2,
                 buffer_bytes: int = 256 << 20, status_interval_s: float = 10.0, max_retries: int = -1,
                 retry_wait_s: float = 10.0, flush_enabled: bool = True, extra_options: dict | None = None,
                 spill_dir: str | None = None, server_version: int = 150000, slot_retries: int = 6,
                 slot_retry_delay_s: float = 10.0):
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
        self.buffer = StreamBuffer(buffer_bytes)
        self.spill_dir = spill_dir or tempfile.mkdtemp(prefix="headwater-spill-")
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
        self.buffer.received_lsn = start_lsn
        self._thread = threading.Thread(target=self._run, name="headwater-replication", daemon=True)
        self._thread.start()

    def restart(self, start_lsn: int, last_commit_ts: int | None = None) -> None:
        """Stop, forget the buffer, and read again from `start_lsn`."""
        self.stop()
        self._stop = threading.Event()
        self.buffer = StreamBuffer(self.buffer.limit)
        self.error = None
        self.start(start_lsn, last_commit_ts)

    def confirm(self, lsn: int) -> None:
        """Everything committing at or before `lsn` is durably processed."""
        if lsn > self.confirmed:
            self.confirmed = lsn
            self._want_reply.set()

    def request_position(self) -> None:
        """Ask the server for a keepalive now, so `received_lsn` catches up when idle."""
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
            if 0 <= self.max_retries < failures:
                self.error = SourceError(
                    f"lost the replication connection and gave up after {failures - 1} retries "
                    f"(errors.max.retries={self.max_retries}): {text or type(err).__name__}")
                return
            self.retries += 1
            log.warning("replication connection lost (%s); retrying in %.1fs (attempt %d)",
                        text.splitlines()[0] if text else type(err).__name__, self.retry_wait_s, failures)
            self.buffer.reset_incomplete()
            self._stop.wait(self.retry_wait_s)

    def _stream(self) -> None:
        self._streamed = False
        conn = connect_replication(self.params)
        self.backend_pids.append(conn.get_backend_pid())
        try:
            cur = conn.cursor()
            start = self.buffer.resume_lsn(max(self.confirmed, self._start_lsn))
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
            msg = stream.read()
            if msg is None:
                if current is None and block is None and stream.wal_end > buf.received_lsn:
                    with buf.cond:
                        buf.received_lsn = max(buf.received_lsn, stream.wal_end)
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
                if kind in STREAM_XID_KINDS:
                    block.add(lsn, _U32.unpack_from(p, 1)[0], strip_stream_xid(p))
                else:
                    block.add(lsn, block.xid, p)
                continue
            if kind == 0x42:  # B
                final_lsn, ts, xid = _BEGIN.unpack_from(p, 1)
                current = Txn(xid, lsn, final_lsn, ts + PG_EPOCH_US)
                with buf.cond:
                    buf.txns.append(current)
                    buf.cond.notify_all()
            elif kind == 0x43:  # C
                _, commit_lsn, end_lsn, ts = _COMMIT.unpack_from(p, 1)
                if current is None or current.commit_lsn != commit_lsn:
                    raise SourceError(f"pgoutput COMMIT at {commit_lsn} does not match the open transaction")
                with buf.cond:
                    current.end_lsn = end_lsn
                    buf.received_lsn = max(buf.received_lsn, end_lsn)
                    buf.cond.notify_all()
                current = None
                self.last_commit_ts = ts + PG_EPOCH_US
            elif kind == 0x53:  # S stream start
                xid = _U32.unpack_from(p, 1)[0]
                block = spills.get(xid)
                if block is None:
                    block = spills[xid] = Spill(self.spill_dir, xid)
                    self.spill_files += 1
            elif kind == 0x45:  # E stream stop
                block = None
            elif kind == 0x63:  # c stream commit
                xid, _, commit_lsn, end_lsn, ts = _STREAM_COMMIT.unpack_from(p, 1)
                sp = spills.pop(xid, None)
                if sp is None:
                    raise SourceError(f"pgoutput stream commit for unknown transaction {xid}")
                sp.seal()
                self.spilled_bytes += sp.size
                n_data, first = sp.scan()
                with buf.cond:
                    if n_data:
                        self.last_commit_ts = ts + PG_EPOCH_US
                        buf.txns.append(Txn(xid, first, commit_lsn, ts + PG_EPOCH_US, end_lsn=end_lsn, spill=sp,
                                            n_data=n_data))
                    else:  # nothing left once aborted subtransactions are gone: protocol 1 sends nothing
                        sp.discard()
                    buf.received_lsn = max(buf.received_lsn, end_lsn)
                    buf.cond.notify_all()
            elif kind == 0x41:  # A stream abort
                xid, subxid = struct.unpack_from(">II", p, 1)
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
                t = Txn(None, lsn, lsn, ts_us, end_lsn=lsn,
                        msgs=[(lsn, p)], n_data=1, nbytes=len(p), transactional=False)
                with buf.cond:
                    buf.txns.append(t)
                    buf.add_bytes(len(p))
                    buf.received_lsn = max(buf.received_lsn, lsn)
                    buf.cond.notify_all()
            elif kind in b"RYO":
                # relation/type/origin outside a transaction: keep with the next one via head state
                if kind == 0x52:
                    with buf.cond:
                        if buf.txns:
                            last = buf.txns[-1]
                            last.msgs.append((lsn, p))
                        else:
                            buf.head_relations[_U32.unpack_from(p, 1)[0]] = p
            else:
                raise SourceError(f"unexpected pgoutput message {chr(kind)!r} at LSN {lsn} outside a transaction")


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
