"""A streamed run of inserts decoded column-wise comes as `PieceEvents` whose `jsonl` lines are those of its
JSON rows, and whose JSON rows are `encode_block`'s, without a server: made-up WRITE_ROWS events (NULLs,
texts JSON must escape, multi-byte UTF-8, long texts) of one or several rows, across binlog files, with
GTIDs and threads or none, the same or different headers, with `include.query` (a statement with escapes
and multi-byte text) or not, transaction metadata on or off, with and without context headers. The
source blocks are `source_parts`' parts, as the decoder gives them."""

from __future__ import annotations

import random
import struct
from typing import Any

import pytest

from headwater.connectors.binlog import insert_runs, streaming
from headwater.connectors.binlog.ddl import SchemaState, apply_statement
from headwater.connectors.binlog.positions import FILE_SHIFT
from headwater.connectors.binlog.records import BinlogMaker
from headwater.connectors.common import columnar, records
from headwater.connectors.common.context_headers import ContextHeaders
from headwater.connectors.common.messages import Segment
from headwater.connectors.mariadb.context import MariaDbContext
from headwater.connectors.registry import validate_connector
from headwater.events.batch import ArrowEvents, Events, PieceEvents
from headwater.events.formats.json import JsonOptions
from headwater.spark.sinks import jsonl_lines, piece_lines
from tests.connectors.binlog.test_insert_runs import _row, _table_map

DDL = "CREATE TABLE t (id bigint NOT NULL PRIMARY KEY, name varchar(300), n int, price decimal(12,2), b tinyint)"
TEXTS = [None, "", "plain", 'say "hi"', "back\\slash", "tab\tnew\nline\x01", "ünïcödé 日本 🎉", "é" * 150, "x" * 300]
GTIDS: list[list[str | None]] = [[None], ["0-1-5"], ["0-1-5", "0-1-6", "1-2-99"]]  # a run's events' GTIDs
QUERIES = [None, 'INSERT INTO t VALUES (1, "ü\\"q\n")', "insert into t values (2, 'plain')"]


def _write_rows(rows: list[bytes], ts: int, server_id: int) -> bytes:
    """A framed WRITE_ROWS_V1 event (type byte + header + body) of table id 7 holding `rows`."""
    body = (7).to_bytes(6, "little") + b"\0\0" + bytes([5, 0x1F]) + b"".join(rows)
    return bytes([23]) + struct.pack("<IBIIIH", ts, 23, server_id, 19 + len(body), 0, 0) + body


def _decoder(transaction_metadata: bool, include_query: bool) -> streaming._Decoder:
    state = SchemaState(database_charsets={"db": "utf8mb4"})
    apply_statement(state, DDL, "db")
    (table,) = state.tables.values()
    config = validate_connector({"connector.class": "mariadb", "database.hostname": "localhost",
                                 "database.user": "u", "database.password": "p", "database.server.id": "1",
                                 "topic.prefix": "p", "table.include.list": "db.t",
                                 "provide.transaction.metadata": str(transaction_metadata).lower(),
                                 "include.query": str(include_query).lower()})
    ctx = MariaDbContext.from_config(config)
    unit = streaming.BinlogSlice(ctx, "mariadb", "binlog.000001", {}, {("db", "t"): table}, {}, {}, [], b"")
    return streaming._Decoder(unit, BinlogMaker(ctx))


def _run_block(decoder: streaming._Decoder, rnd: random.Random, one_row_each: bool) -> Events:
    """The decoder's block of a run of made-up events (what `_run_blocks` hands on)."""
    (table,) = decoder.unit.tables.values()
    run = streaming._WriteRun()
    run.tm, run.table, run.te = _table_map(), table, decoder._records(table)
    gtids = rnd.choice(GTIDS)
    payloads, events, ident = [], [], 0
    for e in range(rnd.randint(1, 12)):
        rows = []
        for _ in range(1 if one_row_each else rnd.randint(1, 5)):
            ident += 1
            rows.append(_row((ident, rnd.choice(TEXTS), rnd.choice([None, -5, 0, 2**31 - 1]),
                              rnd.choice([None, 0, 123, 99_999_999_999]), rnd.choice([None, -1, 0, 127]))))
        payload = _write_rows(rows, 1_700_000_000 + rnd.choice([0, e]), rnd.choice([1, 1, 7]))
        seg = Segment(xid=e, begin_pos=100, commit_pos=1000 + e // 2, end_pos=None, commit_ts=0,
                      transactional=True, begin=False, commit=False, count=1)
        pos = (rnd.choice([1, 1, 2]) << FILE_SHIFT) | (200 + 50 * e)
        events.append(streaming._RunEvent(pos, payload, seg, rnd.choice(gtids), rnd.choice([None, 4, 4, 11]),
                                          rnd.choice(QUERIES) if decoder.ctx.include_query else None))
        payloads.append(payload)
    run.events = events
    decoded = insert_runs.decode_writes(payloads, run.tm)
    assert decoded is not None
    return decoder._run_block(run, events, decoded)


def _piece_lines(events: PieceEvents) -> bytes:
    return b"".join(line for lines in piece_lines(events, 3) for line in lines.to_pylist())


def _row_lines(events: ArrowEvents | PieceEvents) -> bytes:
    return "".join(jsonl_lines(events.to_arrow()).to_pylist()).encode()


@pytest.mark.parametrize("headers", [False, True])
@pytest.mark.parametrize("one_row_each", [False, True])
@pytest.mark.parametrize(("transaction_metadata", "include_query"), [(False, False), (False, True), (True, True)])
@pytest.mark.parametrize("seed", range(4))
def test_a_runs_piece_lines_are_its_json_rows_lines(monkeypatch, seed: int, transaction_metadata: bool,
                                                    include_query: bool, one_row_each: bool, headers: bool):
    monkeypatch.setattr(columnar, "now_ts", lambda: (1, 1000, 1000000))
    monkeypatch.setattr(records, "now_ts", lambda: (1, 1000, 1000000))
    context = ContextHeaders("p", "mariadb", "run") if headers else None
    got: dict[bool, Any] = {}
    for pieces in (True, False):
        if not pieces:  # the JSON rows' path: the run's parts joined by `encode_block`, as before `PieceEvents`
            monkeypatch.setattr(streaming, "piece_block", lambda *a, **k: ArrowEvents(columnar.encode_block(*a, **k)))
        decoder = _decoder(transaction_metadata, include_query)
        assert decoder.runs is not transaction_metadata  # (with transaction metadata a slice makes no run)
        block = _run_block(decoder, random.Random(seed), one_row_each)
        assert isinstance(block, PieceEvents) is pieces
        if context is not None:
            block = context.apply(block, JsonOptions())
        got[pieces] = block
    lines = _piece_lines(got[True])
    assert lines.count(b"\n") == len(got[True]) > 0
    assert lines == _row_lines(got[True]) == _row_lines(got[False])
    assert got[True].to_arrow().equals(got[False].to_arrow())
