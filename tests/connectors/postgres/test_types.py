"""PostgreSQL type conversion and table metadata, checked against Debezium 3.6.3's recorded events.

For every ``tests/golden/postgres/types_*`` scenario: run its setup SQL on a fresh database, read
the catalog with ``catalog.py``, and check that

- the Connect schema built for every column equals the field schema Debezium wrote (and that the
  columns Debezium drops are the ones the factory refuses);
- each snapshot row's values, read back as PostgreSQL's text (COPY TO STDOUT, unescaped) and as
  the binary send format (COPY BINARY), convert to exactly the payload Debezium wrote;
- after the scenario's ``during`` SQL, the streamed inserts convert (with the streaming semantics)
  to Debezium's streamed payloads, deletes give the before image Debezium wrote (key plus
  fallbacks/defaults) and unchanged TOAST columns give the placeholder.

No JVM is needed: the Debezium side is the recorded ``debezium.jsonl``. Unit tests of tricky
values follow.
"""

from __future__ import annotations

import io
import json
import re
import struct
import time
from typing import Any

import pytest

from headwater.connectors.common import java
from headwater.connectors.postgres import catalog as cat
from headwater.connectors.postgres import pgvalues as pv
from headwater.connectors.postgres.pgoutput import Column, Relation
from headwater.connectors.postgres.types import (
    ColumnConverter,
    ConversionError,
    TypeSettings,
    build_converter,
    source_type_parameters,
)
from headwater.events import calendar
from tests.golden_support import GOLDEN_ROOT, load_scenario, run_psql_script

GOLDEN = GOLDEN_ROOT / "postgres"
SCENARIOS = sorted(p.name for p in GOLDEN.glob("types_*") if (p / "debezium.jsonl").exists())

# Column defaults whose values change from run to run: their values are not compared.
VOLATILE = re.compile(r"now\(\)|current_|localtime|random\(|gen_random_uuid", re.IGNORECASE)
# Debezium writes Java's identity hash of a String[] for a row of a text[][]: compared by shape.
JAVA_ARRAY = re.compile(r"^\[Ljava\.lang\.String;@[0-9a-f]+$")


# ------------------------------------------------------------------------------- helpers


def copy_out(conn, table: str, buf: io.StringIO | io.BytesIO, options: str = "") -> list[str]:
    """`table`'s rows ordered by id, copied into `buf` (COPY TO STDOUT with `options`); its column names."""
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {table} LIMIT 0")
        names = [d.name for d in cur.description]
        cur.copy_expert(f"COPY (SELECT * FROM {table} ORDER BY id) TO STDOUT{options}", buf)
    return names


def copy_text(conn, table: str) -> dict[int, dict[str, str | None]]:
    """Rows of `table` by id as COPY TO STDOUT text, unescaped."""
    buf = io.StringIO()
    names = copy_out(conn, table, buf)
    rows = {}
    for line in buf.getvalue().split("\n"):
        if not line:
            continue
        values = [pv.unescape_copy_text(f) for f in line.split("\t")]
        row = dict(zip(names, values, strict=True))
        rows[int(row["id"] or "")] = row  # every row has an id
    return rows


def copy_binary(conn, table: str) -> dict[int, dict[str, bytes | None]]:
    """Rows of `table` by id as COPY BINARY fields (the types' send format)."""
    buf = io.BytesIO()
    names = copy_out(conn, table, buf, " (FORMAT binary)")
    data = buf.getvalue()
    pos = 11 + 4
    ext = struct.unpack_from("!i", data, pos)[0]
    pos += 4 + ext
    rows = {}
    while True:
        n = struct.unpack_from("!h", data, pos)[0]
        pos += 2
        if n == -1:
            break
        values: list[bytes | None] = []
        for _ in range(n):
            size = struct.unpack_from("!i", data, pos)[0]
            pos += 4
            if size < 0:
                values.append(None)
            else:
                values.append(data[pos:pos + size])
                pos += size
        row = dict(zip(names, values, strict=True))
        rows[int.from_bytes(row["id"] or b"", "big", signed=True)] = row  # every row has an id
    return rows


def field_schemas(value_schema: dict) -> dict[str, dict]:
    """The `after`/`before` struct's field schemas by name, without the `field` key."""
    row = next(f for f in value_schema["fields"] if f["field"] == "before")
    return {f["field"]: {k: v for k, v in f.items() if k != "field"} for f in row["fields"]}


def same(expected: Any, actual: Any) -> bool:
    """JSON equality, with Debezium's Java identity hashes matched by shape."""
    if isinstance(expected, str) and JAVA_ARRAY.match(expected):
        return isinstance(actual, str) and JAVA_ARRAY.match(actual) is not None
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(same(e, a) for e, a in zip(expected, actual, strict=True))
    return json.loads(json.dumps(actual)) == expected


def convert(fn, value):
    try:
        return fn(value)
    except ConversionError as exc:
        return f"<ConversionError {exc}>"


class Recorded:
    """A scenario replayed on a fresh database, with the catalog and the values to convert."""

    def __init__(self, name: str, server, dbname: str):
        self.scenario = load_scenario(GOLDEN / name)
        self.settings = TypeSettings.from_config(self.scenario.properties)
        run_psql_script(server, dbname, self.scenario.setup)
        self.conn = server.connect(dbname)
        self.events = [e for e in self.scenario.events if e["value"] is not None]
        self.topics = sorted({e["topic"] for e in self.events})
        self.tables = {t.id: t for t in cat.read_tables(self.conn, [self.table_id(t) for t in self.topics])}
        self.snap_text = {t: copy_text(self.conn, t) for t in self.tables}
        self.snap_binary = {t: copy_binary(self.conn, t) for t in self.tables}
        if self.scenario.during:
            run_psql_script(server, dbname, self.scenario.during)
        self.stream_text = {t: copy_text(self.conn, t) for t in self.tables}
        self.toasted = self._toasted()

    @staticmethod
    def table_id(topic: str) -> str:
        return topic.split(".", 1)[1]

    def _toasted(self) -> dict[str, set[str]]:
        """Columns stored out of line (pgoutput sends them as unchanged TOAST in an update).

        A large value of a type with extended storage; numeric's storage is 'main' (kept inline).
        """
        out: dict[str, set[str]] = {}
        for tid in self.tables:
            with self.conn.cursor() as cur:
                cur.execute("SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
                            "AND attstorage IN ('x', 'e')", (tid,))
                cols = [r[0] for r in cur.fetchall()]
            if not cols:
                out[tid] = set()
                continue
            with self.conn.cursor() as cur:
                cur.execute(f"SELECT {', '.join(f'pg_column_size({c}) > 2000' for c in cols)} "
                            f"FROM {tid} ORDER BY id LIMIT 1")
                row = cur.fetchone()
            out[tid] = {c for c, big in zip(cols, row or [], strict=False) if big}
        return out

    def converters(self, tid: str) -> dict[str, Any]:
        table = self.tables[tid]
        return {c.name: build_converter(c, self.settings, tid) for c in table.columns}


@pytest.fixture(scope="module")
def recorded(pg_server):
    cache: dict[str, Recorded] = {}

    databases: list[str] = []

    def get(name: str) -> Recorded:
        if name not in cache:
            dbname = f"types_{name}_{int(time.time() * 1000) % 100000}"
            pg_server.create_database(dbname)
            databases.append(dbname)
            cache[name] = Recorded(name, pg_server, dbname)
        return cache[name]

    yield get
    for r in cache.values():
        r.conn.close()
    for dbname in databases:
        pg_server.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


# ---------------------------------------------------------------------------- golden tests


@pytest.mark.parametrize("name", SCENARIOS)
def test_schemas_match_debezium(recorded, name):
    rec = recorded(name)
    mismatches = []
    for topic in rec.topics:
        tid = rec.table_id(topic)
        convs = rec.converters(tid)
        for event in rec.events:
            if event["topic"] != topic:
                continue
            op = event["value"]["payload"]["op"]
            golden = field_schemas(event["value"]["schema"])
            expected_names = [c.name for c in rec.tables[tid].columns
                              if convs[c.name] is not None and (op == "r" or not c.is_generated)]
            if list(golden) != expected_names:
                mismatches.append(f"{tid} ({op}): columns {list(golden)} != {expected_names}")
                continue
            for col, schema in golden.items():
                mine = (convs[col].schema if op == "r" else convs[col].stream_schema).to_json()
                if mine != schema:
                    mismatches.append(f"{tid}.{col}: {json.dumps(mine, sort_keys=True)}\n"
                                      f"   debezium: {json.dumps(schema, sort_keys=True)}")
    assert not mismatches, "\n".join(dict.fromkeys(mismatches))


def _key(event: dict) -> int:
    payload = event["key"]["payload"] if "payload" in (event["key"] or {}) else event["key"]
    return int(payload["id"])


@pytest.mark.parametrize("name", SCENARIOS)
def test_values_match_debezium(recorded, name):
    rec = recorded(name)
    mismatches = []
    for event in rec.events:
        tid = rec.table_id(event["topic"])
        convs = rec.converters(tid)
        table = rec.tables[tid]
        payload = event["value"]["payload"]
        op = payload["op"]
        key = _key(event)
        row = payload["after"] if op != "d" else payload["before"]
        for col, golden in row.items():
            conv = convs[col]
            column = table.column(col)
            if op == "r":
                text = rec.snap_text[tid][key][col]
                fn = conv.from_text
            elif op == "d":
                text = rec.snap_text[tid][key][col] if col in table.primary_key else "<absent>"
                fn = conv.from_stream_text
            else:
                text = rec.stream_text[tid][key][col]
                fn = conv.from_stream_text
            if text is not None and column.default_expr and VOLATILE.search(column.default_expr):
                continue
            if op == "u" and col in rec.toasted[tid]:
                mine = conv.toast_placeholder
            elif text == "<absent>" or text is None:
                mine = conv.null_value
            else:
                mine = convert(fn, text)
            if not same(golden, mine):
                mismatches.append(f"{tid}.{col} [{op} id={key}] text={text!r:.80}\n"
                                  f"   mine:     {json.dumps(mine)[:300]}\n   debezium: {json.dumps(golden)[:300]}")
    assert not mismatches, f"{len(mismatches)} mismatches:\n" + "\n".join(mismatches[:60])


@pytest.mark.parametrize("name", SCENARIOS)
def test_binary_values_match_debezium(recorded, name):
    rec = recorded(name)
    mismatches, checked = [], 0
    for event in rec.events:
        payload = event["value"]["payload"]
        if payload["op"] != "r":
            continue
        tid = rec.table_id(event["topic"])
        convs = rec.converters(tid)
        key = _key(event)
        for col, golden in payload["after"].items():
            conv = convs[col]
            raw = rec.snap_binary[tid][key][col]
            if raw is None or not conv.binary_supported:
                continue
            column = rec.tables[tid].column(col)
            if column.default_expr and VOLATILE.search(column.default_expr):
                continue
            checked += 1
            mine = convert(conv.from_binary, raw)
            if not same(golden, mine):
                mismatches.append(f"{tid}.{col} [id={key}] raw={raw[:40]!r}\n"
                                  f"   mine:     {json.dumps(mine)[:300]}\n   debezium: {json.dumps(golden)[:300]}")
    assert not mismatches, f"{len(mismatches)} mismatches of {checked}:\n" + "\n".join(mismatches[:60])


# ----------------------------------------------------------------------------- unit tests


def _col(registry_types: dict[int, cat.PgType] | None = None, **kw) -> cat.ColumnInfo:
    base: dict[str, Any] = dict(name="c", position=1, type_oid=cat.INT4, type_name="integer", typname="int4",
                jdbc_type_name="int4", typmod=-1, not_null=False, default_expr=None, root_oid=cat.INT4,
                root_name="int4")
    base.update(kw)
    return cat.ColumnInfo(**base)


def converter(column: cat.ColumnInfo, settings: TypeSettings | None = None) -> ColumnConverter:
    """`build_converter` for a column Debezium keeps in its events."""
    conv = build_converter(column, settings)
    assert conv is not None, column
    return conv


def test_byte_arrays_are_javas():
    assert java.to_byte_array(0) == b"\x00"
    assert java.to_byte_array(127) == b"\x7f"
    assert java.to_byte_array(128) == b"\x00\x80"
    assert java.to_byte_array(-128) == b"\x80"
    assert java.to_byte_array(-129) == b"\xff\x7f"
    assert java.to_byte_array(-(2**63)) == b"\x80" + b"\x00" * 7


def test_calendar_round_trips_and_bc_dates():
    for days in (-2440550, -719528, -719162, -141438, -1, 0, 18321, 106762939):
        assert calendar.days_from_civil(*calendar.civil_from_days(days)) == days
    assert pv.date_days("0001-01-01 BC") == -719528  # year 0, proleptic
    assert pv.date_days_jdbc("0001-01-01 BC") == -719162  # java.sql.Date drops the era
    assert java.iso_timestamp_utc(pv.timestamptz_micros("0044-03-15 12:00:00+00 BC"), 0) == "-0043-03-15T12:00:00Z"
    assert java.iso_timestamp_utc(pv.timestamptz_micros("10000-01-01 00:00:00+00"), 0) == "+10000-01-01T00:00:00Z"


def test_timestamptz_offsets_and_fraction_widths():
    us = pv.timestamptz_micros("2020-01-01 08:00:00.12345-03:30")
    assert java.iso_timestamp_utc(us, 5) == "2020-01-01T11:30:00.12345Z"
    assert java.iso_timestamp_utc(us, 6) == "2020-01-01T11:30:00.123450Z"
    assert java.iso_timestamp_utc(pv.timestamptz_micros("1900-01-01 00:00:00+00:19:32"), 0) == \
        "1899-12-31T23:40:28Z"


def test_zoned_time_wraps_and_strips_zeros():
    local, off = pv.timetz_parts("24:00:00+01")
    assert java.iso_time_utc(local - off * 1_000_000) == "23:00:00Z"
    assert java.iso_time_utc(pv.time_micros("13:00:00.120000")) == "13:00:00.12Z"


def test_interval_follows_pginterval_and_microduration():
    fields = pv.pginterval("-1 years -2 mons -3 days -04:05:06.789")
    assert fields == (-1, -2, -3, -4, -5, -6.789)
    assert pv.interval_micros(fields) == -37091106789000
    assert pv.interval_micros(pv.pginterval("178000000 years")) == java.LONG_MAX  # saturates like Java
    assert pv.interval_iso(pv.pginterval("00:00:00.000001")) == "P0Y0M0DT0H0M0.000001S"
    assert pv.interval_iso(pv.pginterval("-1 days +01:00:00")) == "P0Y0M-1DT1H0M0S"
    with pytest.raises(ValueError):
        pv.pginterval("2562047788:00:54.775807")  # pgjdbc cannot parse it; Debezium fails


def test_hstore_follows_java_hashmap_order():
    pairs = pv.parse_hstore('"b"=>"2", "a"=>"1", "Aa"=>NULL, "BB"=>"x\\"y"')
    assert pairs == [("b", "2"), ("a", "1"), ("Aa", None), ("BB", 'x"y')]
    keys = [k for k, _ in pairs]
    assert [keys[i] for i in java.hashmap_order(keys)] == ["Aa", "BB", "a", "b"]  # "Aa" and "BB" share a hash (2112)
    assert java.jackson_quote("a\u0001\n\"") == '"a\\u0001\\n\\""'


def test_arrays_parse_quotes_nulls_bounds_and_nesting():
    assert pv.parse_array('{"a,b","c\\"d",NULL,"NULL",""}') == ["a,b", 'c"d', None, "NULL", ""]
    assert pv.parse_array("[2:3]={5,6}") == ["5", "6"]
    assert pv.parse_array("{{1,2},{3,NULL}}") == [["1", "2"], ["3", None]]
    assert pv.parse_array("{}") == []


def test_copy_text_unescaping():
    assert pv.unescape_copy_text("a\\tb\\nc\\\\d") == "a\tb\nc\\d"
    assert pv.unescape_copy_text("\\N") is None
    assert pv.unescape_copy_text("plain") == "plain"


def test_java_double_to_string():
    assert [java.java_double_to_string(x) for x in (1.0, 1e7, 1.5e-4, 0.001, 123.456, -2.0, 1e300)] == \
        ["1.0", "1.0E7", "1.5E-4", "0.001", "123.456", "-2.0", "1.0E300"]


def test_char_padding_and_name_streaming():
    bpchar = _col(type_oid=cat.BPCHAR, typname="bpchar", jdbc_type_name="bpchar", typmod=9,
                  root_oid=cat.BPCHAR, root_name="bpchar", length=5)
    conv = converter(bpchar)
    assert conv.from_text("ab   ") == "ab   "
    name = _col(type_oid=cat.NAME, typname="name", jdbc_type_name="name", root_oid=cat.NAME, root_name="name",
                not_null=True)
    conv = converter(name)
    assert conv.from_text("x") == "x"
    assert conv.from_stream_text("x") == ""  # Debezium has no value while streaming: the fallback


def test_numeric_modes_and_nan():
    n = _col(type_oid=cat.NUMERIC, typname="numeric", jdbc_type_name="numeric", typmod=(10 << 16 | 2) + 4,
             root_oid=cat.NUMERIC, root_name="numeric", length=10, scale=2)
    precise = converter(n)
    assert precise.from_text("12.30") == "BM4="
    assert precise.from_text("NaN") is None
    strict = converter(_col(**{**n.__dict__, "not_null": True}))
    with pytest.raises(ConversionError):
        strict.from_text("NaN")
    assert converter(n, TypeSettings(decimal_mode="string")).from_text("NaN") == "NAN"
    assert converter(n, TypeSettings(decimal_mode="double")).from_text("-Infinity") == "-Infinity"
    variable = _col(type_oid=cat.NUMERIC, typname="numeric", jdbc_type_name="numeric", root_oid=cat.NUMERIC,
                    root_name="numeric", length=0, scale=None)
    assert converter(variable).from_text("100.000") == {"scale": 0, "value": "ZA=="}


def test_money_is_exact():
    m = _col(type_oid=cat.MONEY, typname="money", jdbc_type_name="money", root_oid=cat.MONEY, root_name="money")
    conv = converter(m)
    assert conv.from_text("-$92,233,720,368,547,758.08") == "gAAAAAAAAAA="
    assert converter(m, TypeSettings(money_fraction_digits=0)).from_text("$1.50") == "Ag=="


def test_unknown_types_are_dropped_unless_included():
    box = _col(type_oid=603, typname="box", jdbc_type_name="box", root_oid=603, root_name="box")
    assert build_converter(box) is None
    conv = converter(box, TypeSettings(include_unknown=True, binary_mode="hex"))
    assert conv.from_text("(3,4),(1,2)") == b"(3.0,4.0),(1.0,2.0)".hex()


def test_source_type_parameters():
    vc = _col(name="vc", type_oid=cat.VARCHAR, typname="varchar", jdbc_type_name="varchar", typmod=14,
              root_oid=cat.VARCHAR, root_name="varchar", length=10, scale=0, comment="a comment")
    assert source_type_parameters(vc) == {
        "__debezium.source.column.type": "VARCHAR", "__debezium.source.column.length": "10",
        "__debezium.source.column.scale": "0", "__debezium.source.column.comment": "a comment",
        "__debezium.source.column.name": "vc"}


def test_converters_pickle():
    import pickle

    conv = converter(_col(type_oid=cat.TIMESTAMPTZ, typname="timestamptz", jdbc_type_name="timestamptz",
                                root_oid=cat.TIMESTAMPTZ, root_name="timestamptz", scale=6))
    again = pickle.loads(pickle.dumps(conv))
    assert again.from_text("2020-01-01 08:00:00+00") == "2020-01-01T08:00:00.000000Z"


def test_new_time_precision_modes():
    ts = _col(type_oid=cat.TIMESTAMP, typname="timestamp", jdbc_type_name="timestamp", root_oid=cat.TIMESTAMP,
              root_name="timestamp", scale=3)
    iso = converter(ts, TypeSettings(time_precision_mode="isostring"))
    assert iso.schema.name == "io.debezium.time.IsoTimestamp"
    assert iso.from_text("0001-01-01 00:00:00.5 BC") == "0000-01-01T00:00:00.5Z"
    assert iso.from_text("infinity") == "+294247-01-10T04:00:25.2Z"  # pgjdbc's infinity, in microseconds
    micro = converter(ts, TypeSettings(time_precision_mode="microseconds"))
    assert micro.schema.name == "io.debezium.time.MicroTimestamp"  # whatever the column's precision
    assert micro.from_text("1970-01-01 00:00:00.001") == 1000
    nano = converter(ts, TypeSettings(time_precision_mode="nanoseconds"))
    assert nano.from_text("2262-04-11 23:47:16.854") == 9223372036854000000
    assert nano.from_binary(struct.pack("!q", 0)) == 946684800 * 10**9
    assert nano.from_text("infinity") == java.LONG_MAX
    strict = converter(_col(**{**ts.__dict__, "not_null": True}), TypeSettings(time_precision_mode="nanoseconds"))
    for value in ("2262-04-12 00:00:00", "1677-09-21 00:00:00"):  # outside INT64 nanoseconds
        assert nano.from_text(value) is None
        with pytest.raises(ConversionError):
            strict.from_text(value)
    date = _col(type_oid=cat.DATE, typname="date", jdbc_type_name="date", root_oid=cat.DATE, root_name="date")
    iso_date = converter(date, TypeSettings(time_precision_mode="isostring"))
    assert (iso_date.from_text("infinity"), iso_date.from_stream_text("infinity")) == \
        ("+292278994-08-16Z", "-5877611-06-21Z")
    assert iso_date.from_stream_binary(struct.pack("!i", java.INT_MAX)) == "-5877611-06-21Z"
    assert iso_date.from_stream_binary(struct.pack("!i", -730485)) == "0000-01-01Z"  # 1 BC, proleptic
    assert iso_date.from_binary(struct.pack("!i", -730485)) == "0001-01-01Z"  # a snapshot loses the era
    time = _col(type_oid=cat.TIME, typname="time", jdbc_type_name="time", root_oid=cat.TIME, root_name="time",
                scale=6, default_expr="'12:34:56.789'::time without time zone")
    iso_time = converter(time, TypeSettings(time_precision_mode="isostring"))
    assert (iso_time.from_text("24:00:00"), iso_time.schema.default) == ("00:00:00Z", "12:34:56.789Z")
    assert converter(time, TypeSettings(time_precision_mode="nanoseconds")).from_text("24:00:00") == \
        86_400 * 10**9


def test_layout_follows_the_relation_messages_type_modifiers():
    unconstrained = _col(name="n", type_oid=cat.NUMERIC, typname="numeric", jdbc_type_name="numeric",
                         root_oid=cat.NUMERIC, root_name="numeric", length=0, scale=None, not_null=True,
                         default_expr="1.5")
    table = cat.TableSchema("public", "t", 1, (unconstrained,))
    (n52,) = table.layout_for([Column(False, "n", cat.NUMERIC, (5 << 16 | 2) + 4)])
    assert (n52.length, n52.scale, n52.not_null, n52.default_expr) == (5, 2, True, "1.5")
    assert converter(n52).from_text("1.50") == "AJY="
    (same,) = table.layout_for([Column(False, "n", cat.NUMERIC, -1)])
    assert same is unconstrained
    (older_type,) = table.layout_for([Column(False, "n", cat.VARCHAR, 14)])  # before ALTER ... TYPE numeric
    assert (older_type.typname, older_type.length, older_type.not_null) == ("varchar", 10, True)
    assert converter(older_type).from_text("abc") == "abc"


def test_table_filters(pg_server, pg_db):
    pg_server.execute("CREATE SCHEMA s2; CREATE TABLE public.a (id int); CREATE TABLE public.bb (id int);"
                      "CREATE TABLE s2.a (id int PRIMARY KEY)", pg_db)
    conn = pg_server.connect(pg_db)
    try:
        names = lambda props: [str(t) for t in cat.list_tables(conn, props)]  # noqa: E731
        assert names({}) == ["public.a", "public.bb", "s2.a"]
        assert names({"table.include.list": "public\\.a"}) == ["public.a"]
        assert names({"table.include.list": "PUBLIC\\..*"}) == ["public.a", "public.bb"]
        assert names({"table.exclude.list": ".*\\.a"}) == ["public.bb"]
        assert names({"schema.include.list": "s2"}) == ["s2.a"]
        assert names({"schema.exclude.list": "public"}) == ["s2.a"]
        assert names({"table.include.list": "bb"}) == []  # anchored on schema.table
        table = cat.read_table(conn, "s2", "a")
        assert table.primary_key == ("id",) and table.replica_identity == "d"
        conv = build_converter(table.column("id"), None, table.id)
        assert conv is not None and conv.schema.to_json() == {"type": "int32", "optional": False}
    finally:
        conn.close()


def test_conversion_speed():
    """Not an assertion on speed: prints values/s for a typical mixed row (see the report)."""
    cols = [
        _col(name="id"),
        _col(name="t", type_oid=cat.TEXT, typname="text", jdbc_type_name="text", root_oid=cat.TEXT, root_name="text"),
        _col(name="n", type_oid=cat.NUMERIC, typname="numeric", jdbc_type_name="numeric", root_oid=cat.NUMERIC,
             root_name="numeric", length=10, scale=2),
        _col(name="ts", type_oid=cat.TIMESTAMPTZ, typname="timestamptz", jdbc_type_name="timestamptz",
             root_oid=cat.TIMESTAMPTZ, root_name="timestamptz", scale=6),
        _col(name="b", type_oid=cat.BOOL, typname="bool", jdbc_type_name="bool", root_oid=cat.BOOL, root_name="bool"),
        _col(name="d", type_oid=cat.DATE, typname="date", jdbc_type_name="date", root_oid=cat.DATE, root_name="date"),
        _col(name="f", type_oid=cat.FLOAT8, typname="float8", jdbc_type_name="float8", root_oid=cat.FLOAT8,
             root_name="float8"),
        _col(name="j", type_oid=3802, typname="jsonb", jdbc_type_name="jsonb", root_oid=3802, root_name="jsonb"),
    ]
    fns = [converter(c).from_text for c in cols]
    row = ["12345", "some text value", "1234.56", "2024-05-17 10:11:12.345678+00", "t", "2024-05-17",
           "3.14159", '{"a": 1}']
    pairs = list(zip(fns, row, strict=True))
    n = 20000
    start = time.perf_counter()
    for _ in range(n):
        [f(v) for f, v in pairs]
    elapsed = time.perf_counter() - start
    print(f"\n{n * len(row) / elapsed:,.0f} values/s ({n / elapsed:,.0f} rows/s of {len(row)} columns)")


def test_catalog_cache_follows_relation_messages(pg_server, pg_db):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, a text, g int GENERATED ALWAYS AS (id * 2) STORED);"
                      "CREATE TABLE skipped (id int)", pg_db)
    cache = cat.CatalogCache(lambda: pg_server.connect(pg_db), cat.TableFilters.from_config(
        {"table.include.list": "public\\.t"}))
    oid, skipped = (r[0] for r in pg_server.query(
        "SELECT 't'::regclass::oid UNION ALL SELECT 'skipped'::regclass::oid", pg_db))
    table = cache.get(oid)
    assert table is not None
    assert table.column_names() == ("id", "a", "g") and cache.get(skipped) is None
    rel = Relation(None, oid, "public", "t", "d", (Column(True, "id", cat.INT4, -1), Column(False, "a", cat.TEXT, -1)))
    assert cache.check(rel) is table  # generated columns are not in RELATION messages
    assert [c.name for c in table.layout_for(rel.columns)] == ["id", "a"]
    pg_server.execute("ALTER TABLE t ADD COLUMN n numeric(5,2)", pg_db)
    typmod = (5 << 16 | 2) + 4
    rel = rel._replace(columns=(*rel.columns, Column(False, "n", cat.NUMERIC, typmod)))
    refreshed = cache.check(rel)
    assert refreshed is not None
    assert refreshed is not table and refreshed.column("n").scale == 2
    layout = refreshed.layout_for(rel.columns)
    assert converter(layout[2]).schema.to_json()["parameters"] == {
        "scale": "2", "connect.decimal.precision": "5"}
    cache.connection().close()
