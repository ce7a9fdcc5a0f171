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
