"""A PostgreSQL schema mirrored into a second PostgreSQL database and into MariaDB by the JDBC sink
(`mirror: true`) under a mixed workload: snapshot, inserts, updates, deletes, primary-key changes
(one and several key columns), a truncate, an added column, NULLs and edge values of every mapped
type; the target equals the source row for row (read back with SQL), and batches applied again
change nothing."""

from __future__ import annotations

import decimal

from headwater.sinks.jdbc.connection import MySqlConnection
from tests.sinks.jdbc_support import (
    apply_available,
    mariadb_rows,
    mariadb_url,
    pg_rows,
    pg_url,
    source_engine,
    writer,
)

SETUP = r"""
CREATE TABLE kinds (id int PRIMARY KEY, i2 smallint, i8 bigint, b boolean, f4 real, f8 double precision,
                    num numeric(12,3), vc varchar(20), txt text, bin bytea, d date, t time(6), ts timestamp(6),
                    tstz timestamptz, j json, u uuid);
CREATE TABLE pairs (a varchar(10), b int, v text, at timestamp DEFAULT '2026-01-01 12:00', ok boolean DEFAULT true,
                    price numeric(10,2) DEFAULT 1.5, PRIMARY KEY (a, b));  -- defaults of encoded types
INSERT INTO kinds VALUES
  (1, 7, 70000000000, true, 3.25, 2.5, 1234.5, 'plain', 'text', '\x0102', '2024-02-29', '12:34:56.789012',
   '2024-01-02 03:04:05.678901', '2024-01-02 03:04:05.678901+02', '{"k": "v"}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'),
  (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (3, -32768, 9223372036854775807, false, -1.5, 1e308, -999999999.999, '', E'\u00fc\u20ac\U0001D11E "q" \\ \n',
   '\x00ff10', '1000-01-01', '23:59:59.999999', '9999-12-31 23:59:59.999999', '1970-01-01 00:00:00+00',
   '{"a": [1, 2, null], "b": {"c": true}}', '00000000-0000-0000-0000-000000000000'),
  (4, 32767, -9223372036854775808, true, 0, -2.5e-300, 0.001, 'x', '', '\x', '9999-12-31', '00:00:00',
   '1000-01-01 00:00:00', '2038-01-19 03:14:08.5+00', '[]', 'ffffffff-ffff-ffff-ffff-ffffffffffff');
INSERT INTO pairs VALUES ('x', 1, 'one'), ('x', 2, 'two'), ('y', 1, 'three');
"""
# each list item is one batch of changes
WORKLOAD = [
    """INSERT INTO kinds (id, txt, num) VALUES (5, 'new', 5.5);
       UPDATE kinds SET txt = 'changed', num = 1.5, b = NULL WHERE id = 1;
       UPDATE kinds SET id = 10 WHERE id = 4;
       DELETE FROM kinds WHERE id = 2;
       UPDATE pairs SET b = 9 WHERE a = 'x' AND b = 1;""",
    # a key created, changed and deleted within one batch; a key deleted and created again
    """INSERT INTO kinds (id, txt) VALUES (6, 'short-lived');
       UPDATE kinds SET txt = 'still' WHERE id = 6;
       DELETE FROM kinds WHERE id = 6;
       DELETE FROM kinds WHERE id = 5;
       INSERT INTO kinds (id, txt, vc) VALUES (5, 'again', 'v2');
       INSERT INTO pairs VALUES ('z', 3, 'before truncate');
       TRUNCATE pairs;
       INSERT INTO pairs VALUES ('after', 1, 'truncate'), ('after', 2, NULL);
       UPDATE pairs SET v = 'updated' WHERE a = 'after' AND b = 2;""",
    """ALTER TABLE kinds ADD COLUMN extra int;
       INSERT INTO kinds (id, extra) VALUES (20, 42);
       UPDATE kinds SET extra = -1, vc = 'with extra' WHERE id = 1;""",
]
KINDS = "SELECT id, i2, i8, b, f4, f8, num, vc, txt, bin, d, t, ts, tstz, j, u{extra} FROM {table} ORDER BY id"
PAIRS = "SELECT a, b, v FROM {table} ORDER BY a, b"


def _mirror(pg_server, pg_db, slot, target_props, read_target):
    pg_server.execute(SETUP, pg_db)
    engine = source_engine(pg_server, pg_db, slot, "public.kinds,public.pairs")
    w = writer({**target_props, "mirror": True})
    try:
        batch_id, batches = apply_available(engine, w)
        assert read_target(KINDS.format(extra="", table="kinds")) == pg_rows(
            pg_server, pg_db, KINDS.format(extra="", table="kinds"))
        for step in WORKLOAD:
            pg_server.execute(step, pg_db)
            batch_id, more = apply_available(engine, w, batch_id)
            batches += more
        extra = ", extra"
        source_kinds = pg_rows(pg_server, pg_db, KINDS.format(extra=extra, table="kinds"))
        source_pairs = pg_rows(pg_server, pg_db, PAIRS.format(table="pairs"))
        assert [r[0] for r in source_kinds] == [1, 3, 5, 10, 20]
        assert read_target(KINDS.format(extra=extra, table="kinds")) == source_kinds
        assert read_target(PAIRS.format(table="pairs")) == source_pairs
        # every batch applied again: nothing changes, nothing is counted as applied
        assert sum(w.apply(i, blocks) for i, blocks in batches) == 0
        assert read_target(KINDS.format(extra=extra, table="kinds")) == source_kinds
        assert read_target(PAIRS.format(table="pairs")) == source_pairs
        return batches
    finally:
        w.close()
        engine.close()


def test_postgres_mirrored_into_postgres(pg_server, pg_db):
    target = f"{pg_db}_target"
    pg_server.create_database(target)
    try:
        batches = _mirror(pg_server, pg_db, "mirror_pg", pg_url(pg_server, target),
                          lambda sql: pg_rows(pg_server, target, sql))
        recorded = pg_rows(pg_server, target, "SELECT pipeline, batch_id, topic FROM headwater_sink_batches "
                                              "ORDER BY batch_id, topic")
        assert {r[1] for r in recorded} == {i for i, _ in batches}
        types = dict(pg_rows(pg_server, target, "SELECT column_name, data_type FROM information_schema.columns "
                                                "WHERE table_name = 'kinds'"))
        assert types == {"id": "integer", "i2": "smallint", "i8": "bigint", "b": "boolean", "f4": "real",
                         "f8": "double precision", "num": "numeric", "vc": "text", "txt": "text", "bin": "bytea",
                         "d": "date", "t": "time without time zone", "ts": "timestamp without time zone",
                         "tstz": "timestamp with time zone", "j": "json", "u": "uuid", "extra": "integer"}
    finally:
        pg_server.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')


def test_postgres_mirrored_into_mariadb(pg_server, pg_db, mariadb_server, mariadb_db, monkeypatch):
    loads = []  # (table, warnings) of each LOAD DATA: the rows go by bulk load, not by statements
    load = MySqlConnection.load

    def spy(self, table, columns, text, hexed):
        warnings = load(self, table, columns, text, hexed)
        loads.append((columns, warnings))
        return warnings

    monkeypatch.setattr(MySqlConnection, "load", spy)
    _mirror(pg_server, pg_db, "mirror_maria", mariadb_url(mariadb_server, mariadb_db),
            lambda sql: mariadb_rows(mariadb_server, mariadb_db, sql))
    types = dict(mariadb_rows(mariadb_server, mariadb_db, "SELECT column_name, column_type FROM "
                                                          "information_schema.columns WHERE table_name = 'kinds'"))
    assert types["num"] == "decimal(12,3)" and types["ts"] == "datetime(6)" and types["u"] == "char(36)"
    assert types["b"] == "tinyint(1)" and types["bin"] == "longblob"
    assert any("bin" in cols and "tstz" in cols for cols, _ in loads) and not any(w for _, w in loads)


EDGES = r"""
CREATE TABLE edges (id int PRIMARY KEY, f4 real, f8 double precision, ts timestamp, tstz timestamptz, t time,
                    iv interval, bits bit(5), arr int[], tarr text[], x xml, e mood);
INSERT INTO edges VALUES
  (1, 'NaN', '-Infinity', 'infinity', 'infinity', '24:00:00', '1 day 02:03:04.5', B'10110', '{1,NULL,3}',
   '{"a","b c"}', '<a>x</a>', 'happy'),
  (2, 'Infinity', 'NaN', '-infinity', '-infinity', '00:00:00', '-36 hours', B'00000', '{}', '{}', NULL, NULL);
"""
EDGE_ROWS = ("SELECT id, f4::text, f8::text, ts::text, tstz::text, t::text, extract(epoch FROM iv)::text, bits::text, arr::text, "
             "tarr::text, x::text, e::text FROM edges ORDER BY id")


def test_postgres_edge_values_mirrored_into_postgres(pg_server, pg_db):
    """Values only PostgreSQL has: NaN and the infinities, infinite timestamps, 24:00, intervals, bit
    strings, arrays, XML, enums (into text). An interval is a number of microseconds in the events
    (Debezium's MicroDuration), so the target holds its length, not its days and hours apart."""
    pg_server.execute("CREATE TYPE mood AS ENUM ('happy', 'sad');" + EDGES, pg_db)
    target = f"{pg_db}_target"
    pg_server.create_database(target)
    engine = source_engine(pg_server, pg_db, "mirror_edges", "public.edges")
    w = writer({**pg_url(pg_server, target), "mirror": True})
    try:
        apply_available(engine, w)
        assert pg_rows(pg_server, target, EDGE_ROWS) == pg_rows(pg_server, pg_db, EDGE_ROWS)
    finally:
        w.close()
        engine.close()
        pg_server.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')


def test_propagated_source_types_and_the_database_time_zone_into_mariadb(pg_server, pg_db, mariadb_server, mariadb_db):
    """With `column.propagate.source.type` the columns get the source's lengths (varchar(12),
    char(3), numeric(7,2)); a timestamp with time zone lands in MariaDB's datetime as the local time
    of `database.time_zone`."""
    pg_server.execute("CREATE TABLE typed (id int PRIMARY KEY, code char(3), name varchar(12), amount numeric(7,2), "
                      "at timestamptz); INSERT INTO typed VALUES (1, 'abc', 'twelve chars', 12345.67, "
                      "'2024-07-01 10:00:00+00')", pg_db)
    engine = source_engine(pg_server, pg_db, "propagate", "public.typed", **{"column.propagate.source.type": ".*"})
    w = writer({**mariadb_url(mariadb_server, mariadb_db), "mirror": True, "database.time_zone": "Europe/Berlin"})
    try:
        apply_available(engine, w)
    finally:
        w.close()
        engine.close()
    types = dict(mariadb_rows(mariadb_server, mariadb_db, "SELECT column_name, column_type FROM "
                                                          "information_schema.columns WHERE table_name = 'typed'"))
    assert (types["code"], types["name"], types["amount"]) == ("char(3)", "varchar(12)", "decimal(7,2)")
    assert mariadb_rows(mariadb_server, mariadb_db, "SELECT code, name, amount, CAST(at AS char) FROM typed") == [
        ("abc", "twelve chars", decimal.Decimal("12345.67"), "2024-07-01 12:00:00.000000")]
