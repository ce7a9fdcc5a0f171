"""Runs of WRITE_ROWS decoded column-wise (`binlog.insert_runs`) give the row-wise path's events exactly.

Two engines read the same binlog on a real MariaDB: one with every run of inserts decoded column-wise
(`streaming.MIN_RUN_BYTES` 0), one row by row; their events (JSON and typed) must be equal, key
and value, but for the envelope's clock fields. The workload mixes edge values of every column type
`rows.py` decodes (NULLs, extremes, zero dates, text JSON must escape), runs across transactions,
updates, deletes and a table left to python-mysql-replication between them, DDL and TRUNCATE inside a
run, under the type-mapping settings and with masked and truncated columns. The 26 recorded Debezium
scenarios also pass with every run column-wise.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.connectors.binlog import insert_runs, streaming
from headwater.connectors.registry import validate_connector
from headwater.devservers.mariadb import MariaDBServer
from headwater.engine import Engine
from tests.connectors.binlog.test_rows import DECODED, OTHER, ROWS
from tests.connectors.mariadb import test_golden
from tests.connectors.mariadb.test_golden import SCENARIOS, fresh, run_engine
from tests.golden_support import events_diff, normalize_binlog, read_jsonl

SETTINGS = {
    "defaults": {},
    "modes": {"decimal.handling.mode": "string", "time.precision.mode": "connect",
              "bigint.unsigned.handling.mode": "precise", "binary.handling.mode": "hex",
              "enable.time.adjuster": "false"},
    "double_and_masks": {"decimal.handling.mode": "double", "include.query": "true",
                         "column.mask.with.4.chars": "{db}.fast.vc,{db}.fast.tx",
                         "column.truncate.to.3.chars": "{db}.fast.vcl",
                         "column.mask.hash.SHA-256.with.salt.s": "{db}.fast.c"},
}


def _workload(db: str) -> str:
    rows = [r.replace("(1,", "({id},", 1).replace("(2,", "({id},", 1).replace("(3,", "({id},", 1) for r in ROWS]
    many = ", ".join(rows[i % 3].format(id=100 + i) for i in range(60))
    singles = "; ".join(f"INSERT INTO {db}.fast VALUES {rows[i % 3].format(id=200 + i)}" for i in range(40))
    return f"""
SET SESSION sql_mode = ''; SET time_zone = '+00:00';
INSERT INTO {db}.fast VALUES {many};
{singles};
BEGIN; INSERT INTO {db}.fast VALUES {rows[0].format(id=300)};
UPDATE {db}.fast SET vc = 'upd' WHERE id = 100; INSERT INTO {db}.fast VALUES {rows[1].format(id=301)};
INSERT INTO {db}.other VALUES (1, 'a', 'x,y', '-12:00:00.5', b'101', '{{"k": [1, 2]}}');
INSERT INTO {db}.fast VALUES {rows[2].format(id=302)}; COMMIT;
DELETE FROM {db}.fast WHERE id = 101;
INSERT INTO {db}.fast VALUES {', '.join(rows[i % 3].format(id=400 + i) for i in range(30))};
ALTER TABLE {db}.fast ADD COLUMN extra int DEFAULT 7;
INSERT INTO {db}.fast VALUES {', '.join(rows[i % 3].format(id=500 + i)[:-1] + ', NULL)' for i in range(30))};
TRUNCATE {db}.fast;
INSERT INTO {db}.fast VALUES {', '.join(rows[i % 3].format(id=600 + i)[:-1] + f', {i})' for i in range(30))};
"""


def _props(server: Any, db: str, extra: dict[str, str]) -> dict[str, str]:
    return {"connector.class": "mariadb", **server.connector_properties(db), "database.server.id": "6123",
            "topic.prefix": "runs", "snapshot.mode": "no_data", "include.schema.changes": "true",
            **{k: v.format(db=db) for k, v in extra.items()}}


def _comparable(event: Any) -> tuple[Any, ...]:
    value = event.value_json()
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k not in ("ts_ms", "ts_us", "ts_ns")}
    return event.topic, event.key_json(), value


@pytest.mark.parametrize("output", ["json", "typed"])
@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_column_wise_runs_equal_row_by_row(mariadb_server, mariadb_db, monkeypatch, setting, output):
    db = mariadb_db
    mariadb_server.execute("SET SESSION sql_mode = ''; " + DECODED.format(db=db) + "; " + OTHER.format(db=db))
    props = _props(mariadb_server, db, SETTINGS[setting])
    engines = {mode: Engine(validate_connector({**props, "database.server.id": server_id}), output=output)
               for mode, server_id in (("rows", "6124"), ("columns", "6125"))}
    try:
        for engine in engines.values():
            list(engine.events(once=True))  # the schema snapshot; the stream starts here
        mariadb_server.execute(_workload(db))
        got = {}
        for mode, engine in engines.items():
            monkeypatch.setattr(streaming, "MIN_RUN_BYTES", 0 if mode == "columns" else 1 << 62)
            got[mode] = [_comparable(e) for e in engine.events(once=True)]
    finally:
        for engine in engines.values():
            engine.close()
    assert len(got["rows"]) >= 190
    assert got["columns"] == got["rows"]


@pytest.mark.parametrize("output", ["json", "typed"])
def test_a_runs_blocks_are_made_later_and_refused_ones_row_by_row(mariadb_server, mariadb_db, monkeypatch, output):
    """A run's rows are found at once and its blocks (MAX_RUN_BYTES of events each) made as the slice hands
    them on, after the decoder has moved past the run (past an ALTER TABLE of the run's table, here); a block
    the column-wise encoder refuses is decoded row by row with the run's table as it was. Events equal the
    row-by-row path's."""
    db = mariadb_db
    mariadb_server.execute("SET SESSION sql_mode = ''; " + DECODED.format(db=db) + "; " + OTHER.format(db=db))
    props = _props(mariadb_server, db, {})
    engines = {mode: Engine(validate_connector({**props, "database.server.id": server_id}), output=output)
               for mode, server_id in (("rows", "6126"), ("columns", "6127"))}
    real = streaming._Decoder._run_block
    calls = {"made": 0, "refused": 0}

    def every_other_refused(self, run, events, rows):
        if (calls["made"] + calls["refused"]) % 2:
            calls["refused"] += 1
            raise ValueError("refused by the test")
        calls["made"] += 1
        return real(self, run, events, rows)

    try:
        for engine in engines.values():
            list(engine.events(once=True))
        mariadb_server.execute(_workload(db))
        got = {}
        for mode, engine in engines.items():
            with monkeypatch.context() as m:
                if mode == "columns":
                    m.setattr(streaming, "MIN_RUN_BYTES", 0)
                    m.setattr(streaming, "MAX_RUN_BYTES", 60_000)
                    m.setattr(streaming._Decoder, "_run_block", every_other_refused)
                else:
                    m.setattr(streaming, "MIN_RUN_BYTES", 1 << 62)
                got[mode] = [_comparable(e) for e in engine.events(once=True)]
    finally:
        for engine in engines.values():
            engine.close()
    assert calls["made"] >= 10 and calls["refused"] >= 10
    assert len(got["rows"]) >= 190
    assert got["columns"] == got["rows"]


def test_runs_are_column_wise(mariadb_server, mariadb_db, monkeypatch):
    """The column-wise decoder takes the workload's runs (the test above would pass vacuously otherwise)."""
    db = mariadb_db
    mariadb_server.execute("SET SESSION sql_mode = ''; " + DECODED.format(db=db) + "; " + OTHER.format(db=db))
    decoded: list[int] = []
    real = insert_runs.decode_writes

    def counting(payloads, tm):
        rows = real(payloads, tm)
        decoded.append(0 if rows is None else len(rows.event))
        return rows

    monkeypatch.setattr(streaming, "decode_writes", counting)
    monkeypatch.setattr(streaming, "MIN_RUN_BYTES", 0)
    engine = Engine(validate_connector(_props(mariadb_server, db, {})))
    try:
        list(engine.events(once=True))
        mariadb_server.execute(_workload(db))
        events = list(engine.events(once=True))
    finally:
        engine.close()
    assert sum(decoded) >= 60 + 40 + 30 + 30 + 30 and 0 not in decoded
    assert len(events) >= 190


def test_civil_dates_round_trip():
    days = np.arange(-719_162, 2_932_897, 997, dtype=np.int64)  # 0001-01-01 .. 9999-12-31
    year, month, day = insert_runs.civil_from_days(days)
    assert (insert_runs.days_from_civil(year, month, day) == days).all()
    assert (year[0], month[0], day[0]) == (1, 1, 1)


@pytest.fixture(scope="module")
def golden_server():
    """A server set up as `test_golden`'s (the recording's server character set)."""
    with MariaDBServer(settings={"character-set-server": "latin1", "collation-server": "latin1_swedish_ci"}) as own:
        yield own


@pytest.mark.parametrize("output", ["json", "typed"])
@pytest.mark.parametrize("name", SCENARIOS)
def test_recorded_scenarios_with_every_run_column_wise(golden_server, name, output, tmp_path, monkeypatch):
    monkeypatch.setattr(streaming, "MIN_RUN_BYTES", 0)
    fresh(golden_server)
    golden_server.execute((test_golden.REFERENCE / name / "setup.sql").read_text())
    actual = run_engine(golden_server, name, tmp_path / "offsets.json", output)
    expected = read_jsonl(test_golden.REFERENCE / name / "events.jsonl")
    message = events_diff(normalize_binlog(expected), normalize_binlog(actual))
    assert message is None, message


# ----------------------------------------------------------------------------- the walk, without a server

def _table_map() -> Any:
    """A TABLE_MAP's table as python-mysql-replication gives it: BIGINT, VARCHAR(300) utf8mb4, INT, DECIMAL(12,2), TINYINT."""
    from types import SimpleNamespace

    from pymysqlreplication.constants import FIELD_TYPE

    cols = [SimpleNamespace(type=FIELD_TYPE.LONGLONG, unsigned=False),
            SimpleNamespace(type=FIELD_TYPE.VARCHAR, max_length=1200, character_set_name="utf8mb4"),
            SimpleNamespace(type=FIELD_TYPE.LONG, unsigned=False),
            SimpleNamespace(type=FIELD_TYPE.NEWDECIMAL, precision=12, decimals=2),
            SimpleNamespace(type=FIELD_TYPE.TINY, unsigned=False)]
    return SimpleNamespace(columns=cols, schema="db", table="t")


def _row(values: tuple[Any, ...]) -> bytes:
    """A row image of `_table_map`'s columns (None: NULL)."""
    nulls = sum(1 << i for i, v in enumerate(values) if v is None)
    out = bytes([nulls])
    for i, v in enumerate(values):
        if v is None:
            continue
        if i == 0:
            out += v.to_bytes(8, "little", signed=True)
        elif i == 1:
            raw = v.encode()
            out += len(raw).to_bytes(2, "little") + raw
        elif i == 2:
            out += v.to_bytes(4, "little", signed=True)
        elif i == 3:  # DECIMAL(12,2) of a non-negative number: 10 integral digits (1 + 4 bytes), 2 decimals (1 byte)
            whole, cents = divmod(v, 100)
            raw = bytearray(whole.to_bytes(5, "big") + bytes([cents]))
            raw[0] |= 0x80
            out += bytes(raw)
        else:
            out += v.to_bytes(1, "little", signed=True)
    return out


def _write_rows(rows: list[bytes]) -> bytes:
    """A framed WRITE_ROWS_V1 event (type byte + header + body) of table id 7 holding `rows`."""
    body = (7).to_bytes(6, "little") + b"\0\0" + bytes([5, 0x1F]) + b"".join(rows)
    header = struct.pack("<IBIIIH", 1_700_000_000, 23, 1, 19 + len(body), 0, 0)
    return bytes([23]) + header + body


ROW_VALUES = [(1, "a", 10, 123, 1), (2, None, None, 0, None), (3, "héllo" * 30, -5, 99_999_999_999, -1),
              (4, "", 0, 1, 0), (None, "x", 7, None, 3), (6, "z" * 250, 2**31 - 1, 5, 127)]


def test_the_walk_finds_every_value_of_runs_of_events(monkeypatch):
    """Events of 1 to 4 rows (NULLs, texts of every length prefix) read column-wise as `rows.py` reads them."""
    from headwater.connectors.binlog.rows import rows_of

    tm = _table_map()
    sizes = [1, 4, 2, 3, 1, 1]
    payloads, at = [], 0
    for n in sizes:
        payloads.append(_write_rows([_row(ROW_VALUES[(at + k) % len(ROW_VALUES)]) for k in range(n)]))
        at += n
    rows = insert_runs.decode_writes(payloads, tm)
    assert rows is not None
    assert rows.counts.tolist() == sizes
    assert rows.event.tolist() == [e for e, n in enumerate(sizes) for _ in range(n)]
    assert rows.row.tolist() == [k for n in sizes for k in range(n)]
    decoded = [rows_of(p, {7: tm}) for p in payloads]
    expected = [image for images in decoded if images is not None for (image,) in images]
    plan = insert_runs.plan_of(tm)
    assert plan is not None and len(expected) == sum(sizes)
    for j in range(len(tm.columns)):
        got = [None if rows.nulls[i, j] else plan[j](rows.data, int(rows.offsets[i, j]))[0] for i in range(len(expected))]
        assert got == [image[j] for image in expected]
    assert rows.data[rows.begins[2]] == 23  # each event's start: its type byte


@pytest.mark.parametrize("damage", ["text past its event", "text past every event", "value cut"])
def test_a_malformed_run_is_left_to_the_row_by_row_decoder(damage):
    """A length or a cut that does not fit its event: no offsets (the caller decodes the events one by one,
    whose checks then fail with the library's error), never offsets into another event."""
    tm = _table_map()
    good = _write_rows([_row(ROW_VALUES[0]), _row(ROW_VALUES[2])])
    if damage == "value cut":
        payloads = [good, _write_rows([_row(ROW_VALUES[0])])[:-3]]
    else:
        bad = bytearray(_write_rows([_row(ROW_VALUES[0]), _row(ROW_VALUES[3])]))
        at = len(bad) - len(_row(ROW_VALUES[3])) + 1 + 8  # the second row's text length
        bad[at:at + 2] = (40 if damage == "text past its event" else 65000).to_bytes(2, "little")
        payloads = [bytes(bad), good] if damage == "text past its event" else [good, bytes(bad)]
    assert insert_runs.decode_writes(payloads, tm) is None
    assert insert_runs.decode_writes([good, good], tm) is not None


# A table of every layout the walk tells apart: 11 columns (a null bitmap of two bytes), fixed-width
# groups between length-prefixed values of 1, 2, 3 and 4 prefix bytes.
_WIDE = [("LONGLONG", 8, 0), ("STRING", 0, 1), ("TINY", 1, 0), ("INT24", 3, 0), ("VARCHAR", 0, 2),
         ("NEWDECIMAL", 6, 0), ("SHORT", 2, 0), ("BLOB", 0, 3), ("BLOB", 0, 4), ("LONG", 4, 0), ("TINY", 1, 0)]


def _wide_table_map() -> Any:
    from types import SimpleNamespace

    from pymysqlreplication.constants import FIELD_TYPE

    cols = []
    for name, _, prefix in _WIDE:
        c = SimpleNamespace(type=getattr(FIELD_TYPE, name), unsigned=False, character_set_name="utf8mb4")
        if name in ("STRING", "VARCHAR"):
            c.max_length = 200 if prefix == 1 else 1000
        elif name == "BLOB":
            c.length_size = prefix
        elif name == "NEWDECIMAL":
            c.precision, c.decimals = 12, 2
        cols.append(c)
    return SimpleNamespace(columns=cols, schema="db", table="wide")


def _wide_row(draw: Any) -> bytes:
    """A row image of `_wide_table_map` with random NULLs, bytes and texts (and padding bits set in its
    null bitmap, as servers may leave them)."""
    nulls = draw(st.lists(st.booleans(), min_size=len(_WIDE), max_size=len(_WIDE)))
    out = (sum(1 << i for i, n in enumerate(nulls) if n) | (0b11111 << len(_WIDE))).to_bytes(2, "little")
    for (_, width, prefix), null in zip(_WIDE, nulls, strict=True):
        if null:
            continue
        if width == 6:  # DECIMAL(12,2): a valid value (`_row`'s layout)
            raw = bytearray(draw(st.integers(0, 10**9 - 1)).to_bytes(5, "big") + bytes([draw(st.integers(0, 99))]))
            raw[0] |= 0x80
            out += bytes(raw)
        elif width:
            out += draw(st.binary(min_size=width, max_size=width))
        else:
            text = draw(st.text(alphabet="ab\u00e9\u20ac\"\\", max_size=80 if prefix == 1 else 300)).encode()
            out += len(text).to_bytes(prefix, "little") + text
    return out


def _wide_write_rows(rows: list[bytes], v2: bool) -> bytes:
    """A framed WRITE_ROWS event (v1, or v2 with 5 bytes of extra data) of table id 9 holding `rows`."""
    kind = 30 if v2 else 23
    extra = (7).to_bytes(2, "little") + b"\1\3abc" if v2 else b""
    body = (9).to_bytes(6, "little") + b"\0\0" + extra + bytes([len(_WIDE)]) + b"\xff\x07" + b"".join(rows)
    return bytes([kind]) + struct.pack("<IBIIIH", 1_700_000_000, kind, 1, 19 + len(body), 0, 0) + body


@given(st.data())
@settings(max_examples=60, deadline=None)
def test_the_walk_reads_every_layout_as_rows_py(data):
    """Events of 0 to 12 rows (v1 and v2, NULLs in some rows only, every length prefix size, a two-byte
    null bitmap with its padding bits set) read column-wise exactly as `rows.py` reads each event."""
    from headwater.connectors.binlog.rows import rows_of

    tm = _wide_table_map()
    plan = insert_runs.plan_of(tm)
    assert plan is not None
    sizes = data.draw(st.lists(st.integers(0, 12), min_size=1, max_size=6))
    payloads = [_wide_write_rows([_wide_row(data.draw) for _ in range(n)], data.draw(st.booleans())) for n in sizes]
    rows = insert_runs.decode_writes(payloads, tm)
    if not sum(sizes):
        assert rows is not None and not len(rows.event)
        return
    assert rows is not None
    assert rows.counts.tolist() == sizes
    assert rows.event.tolist() == [e for e, n in enumerate(sizes) for _ in range(n)]
    assert rows.row.tolist() == [k for n in sizes for k in range(n)]
    expected = [image for p in payloads for (image,) in (rows_of(p, {9: tm}) or [])]
    assert len(expected) == sum(sizes)
    for j in range(len(_WIDE)):
        got = [None if rows.nulls[i, j] else plan[j](rows.data, int(rows.offsets[i, j]))[0] for i in range(len(expected))]
        assert got == [image[j] for image in expected]


@pytest.mark.parametrize("damage", ["partial image", "update event", "column count", "header cut"])
def test_events_the_walk_does_not_take(damage):
    """A partial row image, another rows event, another column count, an event cut in its header: no
    offsets (the events are decoded one by one)."""
    tm = _wide_table_map()
    good = _wide_write_rows([b"\xff\xff", b"\xff\xff"], False)  # two rows of NULLs
    bad = bytearray(good)
    at = 1 + 19 + 8
    if damage == "partial image":
        bad[at + 1] = 0xFE
    elif damage == "update event":
        bad[0] = 24
    elif damage == "column count":
        bad[at] = len(_WIDE) - 1
    else:
        bad = bad[:at]
    assert insert_runs.decode_writes([good, bytes(bad)], tm) is None
    assert insert_runs.decode_writes([good, good], tm) is not None


# ----------------------------------------------------------------------------- the value kernels, without a server

def _column(name: str, **attrs: Any) -> Any:
    from types import SimpleNamespace

    from pymysqlreplication.constants import FIELD_TYPE

    return SimpleNamespace(type=getattr(FIELD_TYPE, name), unsigned=False, **attrs)


def _laid_out(values: list[bytes]) -> tuple[bytes, np.ndarray]:
    """Values end to end (with the run buffer's padding after them) and each one's offset."""
    at = np.cumsum([0, *map(len, values)])[:-1].astype(np.int64)
    return b"".join(values) + bytes(insert_runs._PAD), at


def _decimal_bytes(negative: bool, digits: str, precision: int, decimals: int) -> bytes:
    """MySQL's NEWDECIMAL bytes of the number `[-]digits` / 10**decimals (`rows._decimal` reads them)."""
    integral, fraction = digits[:len(digits) - decimals].rjust(precision - decimals, "0"), digits[len(digits) - decimals:]
    raw = b""
    for size, width in insert_runs._decimal_groups(precision, decimals):
        part, integral = (integral[:width], integral[width:]) if integral else (fraction[:width], fraction[width:])
        raw += int(part or "0").to_bytes(size, "big")
    out = bytearray(raw)
    out[0] |= 0x80
    return bytes(b ^ 0xFF for b in out) if negative else bytes(out)


@given(st.data())
@settings(max_examples=40, deadline=None)
def test_integer_and_decimal_kernels_read_as_rows_py(data):
    """Integers of every width, signed and unsigned (their extremes among random bytes), and DECIMALs of
    up to 18 digits (negative, zero, every precision and scale) read at once as `rows.py` reads each."""
    from headwater.connectors.binlog.rows import _reader

    for name, width in (("TINY", 1), ("SHORT", 2), ("INT24", 3), ("LONG", 4), ("LONGLONG", 8)):
        for unsigned in (False, True):
            column = _column(name)
            column.unsigned = unsigned
            extremes = [b"\0" * width, b"\xff" * width, b"\x7f" + b"\xff" * (width - 1), b"\x80" + b"\0" * (width - 1)]
            values = extremes + data.draw(st.lists(st.binary(min_size=width, max_size=width), max_size=20))
            buf, at = _laid_out(values)
            read = _reader(column)
            assert read is not None
            expected = [read(buf, int(a))[0] for a in at]
            # (BIGINT UNSIGNED as int64 wraps, as its converter does)
            assert insert_runs._integers(buf, at, column).tolist() == [v - (1 << 64) if v >= 1 << 63 else v for v in expected]
    precision = data.draw(st.integers(1, 18))
    decimals = data.draw(st.integers(0, precision))
    column = _column("NEWDECIMAL", precision=precision, decimals=decimals)
    numbers = [(False, "0"), (True, "0"), (False, "9" * precision), (True, "9" * precision)] + data.draw(st.lists(
        st.tuples(st.booleans(), st.text("0123456789", min_size=1, max_size=precision)), max_size=20))
    buf, at = _laid_out([_decimal_bytes(n, d, precision, decimals) for n, d in numbers])
    read = _reader(column)
    assert read is not None
    expected = [int(read(buf, int(a))[0].scaleb(decimals)) for a in at]
    assert insert_runs._unscaled(buf, at, column).tolist() == expected


@given(st.data())
@settings(max_examples=40, deadline=None)
def test_timestamp_and_datetime_kernels_read_as_rows_py(data):
    """TIMESTAMP2 (seconds and fraction, negative fractions) and DATETIME2 (zero and impossible dates
    among valid ones) of every fractional precision read at once as `rows.py` reads each."""
    import datetime as dt

    from headwater.connectors.binlog.rows import _reader

    epoch = dt.datetime(1970, 1, 1)
    fsp = data.draw(st.integers(0, 6))
    size = (fsp + 1) // 2
    limit = 10 ** (2 * size)  # (a fraction's stored digits; negative ones count as none)
    fraction = st.integers(1 - limit, limit - 1).map(lambda f: f.to_bytes(size, "big", signed=True))
    stamps = data.draw(st.lists(st.tuples(st.binary(min_size=4, max_size=4), fraction).map(b"".join), max_size=20))
    stamps = [b"\0" * (4 + size), *stamps]
    buf, at = _laid_out(stamps)
    read = _reader(_column("TIMESTAMP2", fsp=fsp))
    assert read is not None
    expected = [(read(buf, int(a))[0] - epoch) // dt.timedelta(microseconds=1) for a in at]
    seconds = insert_runs._read(buf, at, 4, big=True, signed=True)
    assert (seconds * 1_000_000 + insert_runs._fraction(buf, at + 4, fsp)).tolist() == expected

    fields = st.tuples(st.integers(0, 9999), st.integers(0, 12), st.integers(0, 31), st.integers(0, 23),
                       st.integers(0, 59), st.integers(0, 59))
    values = []
    for year, month, day, hour, minute, second in [(0, 0, 0, 0, 0, 0), *data.draw(st.lists(fields, max_size=20))]:
        packed = 1 << 39 | (year * 13 + month) << 22 | day << 17 | hour << 12 | minute << 6 | second
        values.append(packed.to_bytes(5, "big") + data.draw(fraction))
    buf, at = _laid_out(values)
    read = _reader(_column("DATETIME2", fsp=fsp))
    assert read is not None
    expected = [read(buf, int(a))[0] for a in at]
    micros, valid = insert_runs._datetime_fields(buf, at, fsp, False)
    assert valid.tolist() == [v is not None for v in expected]
    assert micros[valid].tolist() == [(v - epoch) // dt.timedelta(microseconds=1) for v in expected if v is not None]


@given(st.lists(st.integers(-62_135_596_800_000_000, 253_402_300_799_999_999), max_size=40), st.integers(0, 6))
@settings(max_examples=30, deadline=None)
def test_iso_timestamps_at_once_as_one_by_one(micros, digits):
    """The ZonedTimestamp JSON of UTC microseconds from year 1 to 9999 (both ends, the epoch) as the
    row-wise path writes each (`java.iso_timestamp_utc`)."""
    import orjson

    from headwater.connectors.common.java import iso_timestamp_utc

    micros = [-62_135_596_800_000_000, 253_402_300_799_999_999, 0, -1, *micros]
    got = insert_runs._iso_json(np.array(micros, dtype=np.int64), digits).to_pylist()
    assert got == [orjson.dumps(iso_timestamp_utc(m, digits)) for m in micros]


def _listed(json: Any) -> list[bytes]:
    """A column's JSON per row (not one shared text)."""
    assert not isinstance(json, bytes)
    return json.to_pylist()


@given(st.data(), st.booleans())
@settings(max_examples=60, deadline=None)
def test_a_runs_texts_per_event_as_orjson_writes_them(data, with_none):
    """The source block's texts per event (GTIDs, files, statements: escapes, non-ASCII, empty texts,
    None) column-wise as `orjson` writes each, taken for each row of its event or one row an event."""
    import orjson

    alphabet = data.draw(st.sampled_from(['ab-:0/\x7f', 'ab-:0"\\/\x7f', 'ab\x00\x1f', 'ab\u00e9\u2028']))
    texts = data.draw(st.lists(st.text(alphabet=alphabet, max_size=6), min_size=65, max_size=90))
    values: list[str | None] = [*texts, None] if with_none else list(texts)
    values += [f"0-1-{i}" for i in range(70)]  # (more than 64 distinct: column-wise)
    expected = [orjson.dumps(v) for v in values]
    assert _listed(streaming._json_per_row(values, None)) == expected
    per_row = np.repeat(np.arange(len(values)), 2)
    taken = streaming._json_per_row(values, streaming.int64_array(per_row))
    assert _listed(taken) == [expected[e] for e in per_row]


@pytest.mark.parametrize("text", ['a"b', "c\\d", "e\x01", "\x1f", "\x7f/", "\u00e9", "\u2028", ""])
def test_a_runs_text_json_must_escape_or_is_not_ascii(text):
    """A text among ASCII ones that JSON escapes, or that is not ASCII, as `orjson` writes it."""
    import orjson

    values = [text, *(f"0-1-{i}" for i in range(70))]
    assert _listed(streaming._json_per_row(values, None)) == [orjson.dumps(v) for v in values]
