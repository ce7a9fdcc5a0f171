"""Record building shared by connectors, with a made-up connector (no server): filled rows,
keys, schemas, transaction counters and records, heartbeats, truncates."""

from __future__ import annotations

import json
import pickle

import orjson

from headwater.connectors.common.records import (
    TableRecords,
    TxnCounters,
    ValueColumn,
    compile_fill,
    table_records,
)
from headwater.events.columns import ColumnOptions, compile_list
from tests.connectors.common.support import UNSENT, Col, SampleMaker, Table, context, converter
from tests.events_support import json_rows

TABLE = Table("we ird", "t-1", (
    Col("id", "int", not_null=True),
    Col("qty", "int", not_null=True, default=3),
    Col("note", "text"),
    Col("n7", "int", default=7),
    Col("secret", "text"),
    Col("gone", "skip"),
), key_columns=("id",))


def column(i: int, replace_null: bool = True, maskers=()) -> ValueColumn:
    c = TABLE.columns[i]
    return ValueColumn(i, c.name, converter(c), maskers, replace_null, streaming=False)


def test_fill_converts_text_and_keeps_other_values():
    fill = compile_fill([column(0), column(2)])
    assert fill(("12", 5, "x")) == {"id": 12, "note": "x"}
    assert fill((12, 5, b"raw")) == {"id": 12, "note": b"raw"}


def test_fill_defaults_fallbacks_and_nulls():
    fill = compile_fill([column(0), column(1), column(2), column(3)])
    # a required column without a value: its default, else the type's fallback; an optional one:
    # its default (JsonConverter's replace.null.with.default), else null
    assert fill((None, None, None, None)) == {"id": 0, "qty": 3, "note": None, "n7": 7}
    no_replace = compile_fill([column(3, replace_null=False)])
    assert no_replace((None, None, None, None)) == {"n7": None}


def test_fill_unavailable_values_get_the_placeholder():
    fill = compile_fill([column(2)], UNSENT)
    assert fill((None, None, UNSENT)) == {"note": "__unsent__"}
    plain = compile_fill([column(2)])  # without the marker, the value is converted as any other
    assert plain((None, None, UNSENT)) == {"note": UNSENT}


def test_fill_applies_masks_in_order_also_to_null():
    fill = compile_fill([column(4, maskers=(lambda v: None if v is None else v[:2], lambda v: "***"))])
    assert fill((0, 0, 0, 0, "abcdef")) == {"secret": "***"}
    assert fill((0, 0, 0, 0, None)) == {"secret": "***"}


def test_table_records_schemas_key_and_masks():
    opts = ColumnOptions(mask_chars=((5, compile_list(["we ird.t-1.secret"])),))
    ctx = context(opts)
    te = TableRecords(ctx, TABLE, TABLE.columns, streaming=False)
    assert te.topic == "srv.we_ird.t-1"
    assert te.collection == "we ird.t-1"
    assert te.key_schema is not None and te.key_schema.name == "srv.we_ird.t-1.Key"
    assert te.value_schema.name == "srv.we_ird.t-1.Value"
    assert te.envelope.name == "srv.we_ird.t-1.Envelope"
    assert [f.name for f in te.value_schema.fields] == ["id", "qty", "note", "n7", "secret"]
    secret = te.value_schema.fields[4].schema
    assert dict(secret.parameters or ()) == {"masked": "true"}
    values = ("5", None, "n", None, "hide me", "ignored")
    assert te.row(values) == {"id": 5, "qty": 3, "note": "n", "n7": 7, "secret": "*****"}
    assert te.key_out.dumps(te.key(values)) == '{"id":5}'
    assert table_records(ctx, TABLE, TABLE.columns, False) is table_records(ctx, TABLE, TABLE.columns, False)
    assert pickle.loads(pickle.dumps(ctx)) == ctx


def test_txn_counters_count_and_round_trip():
    c = TxnCounters()
    assert [c.next("a"), c.next("b"), c.next("a")] == [(1, 1), (2, 1), (3, 2)]
    assert TxnCounters.from_json(json.loads(json.dumps(c.to_json()))) == c
    assert TxnCounters.from_json(None) == TxnCounters()


def test_txn_counters_in_java_hashmap_order():
    # recorded from Debezium 3.6.3 (golden scenario topic_names): first appearance was
    # "we ird.s.t.a b", "public.tëst/ü", "public.emoji😀", "public.q\"uote"
    c = TxnCounters()
    for name in ("we ird.s.t.a b", "public.tëst/ü", "public.emoji😀", 'public.q"uote'):
        c.next(name)
    assert [k for k, _ in c.in_java_order()] == ["public.emoji😀", 'public.q"uote', "public.tëst/ü", "we ird.s.t.a b"]
    two = TxnCounters()
    for name in ("public.orders", "public.lines", "public.orders"):
        two.next(name)
    assert two.in_java_order() == [("public.orders", 2), ("public.lines", 1)]


def test_txn_counters_java_order_after_a_resize():
    # 13 entries: the HashMap has grown to 32 buckets; "Aa" and "BB" share a hash. The expected
    # order is what java.util.HashMap.keySet() gave for the same insertions (OpenJDK 17).
    c = TxnCounters()
    for name in ["BB", "Aa", *(f"t{i}" for i in range(11))]:
        c.next(name)
    assert [k for k, _ in c.in_java_order()] == \
        ["BB", "Aa", "t4", "t5", "t6", "t7", "t8", "t9", "t10", "t0", "t1", "t2", "t3"]


def test_transaction_heartbeat_and_truncate_records():
    ctx = context(schemas_enable=False)
    maker = SampleMaker(ctx)
    te = table_records(ctx, TABLE, TABLE.columns, streaming=True)
    counters = TxnCounters()
    maker.begin_record("gtid:7", 1_000_000, 1)
    counters.next(te.collection)
    src = maker.fixed_source(te, "false", 1_000_000, {"sequence": b"null"})
    maker.truncate(te, orjson.Fragment(src.render(b"4", b"0")), None, 1, 1_000_000)
    maker.end_record("gtid:7", 1_000_000, counters, 1)
    maker.heartbeat(1234, 2)
    events = list(json_rows(maker.take()))
    values = [json.loads(e.value or "null") for e in events]
    assert [e.topic for e in events] == ["srv.transaction", "srv.we_ird.t-1", "srv.transaction",
                                         "__debezium-heartbeat.srv"]
    begin = values[0]
    assert begin == {"status": "BEGIN", "id": "gtid:7", "event_count": None, "data_collections": None, "ts_ms": 1000}
    truncate = events[1]
    assert truncate.key is None and truncate.op == "t"
    payload = values[1]
    assert (payload["before"], payload["after"], payload["op"]) == (None, None, "t")
    assert payload["source"]["table"] == "t-1" and payload["source"]["pos"] == 4
    end = values[2]
    assert end["event_count"] == 1
    assert end["data_collections"] == [{"data_collection": "we ird.t-1", "event_count": 1}]
    assert json.loads(events[3].key or "null") == {"serverName": "srv"}
    assert values[3] == {"ts_ms": 1234}
