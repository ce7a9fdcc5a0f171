"""MySQL/MariaDB type conversion (`connectors/binlog/types.py`), checked against Debezium's MariaDB connector.

For every recorded type scenario (04-17 of the MariaDB reference corpus): run its setup.sql on a real
MariaDB, read the tables as Debezium's snapshot does (SHOW CREATE TABLE through the DDL parser,
`catalog.read_tables`) and their rows over the text protocol (PyMySQL without decoders, session time
zone UTC); run changes.sql and read the binlog with python-mysql-replication from the position after
setup (DDL from the binlog's query events applied with the DDL parser, as streaming does). Every value
of every snapshot row and every streamed row image is converted with the column's converter and
compared with the `after`/`before` values Debezium wrote in events.jsonl, column by column.
The unit tests after them pin schemas against the spec and a few values the scenarios do not hold.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pickle
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import QueryEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from headwater.connectors.binlog import catalog
from headwater.connectors.binlog.ddl import SchemaState, apply_statement
from headwater.connectors.binlog.schema import Column, Table
from headwater.connectors.binlog.types import (
    ColumnConverter,
    TypeSettings,
    UnsupportedType,
    converter,
    json_text_kind,
)
from headwater.connectors.binlog.values import replication_values
from headwater.connectors.common.columnar import COMMON_KERNELS
from headwater.devservers.mariadb import MariaDBServer


def _reference() -> Path | None:
    """The recorded scenarios: $HEADWATER_MARIADB_REFERENCE, else shared/reference/mariadb beside a parent."""
    env = os.environ.get("HEADWATER_MARIADB_REFERENCE")
    if env:
        return Path(env)
    for parent in Path(__file__).resolve().parents:
        candidate = parent / "shared" / "reference" / "mariadb"
        if candidate.is_dir():
            return candidate
    return None


REFERENCE = _reference()
SCENARIOS = ["04_types_integer_long", "05_types_integer_precise", "06_types_decimal_precise",
             "07_types_decimal_double", "08_types_decimal_string", "09_types_temporal_adaptive",
             "10_types_temporal_connect", "11_types_strings_charsets", "12_types_binary_bytes",
             "13_types_binary_base64", "14_types_binary_hex", "15_types_enum_set_json", "16_types_spatial",
             "17_types_uuid"]
DATABASE = "types"
# PyMySQL with its encoders only: every value arrives as the server sent it (str, or bytes when binary)
TEXT_PROTOCOL = {k: f for k, f in pymysql.converters.conversions.items() if not isinstance(k, int)}


def _connect(server: Any) -> pymysql.Connection:
    conn = pymysql.connect(**server.connection_params(), conv=TEXT_PROTOCOL, charset="utf8mb4", autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
    return conn


def _convert(conv: ColumnConverter, value: Any, streaming: bool) -> Any:
    """What record building does with one value (common/records.py compile_fill)."""
    if value is None:
        return conv.null_value if conv.column.optional else conv.fallback
    if isinstance(value, str):
        return conv.from_stream_text(value) if streaming else conv.from_text(value)
    return conv.from_stream_binary(value) if streaming else conv.from_binary(value)


class Scenario:
    """One recorded scenario run on a real server: its expected and actual row images."""

    def __init__(self, server: Any, name: str):
        assert REFERENCE is not None
        self.folder = REFERENCE / name
        props = json.loads((self.folder / "properties.json").read_text())
        self.settings = TypeSettings.from_config(props)
        self.prefix = props["topic.prefix"]
        self.server = server
        events = [json.loads(line) for line in (self.folder / "events.jsonl").read_text().splitlines()]
        self.expected = [e for e in events if e["value"] is not None and e["value"].get("op")]

    def run(self) -> tuple[list[tuple[str, str, dict | None, dict | None]], list[tuple[str, str, dict | None, dict | None]]]:
        """Setup, snapshot, changes, stream: (table, op, before, after) images, snapshot then streamed."""
        self.server.execute((self.folder / "setup.sql").read_text())
        conn = _connect(self.server)
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW MASTER STATUS")
                log_file, log_pos = cur.fetchone()[:2]
            tables = catalog.read_tables(conn, [(DATABASE, t) for t in catalog.list_tables(conn, DATABASE)])
            snapshot: list[tuple[str, str, dict | None, dict | None]] = []
            for (_, name), table in tables.items():
                with conn.cursor() as cur:
                    cur.execute(f"SELECT * FROM `{DATABASE}`.`{name}`")
                    for row in cur.fetchall():
                        snapshot.append((name, "r", None, self._image(table, dict(zip(
                            [c.name for c in table.columns], row, strict=True)), streaming=False)))
        finally:
            conn.close()
        self.server.execute((self.folder / "changes.sql").read_text())
        state = SchemaState(tables={k: v for k, v in tables.items()}, database_charsets={DATABASE: "utf8mb4"})
        return snapshot, list(self._stream(state, _text(log_file), int(log_pos)))

    def _stream(self, state: SchemaState, log_file: str, log_pos: int) -> Iterator:
        reader = BinLogStreamReader(
            connection_settings=self.server.connection_params(), server_id=4242, log_file=log_file,
            log_pos=log_pos, resume_stream=True, blocking=False, is_mariadb=True,
            only_schemas=[DATABASE],  # other tests' rows on the shared server are skipped, not decoded
            only_events=[QueryEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
        try:
            for ev in reader:
                if reader.log_file == log_file and ev.packet.log_pos <= log_pos:
                    continue  # python-mysql-replication starts MariaDB streams at the file's start
                if isinstance(ev, QueryEvent):
                    query = _text(ev.query)
                    if query.upper() not in ("BEGIN", "COMMIT"):
                        apply_statement(state, query, _text(ev.schema) or None)
                    continue
                if ev.schema != DATABASE:
                    continue
                table = state.tables[(DATABASE, ev.table)]
                for row in ev.rows:
                    if isinstance(ev, WriteRowsEvent):
                        yield ev.table, "c", None, self._row(table, row["values"], row["none_sources"])
                    elif isinstance(ev, DeleteRowsEvent):
                        yield ev.table, "d", self._row(table, row["values"], row["none_sources"]), None
                    else:
                        before = self._row(table, row["before_values"], row["before_none_sources"])
                        after = self._row(table, row["after_values"], row["after_none_sources"])
                        if [before[k] for k in table.primary_key] != [after[k] for k in table.primary_key]:
                            yield ev.table, "d", before, None  # a key change: delete and create
                            yield ev.table, "c", None, after
                        else:
                            yield ev.table, "u", before, after
        finally:
            reader.close()

    def _row(self, table: Table, values: dict, none_sources: dict) -> dict:
        return self._image(table, replication_values(values, none_sources), streaming=True)

    def _image(self, table: Table, values: dict, streaming: bool) -> dict:
        out = {}
        for column in table.columns:
            conv = converter(column, self.settings)
            out[column.name] = _convert(conv, values[column.name], streaming)
        return out


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _key(image: dict, key: dict) -> tuple:
    return tuple(image[k] for k in key)


@pytest.fixture(scope="module")
def server() -> Iterator[MariaDBServer]:
    """A server of this module's own: the scenarios read the binlog from the start of its current file,
    which on the session's shared server holds other tests' loads (and rotations)."""
    with MariaDBServer() as own:
        yield own


@pytest.fixture(scope="module")
def runs(server: MariaDBServer) -> dict:
    """Each scenario run once (they share the `types` database, so one after another)."""
    return {}


def _run(runs: dict, server: Any, name: str) -> tuple[Scenario, list, list]:
    if name not in runs:
        scenario = Scenario(server, name)
        runs[name] = (scenario, *scenario.run())
    return runs[name]


def _compare(expected: dict | None, actual: dict | None, where: str, mismatches: list[str]) -> int:
    if expected is None or actual is None:
        if expected != actual:
            mismatches.append(f"{where}: expected {expected!r}, got {actual!r}")
        return 0
    matched = 0
    for column in sorted(set(expected) | set(actual)):
        want, got = expected.get(column, "<absent>"), actual.get(column, "<absent>")
        if json.loads(json.dumps(got)) == want:
            matched += 1
        else:
            mismatches.append(f"{where}.{column}: expected {want!r}, got {got!r}")
    return matched


@pytest.mark.skipif(REFERENCE is None, reason="the MariaDB reference scenarios (shared/reference/mariadb) are absent")
@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_values_equal_debezium(server: MariaDBServer, runs: dict, name: str) -> None:
    scenario, snapshot, streamed = _run(runs, server, name)
    mismatches: list[str] = []
    matched = 0
    expected_snapshot = [e for e in scenario.expected if e["value"]["op"] == "r"]
    by_key = {(e["value"]["source"]["table"], json.dumps(e["key"], sort_keys=True)): e for e in expected_snapshot}
    assert len(snapshot) == len(expected_snapshot), "snapshot row count differs from Debezium's"
    for table, _, _, after in snapshot:
        key_fields = next(e["key"] for e in expected_snapshot if e["value"]["source"]["table"] == table)
        key = json.dumps({k: json.loads(json.dumps(after[k])) for k in key_fields}, sort_keys=True)
        event = by_key.get((table, key))
        if event is None:
            mismatches.append(f"snapshot {table} {key}: no such row in Debezium's snapshot")
            continue
        matched += _compare(event["value"]["after"], after, f"snapshot {table} {key}", mismatches)
    expected_stream = [e for e in scenario.expected if e["value"]["op"] != "r"]
    assert [(e["value"]["source"]["table"], e["value"]["op"]) for e in expected_stream] == \
        [(t, op) for t, op, _, _ in streamed], "streamed row events differ from Debezium's"
    for i, (event, (table, op, before, after)) in enumerate(zip(expected_stream, streamed, strict=True)):
        value = event["value"]
        matched += _compare(value["before"], before, f"stream #{i} {op} {table} before", mismatches)
        matched += _compare(value["after"], after, f"stream #{i} {op} {table} after", mismatches)
    print(f"{name}: {matched} values equal Debezium's, {len(mismatches)} differ")
    assert not mismatches, "\n".join(mismatches[:40])


# ------------------------------------------------------------------------------------ unit tests


def _columns(ddl: str) -> dict[str, Column]:
    """The columns of one CREATE TABLE as the DDL parser reads them (what streaming sees)."""
    state = SchemaState(database_charsets={"db": "utf8mb4"})
    apply_statement(state, ddl, "db")
    (table,) = state.tables.values()
    return {c.name: c for c in table.columns}


def _schema(ddl_type: str, **settings: Any) -> dict:
    column = _columns(f"CREATE TABLE t (c {ddl_type})")["c"]
    return converter(column, TypeSettings(**settings)).schema.to_json()


@pytest.mark.parametrize(("ddl_type", "settings", "expected"), [
    # the spec's table (mysql.md section 5)
    ("BOOLEAN", {}, {"type": "boolean"}),
    ("BOOL", {}, {"type": "boolean"}),
    ("BIT(1)", {}, {"type": "boolean"}),
    ("BIT(12)", {}, {"type": "bytes", "name": "io.debezium.data.Bits", "version": 1, "parameters": {"length": "12"}}),
    ("TINYINT", {}, {"type": "int16"}),
    ("TINYINT(1)", {}, {"type": "int16"}),
    ("TINYINT UNSIGNED", {}, {"type": "int16"}),
    ("SMALLINT", {}, {"type": "int16"}),
    ("SMALLINT UNSIGNED", {}, {"type": "int32"}),
    ("MEDIUMINT UNSIGNED", {}, {"type": "int32"}),
    ("INT", {}, {"type": "int32"}),
    ("INT(6) UNSIGNED ZEROFILL", {}, {"type": "int64"}),
    ("BIGINT", {}, {"type": "int64"}),
    ("BIGINT UNSIGNED", {}, {"type": "int64"}),
    ("BIGINT UNSIGNED", {"bigint_unsigned_mode": "precise"},
     {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
      "parameters": {"scale": "0", "connect.decimal.precision": "20"}}),
    ("REAL", {}, {"type": "float"}),
    ("FLOAT", {}, {"type": "float"}),
    ("FLOAT(23)", {}, {"type": "float"}),
    ("FLOAT(30)", {}, {"type": "double"}),
    ("FLOAT(7,2)", {}, {"type": "double"}),
    ("DOUBLE", {}, {"type": "double"}),
    ("DOUBLE PRECISION", {}, {"type": "double"}),
    ("VARCHAR(10) BINARY", {}, {"type": "string"}),
    ("NATIONAL CHAR(4)", {}, {"type": "string"}),
    ("LONGTEXT", {}, {"type": "string"}),
    ("VARBINARY(8)", {}, {"type": "bytes"}),
    ("BLOB", {"binary_mode": "hex"}, {"type": "string"}),
    ("JSON", {}, {"type": "string", "name": "io.debezium.data.Json", "version": 1}),
    ("ENUM('a','b,c')", {}, {"type": "string", "name": "io.debezium.data.Enum", "version": 1,
                             "parameters": {"allowed": "a,b\\,c"}}),
    ("SET('x','y')", {}, {"type": "string", "name": "io.debezium.data.EnumSet", "version": 1,
                          "parameters": {"allowed": "x,y"}}),
    ("YEAR", {}, {"type": "int32", "name": "io.debezium.time.Year", "version": 1}),
    ("TIMESTAMP(3) NULL", {}, {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1}),
    ("DECIMAL(5,2)", {}, {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                          "parameters": {"scale": "2", "connect.decimal.precision": "5"}}),
    ("NUMERIC", {}, {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
                     "parameters": {"scale": "0", "connect.decimal.precision": "10"}}),
    ("DECIMAL(5,2)", {"decimal_mode": "double"}, {"type": "double"}),
    ("DECIMAL(5,2)", {"decimal_mode": "string"}, {"type": "string"}),
    ("UUID", {}, {"type": "string", "name": "io.debezium.data.Uuid", "version": 1}),
    # temporal, adaptive_time_microseconds
    ("DATE", {}, {"type": "int32", "name": "io.debezium.time.Date", "version": 1}),
    ("TIME(3)", {}, {"type": "int64", "name": "io.debezium.time.MicroTime", "version": 1}),
    ("DATETIME", {}, {"type": "int64", "name": "io.debezium.time.Timestamp", "version": 1}),
    ("DATETIME(3)", {}, {"type": "int64", "name": "io.debezium.time.Timestamp", "version": 1}),
    ("DATETIME(4)", {}, {"type": "int64", "name": "io.debezium.time.MicroTimestamp", "version": 1}),
    # connect (Connect's Time is INT32 milliseconds; the guide's INT64 is a documentation slip)
    ("DATE", {"time_precision_mode": "connect"},
     {"type": "int32", "name": "org.apache.kafka.connect.data.Date", "version": 1}),
    ("TIME(6)", {"time_precision_mode": "connect"},
     {"type": "int32", "name": "org.apache.kafka.connect.data.Time", "version": 1}),
    ("DATETIME(6)", {"time_precision_mode": "connect"},
     {"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "version": 1}),
])
def test_schema_follows_the_spec(ddl_type: str, settings: dict, expected: dict) -> None:
    assert _schema(ddl_type, **settings) == {**expected, "optional": True}


def test_spatial_schemas_are_debeziums_structs() -> None:
    point = _schema("POINT")
    assert point["name"] == "io.debezium.data.geometry.Point"
    assert [(f["field"], f["type"], f["optional"]) for f in point["fields"]] == [
        ("x", "double", False), ("y", "double", False), ("wkb", "bytes", True), ("srid", "int32", True)]
    for kind in ("GEOMETRY", "LINESTRING", "POLYGON", "MULTIPOINT", "MULTILINESTRING", "MULTIPOLYGON",
                 "GEOMETRYCOLLECTION"):
        geometry = _schema(kind)
        assert geometry["name"] == "io.debezium.data.geometry.Geometry"
        assert [(f["field"], f["type"], f["optional"]) for f in geometry["fields"]] == [
            ("wkb", "bytes", False), ("srid", "int32", True)]


def test_defaults_and_fallbacks_of_not_null_columns() -> None:
    cols = _columns("CREATE TABLE t (a BIGINT UNSIGNED NOT NULL DEFAULT 7, d DATE NOT NULL DEFAULT '2000-01-01',"
                    " z DATE NOT NULL, ts TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,"
                    " e ENUM('p','q') DEFAULT 'p', b BOOL NOT NULL DEFAULT TRUE, n INT NULL DEFAULT NULL)")
    s = TypeSettings()
    conv = {name: converter(c, s) for name, c in cols.items()}
    assert conv["a"].schema.to_json()["default"] == 7
    assert conv["d"].schema.default == 10957
    assert conv["d"].from_text("0000-00-00") == 10957  # a zero date in a NOT NULL column: its default
    assert conv["d"].from_text("2024-00-15") == 10957  # a partial zero date too
    assert not conv["z"].schema.has_default and conv["z"].fallback == 0  # no default: the epoch day
    assert conv["z"].from_stream_binary(dt.date(1970, 1, 2)) == 1
    assert conv["ts"].schema.default == "1970-01-01T00:00:00Z"  # CURRENT_TIMESTAMP is the epoch
    assert conv["ts"].from_stream_binary(dt.datetime(1970, 1, 1)) == "1970-01-01T00:00:00Z"  # zero TIMESTAMP
    assert conv["e"].null_value == "p"  # JsonConverter writes the default for null
    assert conv["b"].schema.default is True
    assert conv["n"].null_value is None and not conv["n"].schema.has_default
    more = _columns("CREATE TABLE t (f BIT(1) NOT NULL DEFAULT b'1', g BIT(10) DEFAULT b'1000000001',"
                    " r INT DEFAULT 2.5, m DECIMAL(6,3) NOT NULL DEFAULT 1.5)")
    assert converter(more["f"], s).schema.default is True
    assert converter(more["g"], s).schema.default == "AQI="
    assert converter(more["r"], s).schema.default == 3  # Math.round
    assert converter(more["m"], s).fallback == "Bdw=" == converter(more["m"], s).from_text("1.500")


def test_time_adjuster_on_two_digit_years() -> None:
    cols = _columns("CREATE TABLE t (d DATE, y YEAR, dt DATETIME)")
    on, off = TypeSettings(), TypeSettings(time_adjuster=False)
    assert converter(cols["d"], on).from_text("0069-01-01") == converter(cols["d"], off).from_text("2069-01-01")
    assert converter(cols["d"], off).from_text("0069-01-01") < 0
    assert converter(cols["d"], on).from_stream_binary(dt.date(75, 6, 1)) == \
        converter(cols["d"], on).from_text("1975-06-01")
    assert converter(cols["y"], on).from_stream_binary(69) == 2069
    assert converter(cols["y"], off).from_stream_binary(69) == 69
    assert converter(cols["y"], on).from_stream_binary(1900) == 1900  # YEAR 0000 streams as 1900
    assert converter(cols["dt"], on).from_text("0099-12-31 23:59:59") == \
        converter(cols["dt"], on).from_text("1999-12-31 23:59:59")


def test_negative_time_from_python_mysql_replication_is_corrected() -> None:
    column = _columns("CREATE TABLE t (t TIME(6))")["t"]
    conv = converter(column, TypeSettings())
    # python-mysql-replication 1.0.x gives -(s + (1 - fraction)) for a negative TIME with a fraction
    assert conv.from_stream_binary(-dt.timedelta(hours=1, minutes=2, seconds=3, microseconds=999996)) == -3723000004
    assert conv.from_stream_binary(-dt.timedelta(seconds=1)) == -1_000_000
    assert conv.from_stream_binary(dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=5)) == 3020399000005
    assert conv.from_text("-00:00:00.000001") == -1


def test_unsigned_values_arrive_wrapped_or_not() -> None:
    cols = _columns("CREATE TABLE t (i INT UNSIGNED, b BIGINT UNSIGNED)")
    assert converter(cols["i"], TypeSettings()).from_stream_binary(-1) == 4294967295  # without signedness metadata
    assert converter(cols["b"], TypeSettings()).from_stream_binary(2**64 - 1) == -1
    assert converter(cols["b"], TypeSettings()).from_stream_binary(-1) == -1
    precise = converter(cols["b"], TypeSettings(bigint_unsigned_mode="precise"))
    assert precise.from_stream_binary(-1) == precise.from_text("18446744073709551615") == "AP//////////"


def test_mysql8_binary_json_as_compact_text() -> None:
    """Written from the spec (MySQL 8 streams JSON as binary JSON, decoded by python-mysql-replication):
    not verified against Debezium on a MySQL server."""
    conv = converter(_columns("CREATE TABLE t (j JSON)")["j"], TypeSettings())
    assert conv.from_stream_binary({b"a": [1, True, None, b"x"], "k": "é\"\\\n\x01"}) == \
        '{"a":[1,true,null,"x"],"k":"é\\"\\\\\\n\\u0001"}'
    assert conv.from_stream_binary([1.5, 1e20, 0.1, 2**64 - 1]) == "[1.5,100000000000000000000,0.1,18446744073709551615]"
    assert conv.from_stream_binary(3) == "3"
    assert conv.from_stream_text('{"a": 1}') == '{"a": 1}'  # MariaDB: the LONGTEXT as stored


def test_settings_from_config_and_refused_values() -> None:
    assert TypeSettings.from_config({}) == TypeSettings()
    assert TypeSettings.from_config({"time.precision.mode": "connect", "enable.time.adjuster": "false",
                                     "bigint.unsigned.handling.mode": "PRECISE"}) == TypeSettings(
        time_precision_mode="connect", time_adjuster=False, bigint_unsigned_mode="precise")
    with pytest.raises(ValueError, match="time.precision.mode='adaptive'.*no longer supported"):
        TypeSettings(time_precision_mode="adaptive")
    with pytest.raises(ValueError, match="decimal.handling.mode"):
        TypeSettings.from_config({"decimal.handling.mode": "exact"})


def test_converters_pickle_and_unknown_types_are_refused() -> None:
    column = _columns("CREATE TABLE t (e ENUM('a','b'))")["e"]
    conv = pickle.loads(pickle.dumps(converter(column, TypeSettings())))
    assert conv.from_stream_text("b") == "b" and conv.schema == converter(column, TypeSettings()).schema
    inet = _columns("CREATE TABLE t (i INET6)")["i"]
    with pytest.raises(UnsupportedType, match="INET6"):
        converter(inet, TypeSettings())


def test_stream_values_of_odd_cases() -> None:
    cols = _columns("CREATE TABLE t (s SET('a','b','c'), e ENUM('x','y'), bn BINARY(4), u UUID, b BIT(10),"
                    " f FLOAT, amount DECIMAL(65,30))")
    s = TypeSettings()
    assert converter(cols["s"], s).from_stream_binary({"c", "a"}) == "a,c"  # definition order
    assert converter(cols["s"], s).from_stream_binary(set()) == ""
    assert converter(cols["s"], s).from_stream_binary(0b110) == "b,c"
    assert converter(cols["e"], s).from_stream_binary(0) == ""  # an invalid value: index 0
    assert converter(cols["bn"], s).from_stream_binary(b"\x01") == "AQAAAA=="  # zero-padded to BINARY(4)
    assert converter(cols["u"], s).from_stream_binary(bytes.fromhex("123e4567e89b12d3a45642661417400000")[:15]) \
        == "00123e45-67e8-9b12-d3a4-564266141740"  # Debezium's unpadded reading, copied
    assert converter(cols["b"], s).from_stream_text("1000000001") == "AQI="  # little-endian
    assert converter(cols["f"], s).from_stream_binary(3.141590118408203) == 3.14159
    big = Decimal("12345678901234567890123456789012345.123456789012345678901234567890")
    assert converter(cols["amount"], TypeSettings(decimal_mode="string")).from_stream_binary(big) == str(big)


def test_text_kinds_give_what_the_converters_give() -> None:
    """A column whose text kind has a common kernel is written column-wise (common/columnar.py):
    the kernel's JSON must be the converter's."""
    cols = _columns("CREATE TABLE t (i INT NOT NULL, z INT(6) ZEROFILL, u INT UNSIGNED, s VARCHAR(9),"
                    " e ENUM('a','b,c'), d DECIMAL(7,2), big DECIMAL(30,2), dt DATETIME)")
    samples = {"i": ["-2147483648", "0", "7"], "z": ["000042"], "u": ["4294967295"], "s": ["x", 'q"\\', ""],
               "e": ["b,c"], "d": ["-12345.67", "0.00", "1.50"], "big": ["1234567890123456789012345.67"],
               "dt": ["2024-01-01 00:00:00"]}
    kinds = {}
    for name, column in cols.items():
        conv = converter(column, TypeSettings())
        kinds[name] = found = json_text_kind(conv)
        if found is None:
            continue
        kind, param = found
        out, slow = COMMON_KERNELS[kind](pa.array(samples[name], pa.string()), param)
        fast = [b.as_py() for b in out]
        for i, text in enumerate(samples[name]):
            if slow is None or not slow[i].as_py():
                assert fast[i] == orjson.dumps(conv.from_text(text)), (name, text)
    assert kinds == {"i": ("integer", 0), "z": None, "u": None, "s": ("text", 0), "e": ("text", 0),
                     "d": ("decimal", 2), "big": ("decimal", 2), "dt": None}
    assert json_text_kind(converter(cols["e"], TypeSettings()), streaming=True) is None  # members escaped
