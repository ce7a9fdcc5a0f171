"""The JDBC sink's configuration, type mapping and SQL, without a server: Debezium's properties
checked before anything runs (exit 2 from the CLI, never the password), the `mirror` shorthand,
the spec's type tables, and the SQL of every dialect (Oracle, SQL Server and Db2 included)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from headwater.config.errors import ConfigErrors
from headwater.sinks.jdbc.config import parse_jdbc_sink, parse_url
from headwater.sinks.jdbc.dialects import Column, dialect
from headwater.sinks.jdbc.types import SqlType, column_type

URL = "jdbc:postgresql://db.example:5433/shop?sslmode=disable"


def errors(props: dict) -> dict[str, str]:
    with pytest.raises(ConfigErrors) as exc:
        parse_jdbc_sink({"type": "jdbc", **props})
    return {e.property: f"{e.message} ({e.hint})" for e in exc.value.errors}


def test_urls_of_each_database():
    t = parse_url(URL)
    assert (t.dialect, t.host, t.port, t.database, t.params) == ("postgresql", "db.example", 5433, "shop",
                                                                 {"sslmode": "disable"})
    assert parse_url("jdbc:mariadb://h/inv").dialect == "mysql" and parse_url("jdbc:mariadb://h/inv").port == 3306
    assert parse_url("jdbc:mysql://h:3307/inv").port == 3307
    assert parse_url("jdbc:sqlserver://h:1433;databaseName=inv").database == "inv"
    with pytest.raises(ValueError):
        parse_url("jdbc:sqlite:/tmp/x.db")


def test_defaults_are_debeziums():
    cfg = parse_jdbc_sink({"type": "jdbc", "connection.url": URL})
    assert (cfg.insert_mode, cfg.primary_key_mode, cfg.delete_enabled, cfg.truncate_enabled, cfg.schema_evolution,
            cfg.table_name_format, cfg.quote_identifiers, cfg.batch_size, cfg.time_zone) == (
        "insert", "none", False, False, "none", "${topic}", False, 500, "UTC")


def test_mirror_is_upsert_by_key_with_deletes_truncates_and_evolution():
    cfg = parse_jdbc_sink({"type": "jdbc", "connection.url": URL, "mirror": True})
    assert (cfg.insert_mode, cfg.primary_key_mode, cfg.delete_enabled, cfg.truncate_enabled, cfg.schema_evolution,
            cfg.table_name_format) == ("upsert", "record_key", True, True, "basic", "${source.table}")
    assert parse_jdbc_sink({"type": "jdbc", "connection.url": URL, "mirror": True,
                            "delete.enabled": "false"}).delete_enabled is False


def test_settings_that_cannot_work_are_refused_with_the_fix():
    found = errors({"connection.url": URL, "insert.mode": "upsert"})
    assert "needs a primary key" in found["sink.primary.key.mode"]
    found = errors({"connection.url": URL, "delete.enabled": "true", "primary.key.mode": "record_value"})
    assert "record_key" in found["sink.delete.enabled"]
    found = errors({"connection.url": "jdbc:sqlite:/x", "insert.mode": "merge", "batch.size": 0,
                    "primary.key.mod": "none", "database.time_zone": "Mars/Base",
                    "field.include.list": "a", "field.exclude.list": "b", "table.name.format": "${table}"})
    assert "not a JDBC URL" in found["sink.connection.url"]
    assert "allowed values: insert, update, upsert" in found["sink.insert.mode"]
    assert "did you mean primary.key.mode?" in found["sink.primary.key.mod"]
    assert set(found) >= {"sink.batch.size", "sink.database.time_zone", "sink.field.include.list",
                          "sink.table.name.format"}
    assert "no oracle driver" in errors({"connection.url": "jdbc:oracle:thin:@//h:1521/x"})["sink.connection.url"]
    assert parse_url("jdbc:oracle:thin:@//h:1521/x").dialect == "oracle"
    assert "required" in errors({})["sink.connection.url"]
    assert "kafka" in errors({"connection.url": URL, "primary.key.mode": "kafka"})["sink.primary.key.mode"]


def test_the_password_is_never_shown():
    cfg = parse_jdbc_sink({"type": "jdbc", "connection.url": URL, "connection.password": "s3cret-pw"})
    assert cfg.password is not None and cfg.password.get_secret_value() == "s3cret-pw"
    assert "s3cret-pw" not in repr(cfg) and "s3cret-pw" not in str(cfg.properties())


def test_the_cli_exits_2_before_anything_runs(tmp_path: Path):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({
        "name": "p", "source": {"connector.class": "postgres", "database.hostname": "localhost",
                                "database.user": "u", "database.password": "pw", "database.dbname": "d",
                                "topic.prefix": "t"},
        "sink": {"type": "jdbc", "connection.url": "jdbc:postgresql://localhost/x", "connection.password": "s3cret-pw",
                 "insert.mode": "upsert"}}))
    proc = subprocess.run([sys.executable, "-m", "headwater.cli.main", "validate", str(config)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "sink.primary.key.mode" in proc.stderr and "s3cret-pw" not in proc.stdout + proc.stderr


def test_type_mapping_follows_the_spec():
    pg, my = dialect("postgresql"), dialect("mysql")

    def both(schema: dict) -> tuple[str, str]:
        t = column_type(schema)
        return pg.type_name(t), my.type_name(t)

    assert both({"type": "int8"}) == ("smallint", "tinyint")
    assert both({"type": "int8", "parameters": {"__debezium.source.column.type": "TINYINT",
                                                "__debezium.source.column.length": "1"}}) == ("smallint", "tinyint(1)")
    assert both({"type": "int64"}) == ("bigint", "bigint")
    assert both({"type": "float"}) == ("real", "float")
    assert both({"type": "boolean"}) == ("boolean", "boolean")
    assert both({"type": "string"}) == ("text", "longtext")
    assert both({"type": "string", "parameters": {"__debezium.source.column.type": "VARCHAR",
                                                  "__debezium.source.column.length": "40"}}) == ("varchar(40)",) * 2
    assert both({"type": "bytes"}) == ("bytea", "longblob")
    dec = {"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
           "parameters": {"scale": "2", "connect.decimal.precision": "10"}}
    assert both(dec) == ("numeric(10,2)", "decimal(10,2)")
    assert both({"type": "int32", "name": "io.debezium.time.Date"}) == ("date", "date")
    assert both({"type": "int64", "name": "io.debezium.time.MicroTime"}) == ("time", "time(6)")
    assert both({"type": "int64", "name": "io.debezium.time.MicroTimestamp"}) == ("timestamp", "datetime(6)")
    assert both({"type": "string", "name": "io.debezium.time.ZonedTimestamp"}) == ("timestamp with time zone",
                                                                                   "datetime(6)")
    assert both({"type": "string", "name": "io.debezium.data.Json"}) == ("json", "json")
    assert both({"type": "string", "name": "io.debezium.data.Uuid"}) == ("uuid", "char(36)")
    assert both({"type": "string", "name": "io.debezium.data.Enum", "parameters": {"allowed": "a,b"}}) == (
        "text", "enum('a', 'b')")
    assert both({"type": "string", "name": "io.debezium.data.EnumSet", "parameters": {"allowed": "x,y"}}) == (
        "text", "set('x', 'y')")
    assert both({"type": "int32", "name": "io.debezium.time.Year"}) == ("integer", "year")
    assert both({"type": "int64", "name": "io.debezium.time.MicroDuration"}) == ("interval", "bigint")
    assert both({"type": "bytes", "name": "io.debezium.data.Bits", "parameters": {"length": "5"}})[1] == "bit(5)"
    assert both({"type": "struct", "name": "io.debezium.data.VariableScaleDecimal", "fields": []}) == (
        "double precision", "double")
    assert both({"type": "array", "items": {"type": "int32"}}) == ("integer[]", "json")
    assert my.type_name(column_type({"type": "string"}), key=True) == "varchar(255)"


COLUMNS = [Column("id", SqlType("integer"), nullable=False), Column("name", SqlType("string")),
           Column("qty", SqlType("integer"), default=0)]


def test_sql_of_postgres_and_mysql():
    pg, my = dialect("postgresql"), dialect("mysql", quote_identifiers=True)
    assert pg.create_table("orders", COLUMNS, ["id"]) == (
        "CREATE TABLE orders (id integer NOT NULL, name text, qty integer DEFAULT 0, PRIMARY KEY (id))")
    assert pg.upsert("orders", ["id", "name"], ["id"]) == (
        "INSERT INTO orders (id, name) VALUES (%s, %s) ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name")
    assert pg.upsert("k", ["id"], ["id"]).endswith("ON CONFLICT (id) DO NOTHING")
    assert pg.truncate("orders") == "TRUNCATE TABLE orders"
    assert pg.ident("__connect_topic") == '"__connect_topic"' and pg.ident("Order") == "Order"
    assert my.upsert("orders", ["id", "name"], ["id"]) == (
        "INSERT INTO `orders` (`id`, `name`) VALUES (%s, %s) ON DUPLICATE KEY UPDATE `name` = VALUES(`name`)")
    assert my.truncate("orders") == "DELETE FROM `orders`"  # in the batch's transaction
    assert my.update("o", ["id", "name"], ["id"]) == "UPDATE `o` SET `name` = %s WHERE `id` = %s"
    assert my.delete("o", ["a", "b"]) == "DELETE FROM `o` WHERE `a` = %s AND `b` = %s"


def test_sql_of_oracle_sqlserver_and_db2():
    ora, mss, db2 = dialect("oracle"), dialect("sqlserver"), dialect("db2", quote_identifiers=True)
    assert ora.upsert("orders", ["id", "name"], ["id"]) == (
        "MERGE INTO orders t USING (SELECT ? id, ? name FROM dual) s ON (t.id = s.id) "
        "WHEN MATCHED THEN UPDATE SET t.name = s.name WHEN NOT MATCHED THEN INSERT (id, name) VALUES (s.id, s.name)")
    assert ora.create_table("orders", COLUMNS, ["id"]) == (
        "CREATE TABLE orders (id NUMBER(10) NOT NULL, name CLOB, qty NUMBER(10) DEFAULT 0, PRIMARY KEY (id))")
    assert ora.add_column("orders", COLUMNS[1]) == "ALTER TABLE orders ADD (name CLOB)"
    assert ora.fold("orders") == "ORDERS"
    assert mss.upsert("orders", ["id", "name"], ["id"]) == (
        "MERGE INTO orders t USING (SELECT * FROM (VALUES (?, ?)) v (id, name)) s ON (t.id = s.id) "
        "WHEN MATCHED THEN UPDATE SET t.name = s.name WHEN NOT MATCHED THEN INSERT (id, name) VALUES (s.id, s.name);")
    assert mss.create_table("o", COLUMNS[:2], ["id"]) == "CREATE TABLE o (id int NOT NULL, name nvarchar(max), PRIMARY KEY (id))"
    assert mss.ident("__x") == "[__x]" and mss.truncate("o") == "TRUNCATE TABLE o"
    assert mss.type_name(SqlType("timestamptz")) == "datetimeoffset(6)"
    assert db2.upsert("o", ["id"], ["id"]) == (
        'MERGE INTO "o" t USING (SELECT * FROM (VALUES (?)) AS v ("id")) s ON (t."id" = s."id") '
        'WHEN NOT MATCHED THEN INSERT ("id") VALUES (s."id")')
    assert db2.type_name(SqlType("string"), key=True) == "varchar(255)"
    assert db2.applied_insert() == "INSERT INTO headwater_sink_batches (pipeline, batch_id, topic, events) VALUES (?, ?, ?, ?)"


def test_copy_text_carries_what_arrow_can_write_and_refuses_the_rest():
    import pyarrow as pa

    from headwater.sinks.jdbc.types import copy_text

    ok = [("a", pa.array([1, None], pa.int32()), {"type": "int32"}),
          ("b", pa.array(["", None], pa.string()), {"type": "string"}),
          ("c", pa.array([b"\x00\xff", None], pa.binary()), {"type": "bytes"}),
          ("d", pa.array([86_399_999_999, 0], pa.time64("us")), {"type": "int64"})]
    assert copy_text(ok) == b'"1","","\\x00ff","23:59:59.999999"\n,,,"00:00:00.000000"\n'
    midnight = ("t", pa.array([86_400_000_000], pa.time64("us")), {"type": "int64"})
    infinite = ("ts", pa.array([2**63 - 1], pa.int64()).cast(pa.timestamp("us")), {"type": "int64"})
    bits = ("b", pa.array([b"\x01"]), {"type": "bytes", "name": "io.debezium.data.Bits"})
    assert copy_text([midnight]) is None and copy_text([infinite]) is None and copy_text([bits]) is None


def test_only_plain_numbers_and_booleans_become_column_defaults():
    # a timestamp's Connect default is its microseconds, a decimal's its unscaled bytes: no DEFAULT
    d = dialect("postgresql")
    assert d.column_def(Column("n", SqlType("bigint"), default=5)) == "n bigint DEFAULT 5"
    assert d.column_def(Column("ok", SqlType("boolean"), default=True)) == "ok boolean DEFAULT true"
    assert d.column_def(Column("at", SqlType("timestamp"), default=1767268800000000)) == "at timestamp"
    assert d.column_def(Column("p", SqlType("decimal", precision=10, scale=2), default="AQ==")) == "p numeric(10,2)"


def test_batch_atomic_is_a_checked_flag():
    url = {"connection.url": "jdbc:postgresql://h/db"}
    assert parse_jdbc_sink({**url, "batch.atomic": True}).batch_atomic
    assert not parse_jdbc_sink(url).batch_atomic
    with pytest.raises(ConfigErrors) as err:
        parse_jdbc_sink({**url, "batch.atomic": "sometimes"})
    assert "sink.batch.atomic" in str(err.value) and "true or false" in str(err.value)
