"""Tests for the pgoutput decoder: recorded real messages, a round-trip encoder, fuzzing, a live server."""

from __future__ import annotations

import contextlib
import copy
import json
import pickle
import select
import struct
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import psycopg2
import psycopg2.extras
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from headwater.connectors.postgres.pgoutput import (
    PG_EPOCH_OFFSET_US,
    STREAM_XID_KINDS,
    UNCHANGED_TOAST,
    Begin,
    Column,
    Commit,
    Delete,
    Insert,
    LogicalMessage,
    Message,
    Origin,
    ProtocolError,
    Relation,
    StreamAbort,
    StreamCommit,
    StreamStart,
    StreamStop,
    Truncate,
    Type,
    Update,
    Value,
    decode,
    lsn_to_str,
    peek,
    peek_xid,
    str_to_lsn,
)

DATA = Path(__file__).resolve().parents[2] / "data" / "pgoutput"

# ---------------------------------------------------------------------------------------------
# A test-only encoder: the inverse of decode.


def _cstr(text: str) -> bytes:
    return text.encode() + b"\0"


def xid_of(m: Message) -> int | None:
    """The xid ``m`` carries, or None (also for the kinds that have none)."""
    return getattr(m, "xid", None)


def text(v: Value) -> str:
    """A column value that must be in text format."""
    assert isinstance(v, str), v
    return v


def binary(v: Value) -> bytes:
    """A column value that must be in binary format."""
    assert isinstance(v, bytes), v
    return v


def encode_tuple(values: tuple) -> bytes:
    out = [struct.pack(">H", len(values))]
    for v in values:
        if v is None:
            out.append(b"n")
        elif v is UNCHANGED_TOAST:
            out.append(b"u")
        elif isinstance(v, str):
            data = v.encode()
            out.append(b"t" + struct.pack(">i", len(data)) + data)
        else:
            out.append(b"b" + struct.pack(">i", len(v)) + v)
    return b"".join(out)


def encode(m: Message) -> bytes:
    """The pgoutput bytes for ``m``; messages with an xid are encoded as inside a stream block."""
    k = m.kind.encode()
    xid_value = xid_of(m)
    xid = b"" if xid_value is None or m.kind not in STREAM_XID_KINDS else struct.pack(">I", xid_value)
    match m:
        case Begin():
            return k + struct.pack(">QqI", m.final_lsn, m.commit_ts, m.xid)
        case Commit():
            return k + struct.pack(">BQQq", 0, m.commit_lsn, m.end_lsn, m.commit_ts)
        case Origin():
            return k + struct.pack(">Q", m.origin_lsn) + _cstr(m.name)
        case Relation():
            cols = b"".join(struct.pack(">B", c.is_key) + _cstr(c.name) + struct.pack(">Ii", c.type_oid, c.type_modifier)
                            for c in m.columns)
            return (k + xid + struct.pack(">I", m.oid) + _cstr(m.namespace) + _cstr(m.name)
                    + m.replica_identity.encode() + struct.pack(">H", len(m.columns)) + cols)
        case Type():
            return k + xid + struct.pack(">I", m.oid) + _cstr(m.namespace) + _cstr(m.name)
        case Insert():
            return k + xid + struct.pack(">I", m.relation_oid) + b"N" + encode_tuple(m.new)
        case Update():
            old = b""
            if m.old_kind is not None:
                assert m.old is not None
                old = m.old_kind.encode() + encode_tuple(m.old)
            return k + xid + struct.pack(">I", m.relation_oid) + old + b"N" + encode_tuple(m.new)
        case Delete():
            return k + xid + struct.pack(">I", m.relation_oid) + m.old_kind.encode() + encode_tuple(m.old)
        case Truncate():
            n = len(m.relation_oids)
            return k + xid + struct.pack(f">iB{n}I", n, m.options, *m.relation_oids)
        case LogicalMessage():
            return (k + xid + struct.pack(">BQ", m.transactional, m.lsn) + _cstr(m.prefix)
                    + struct.pack(">i", len(m.content)) + m.content)
        case StreamStart():
            return k + struct.pack(">IB", m.xid, m.first_segment)
        case StreamStop():
            return k
        case StreamCommit():
            return k + struct.pack(">IBQQq", m.xid, 0, m.commit_lsn, m.end_lsn, m.commit_ts)
        case StreamAbort():
            return k + struct.pack(">II", m.xid, m.subxid)
    raise TypeError(m)


def streamed(m: Message) -> bool:
    """Whether ``encode(m)`` is to be decoded with ``in_stream=True``."""
    return m.kind in STREAM_XID_KINDS and xid_of(m) is not None


# ---------------------------------------------------------------------------------------------
# Recorded messages


def load(name: str) -> list[tuple[dict, bytes, Message, bool]]:
    """(line, payload, message, in_stream) for each recorded message, tracking stream blocks."""
    out, in_stream = [], False
    for text in (DATA / f"{name}.jsonl").read_text().splitlines():
        line = json.loads(text)
        payload = bytes.fromhex(line["payload"])
        m = decode(payload, in_stream)
        out.append((line, payload, m, in_stream))
        if isinstance(m, StreamStart):
            assert not in_stream, "nested Stream Start"
            in_stream = True
        elif isinstance(m, StreamStop):
            assert in_stream, "Stream Stop outside a block"
            in_stream = False
    assert not in_stream
    return out


RECORDINGS = ["text_v1", "stream_v2", "binary_v2"]


def relations(msgs: list) -> dict[str, Relation]:
    return {m.name: m for _, _, m, _ in msgs if isinstance(m, Relation)}


def check_transactions(msgs: list) -> None:
    """Begin/Commit pair up around the data messages of one transaction, with matching LSN and time."""
    begin = None
    for line, _, m, in_stream in msgs:
        if isinstance(m, Begin):
            assert begin is None and not in_stream
            begin = m
        elif isinstance(m, Commit):
            assert begin is not None
            assert m.commit_lsn == begin.final_lsn and m.commit_ts == begin.commit_ts
            assert m.end_lsn > m.commit_lsn
            assert str_to_lsn(line["data_start"]) == m.end_lsn  # a Commit is sent at the record's end
            begin = None
        elif m.kind in "IUDTR" and not in_stream:
            assert begin is not None, f"{m} outside a transaction"
        elif isinstance(m, LogicalMessage):
            assert m.transactional == (begin is not None or in_stream)
            if not m.transactional:  # sent as decoded, at the end of its WAL record
                assert str_to_lsn(line["data_start"]) == m.lsn
    assert begin is None


@pytest.mark.parametrize("name", RECORDINGS)
def test_recorded_messages_decode_and_reencode(name):
    msgs = load(name)
    assert msgs
    for line, payload, m, in_stream in msgs:
        assert encode(m) == payload
        assert streamed(m) == (in_stream and m.kind in STREAM_XID_KINDS)
        assert line["data_start"] == line["wal_end"]
        if m.kind in "RY":  # not the last write for its change: the walsender sends LSN 0
            assert line["data_start"] == "0/0"
        kind, oid = peek(payload, in_stream)
        assert kind == m.kind
        assert oid == (m.oid if isinstance(m, Relation)
                       else m.relation_oid if isinstance(m, (Insert, Update, Delete)) else None)
        expected_xid = xid_of(m) if m.kind in "BScA" or streamed(m) else None
        assert peek_xid(payload, in_stream) == expected_xid
    check_transactions(msgs)


def test_text_v1_matches_workload():
    msgs = load("text_v1")
    rels = relations(msgs)
    assert set(rels) == {"customers", "docs", "audit", "accounts", "parent", "child"}
    by_oid = {r.oid: r.name for r in rels.values()}
    cust = rels["customers"]
    assert cust.namespace == "public" and cust.replica_identity == "d"
    assert [c.name for c in cust.columns] == ["id", "name", "email", "mood", "balance", "created"]
    assert [c.is_key for c in cust.columns] == [True, False, False, False, False, False]
    assert [c.type_oid for c in cust.columns][:3] == [23, 25, 25]
    assert cust.columns[4].type_modifier == (10 << 16 | 2) + 4  # numeric(10,2)
    assert rels["audit"].replica_identity == "f" and all(c.is_key for c in rels["audit"].columns)
    assert rels["accounts"].replica_identity == "i"
    assert [c.is_key for c in rels["accounts"].columns] == [False, True, False]
    assert rels["docs"].replica_identity == "f"  # the last Relation for docs followed the ALTER

    kinds = [m.kind for _, _, m, _ in msgs]
    types = [m for _, _, m, _ in msgs if isinstance(m, Type)]
    assert [(t.namespace, t.name) for t in types] == [("public", "mood")]
    assert kinds.index("Y") < kinds.index("R")
    assert cust.columns[3].type_oid == types[0].oid

    data = [(by_oid[m.relation_oid], m) for _, _, m, _ in msgs if isinstance(m, (Insert, Update, Delete))]
    inserts = [m.new for name, m in data if name == "customers" and isinstance(m, Insert)]
    assert inserts[:3] == [
        ("1", "Alice", "alice@example.com", "happy", "10.50", "2024-01-02 03:04:05+00"),
        ("2", 'Zoë ✓ "quoted" \\ back', None, "ok", "-3.00", "2024-01-02 03:04:05+00"),
        ("3", "multi\nline\ttab", "c@example.com", None, None, "2024-01-02 03:04:05+00"),
    ]
    updates = [m for name, m in data if isinstance(m, Update)]
    assert (updates[0].old_kind, updates[0].new[4]) == (None, "99.99")
    assert (updates[1].old_kind, updates[1].old, updates[1].new[0]) == ("K", ("2",) + (None,) * 5, "20")
    doc_updates = [m for name, m in data if name == "docs" and isinstance(m, Update)]
    assert doc_updates[0].new == ("1", "renamed", UNCHANGED_TOAST) and doc_updates[0].old is None
    detoasted = doc_updates[1].old
    assert doc_updates[1].old_kind == "O" and detoasted is not None and len(text(detoasted[2])) == 94 * 32
    assert doc_updates[1].new[2] is UNCHANGED_TOAST
    deletes = [(name, m.old_kind, m.old) for name, m in data if isinstance(m, Delete)]
    assert deletes == [("customers", "K", ("3",) + (None,) * 5), ("audit", "O", ("2", None)),
                       ("accounts", "K", (None, "ACC-2", None))]
    assert [m.old for name, m in data if name == "audit" and isinstance(m, Update)] == [("1", "one")]

    truncates = [m for _, _, m, _ in msgs if isinstance(m, Truncate)]
    assert [([by_oid[o] for o in t.relation_oids], t.options) for t in truncates] == [
        (["parent", "child"], 3), (["audit"], 0), (["accounts"], 2)]
    assert truncates[0].cascade and truncates[0].restart_identity and not truncates[1].cascade

    lm = [(m.transactional, m.prefix, m.content) for _, _, m, _ in msgs if isinstance(m, LogicalMessage)]
    assert lm == [
        (False, "headwater.test", b"sent at once, inside a transaction"),  # before its transaction
        (True, "headwater.test", b"transactional hello"),
        (False, "headwater.bytes", b"\x00\xff\x10"),
        (True, "headwater.only", b"a transaction with only a message"),
        (False, "headwater.test", b"non-transactional, then rollback"),
        (False, "headwater.end", b"done"),
    ]
    # Nothing for the rolled-back transaction nor for those touching only unpublished tables.
    assert all("rolled back" not in str(m.new[1]) for name, m in data if isinstance(m, Insert) and name == "customers")

    origins = [(i, m) for i, (_, _, m, _) in enumerate(msgs) if isinstance(m, Origin)]
    assert len(origins) == 1
    i, origin = origins[0]
    assert (origin.name, lsn_to_str(origin.origin_lsn)) == ("headwater_origin", "0/ABCDEF0")
    begin = msgs[i - 1][2]
    assert isinstance(begin, Begin) and msgs[i - 1][0]["data_start"] == "0/0"
    stamp = datetime.fromtimestamp(begin.commit_ts_unix_us / 1e6, UTC)
    assert stamp == datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC)

    begins = [m for _, _, m, _ in msgs if isinstance(m, Begin)]
    assert [b.xid for b in begins] == sorted(b.xid for b in begins)
    assert all(b.commit_ts_unix_us > datetime(2024, 1, 1, tzinfo=UTC).timestamp() * 1e6 for b in begins)


def test_stream_v2_blocks_and_outcome():
    msgs = load("stream_v2")
    rels = relations(msgs)
    events_oid = rels["events"].oid
    seq = [m for _, _, m, _ in msgs]

    # Blocks: S ... E, first_segment only on the first block of each transaction.
    starts = [m for m in seq if isinstance(m, StreamStart)]
    assert [(s.xid, s.first_segment) for s in starts] == [
        (starts[0].xid, True), (starts[0].xid, False), (starts[0].xid, False), (starts[3].xid, True)]
    big, aborted = starts[0].xid, starts[3].xid
    assert sum(isinstance(m, StreamStop) for m in seq) == 4
    # A small transaction committed mid-way is sent whole between the big one's blocks.
    first_stop = next(i for i, m in enumerate(seq) if isinstance(m, StreamStop))
    assert isinstance(seq[first_stop + 1], Begin)
    assert [m.kind for m in seq].count("c") == 1

    # Apply the stream: changes carry the (sub)transaction's xid, grouped by the block's xid.
    pending: dict[int, list[tuple[int, Insert | Update | Delete]]] = {}
    table: dict[Value, Value] = {}
    top: int | None = None
    subxids: dict[int, set[int]] = {}
    for _, _, m, in_stream in msgs:
        if isinstance(m, StreamStart):
            top = m.xid
        elif in_stream and m.kind in STREAM_XID_KINDS:
            xid = xid_of(m)
            assert top is not None and xid is not None
            subxids.setdefault(top, set()).add(xid)
            if isinstance(m, (Insert, Update, Delete)) and m.relation_oid == events_oid:
                pending.setdefault(top, []).append((xid, m))
        elif isinstance(m, StreamAbort):
            assert m.subxid in subxids[m.xid]
            pending[m.xid] = [] if m.subxid == m.xid else [(x, c) for x, c in pending[m.xid] if x != m.subxid]
        elif isinstance(m, StreamCommit):
            for _, c in pending.pop(m.xid):
                if isinstance(c, Delete):
                    del table[c.old[0]]
                else:
                    table[c.new[0]] = c.new[1]
        elif isinstance(m, Insert) and m.relation_oid == events_oid:
            table[m.new[0]] = m.new[1]
    aborts = [m for m in seq if isinstance(m, StreamAbort)]
    assert [(a.xid, a.subxid != a.xid) for a in aborts] == [(big, True), (aborted, False)]
    assert pending == {aborted: []}
    expected = {str(i) for i in range(1, 301)} - {"3"} | {"2001", "4001"}
    assert set(table) == expected
    assert table["1"] == table["2"] == "updated" and table["2001"] == "after the savepoint"
    assert len(subxids[big]) == 3  # the top-level xid, the aborted and the surviving subtransaction

    inner = [m for _, _, m, s in msgs if s and isinstance(m, (LogicalMessage, Truncate))]
    assert [(m.kind, m.xid) for m in inner] == [("M", big), ("T", big)]
    message, truncate = inner
    assert isinstance(message, LogicalMessage) and message.transactional
    assert isinstance(truncate, Truncate) and truncate.relation_oids == (rels["audit"].oid,)
    # An origin's name comes first inside the first block of its transaction, without an xid.
    i = next(i for i, m in enumerate(seq) if isinstance(m, Origin))
    origin = seq[i]
    assert isinstance(origin, Origin)
    assert seq[i - 1] == StreamStart(aborted, True) and msgs[i][3]
    assert (origin.name, origin.origin_lsn, msgs[i - 1][0]["data_start"]) == ("headwater_origin", 0, "0/0")
    commit = next(m for m in seq if isinstance(m, StreamCommit))
    assert commit.xid == big and commit.end_lsn > commit.commit_lsn


def test_binary_v2_values():
    msgs = load("binary_v2")
    rels = relations(msgs)
    kinds_oid, docs_oid = rels["kinds"].oid, rels["docs"].oid
    ins = next(m for _, _, m, _ in msgs if isinstance(m, Insert) and m.relation_oid == kinds_oid)
    assert all(isinstance(v, bytes) for v in ins.new[:-1]) and ins.new[-1] is None
    assert struct.unpack(">i", binary(ins.new[0])) == (1,)
    assert struct.unpack(">h", binary(ins.new[1])) == (-2,)
    assert struct.unpack(">q", binary(ins.new[2])) == (9007199254740993,)
    assert struct.unpack(">d", binary(ins.new[3])) == (1.5,)
    assert ins.new[5] == b"\x01"
    assert ins.new[6] == "héllo".encode()
    assert binary(ins.new[10])[:1] == b"\x01"  # jsonb binary format version
    assert ins.new[12] == b"\xde\xad\xbe\xef"
    assert ins.new[13] == b"sad"
    doc_update = next(m for _, _, m, _ in msgs if isinstance(m, Update) and m.relation_oid == docs_oid)
    assert doc_update.new[2] is UNCHANGED_TOAST and doc_update.new[1] == b"still binary"


# ---------------------------------------------------------------------------------------------
# Errors


def _raises(payload: bytes, *words: str, in_stream: bool = False) -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        decode(payload, in_stream)
    text = str(info.value)
    for word in words:
        assert word in text, text
    assert info.value.offset is not None
    return info.value


def _insert(*cols: bytes, ncols: int | None = None) -> bytes:
    return b"I" + struct.pack(">I", 16384) + b"N" + struct.pack(">H", len(cols) if ncols is None else ncols) + b"".join(cols)


def test_errors_name_type_field_and_offset():
    t = b"t" + struct.pack(">i", 2) + b"ok"
    ok = decode(_insert(t, b"n"))
    assert isinstance(ok, Insert) and ok.new == ("ok", None)
    assert _raises(b"", "empty").offset == 0
    assert _raises(b"Z", "unknown message type 0x5a").field == "type"
    e = _raises(b"B" + bytes(10), "Begin", "commit_ts", "truncated")
    assert (e.message_type, e.field, e.offset) == ("Begin", "commit_ts", 9)
    assert _raises(encode(Begin(1, 2, 3)) + b"x", "Begin", "trailing").offset == 21
    assert _raises(_insert(t, b"n") + b"n", "Insert", "1 trailing bytes").offset == len(_insert(t, b"n"))
    assert _raises(_insert(b"t" + struct.pack(">i", -1)), "negative length -1").offset == 9
    assert _raises(_insert(b"t" + struct.pack(">i", 5) + b"ok"), "runs past the end").offset == 9
    assert _raises(_insert(b"t\x00\x00"), "column 0 length", "truncated").offset == 9
    assert _raises(_insert(b"x"), "column 0 kind", "unknown column kind 0x78").offset == 8
    assert _raises(_insert(t, ncols=2), "new tuple column 1", "2 columns announced, 1 present").offset == 15
    assert _raises(_insert(t, b"n", ncols=1), "trailing").offset == 15
    assert _raises(_insert(b"t" + struct.pack(">i", 2) + b"\xc3\x28"), "text value", "invalid UTF-8").offset == 13
    assert _raises(b"I\x00\x00", "relation oid").offset == 1
    assert _raises(b"I" + bytes(4) + b"K", "tuple marker").offset == 5
    assert _raises(b"Y" + bytes(4) + b"ns\0\xffname\0", "Type", "type name", "invalid UTF-8").offset == 8
    assert _raises(b"Y" + bytes(4) + b"ns\0name", "unterminated").offset == 8
    assert _raises(b"T" + struct.pack(">iB", 2, 0) + bytes(4), "2 relation oids announced, 4 bytes").offset == 6
    assert _raises(b"T" + struct.pack(">iB", -1, 0), "negative count").offset == 1
    assert _raises(b"T" + struct.pack(">iB", 0, 4), "option bits").offset == 5
    assert _raises(b"C\x01" + bytes(24), "Commit", "flags").offset == 1
    assert _raises(b"S" + bytes(4) + b"\x02", "first_segment", "expected 0 or 1").offset == 5
    assert _raises(b"M\x00" + bytes(8) + b"p\0" + struct.pack(">i", -5), "content length", "negative").offset == 12
    rel = encode(Relation(None, 1, "public", "t", "d", (Column(True, "id", 23, -1),)))
    assert _raises(rel.replace(b"\0d\x00\x01", b"\0x\x00\x01"), "replica identity").offset == 14
    assert _raises(rel[:-3], "column 0 type oid").offset == len(rel) - 8
    assert _raises(encode(Insert(7, 1, ())), "tuple marker", in_stream=False).offset == 5  # xid read as oid
    assert _raises(encode(Insert(None, 1, ())), "xid and relation oid", in_stream=True).offset == 1
    for fn in (peek, peek_xid):
        with pytest.raises(ProtocolError):
            fn(b"")
        with pytest.raises(ProtocolError):
            fn(b"\x00abc")
    with pytest.raises(ProtocolError):
        peek(b"I\x00")
    with pytest.raises(ProtocolError):
        peek_xid(b"B" + bytes(10))
    assert isinstance(ProtocolError("x"), ValueError)
    payload = encode(Insert(None, 5, ("a", b"b", None)))
    assert decode(bytearray(payload)) == decode(memoryview(payload)) == Insert(None, 5, ("a", b"b", None))


def test_lsn_helpers_and_sentinel():
    assert lsn_to_str(0x16B3748) == "0/16B3748"
    assert str_to_lsn("0/16B3748") == 0x16B3748
    assert str_to_lsn("a/ff") == (10 << 32) + 255
    assert lsn_to_str((1 << 64) - 1) == "FFFFFFFF/FFFFFFFF"
    for text, value in [("0/0", 0), ("A/FF", (10 << 32) + 255), ("FFFFFFFF/FFFFFFFF", (1 << 64) - 1)]:
        assert str_to_lsn(text) == value and lsn_to_str(value) == text
    assert str_to_lsn(None) is None and lsn_to_str(None) is None  # a NULL from the server
    for bad in ("", "0", "0/", "/1", "0/123456789", "x/1", " 0/1", "0/1 "):
        with pytest.raises(ValueError):
            str_to_lsn(bad)
    for bad_lsn in (-1, 1 << 64):
        with pytest.raises(ValueError):
            lsn_to_str(bad_lsn)
    assert pickle.loads(pickle.dumps(UNCHANGED_TOAST)) is UNCHANGED_TOAST
    assert copy.deepcopy(UNCHANGED_TOAST) is UNCHANGED_TOAST
    assert repr(UNCHANGED_TOAST) == "UNCHANGED_TOAST"
    assert Begin(0, 0, 1).commit_ts_unix_us == PG_EPOCH_OFFSET_US == 946684800 * 10**6
    assert int(datetime(2000, 1, 1, tzinfo=UTC).timestamp()) * 1_000_000 == PG_EPOCH_OFFSET_US


# ---------------------------------------------------------------------------------------------
# Round trips and fuzzing

u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
xids = st.none() | u32
surrogates: tuple[Literal["Cs"]] = ("Cs",)  # not encodable as UTF-8
names = st.text(st.characters(blacklist_categories=surrogates, blacklist_characters="\0"), max_size=12)
texts = st.text(st.characters(blacklist_categories=surrogates), max_size=12)
values = st.none() | st.just(UNCHANGED_TOAST) | texts | st.binary(max_size=12)
tuples = st.lists(values, max_size=6).map(tuple)
columns = st.builds(Column, st.booleans(), names, u32, st.integers(-(2**31), 2**31 - 1))

messages = st.one_of(
    st.builds(Begin, u64, i64, u32),
    st.builds(Commit, u64, u64, i64),
    st.builds(Origin, u64, names),
    st.builds(Relation, xids, u32, names, names, st.sampled_from("dnfi"), st.lists(columns, max_size=4).map(tuple)),
    st.builds(Type, xids, u32, names, names),
    st.builds(Insert, xids, u32, tuples),
    st.builds(Update, xids, u32, st.just(None), st.just(None), tuples),
    st.builds(Update, xids, u32, st.sampled_from("KO"), tuples, tuples),
    st.builds(Delete, xids, u32, st.sampled_from("KO"), tuples),
    st.builds(Truncate, xids, st.integers(0, 3), st.lists(u32, max_size=4).map(tuple)),
    st.builds(LogicalMessage, xids, st.booleans(), u64, names, st.binary(max_size=12)),
    st.builds(StreamStart, u32, st.booleans()),
    st.just(StreamStop()),
    st.builds(StreamCommit, u32, u64, u64, i64),
    st.builds(StreamAbort, u32, u32),
)

FUZZ = settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow], deadline=None)


def decode_or_error(payload: bytes, in_stream: bool) -> Message | None:
    """The message, or None after a ProtocolError; any other exception fails the test."""
    try:
        m = decode(payload, in_stream)
    except ProtocolError as exc:
        assert exc.offset is not None and 0 <= exc.offset <= len(payload)
        return None
    assert encode(m) == payload  # a message is never built from garbage
    return m


@FUZZ
@given(messages)
def test_round_trip(m):
    payload = encode(m)
    assert decode(payload, streamed(m)) == m
    assert type(decode(payload, streamed(m))) is type(m)
    kind, oid = peek(payload, streamed(m))
    assert kind == m.kind


@FUZZ
@given(st.sampled_from(b"BCORYIUDTMSEcA") | st.integers(0, 255), st.binary(max_size=40), st.booleans())
def test_fuzz_arbitrary_bytes(first, rest, in_stream):
    payload = bytes([first]) + rest
    decode_or_error(payload, in_stream)
    for fn in (peek, peek_xid):
        with contextlib.suppress(ProtocolError):
            fn(payload, in_stream)


@FUZZ
@given(messages, st.data())
def test_fuzz_truncated_or_extended(m, data):
    payload = encode(m)
    cut = data.draw(st.integers(0, len(payload) - 1))
    with pytest.raises(ProtocolError):
        decode(payload[:cut], streamed(m))
    extra = data.draw(st.binary(min_size=1, max_size=8))
    with pytest.raises(ProtocolError):
        decode(payload + extra, streamed(m))


@FUZZ
@given(messages, st.data())
def test_fuzz_corrupted_byte(m, data):
    payload = bytearray(encode(m))
    i = data.draw(st.integers(0, len(payload) - 1))
    payload[i] = data.draw(st.integers(0, 255).filter(lambda b: b != payload[i]))
    decode_or_error(bytes(payload), streamed(m))


# ---------------------------------------------------------------------------------------------
# Live server


def _read_until(dsn: str, slot: str, options: dict[str, str], end_prefix: bytes, timeout: float = 60.0):
    conn = psycopg2.connect(dsn, connection_factory=psycopg2.extras.LogicalReplicationConnection)
    out = []
    try:
        cur = conn.cursor()
        cur.start_replication(slot_name=slot, decode=False, options=options)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msg = cur.read_message()
            if msg is None:
                select.select([cur], [], [], 0.5)
                continue
            out.append(msg.payload)
            if msg.payload[:1] == b"M" and end_prefix + b"\0" in msg.payload:
                return out
        raise AssertionError(f"no end message after {len(out)} messages")
    finally:
        conn.close()


def test_live_server_stream(pg_server, pg_db):
    ddl = [
        "CREATE TABLE items (id int PRIMARY KEY, name text, qty int, price numeric, note text)",
        "CREATE PUBLICATION live_pub FOR TABLE items",
        "SELECT pg_create_logical_replication_slot('live_slot', 'pgoutput')",
    ]
    for sql in ddl:
        pg_server.execute(sql, pg_db)
    conn = pg_server.connect(pg_db)
    with conn.cursor() as cur:
        cur.execute("INSERT INTO items VALUES (1, 'apple', 3, 1.25, NULL), (2, 'pear', NULL, 0.5, 'ünï')")
        cur.execute("UPDATE items SET qty = 4 WHERE id = 1")
        cur.execute("DELETE FROM items WHERE id = 2")
        cur.execute("BEGIN")
        cur.execute("INSERT INTO items SELECT g, repeat(md5(g::text), 3), g, g, NULL FROM generate_series(10, 509) g")
        cur.execute("COMMIT")
        cur.execute("TRUNCATE items")
        cur.execute("SELECT pg_logical_emit_message(false, 'live.end', '')")
    conn.close()
    dsn = pg_server.dsn(pg_db, options="'-c logical_decoding_work_mem=64kB'")
    options = {"proto_version": "2", "publication_names": "live_pub", "messages": "true", "streaming": "on"}
    payloads = _read_until(dsn, "live_slot", options, b"live.end")

    in_stream, seq = False, []
    for payload in payloads:
        m = decode(payload, in_stream)
        assert encode(m) == payload
        in_stream = {"S": True, "E": False}.get(m.kind, in_stream)
        seq.append(m)
    kinds = "".join(m.kind for m in seq)
    assert kinds.startswith("BRIIC") and "SRI" in kinds  # a Relation before the first change
    core = kinds.replace("R", "")  # Relations may be sent again after any cache invalidation
    assert core.startswith("BIICBUCBDCSI") and core.endswith("cBTCM")
    inserts = [m for m in seq if isinstance(m, Insert)]
    assert inserts[0].new == ("1", "apple", "3", "1.25", None)
    assert inserts[1].new == ("2", "pear", None, "0.5", "ünï")
    big = [m for m in inserts if m.xid is not None]
    assert [m.new[0] for m in big] == [str(i) for i in range(10, 510)]
    starts = [m for m in seq if isinstance(m, StreamStart)]
    assert len(starts) >= 2 and starts[0].first_segment and not any(s.first_segment for s in starts[1:])
    assert {m.xid for m in big} == {starts[0].xid} == {next(m for m in seq if m.kind == "c").xid}
    assert next(m for m in seq if isinstance(m, Update)).new[2] == "4"


# ---------------------------------------------------------------------------------------------
# Throughput (printed with -s, not asserted)


def test_throughput_report():
    def t(s: str) -> bytes:
        b = s.encode()
        return b"t" + struct.pack(">i", len(b)) + b

    payload = _insert(t("12345"), t("alice"), t("2024-01-01 12:00:00+00"), t("42.50"), b"n")
    n, best = 20_000, float("inf")
    for _ in range(10):
        start = time.perf_counter()
        for _ in range(n):
            decode(payload)
        best = min(best, time.perf_counter() - start)
    recorded = [(p, s) for _, p, _, s in load("stream_v2")]
    start = time.perf_counter()
    for p, s in recorded * 20:
        decode(p, s)
    rec_rate = len(recorded) * 20 / (time.perf_counter() - start)
    print(f"\npgoutput decode: {n / best:,.0f} five-column text inserts/s; "
          f"{rec_rate:,.0f} recorded stream_v2 messages/s")
