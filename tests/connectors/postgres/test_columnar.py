"""Snapshot events built column-wise are byte for byte those the row-by-row path builds."""

from __future__ import annotations

import dataclasses
import json
import time

import pyarrow as pa
import pytest

from headwater.connectors.common.columnar import SnapshotBlockEncoder
from headwater.connectors.common.records import table_records
from headwater.connectors.postgres import catalog as cat
from headwater.connectors.postgres.columnar import read_csv_blocks
from headwater.connectors.postgres.pgvalues import unescape_copy_text
from headwater.connectors.postgres.records import EventContext, RecordMaker
from headwater.connectors.registry import validate_connector
from headwater.events.batch import EventBatch
from headwater.events.formats.json import to_event_batch
from headwater.events.typed import TypedEvents
from tests.events_support import json_rows

TABLE = """
CREATE TABLE t (
    id bigint PRIMARY KEY, i2 smallint, i4 integer NOT NULL DEFAULT 0, b boolean, tx text, vc varchar(20),
    ch char(5), n numeric(12,2), n0 numeric(20,0), n4 numeric(30,4), nv numeric, nn numeric(5,1) NOT NULL,
    ts timestamptz, ts3 timestamptz(3), ts0 timestamptz(0), f8 float8, d date, j jsonb, u uuid,
    dflt integer DEFAULT 7, arr integer[], masked text
)"""

# edge values of every kind the column-wise kernels cover, and of those they hand to the converters
ROWS = """
INSERT INTO t SELECT g, (g % 65536) - 32768, g * 7919 % 100000, (g % 3 = 0),
    'customer ' || md5(g::text), left(md5(g::text), 20), 'c' || (g % 9),
    ((g * 104729) % 10000000 - 5000000) / 100.0, (g * 2654435761) % 100000000000000000000,
    g * 123456789.1234, g / 7.0, (g % 9999) / 10.0 - 499,
    timestamptz '2024-01-01 00:00:00+00' + g * interval '1.234567 seconds',
    timestamptz '2024-01-01 00:00:00+00' + g * interval '0.1 seconds',
    timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second',
    g / 3.0, date '2000-01-01' + g, jsonb_build_object('g', g), md5(g::text)::uuid,
    CASE WHEN g % 4 = 0 THEN NULL ELSE g END, ARRAY[g, g + 1], 'secret ' || g
FROM generate_series(1, 3000) g;
INSERT INTO t (id, i2, i4, b, tx, vc, ch, n, n0, n4, nv, nn, ts, ts3, ts0, f8, d, j, u, dflt, arr, masked) VALUES
 (100001, -32768, -2147483648, NULL, E'quote " back \\\\ tab \\t nl \\n cr \\r bell \\x07 end', '', '',
  -9999999999.99, 0, 0.0001, 'NaN', 0, '-infinity', 'infinity', '0001-01-01 00:00:00+00', 'NaN', '-infinity',
  'null', NULL, NULL, '{}', NULL),
 (100002, 32767, 2147483647, true, 'ünïcödé ☃ 😀', 'x', 'abcde', 9999999999.99,
  99999999999999999999, 99999999999999999999999999.9999, 1e-20, -0.5,
  '2024-02-29 23:59:59.999999+00', '1999-12-31 23:59:59.9995+00', '2000-01-01 00:00:00.5+00',
  'Infinity', '9999-12-31', '"s"', NULL, NULL, '{NULL}', ''),
 (100003, 0, 0, false, '', NULL, NULL, 127, 128, -128, -129, 12.7, '0044-03-15 12:00:00+00 BC',
  '1970-01-01 00:00:00+00', '1969-12-31 23:59:59+00', -0.0, '1970-01-01', '[]', NULL, 0, NULL, NULL),
 (100004, 1, 1, true, 'a', 'b', 'c', 0.01, 32767, 32768, 8388607, -0.1, '2024-06-01 12:00:00.000001+00',
  NULL, NULL, 1e300, NULL, NULL, NULL, NULL, NULL, NULL),
 (100005, -1, -1, false, 'x', 'y', 'z', -0.01, -32768, -32769, -8388608, 0.1, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL, NULL),
 (100006, 2, 2, true, 'y', 'z', 'w', 1234567890.12, 9223372036854775807, 92233720368547.75807,
  -9223372036854775808, 1, '2024-06-01 12:00:00+00', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
 (100007, 3, 3, false, 'q', 'r', 's', -0.10, 1234567890123456789, 999999999999999.9999, 2, 2.5,
  '12345-06-07 08:09:10.5+00', '2024-06-01 12:00:00.12+00', '2024-06-01 12:00:00.9+00', NULL, NULL, NULL,
  NULL, NULL, NULL, NULL)
"""


def parse_csv_block(data: bytes, ncols: int) -> list[pa.Array]:
    """All the string columns of a CSV text, read in small blocks (rows cross their bounds)."""
    blocks = list(read_csv_blocks(pa.BufferReader(data), ncols, block_size=4096))
    return [pa.concat_arrays([b[i] for b in blocks]) for i in range(ncols)]


def _normalize(value: str | None) -> dict | None:
    """An envelope without its processing-time fields (read when each event is made)."""
    if value is None:
        return None
    doc = json.loads(value)
    body = doc.get("payload", doc)
    for k in ("ts_ms", "ts_us", "ts_ns"):
        body.pop(k)
    return doc


@pytest.mark.parametrize("timezone,schemas", [("UTC", False), ("Europe/Paris", True)])
def test_column_wise_snapshot_equals_row_by_row(pg_server, pg_db, timezone, schemas):
    conn = pg_server.connect(pg_db)
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute(TABLE)
        cur.execute(ROWS)
        cur.execute("SELECT 't'::regclass::oid")
        oid = cur.fetchone()[0]
        cur.execute(f"SET TimeZone = '{timezone}'")
    table = cat.read_tables(conn, [oid])[0]
    cfg = validate_connector({"connector.class": "postgres", "topic.prefix": "p", "database.hostname": "h",
                              "database.user": "u", "database.dbname": pg_db,
                              "column.mask.with.6.chars": "public.t.masked",
                              "column.exclude.list": "public.t.vc"})
    ctx = EventContext.from_config(cfg, schemas_enable=schemas)
    te = table_records(ctx, table, table.columns, streaming=False)
    kinds = {c.name: c.text_kind and c.text_kind[0] for c in te.columns}
    assert kinds["n"] == "decimal" and kinds["ts"] == "timestamptz" and kinds["tx"] == "text"
    assert kinds["i4"] == "integer" and kinds["b"] == "boolean" and kinds["masked"] is None
    cols = ", ".join(c.name for c in table.columns)
    with conn.cursor() as cur:
        import io

        text, csv = io.StringIO(), io.StringIO()
        cur.copy_expert(f"COPY (SELECT {cols} FROM t ORDER BY id) TO STDOUT", text)
        cur.copy_expert(f"COPY (SELECT {cols} FROM t ORDER BY id) TO STDOUT WITH (FORMAT csv)", csv)
    lines = text.getvalue().splitlines()
    n = len(lines)
    marks = {0: "first", n - 1: "last_in_data_collection"}

    maker = RecordMaker(ctx)
    for i, line in enumerate(lines):
        values = [unescape_copy_text(f) for f in line.split("\t")]
        maker.snapshot_row(te, values, marks.get(i, "true"), 1234, 567, 1_700_000_000_000_000, '[null,"1234"]', 9)
    row_wise = maker.take()
    assert isinstance(row_wise, EventBatch)

    encoder = SnapshotBlockEncoder(te, RecordMaker(ctx), lsn=1234, txid=567,
                                   ts_us=1_700_000_000_000_000, sequence='[null,"1234"]', version=9)
    encoded = encoder.encode(parse_csv_block(csv.getvalue().encode(), len(table.columns)), marks)
    assert not isinstance(encoded, TypedEvents)
    batch = encoded.to_arrow()

    assert batch.num_rows == n == 3007
    assert batch.column("key").to_pylist() == row_wise.key
    got, want = batch.column("value").to_pylist(), row_wise.value
    for i in range(n):
        g, w = _normalize(got[i]), _normalize(want[i])
        assert g is not None and w is not None
        gp, wp = g.get("payload", g)["after"], w.get("payload", w)["after"]
        assert g == w, (i, {k: (gp[k], wp[k]) for k in wp if gp[k] != wp[k]})
        # byte for byte, once the processing time is the same
        assert _normalize(got[i]) is not None
    assert [json.loads(v).get("payload", json.loads(v))["source"]["snapshot"] for v in (got[0], got[1], got[-1])] \
        == ["first", "true", "last_in_data_collection"]
    rest = batch.to_pydict()
    assert set(rest["topic"]) == {"p.public.t"} and set(rest["op"]) == {"r"}
    assert set(rest["_commit_version"]) == {9} and set(rest["_change_type"]) == {"insert"}

    # typed output: the block built column-wise (casts, kernels) holds what the row-by-row path puts
    # in typed blocks, and both write the same JSON as the direct path
    typed_ctx = dataclasses.replace(ctx, output="typed")
    typed_te = table_records(typed_ctx, table, table.columns, streaming=False)
    typed_maker = RecordMaker(typed_ctx)
    for i, line in enumerate(lines):
        values = [unescape_copy_text(f) for f in line.split("\t")]
        typed_maker.snapshot_row(typed_te, values, marks.get(i, "true"), 1234, 567, 1_700_000_000_000_000,
                                 '[null,"1234"]', 9)
    typed_rows = typed_maker.take()
    typed_encoder = SnapshotBlockEncoder(typed_te, RecordMaker(typed_ctx), lsn=1234, txid=567,
                                         ts_us=1_700_000_000_000_000, sequence='[null,"1234"]', version=9)
    typed_columns = typed_encoder.encode(parse_csv_block(csv.getvalue().encode(), len(table.columns)), marks)
    assert isinstance(typed_rows, TypedEvents) and isinstance(typed_columns, TypedEvents)
    for typed in (typed_rows, typed_columns):
        out = to_event_batch(typed, ctx.json_options)
        assert out.key == row_wise.key
        assert [_normalize(v) for v in out.value] == [_normalize(v) for v in want]


def test_csv_blocks_keep_nulls_empty_strings_and_empty_lines():
    rows = b'\n""\n"a,""b""\nc"\nplain\n'
    assert parse_csv_block(rows, 1)[0].to_pylist() == [None, "", 'a,"b"\nc', "plain"]
    assert [c.to_pylist() for c in parse_csv_block(b',""\n1,\n', 2)] == [[None, "1"], ["", None]]


def test_one_column_rows_holding_null_survive_a_snapshot(pg_server, pg_db):
    """A row of one NULL column is an empty CSV line: with an override SELECT (no ctid column) the
    snapshot must still emit it."""
    from headwater.engine import Engine

    pg_server.execute("CREATE TABLE one (v text); INSERT INTO one VALUES (NULL), (''), ('x'), (NULL)", pg_db)
    props = {"connector.class": "postgres", **pg_server.connector_properties(pg_db), "topic.prefix": "p",
             "table.include.list": "public.one", "slot.name": f"s_{pg_db}", "snapshot.mode": "initial_only",
             "snapshot.select.statement.overrides": "public.one",
             "snapshot.select.statement.overrides.public.one": "SELECT v FROM public.one"}
    engine = Engine(validate_connector(props))
    try:
        events = [e for batch in engine.batches(once=True) for e in json_rows(batch) if e.topic == "p.public.one"]
    finally:
        engine.close()
    docs = [json.loads(e.value) for e in events if e.value is not None]
    assert len(docs) == len(events)
    after = [d["after"]["v"] for d in docs]
    marks = [d["source"]["snapshot"] for d in docs]
    assert after == [None, "", "x", None]
    assert marks == ["first", "true", "true", "last"]


PANDAS_FREE = """
import json, sys
import psycopg2
from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from headwater.engine.engine import OffsetFile
from headwater.connectors.common.context_headers import ContextHeaders
from headwater.events.batch import ArrowEvents, PieceEvents
from headwater.spark.sinks import jsonl_lines, piece_lines

props, offsets, dsn = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
kinds, lines, made = [], 0, []
add_headers = ContextHeaders.apply


def recording(self, batch, options):  # what the connector made, before the context headers make it Arrow
    made.append(isinstance(batch, (ArrowEvents, PieceEvents)))
    return add_headers(self, batch, options)


ContextHeaders.apply = recording
for step in ("snapshot", "stream"):
    if step == "stream":
        with psycopg2.connect(dsn) as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO t SELECT g + 200000, g, g, true, 'x' || g, 'v', 'c', 1.5, 2, 3, 4, 5, now(), "
                        "now(), now(), 1, current_date, '{}', NULL, 1, NULL, 'm' FROM generate_series(1, 100) g")
            cur.execute("UPDATE t SET tx = 'updated' WHERE id = 1")
        conn.close()
    engine = Engine(validate_connector(props), OffsetFile(offsets))
    try:
        for batch in engine.batches(once=True):
            kinds.append((step, made[-1]))
            lines += sum(map(len, piece_lines(batch, 1000))) if isinstance(batch, PieceEvents) \
                else len(jsonl_lines(batch.to_arrow()))
    finally:
        engine.close()
print(json.dumps({"pandas": "pandas" in sys.modules, "kinds": kinds, "lines": lines}))
"""


def test_event_building_and_the_jsonl_sink_leave_pandas_unimported(pg_server, pg_db, tmp_path):
    """pyarrow's `pa.array`/`pa.scalar` import pandas (~50 MB and ~0.35 s in each Spark Python worker
    that reads events): a snapshot, a streamed run of INSERTs, a row-by-row UPDATE, their context
    headers and their jsonl lines must not get there."""
    import subprocess
    import sys

    pg_server.execute(TABLE + ";" + ROWS, pg_db)
    props = {"connector.class": "postgres", **pg_server.connector_properties(pg_db), "topic.prefix": "p",
             "table.include.list": "public.t", "slot.name": f"s_{pg_db}", "column.mask.with.4.chars": "public.t.masked"}
    p = pg_server.connector_properties(pg_db)
    dsn = (f"host={p['database.hostname']} port={p['database.port']} user={p['database.user']} "
           f"password={p.get('database.password', '')} dbname={pg_db}")
    out = subprocess.run([sys.executable, "-c", PANDAS_FREE, json.dumps(props), str(tmp_path / "offsets.json"), dsn],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["lines"] == 3007 + 100 + 1
    kinds = {tuple(k) for k in result["kinds"]}
    assert {("snapshot", True), ("stream", True), ("stream", False)} <= kinds  # column-wise blocks and the row path
    assert result["pandas"] is False


BIG = ("CREATE TABLE big (id bigint PRIMARY KEY, name text NOT NULL); "
       "INSERT INTO big SELECT g, repeat(md5(g::text), 8) FROM generate_series(1, 200000) g")


def _big_engine(pg_server, pg_db, monkeypatch):
    """An engine about to snapshot `big` (two chunks of ~27 MB of CSV each), its COPY text handed over
    in 64 KiB blocks: Arrow's CSV reader reads up to 32 blocks ahead of its consumer, so with the usual
    1 MiB blocks a whole chunk could be read (and its COPY ended) before the first batch is given."""
    from headwater.connectors.postgres import snapshot
    from headwater.engine import Engine

    monkeypatch.setattr(snapshot, "PIPE_BYTES", 1 << 16)
    pg_server.execute(BIG, pg_db)
    props = {"connector.class": "postgres", **pg_server.connector_properties(pg_db), "topic.prefix": "p",
             "table.include.list": "public.big", "slot.name": f"s_{pg_db}", "snapshot.mode": "initial_only",
             "headwater.snapshot.chunk.rows": "1000000"}
    return Engine(validate_connector(props))


def _copies(pg_server, pg_db, *, sending: bool = False) -> list[int]:
    """The backends running a COPY in `pg_db`; `sending`: only those waiting for the client to take
    more of its rows (the COPY has rows left to send)."""
    waiting = " AND wait_event = 'ClientWrite'" if sending else ""
    rows = pg_server.query(f"SELECT pid FROM pg_stat_activity WHERE datname = '{pg_db}' AND state = 'active' "
                           f"AND query LIKE 'COPY%' AND pid <> pg_backend_pid(){waiting}")
    return [r[0] for r in rows]


def _eventually(check, what: str, timeout: float = 60.0):
    """`check()` once it is true (polled), or the test fails naming `what`."""
    deadline = time.monotonic() + timeout
    while not (result := check()):
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not within {timeout:.0f} s")
        time.sleep(0.05)
    return result


def test_a_chunk_whose_copy_is_cut_short_fails_and_yields_no_partial_row(pg_server, pg_db, monkeypatch):
    """The connection of a chunk's COPY ends mid-table: the chunk fails with a clear error, and
    every event it gave before is a whole row (the block a cut COPY may have left half a row in is
    never given). The consumer holds the first batch until the COPY's backend waits to send more
    rows, and the backend is gone before it reads on: the COPY is cut while it still has rows to send."""
    from headwater.connectors.errors import SourceError

    engine = _big_engine(pg_server, pg_db, monkeypatch)
    got = []
    try:
        batches = engine.batches(once=True)
        got += [json.loads(e.value)["after"] for e in next(batches).rows()]
        pids = _eventually(lambda: _copies(pg_server, pg_db, sending=True), "a COPY waiting to send more rows")
        for pid in pids:
            pg_server.execute(f"SELECT pg_terminate_backend({pid})")
        gone = f"SELECT 1 FROM pg_stat_activity WHERE pid IN ({', '.join(map(str, pids))})"
        _eventually(lambda: not pg_server.query(gone), "the terminated COPY's backend gone")
        with pytest.raises(SourceError, match=r"reading snapshot of public\.big pages .* failed"):
            for batch in batches:
                got += [json.loads(e.value)["after"] for e in batch.rows()]
    finally:
        engine.close()
    assert 0 < len(got) < 200000
    assert all(len(a["name"]) == 256 for a in got)
    assert [a["id"] for a in got] == list(range(1, len(got) + 1))


def test_a_chunk_given_up_early_ends_its_copy(pg_server, pg_db, monkeypatch):
    """A consumer that stops after the first batch leaves no COPY running on the server."""
    engine = _big_engine(pg_server, pg_db, monkeypatch)
    try:
        batches = engine.batches(once=True)
        next(batches)
        _eventually(lambda: _copies(pg_server, pg_db, sending=True), "a COPY waiting to send more rows")
        batches.close()
    finally:
        engine.close()
    _eventually(lambda: _copies(pg_server, pg_db) == [], "no COPY left running")
