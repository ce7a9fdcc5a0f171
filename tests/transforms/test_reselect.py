"""The reselect post processor on a real PostgreSQL: TOASTed columns left out of updates under REPLICA
IDENTITY DEFAULT re-read as Debezium 3.6.3 does, and the options it refuses."""

from __future__ import annotations

import pytest

from headwater.config.errors import ConfigErrors
from headwater.transforms.reselect import parse_post_processors, split_post_processors
from tests.golden_support import assert_events_equal
from tests.transforms.golden_transforms import ROOT, expected_events, run_scenario


def test_reselect_equals_debezium(pg_server):
    directory = ROOT / "reselect"
    assert_events_equal(expected_events(directory), run_scenario(pg_server, directory), keep_headers=True)


def test_split_and_refusals():
    props = {"post.processors": "r", "r.type": "ReselectColumnsPostProcessor", "r.reselect.null.values": "false",
             "database.hostname": "h"}
    own, post = split_post_processors(props)
    assert own == {"database.hostname": "h"} and set(post) == {"post.processors", "r.type", "r.reselect.null.values"}
    assert parse_post_processors(post) is not None
    with pytest.raises(ConfigErrors, match="did you mean r.reselect.null.values"):
        parse_post_processors({**post, "r.reselect.nul.values": "true"})
    with pytest.raises(ConfigErrors, match="unknown post processor"):
        parse_post_processors({**post, "r.type": "io.debezium.Other"})
    with pytest.raises(ConfigErrors, match="r.reselect.columns.exclude.list"):
        parse_post_processors({**post, "r.reselect.columns.include.list": "a", "r.reselect.columns.exclude.list": "b"})


def _run(pg_server, dbname: str, props: dict, during: str, slot: str = "s") -> list[dict]:
    """The streamed events (after an empty snapshot) of `during` with `props`, as JSON without schemas."""
    import json

    from headwater.connectors.registry import validate_connector
    from headwater.engine import Engine
    from tests.golden_support import run_psql_script

    config = validate_connector({**pg_server.connector_properties(dbname), "connector.class": "postgres",
                                 "topic.prefix": "t", "slot.name": f"{dbname}_{slot}", **props})
    engine = Engine(config)
    try:
        list(engine.events(once=True))
        run_psql_script(pg_server, dbname, during)
        return [{"op": e.op, "key": e.key_json(), "value": json.loads(e.value)} for e in engine.events(once=True)
                if e.value is not None]
    finally:
        engine.close()


BIG = "(SELECT string_agg(md5(i::text), '') FROM generate_series(1, 400) AS i)"
RESELECT = {"post.processors": "r", "r.type": "io.debezium.processors.reselect.ReselectColumnsPostProcessor"}


def test_spec_vector_and_a_row_gone_before_the_reselect(pg_server, pg_db):
    """`public.t:big`: the update's placeholder re-read; an update whose row is deleted before the post
    processor reads it keeps the placeholder with a warning, or fails the batch (error handling `fail`)."""
    pg_server.execute("CREATE TABLE public.t (id integer PRIMARY KEY, big text, x integer)", dbname=pg_db)
    during = (f"INSERT INTO public.t VALUES (7, {BIG}, 1), (8, {BIG}, 1);\n"
              "UPDATE public.t SET x = 2 WHERE id IN (7, 8);\nDELETE FROM public.t WHERE id = 8;\n")
    props = {**RESELECT, "r.reselect.columns.include.list": "public.t:big", "table.include.list": "public.t"}
    events = _run(pg_server, pg_db, props, during)
    updates = [e["value"]["after"] for e in events if e["op"] == "u"]
    big = pg_server.query("SELECT string_agg(md5(i::text), '') FROM generate_series(1, 400) AS i")[0][0]
    assert updates == [{"id": 7, "big": big, "x": 2}, {"id": 8, "big": "__debezium_unavailable_value", "x": 2}]


def test_event_key_and_fail_mode(pg_server, pg_db):
    """`reselect.use.event.key`: the row found by the key `message.key.columns` makes; a row gone
    fails the batch with `reselect.error.handling.mode=fail`."""
    from headwater.transforms.base import TransformError

    pg_server.execute("CREATE TABLE public.k (id integer PRIMARY KEY, code text NOT NULL, big text, x integer)",
                      dbname=pg_db)
    props = {**RESELECT, "r.reselect.use.event.key": "true", "message.key.columns": "public.k:code",
             "table.include.list": "public.k", "r.reselect.null.values": "false"}
    during = f"INSERT INTO public.k VALUES (1, 'a', {BIG}, 1);\nUPDATE public.k SET x = 2;\n"
    events = _run(pg_server, pg_db, props, during)
    assert [(e["key"], e["value"]["after"]["big"][:8]) for e in events] == [({"code": "a"}, "c4ca4238")] * 2
    gone = (f"INSERT INTO public.k VALUES (2, 'b', {BIG}, 1);\nUPDATE public.k SET x = 3 WHERE code = 'b';\n"
            "DELETE FROM public.k WHERE code = 'b';\n")
    with pytest.raises(TransformError, match="Failed to find row"):
        _run(pg_server, pg_db, {**props, "r.reselect.error.handling.mode": "fail"}, gone, slot="fail")


def test_refused_for_mariadb_and_checked_with_the_connector_properties(mariadb_server, pg_server):
    from headwater.connectors.registry import validate_connector

    post = {**RESELECT, "r.reselect.columns.include.list": "db.t:c"}
    with pytest.raises(ConfigErrors, match="re-selects from PostgreSQL only"):
        validate_connector({"connector.class": "mariadb", **mariadb_server.connector_properties("x"),
                            "database.server.id": "9", "topic.prefix": "m", **post})
    with pytest.raises(ConfigErrors) as exc:
        validate_connector({"connector.class": "postgres", **pg_server.connector_properties("x"), "topic.prefix": "p",
                            **post, "r.reselect.error.handling.mode": "ignore", "snapshot.mode": "nope"})
    assert {e.property for e in exc.value.errors} == {"r.reselect.error.handling.mode", "snapshot.mode"}
