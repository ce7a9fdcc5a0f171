"""A snapshot chunk's text rows, column-wise as `PieceEvents`, give the `jsonl` sink's lines of the row-wise
path exactly, without a server: made-up rows of a table with text, binary, decimal, TIMESTAMP and boolean
columns holding NULLs, empty strings, text JSON escapes, multi-byte UTF-8 and long values, in blocks
(the first and last rows' `source.snapshot` markers), with and without Debezium's context headers."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from headwater.connectors.binlog import snapshot_rows
from headwater.connectors.binlog.ddl import SchemaState, apply_statement
from headwater.connectors.binlog.records import BinlogContext, BinlogMaker, records_of
from headwater.connectors.binlog.schema import Table
from headwater.connectors.binlog.textrows import TextRows
from headwater.connectors.common import columnar, records
from headwater.connectors.common.context_headers import ContextHeaders
from headwater.connectors.mariadb.context import MariaDbContext
from headwater.connectors.registry import validate_connector
from headwater.events.batch import PieceEvents
from headwater.events.formats.json import JsonOptions
from headwater.spark.sinks import jsonl_lines, piece_lines
from tests.connectors.binlog.test_textrows import _lenenc, packets

DDL = """CREATE TABLE t (id bigint NOT NULL PRIMARY KEY, name text, note varchar(300) NOT NULL,
    price decimal(12,2), ts timestamp(6) NULL, data blob, flag boolean, code binary(4))"""
BINARY = (False, False, False, False, False, True, False, True)
TEXTS = [b"", b"plain", b'say "hi"', b"back\\slash", b"tab\tnew\nline\x01", "ünïcödé 日本 🎉".encode(),
         "é".encode() * 200, b"x" * 70000]


def _row(rnd: random.Random, i: int) -> tuple[bytes | None, ...]:
    def maybe(v: bytes) -> bytes | None:
        return None if rnd.random() < 0.2 else v

    return (str(i).encode(), maybe(rnd.choice(TEXTS)), rnd.choice(TEXTS[:7]),
            maybe(rnd.choice([b"0.00", b"-12.50", b"99999.99", b"1234567890.12"])),
            maybe(rnd.choice([b"2024-01-01 00:00:00", b"2024-02-29 23:59:59.123400", b"0000-00-00 00:00:00"])),
            maybe(bytes(rnd.randrange(256) for _ in range(rnd.choice([0, 1, 5, 300])))),
            maybe(rnd.choice([b"0", b"1"])), maybe(rnd.choice([b"\x00\xff\x10\x80", b"abcd"])))


def _text_rows(rows: list[tuple[bytes | None, ...]]) -> TextRows:
    payloads = [b"".join(_lenenc(v) for v in r) for r in rows]
    starts, at = [], 0
    for p in payloads:
        starts.append(at + 4)
        at += 4 + len(p)
    return TextRows(packets(payloads, 0), np.array(starts, dtype=np.int64), BINARY)


def _table_and_context(batch_rows: int) -> tuple[Table, BinlogContext]:
    state = SchemaState(database_charsets={"db": "utf8mb4"})
    apply_statement(state, DDL, "db")
    (table,) = state.tables.values()
    config = validate_connector({"connector.class": "mariadb", "database.hostname": "localhost",
                                 "database.user": "u", "database.password": "p", "database.server.id": "1",
                                 "topic.prefix": "p", "table.include.list": "db.t"})
    return table, replace(MariaDbContext.from_config(config), batch_rows=batch_rows)


def _lines(batches: list, headers: ContextHeaders | None) -> bytes:
    out: list[bytes] = []
    for batch in batches:
        if headers is not None:
            batch = headers.apply(batch, JsonOptions())
        if isinstance(batch, PieceEvents):
            out.extend(line for lines in piece_lines(batch, 5) for line in lines.to_pylist())
        else:
            out.append("".join(jsonl_lines(batch.to_arrow()).to_pylist()).encode())
    return b"".join(out)


@pytest.mark.parametrize("with_headers", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_column_wise_lines_equal_the_row_wise_paths(monkeypatch, seed: int, with_headers: bool):
    monkeypatch.setattr(columnar, "now_ts", lambda: (1, 1000, 1000000))
    monkeypatch.setattr(records, "now_ts", lambda: (1, 1000, 1000000))
    table, ctx = _table_and_context(7)
    rnd = random.Random(seed)
    text = _text_rows([_row(rnd, i) for i in range(40)])
    headers = ContextHeaders("p", "mariadb", "run") if with_headers else None
    got = {}
    for column_wise in (False, True):
        monkeypatch.setattr(snapshot_rows, "COLUMN_WISE", column_wise)
        te = records_of(ctx, table, streaming=False)
        batches = list(snapshot_rows.snapshot_events(te, BinlogMaker(ctx), text, ts_us=5_000_000, version=3,
                                                     position={"file": "binlog.000001", "pos": 4},
                                                     ends=(True, True, True, True)))
        assert all(isinstance(b, PieceEvents) == column_wise for b in batches)
        got[column_wise] = _lines(batches, headers)
    assert got[True].count(b"\n") == 40
    assert got[True] == got[False]


def test_text_that_is_not_utf8_is_refused(monkeypatch):
    table, ctx = _table_and_context(10)
    text = _text_rows([(b"1", b"\xff", b"", None, None, None, None, None)])
    with pytest.raises(pa.ArrowInvalid):
        for batch in snapshot_rows.snapshot_events(records_of(ctx, table, streaming=False), BinlogMaker(ctx), text,
                                                   ts_us=0, version=0, position={"file": "f", "pos": 4}, ends=None):
            list(piece_lines(batch, 10)) if isinstance(batch, PieceEvents) else None
