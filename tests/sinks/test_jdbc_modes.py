"""The JDBC sink's settings on a real PostgreSQL (and MariaDB where the SQL differs): the spec's test
vectors for `insert.mode`, `primary.key.mode`, `delete.enabled`, `truncate.enabled` and
`schema.evolution`, table and column naming, flat records, and a row the target refuses."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.events.typed import BlockBuilder, TypedBlock
from headwater.sinks.jdbc.writer import SinkError
from tests.sinks.jdbc_support import mariadb_rows, mariadb_url, pg_rows, pg_url, writer

ROW: dict[str, Any] = {"type": "struct", "optional": True, "fields": [
    {"field": "id", "type": "int32"}, {"field": "qty", "type": "int32", "optional": True}]}
KEY = {"type": "struct", "fields": [{"field": "id", "type": "int32"}]}
ENVELOPE = {"type": "struct", "fields": [{**ROW, "field": "before"}, {**ROW, "field": "after"},
                                         {"field": "op", "type": "string"}]}


def events(*changes: tuple, topic: str = "orders", key_schema: dict | None = KEY, value_schema: dict = ENVELOPE
           ) -> list[TypedBlock]:
    """Blocks of envelopes: (op, id, qty) for c/r/u, (op, id) for d, (None, id) for a tombstone, ("t",)."""
    b = BlockBuilder()
    for change in changes:
        op = change[0]
        key = None if op == "t" else {"id": change[1]}
        if op is None:
            value = None
        elif op == "d":
            value = {"before": {"id": change[1], "qty": None}, "after": None, "op": "d"}
        elif op == "t":
            value = {"before": None, "after": None, "op": "t"}
        else:
            value = {"before": None, "after": {"id": change[1], "qty": change[2]}, "op": op}
        b.add(topic, key_schema if key is not None else None, key, value_schema, value, op, 1, 0)
    return b.take().blocks


@pytest.fixture
def target(pg_server, pg_db):
    """(sink properties, a function running SQL on the target)."""
    return pg_url(pg_server, pg_db), lambda sql: pg_rows(pg_server, pg_db, sql)


UPSERT = {"insert.mode": "upsert", "primary.key.mode": "record_key", "schema.evolution": "basic"}


def test_upsert_by_record_key_creates_the_table_and_is_idempotent(target):
    props, sql = target
    w = writer({**props, **UPSERT, "delete.enabled": "true"})
    try:
        w.apply(0, events(("c", 1, 2)))
        assert sql("SELECT id, qty FROM orders") == [(1, 2)]
        key = sql("SELECT kcu.column_name FROM information_schema.table_constraints tc JOIN "
                  "information_schema.key_column_usage kcu USING (constraint_name) "
                  "WHERE tc.table_name = 'orders' AND tc.constraint_type = 'PRIMARY KEY'")
        assert key == [("id",)]
        assert sql("SELECT is_nullable FROM information_schema.columns WHERE table_name = 'orders' "
                   "ORDER BY ordinal_position") == [("NO",), ("YES",)]
        w.apply(1, events(("c", 1, 2)))  # the same record delivered again (a new batch): same state
        assert sql("SELECT id, qty FROM orders") == [(1, 2)]
        w.apply(2, events(("u", 1, 5)))
        assert sql("SELECT id, qty FROM orders") == [(1, 5)]
        w.apply(3, events(("d", 1)))
        assert sql("SELECT id, qty FROM orders") == []
        w.apply(4, events((None, 1)))  # the tombstone after it: a delete of nothing
        assert sql("SELECT count(*) FROM orders") == [(0,)]
    finally:
        w.close()


def test_deletes_and_tombstones_are_ignored_unless_enabled(target):
    props, sql = target
    w = writer({**props, **UPSERT})
    try:
        w.apply(0, events(("c", 1, 2), ("c", 2, 3)))
        w.apply(1, events(("d", 1), (None, 1), ("u", 2, 4), ("d", 2), (None, 2)))
        # Debezium applies the update of id 2 and skips the delete after it
        assert sql("SELECT id, qty FROM orders ORDER BY id") == [(1, 2), (2, 4)]
    finally:
        w.close()


def test_truncate_empties_the_table_when_enabled(target):
    props, sql = target
    off = writer({**props, **UPSERT, "table.name.format": "kept"})
    on = writer({**props, **UPSERT, "truncate.enabled": "true"})
    try:
        off.apply(0, events(("c", 1, 2), ("t",), ("c", 2, 2)))
        assert sql("SELECT id FROM kept ORDER BY id") == [(1,), (2,)]
        on.apply(0, events(("c", 1, 2), ("c", 3, 3)))
        on.apply(1, events(("u", 3, 4), ("t",), ("c", 2, 2)))
        assert sql("SELECT id, qty FROM orders ORDER BY id") == [(2, 2)]
    finally:
        off.close()
        on.close()


def test_insert_mode_inserts_and_a_refused_row_fails_the_batch_whole(target):
    props, sql = target
    w = writer({**props, "insert.mode": "insert", "primary.key.mode": "record_key", "schema.evolution": "basic"})
    try:
        w.apply(0, events(("c", 1, 2)))
        other = events(("c", 7, 7), topic="other")
        with pytest.raises(SinkError) as err:
            w.apply(1, events(("c", 5, 5), ("c", 1, 3), ("c", 6, 6)) + other)
        message = str(err.value)
        assert "table orders" in message and "{id=1}" in message and "duplicate key" in message
        # nothing of the batch: not the rows of orders around it, not the other table's, not the record
        assert sql("SELECT id, qty FROM orders ORDER BY id") == [(1, 2)]
        assert sql("SELECT count(*) FROM information_schema.tables WHERE table_name = 'other'") == [(1,)]
        assert sql("SELECT count(*) FROM other") == [(0,)]
        assert sql("SELECT batch_id FROM headwater_sink_batches ORDER BY batch_id") == [(0,)]
    finally:
        w.close()


def test_update_mode_updates_existing_rows_only(target):
    props, sql = target
    w = writer({**props, "insert.mode": "update", "primary.key.mode": "record_key", "schema.evolution": "basic"})
    try:
        w.apply(0, events(("r", 1, 2)))  # creates the table; the update finds no row
        assert sql("SELECT count(*) FROM orders") == [(0,)]
        sql_insert = "INSERT INTO orders VALUES (1, 2)"
        sql(sql_insert + " RETURNING id")
        w.apply(1, events(("u", 1, 9), ("u", 2, 9)))
        assert sql("SELECT id, qty FROM orders ORDER BY id") == [(1, 9)]
    finally:
        w.close()


def test_no_primary_key_inserts_every_event(target):
    props, sql = target
    w = writer({**props, "schema.evolution": "basic"})
    try:
        w.apply(0, events(("c", 1, 2), ("u", 1, 3), ("d", 1)))
        assert sql("SELECT id, qty FROM orders ORDER BY qty") == [(1, 2), (1, 3)]
        assert sql("SELECT count(*) FROM information_schema.table_constraints WHERE table_name = 'orders' "
                   "AND constraint_type = 'PRIMARY KEY'") == [(0,)]
    finally:
        w.close()


def test_record_value_key_from_chosen_fields(target):
    props, sql = target
    w = writer({**props, "insert.mode": "upsert", "primary.key.mode": "record_value", "primary.key.fields": "qty",
                "schema.evolution": "basic"})
    try:
        w.apply(0, events(("c", 1, 2), ("c", 2, 2), ("c", 3, 4)))
        assert sql("SELECT id, qty FROM orders ORDER BY qty") == [(2, 2), (3, 4)]
        key = sql("SELECT kcu.column_name FROM information_schema.key_column_usage kcu "
                  "WHERE kcu.table_name = 'orders'")
        assert key == [("qty",)]
    finally:
        w.close()


def test_a_primitive_key_is_named_by_primary_key_fields(target):
    props, sql = target
    w = writer({**props, **UPSERT, "primary.key.fields": "order_id"})
    b = BlockBuilder()
    b.add("orders", {"type": "int64"}, 10, ENVELOPE, {"before": None, "after": {"id": 1, "qty": 1}, "op": "c"}, "c", 1, 0)
    b.add("orders", {"type": "int64"}, 10, ENVELOPE, {"before": None, "after": {"id": 1, "qty": 5}, "op": "u"}, "u", 1, 0)
    try:
        w.apply(0, b.take().blocks)
        assert sql("SELECT order_id, id, qty FROM orders") == [(10, 1, 5)]
    finally:
        w.close()
    b.add("orders", {"type": "int64"}, 11, ENVELOPE, {"before": None, "after": {"id": 2, "qty": 1}, "op": "c"}, "c", 1, 0)
    bad = writer({**props, **UPSERT})
    try:
        with pytest.raises(SinkError, match="primary.key.fields"):
            bad.apply(1, b.take().blocks)
    finally:
        bad.close()


def test_schema_evolution_none_needs_the_table_and_its_columns(target):
    props, sql = target
    w = writer({**props, "insert.mode": "upsert", "primary.key.mode": "record_key"})
    try:
        with pytest.raises(SinkError, match="table orders does not exist"):
            w.apply(0, events(("c", 1, 2)))
        sql("CREATE TABLE orders (id int PRIMARY KEY) ; SELECT 1")
        with pytest.raises(SinkError, match="no column qty"):
            w.apply(0, events(("c", 1, 2)))
        sql("ALTER TABLE orders ADD COLUMN qty int; SELECT 1")
        w.apply(0, events(("c", 1, 2)))
        assert sql("SELECT id, qty FROM orders") == [(1, 2)]
    finally:
        w.close()


def test_basic_evolution_adds_a_new_optional_column(target):
    props, sql = target
    wider = {**ROW, "fields": [*ROW["fields"], {"field": "note", "type": "string", "optional": True}]}
    envelope = {**ENVELOPE, "fields": [{**wider, "field": "before"}, {**wider, "field": "after"},
                                       {"field": "op", "type": "string"}]}
    w = writer({**props, **UPSERT})
    try:
        w.apply(0, events(("c", 1, 2)))
        b = BlockBuilder()
        b.add("orders", KEY, {"id": 2}, envelope, {"before": None, "after": {"id": 2, "qty": 1, "note": "n"},
                                                   "op": "c"}, "c", 1, 0)
        w.apply(1, b.take().blocks)
        assert sql("SELECT id, qty, note FROM orders ORDER BY id") == [(1, 2, None), (2, 1, "n")]
    finally:
        w.close()


def test_table_naming_field_filters_and_quoting(target):
    props, sql = target
    w = writer({**props, **UPSERT, "table.name.format": "jdbc_${topic}", "field.exclude.list": "qty"})
    q = writer({**props, **UPSERT, "quote.identifiers": "true", "field.include.list": "Shop.Orders:id"})
    try:
        w.apply(0, events(("c", 1, 2), topic="dbserver1.inventory.customers"))
        assert sql("SELECT * FROM jdbc_dbserver1_inventory_customers") == [(1,)]
        q.apply(0, events(("c", 1, 2), topic="Shop.Orders"))
        assert sql('SELECT * FROM "Shop_Orders"') == [(1,)]
    finally:
        w.close()
        q.close()


FLAT: dict[str, Any] = {"type": "struct", "fields": [*ROW["fields"], {"field": "__deleted", "type": "string",
                                                                      "optional": True}]}


def test_flat_records_with_rewritten_deletes_and_tombstones(target):
    """ExtractNewRecordState's output: the row itself, `__deleted` for a rewritten delete, a tombstone
    for a deleted key (delete.tombstone.handling.mode=tombstone)."""
    props, sql = target
    w = writer({**props, **UPSERT, "delete.enabled": "true", "field.exclude.list": "__deleted"})
    b = BlockBuilder()
    for i, deleted in ((1, "false"), (2, "false"), (3, "false")):
        b.add("flat", KEY, {"id": i}, FLAT, {"id": i, "qty": i, "__deleted": deleted}, None, 1, 0)
    b.add("flat", KEY, {"id": 1}, FLAT, {"id": 1, "qty": 1, "__deleted": "true"}, None, 1, 0)
    b.add("flat", KEY, {"id": 2}, FLAT, None, None, 1, 0)
    try:
        w.apply(0, b.take().blocks)
        assert sql("SELECT * FROM flat") == [(3, 3)]
    finally:
        w.close()


def test_mariadb_refuses_a_too_long_value_naming_the_row(mariadb_server, mariadb_db):
    mariadb_server.execute("CREATE TABLE orders (id int PRIMARY KEY, qty varchar(1))", mariadb_db)
    w = writer({**mariadb_url(mariadb_server, mariadb_db), **UPSERT})
    try:
        with pytest.raises(SinkError) as err:
            w.apply(0, events(("c", 1, 2), ("c", 2, 22), ("c", 3, 3)))
        assert "table orders" in str(err.value) and "{id=2}" in str(err.value) and "too long" in str(err.value)
        assert mariadb_rows(mariadb_server, mariadb_db, "SELECT count(*) FROM orders") == [(0,)]
        w.apply(0, events(("c", 1, 2), ("d", 2), (None, 2), ("c", 3, 3)))
        assert mariadb_rows(mariadb_server, mariadb_db, "SELECT id, qty FROM orders ORDER BY id") == [(1, "2"), (3, "3")]
        assert w.apply(0, events(("u", 1, 9))) == 0  # batch 0 is applied: a replay changes nothing
        assert mariadb_rows(mariadb_server, mariadb_db, "SELECT qty FROM orders WHERE id = 1") == [("2",)]
    finally:
        w.close()


def test_mariadb_without_local_infile_takes_statements(mariadb_server, mariadb_db):
    mariadb_server.execute("SET GLOBAL local_infile = 0")
    w = writer({**mariadb_url(mariadb_server, mariadb_db), **UPSERT})
    try:
        w.apply(0, events(("c", 1, 2), ("c", 2, 3)))
        w.apply(1, events(("u", 1, 5), ("c", 3, 4)))
        assert mariadb_rows(mariadb_server, mariadb_db, "SELECT id, qty FROM orders ORDER BY id") == [(1, 5), (2, 3),
                                                                                                     (3, 4)]
        assert not w.bulk_load
    finally:
        w.close()
        mariadb_server.execute("SET GLOBAL local_infile = 1")


def test_postgres_without_temporary_tables_takes_statements(pg_server, pg_db):
    user = f"{pg_db}_u"
    pg_server.execute(f'CREATE ROLE "{user}" LOGIN PASSWORD \'pw\'; REVOKE TEMPORARY ON DATABASE "{pg_db}" FROM PUBLIC; '
                      f'GRANT CREATE ON SCHEMA public TO "{user}"', pg_db)
    w = writer({**pg_url(pg_server, pg_db), "connection.username": user, "connection.password": "pw",
                **UPSERT, "delete.enabled": True})
    try:
        w.apply(0, events(("c", 1, 2), ("c", 2, 3)))
        w.apply(1, events(("u", 1, 5), ("d", 2), ("c", 3, 4)))
        assert pg_rows(pg_server, pg_db, "SELECT id, qty FROM orders ORDER BY id") == [(1, 5), (3, 4)]
        assert not w.bulk_load
    finally:
        w.close()
        pg_server.execute(f'DROP OWNED BY "{user}"; DROP ROLE "{user}"', pg_db)


def test_mariadb_without_temporary_tables_takes_statements(mariadb_server, mariadb_db):
    user = f"{mariadb_db}_u"
    mariadb_server.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw'; GRANT SELECT, INSERT, UPDATE, DELETE, "
                           f"CREATE, ALTER ON `{mariadb_db}`.* TO '{user}'@'%'")
    w = writer({**mariadb_url(mariadb_server, mariadb_db), "connection.username": user, "connection.password": "pw",
                **UPSERT, "delete.enabled": True})
    try:
        w.apply(0, events(("c", 1, 2), ("c", 2, 3)))
        w.apply(1, events(("u", 1, 5), ("d", 2), ("c", 3, 4)))
        assert mariadb_rows(mariadb_server, mariadb_db, "SELECT id, qty FROM orders ORDER BY id") == [(1, 5), (3, 4)]
        assert not w.bulk_load
    finally:
        w.close()
        mariadb_server.execute(f"DROP USER '{user}'@'%'")


def test_only_table_topics_are_written(target):
    """Transaction metadata (and heartbeats, schema changes) never become tables; `topics` and
    `topics.regex` choose among the rest."""
    props, sql = target
    b = BlockBuilder()
    tx = {"type": "struct", "name": "io.debezium.connector.common.TransactionMetadataValue",
          "fields": [{"field": "status", "type": "string"}, {"field": "id", "type": "string"}]}
    b.add("p.transaction", {"type": "struct", "fields": [{"field": "id", "type": "string"}]}, {"id": "1"}, tx,
          {"status": "BEGIN", "id": "1"}, None, 1, 0)
    blocks = b.take().blocks + events(("c", 1, 2)) + events(("c", 1, 2), topic="skipped")
    w = writer({**props, **UPSERT, "topics.regex": "ord.*"})
    try:
        w.apply(0, blocks)
        assert sql("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
                   "ORDER BY table_name") == [("headwater_sink_batches",), ("orders",)]
    finally:
        w.close()
