"""Streamed INSERTs decoded column-wise (insert_runs + columnar) give exactly the row-by-row events (JSON events
as `PieceEvents`, whose `jsonl` lines are those of their JSON rows)."""

from __future__ import annotations

import json
import struct

import pytest

from headwater.connectors.postgres import pgoutput, streaming
from headwater.connectors.postgres.insert_runs import decode_inserts
from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from headwater.events.batch import PieceEvents
from headwater.spark.sinks import jsonl_lines, piece_lines
from tests.connectors.postgres.test_columnar import ROWS, TABLE
from tests.connectors.postgres.test_streaming import (
    RecordingSource,
    _mixed_workload,
    _tables,
    prime,
    properties,
    read,
)
from tests.events_support import any_run


def _insert(values: list, oid: int = 16384, count: int | None = None) -> bytes:
    """An INSERT message; a value is None (null), a str (text), or (kind, bytes) as sent."""
    out = [b"I", struct.pack(">I", oid), b"N", struct.pack(">H", len(values) if count is None else count)]
    for v in values:
        if v is None:
            out.append(b"n")
        elif isinstance(v, str):
            data = v.encode()
            out += [b"t", struct.pack(">i", len(data)), data]
        else:
            kind, data = v
            out += [kind, struct.pack(">i", len(data)), data] if kind in (b"t", b"b") else [kind]
    return b"".join(out)


def _decode_insert(payload: bytes) -> pgoutput.Insert:
    m = pgoutput.decode(payload)
    assert isinstance(m, pgoutput.Insert), m
    return m


def test_columns_equal_the_per_message_decoder():
    rows = [["1", "", None, "ünï ☃ 😀"], [None, "a\nb\"c\\", "x" * 70_000, ""], ["-3", None, None, None]]
    payloads = [_insert(r) for r in rows]
    columns = decode_inserts(payloads, 4)
    assert columns is not None
    assert [list(r) for r in zip(*(c.to_pylist() for c in columns), strict=True)] == rows
    assert [list(_decode_insert(p).new) for p in payloads] == rows
    # a column null in every row, and one row only
    one = decode_inserts([_insert([None, "z"])], 2)
    assert one is not None
    assert [c.to_pylist() for c in one] == [[None], ["z"]]


@pytest.mark.parametrize("bad", [
    _insert(["1", (b"u", b"")]),  # unchanged TOAST: never in an INSERT, left to pgoutput
    _insert(["1", (b"b", b"\x00\x01")]),  # binary mode
    _insert(["1"], count=2),  # fewer values than announced
    _insert(["1", "2"], count=1),  # bytes after the tuple
    _insert(["1", "2"]) + b"x",
    _insert(["1", "2"])[:-1],  # the last value cut short
    _insert(["1", (b"t", b"\xff\xfe")]),  # not UTF-8
    _insert(["1", (b"x", b"")]),  # unknown kind
    b"U" + _insert(["1", "2"])[1:],  # not an INSERT
    _insert(["1", "2"])[:3],
])
def test_anything_unusual_is_left_to_the_per_message_decoder(bad):
    good = _insert(["7", "8"])
    assert decode_inserts([good, bad, good], 2) is None
    assert decode_inserts([good], 3) is None  # a column count other than the relation's


def _wide_workload(server, dbname: str) -> None:
    """Every value kind of the column-wise kernels, in one large transaction, then single-row
    transactions, updates between inserts, and a column added mid-stream."""
    server.execute(TABLE + ";" + ROWS, dbname)
    for g in range(5):
        server.execute(f"INSERT INTO t (id, nn, i4) VALUES ({200_000 + g}, {g}, {g})", dbname)
    server.execute("BEGIN; INSERT INTO t (id, nn) SELECT g, 1 FROM generate_series(300000, 300100) g; "
                   "UPDATE t SET tx = 'updated' WHERE id = 300000; "
                   "INSERT INTO t (id, nn) SELECT g, 2 FROM generate_series(300101, 300200) g; "
                   "ALTER TABLE t ADD COLUMN extra text DEFAULT 'e'; "
                   "INSERT INTO t (id, nn, extra) SELECT g, 3, NULL FROM generate_series(300201, 300300) g; COMMIT",
                   dbname)


def _comparable(ev) -> tuple:
    """An event without its processing-time fields (with schemas, inside the payload)."""
    value = None if ev.value is None else json.loads(ev.value)
    body = value.get("payload", value) if isinstance(value, dict) else None
    if isinstance(body, dict) and "source" in body:
        for k in ("ts_ms", "ts_us", "ts_ns"):
            body.pop(k, None)
    return ev.topic, ev.key, value, ev.op, any_run(ev.headers), ev.change_type, ev.commit_version, ev.commit_ts_us


MODES = {"rows": 10**9, "runs": streaming.MIN_RUN, "every": 1}  # the shortest run decoded column-wise


def _read_each_way(pg_server, pg_db, monkeypatch, workload, props: dict[str, str],
                   schemas: bool = False, outputs: tuple[str, ...] = ("json",)) -> dict[str, tuple[list, int]]:
    """One workload read through a slot per mode of `MODES` and output: the events (typed blocks
    written as JSON) and the number of column-wise blocks made, by mode (`<mode>/typed` for typed)."""
    blocks = [0]
    real_encode = streaming.InsertRun.encode

    def counting_encode(self, *args):
        blocks[0] += 1
        events = real_encode(self, *args)
        if isinstance(events, PieceEvents):  # the jsonl sink's lines of its pieces: those of its JSON rows
            lines = b"".join(line for part in piece_lines(events, 1000) for line in part.to_pylist())
            assert lines == "".join(jsonl_lines(events.to_arrow()).to_pylist()).encode()
        return events

    monkeypatch.setattr(streaming.InsertRun, "encode", counting_encode)
    engines = {}
    for output in outputs:
        for mode in MODES:
            name = mode if output == "json" else f"{mode}/{output}"
            source = RecordingSource(validate_connector(properties(pg_server, pg_db, f"{mode}_{output}_{pg_db}", **props)),
                                     parallelism=2, schemas_enable=schemas, output=output)
            engines[name] = Engine(source.config, max_events=2_500, connector=source, schemas_enable=schemas,
                                   output=output)
    try:
        prime(*engines.values())
        workload(pg_server, pg_db)
        out = {}
        for name, eng in engines.items():
            monkeypatch.setattr(streaming, "MIN_RUN", MODES[name.split("/")[0]])
            blocks[0] = 0
            out[name] = ([_comparable(e) for e in read(eng)], blocks[0])
        return out
    finally:
        for eng in engines.values():
            eng.close()


@pytest.mark.parametrize("schemas", [False, True])
def test_column_wise_streaming_equals_row_by_row(pg_server, pg_db, monkeypatch, schemas):
    pg_server.execute(f"ALTER DATABASE \"{pg_db}\" SET TimeZone = 'Europe/Paris'")
    got = _read_each_way(pg_server, pg_db, monkeypatch, _wide_workload,
                         {"column.mask.with.6.chars": "public.t.masked", "column.exclude.list": "public.t.vc",
                          "table.include.list": "public.t"}, schemas, outputs=("json", "typed"))
    (rows, row_blocks), (runs, run_blocks), (every, every_blocks) = got["rows"], got["runs"], got["every"]
    assert len(rows) == 3007 + 5 + 301 + 1
    # runs: the large transaction's (cut by max_events), its rest with the single-row transactions
    # and the next 101 rows, then the INSERTs between the UPDATE and the ALTER, and after it
    assert row_blocks == 0 and run_blocks >= 4 and every_blocks >= run_blocks
    assert runs == rows
    assert every == rows
    # typed output: the runs become typed blocks column-wise, and their JSON is the same
    assert got["rows/typed"][1] == 0 and got["runs/typed"][1] == run_blocks
    for mode in MODES:
        assert got[f"{mode}/typed"][0] == rows


def test_column_wise_streaming_of_a_mixed_workload(pg_server, pg_db, monkeypatch):
    """Several tables, interleaved transactions, TRUNCATE, messages, a column added inside a
    transaction, an uncaptured table: runs of every length give the row-by-row events."""
    _tables(pg_server, pg_db)
    got = _read_each_way(pg_server, pg_db, monkeypatch, _mixed_workload,
                         {"table.include.list": "public.a,public.b", "skipped.operations": "none"})
    rows = got["rows"][0]
    assert len(rows) > 3500 and got["every"][1] > got["runs"][1] > 0
    assert got["runs"][0] == rows
    assert got["every"][0] == rows


def test_transaction_metadata_keeps_the_row_by_row_path(pg_server, pg_db, monkeypatch):
    """Events carrying a transaction block are made row by row (their counters are per event)."""
    _tables(pg_server, pg_db)
    got = _read_each_way(pg_server, pg_db, monkeypatch, _mixed_workload,
                         {"table.include.list": "public.a,public.b", "provide.transaction.metadata": "true"})
    assert got["every"] == got["rows"] and got["every"][1] == 0
