"""The binlog reader's packet splitter (`reader.Packets`) on byte streams as the server sends them, and a
row event larger than one protocol packet (16 MiB) streamed from a real MariaDB."""

from __future__ import annotations

import io
import struct
from types import SimpleNamespace

import pymysql
import pytest

from headwater.connectors.binlog import reader
from headwater.connectors.registry import validate_connector
from headwater.engine import Engine


def _packet(seq: int, payload: bytes) -> bytes:
    return len(payload).to_bytes(3, "little") + bytes((seq,)) + payload


class _Trickle(io.RawIOBase):
    """A socket file that hands out at most `step` bytes a read (as a socket may)."""

    def __init__(self, data: bytes, step: int):
        self.data, self.step, self.at = data, step, 0

    def read1(self, n: int = -1) -> bytes:
        chunk = self.data[self.at:self.at + min(n, self.step)]
        self.at += len(chunk)
        return chunk


def _packets(data: bytes, step: int = 1 << 20, seq: int = 1) -> reader.Packets:
    sock = SimpleNamespace(gettimeout=lambda: 10.0, settimeout=lambda t: None)
    conn = SimpleNamespace(_sock=sock, _read_timeout=10.0, _rfile=_Trickle(data, step), _next_seq_id=seq)
    return reader.Packets(conn)  # type: ignore[arg-type]


@pytest.mark.parametrize("step", [1, 3, 7, 1 << 20])
def test_packets_split_whatever_the_reads(step):
    payloads = [b"\x00" + bytes(range(200)), b"\x00ab", b"\x00" * 70_000]
    data = b"".join(_packet((1 + i) % 256, p) for i, p in enumerate(payloads))
    packets = _packets(data, step)
    assert [packets.next() for _ in payloads] == payloads


def test_a_payload_over_several_packets_is_joined():
    payload = b"\x00" + bytes(i % 251 for i in range(2 * reader.MAX_PACKET + 10))
    parts = [payload[:reader.MAX_PACKET], payload[reader.MAX_PACKET:2 * reader.MAX_PACKET],
             payload[2 * reader.MAX_PACKET:]]
    data = b"".join(_packet(255 + i if i == 0 else i - 1, p) for i, p in enumerate(parts)) + _packet(2, b"\x00x")
    packets = _packets(data, 1 << 20, seq=255)
    assert not packets.buffered()  # (nothing read yet)
    assert packets.next() == payload
    assert packets.buffered()
    assert packets.next() == b"\x00x"
    assert not packets.buffered()


def test_error_packet_raises_the_servers_error():
    err = b"\xff" + struct.pack("<H", 1236) + b"#HY000" + b"Could not find first log file name in binary log index file"
    packets = _packets(_packet(1, err))
    with pytest.raises(pymysql.err.OperationalError) as e:
        packets.next()
    assert e.value.args[0] == 1236


def test_a_closed_stream_or_wrong_sequence_is_a_lost_connection():
    with pytest.raises(pymysql.err.OperationalError):
        _packets(_packet(1, b"\x00abc")[:5]).next()  # ends inside the packet
    with pytest.raises(pymysql.err.OperationalError):
        _packets(_packet(0, b"\xff\x00\x00shutdown")).next()  # MariaDB's shutdown packet, numbered 0
    with pytest.raises(pymysql.err.InternalError):
        _packets(_packet(7, b"\x00abc")).next()


def test_a_row_event_over_16_mib_streams(mariadb_server, mariadb_db):
    """A 17 MiB LONGBLOB value: its rows event comes in two protocol packets."""
    db = mariadb_db
    mariadb_server.execute("SET GLOBAL max_allowed_packet = 67108864")
    mariadb_server.execute(f"CREATE TABLE {db}.big (id int PRIMARY KEY, b longblob, t longtext)")
    props = {"connector.class": "mariadb", **mariadb_server.connector_properties(db), "database.server.id": "6201",
             "topic.prefix": "big", "snapshot.mode": "no_data", "include.schema.changes": "false",
             "binary.handling.mode": "hex"}
    engine = Engine(validate_connector(props))
    try:
        list(engine.events(once=True))
        size = 17 << 20
        mariadb_server.execute(f"INSERT INTO {db}.big VALUES (1, REPEAT(x'ab', {size}), REPEAT('é', 10)), "
                               f"(2, x'01', 'x')")
        events = list(engine.events(once=True))
    finally:
        engine.close()
    after = [e.value_json()["after"] for e in events]
    assert [a["id"] for a in after] == [1, 2]
    assert after[0]["b"] == "ab" * size and after[0]["t"] == "é" * 10
    assert after[1] == {"id": 2, "b": "01", "t": "x"}
