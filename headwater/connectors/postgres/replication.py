"""The driver-side replication reader: one thread reads the slot into an ordered buffer.

The thread does only framing: it looks at each pgoutput message's type byte and, for BEGIN,
COMMIT and the v2 stream messages, a few integers. Data messages stay raw bytes; decoding them
into events is the executors' work. Transactions enter the buffer in commit order. Messages of
v2 streamed (in-progress) transactions are spilled to disk until their stream commit, so a huge
transaction never fills memory; the in-memory buffer is bounded (`headwater.stream.buffer.bytes`)
by not reading further, and the thread keeps sending status updates while it waits.

The flush LSN sent to the server is only ever what the caller confirmed (`confirm`): the slot
never moves past what the sink has durably committed. A lost connection is retried per
`errors.max.retries`, restarting from the end of the last complete transaction received.
"""

from __future__ import annotations

import logging
import os
import select
import struct
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import psycopg2

from headwater.connectors.postgres.connection import ConnectionParams, SourceError, connect_replication
from headwater.connectors.postgres.positions import StreamPosition

log = logging.getLogger("headwater.postgres")

PG_EPOCH_US = 946_684_800_000_000  # 2000-01-01 in Unix microseconds
_BEGIN = struct.Struct(">QqI")  # final_lsn, commit ts, xid
_COMMIT = struct.Struct(">BQQq")  # flags, commit_lsn, end_lsn, commit ts
_STREAM_COMMIT = struct.Struct(">IBQQq")  # xid, flags, commit_lsn, end_lsn, ts
_U32 = struct.Struct(">I")
_SPILL = struct.Struct("<QII")  # lsn, xid, length
DATA_KINDS = frozenset(b"IUDTM")
STREAM_XID_KINDS = frozenset(b"RYIUDTM")


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
    """An in-progress streamed transaction's messages on disk (protocol v2)."""

    def __init__(self, directory: str, xid: int):
        fd, self.path = tempfile.mkstemp(prefix=f"xid{xid}-", suffix=".spill", dir=directory)
        self.file = os.fdopen(fd, "wb", buffering=1 << 20)
        self.xid = xid
        self.n_data = 0
        self.aborted_subxids: set[int] = set()
        self.first_lsn: int | None = None

    def add(self, lsn: int, xid: int, payload: bytes) -> None:
        if self.first_lsn is None:
            self.first_lsn = lsn
        self.file.write(_SPILL.pack(lsn, xid, len(payload)))
        self.file.write(payload)

    def seal(self) -> None:
        self.file.close()

    def read(self) -> Iterator[tuple[int, bytes]]:
        with open(self.path, "rb", buffering=1 << 20) as f:
            while True:
                head = f.read(_SPILL.size)
                if not head:
                    return
                lsn, xid, n = _SPILL.unpack(head)
                payload = f.read(n)
                if xid not in self.aborted_subxids:
                    yield lsn, payload

    def count_data(self) -> int:
        return sum(1 for _, p in self.read() if p[:1] in (b"I", b"U", b"D", b"T", b"M"))

    def discard(self) -> None:
        try:
            self.file.close()
        finally:
            try:
                os.unlink(self.path)
            except OSError:
                pass


class StreamBuffer:
    """Transactions received and not yet handed out, in commit order, with a byte bound."""

    def __init__(self, limit_bytes: int):
        self.cond = threading.Condition()
        self.txns: list[Txn] = []
        self.nbytes = 0
        self.limit = limit_bytes
        self.received_lsn = 0  # every transaction committing before this has been received
        self.head_relations: dict[int, bytes] = {}  # RELATION payloads as of the buffer's head

    def full(self) -> bool:
        return self.nbytes >= self.limit

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
            while self.txns:
                t = self.txns[0]
                if t.complete and t.end_lsn <= upto.lsn_commit:
                    self._absorb_relations(t.messages())
                    self.nbytes -= t.nbytes
                    if t.spill is not None:
                        t.spill.discard()
                    self.txns.pop(0)
                    continue
                if upto.txid is not None and t.xid == upto.txid and t.spill is None:
                    drop = upto.msg - t.first_index
                    if drop > 0:
                        cut, seen = 0, 0
                        for i, (_, p) in enumerate(t.msgs):
                            if p[0] in DATA_KINDS:
                                seen += 1
                                if seen == drop:
                                    cut = i + 1
                                    break
                        gone = t.msgs[:cut]
                        self._absorb_relations(gone)
                        freed = sum(len(p) for _, p in gone)
                        t.msgs = t.msgs[cut:]
                        t.first_index += seen
                        t.nbytes -= freed
                        self.nbytes -= freed
                break
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
        self.messages_received = 0

    # ---- control, from the planner's thread
    def start(self, start_lsn: int) -> None:
        self._start_lsn = start_lsn
        self.confirmed = max(self.confirmed, start_lsn)
        self.buffer.received_lsn = start_lsn
        self._thread = threading.Thread(target=self._run, name="headwater-replication", daemon=True)
        self._thread.start()

    def restart(self, start_lsn: int) -> None:
        """Stop, forget the buffer, and read again from `start_lsn`."""
        self.stop()
        self._stop = threading.Event()
        self.buffer = StreamBuffer(self.buffer.limit)
        self.error = None
        self.start(start_lsn)

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
            except (psycopg2.OperationalError, psycopg2.InterfaceError, psycopg2.errors.AdminShutdown) as exc:
                self.connected = False
                if self._stop.is_set():
                    return
                failures += 1
                if 0 <= self.max_retries < failures:
                    self.error = SourceError(
                        f"lost the replication connection and gave up after {failures - 1} retries "
                        f"(errors.max.retries={self.max_retries}): {str(exc).strip()}")
                    return
                log.warning("replication connection lost (%s); retrying in %.1fs (attempt %d)",
                            str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__,
                            self.retry_wait_s, failures)
                self.buffer.reset_incomplete()
                self._stop.wait(self.retry_wait_s)
            except BaseException as exc:  # protocol errors, bugs: fatal, reported to the planner
                self.connected = False
                self.error = exc
                return

    def _stream(self) -> None:
        conn = connect_replication(self.params)
        try:
            cur = conn.cursor()
            start = self.buffer.resume_lsn(max(self.confirmed, self._start_lsn))
            self._start_replication(conn, cur, start)
            self.connected = True
            self._sent_confirmed = -1
            self._loop(conn, cur)
        finally:
            try:
                conn.close()
            except Exception:
                pass

    def _start_replication(self, conn, cur, start: int) -> None:
        """START_REPLICATION; a slot still held by a connection that is going away is retried
        quickly, a slot held by someone else `slot.max.retries` times `slot.retry.delay.ms` apart."""
        deadline = time.monotonic() + max(5.0, self.slot_retries * self.slot_retry_delay_s)
        while True:
            try:
                cur.start_replication(slot_name=self.slot, decode=False, start_lsn=start,
                                      options=self._options(), status_interval=self.status_interval_s)
                return
            except psycopg2.errors.ObjectInUse:
                if time.monotonic() > deadline or self._stop.is_set():
                    raise SourceError(f"replication slot {self.slot!r} is in use by another process "
                                      f"(gave up after {self.slot_retries} retries); is another connector "
                                      "using the same slot.name?") from None
                time.sleep(0.2)
            except psycopg2.errors.UndefinedObject as exc:
                raise SourceError(f"replication slot {self.slot!r} does not exist: {str(exc).strip()}") from None
            except psycopg2.ProgrammingError as exc:
                raise SourceError(f"cannot start replication on slot {self.slot!r}: {str(exc).strip()}") from None

    def _feedback(self, cur, reply: bool = False) -> None:
        lsn = self.confirmed if self.flush_enabled else 0
        cur.send_feedback(write_lsn=lsn, flush_lsn=lsn, apply_lsn=lsn, reply=reply, force=True)
        self._sent_confirmed = lsn

    def _loop(self, conn, cur) -> None:
        buf = self.buffer
        current: Txn | None = None
        stream: Spill | None = None
        spills: dict[int, Spill] = {}
        last_feedback = time.monotonic()
        fd = conn.fileno()
        while not self._stop.is_set():
            now = time.monotonic()
            if self._want_reply.is_set() or self.confirmed != self._sent_confirmed or \
                    now - last_feedback > self.status_interval_s:
                reply = self._want_reply.is_set()
                self._want_reply.clear()
                self._feedback(cur, reply=reply)
                last_feedback = now
            if buf.full():
                with buf.cond:
                    buf.cond.wait(timeout=1.0)
                continue
            msg = cur.read_message()
            if msg is None:
                if current is None and stream is None:
                    buf.received_lsn = max(buf.received_lsn, cur.wal_end)
                select.select([fd], [], [], 0.2)
                continue
            self.messages_received += 1
            p = msg.payload
            kind = p[0]
            lsn = msg.data_start
            if stream is not None and kind != 0x45:
                # inside a v2 stream block: data, relation, type and message messages carry the
                # (sub)transaction's xid after the type byte; origin messages do not
                if kind in STREAM_XID_KINDS:
                    stream.add(lsn, _U32.unpack_from(p, 1)[0], strip_stream_xid(p))
                else:
                    stream.add(lsn, stream.xid, p)
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
            elif kind == 0x53:  # S stream start
                xid = _U32.unpack_from(p, 1)[0]
                stream = spills.get(xid)
                if stream is None:
                    stream = spills[xid] = Spill(self.spill_dir, xid)
            elif kind == 0x45:  # E stream stop
                stream = None
            elif kind == 0x63:  # c stream commit
                xid, _, commit_lsn, end_lsn, ts = _STREAM_COMMIT.unpack_from(p, 1)
                sp = spills.pop(xid, None)
                if sp is None:
                    raise SourceError(f"pgoutput stream commit for unknown transaction {xid}")
                sp.seal()
                t = Txn(xid, sp.first_lsn if sp.first_lsn is not None else lsn, commit_lsn, ts + PG_EPOCH_US,
                        end_lsn=end_lsn, spill=sp)
                t.n_data = sp.count_data()
                with buf.cond:
                    buf.txns.append(t)
                    buf.received_lsn = max(buf.received_lsn, end_lsn)
                    buf.cond.notify_all()
            elif kind == 0x41:  # A stream abort
                xid, subxid = struct.unpack_from(">II", p, 1)
                sp = spills.get(xid)
                if sp is not None:
                    if subxid == xid:
                        sp.discard()
                        del spills[xid]
                    else:
                        sp.aborted_subxids.add(subxid)
            elif current is not None:
                with buf.cond:
                    current.msgs.append((lsn, p))
                    current.nbytes += len(p)
                    buf.nbytes += len(p)
                    if kind in DATA_KINDS:
                        current.n_data += 1
                    buf.cond.notify_all()
            elif kind == 0x4D:  # M outside a transaction: a non-transactional logical message
                # its LSN is the end of its WAL record: restarting there skips it, and nothing after
                t = Txn(None, lsn, lsn, int(time.time() * 1_000_000), end_lsn=lsn,
                        msgs=[(lsn, p)], n_data=1, nbytes=len(p), transactional=False)
                with buf.cond:
                    buf.txns.append(t)
                    buf.nbytes += len(p)
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
        for sp in spills.values():
            sp.discard()


def strip_stream_xid(payload: bytes) -> bytes:
    """A streamed message without its xid field, so it decodes like a v1 message."""
    return payload[:1] + payload[5:]
