"""Topic names as Debezium makes them: invalid characters replaced, blank parts left out."""

from __future__ import annotations

import string

import pytest

from headwater.connectors.common.topics import TopicNames, sanitized_topic_name
from headwater.connectors.registry import validate_connector

VALID = string.ascii_letters + string.digits + "._-"
NAMES = TopicNames(prefix="golden", delimiter=".", transaction_name="transaction",
                   heartbeat_prefix="__debezium-heartbeat")


def test_valid_characters_are_kept():
    assert sanitized_topic_name(VALID) == VALID
    assert NAMES.data("public", "ok-name_1.x") == "golden.public.ok-name_1.x"


@pytest.mark.parametrize("code", [c for c in range(0x80) if chr(c) not in VALID])
def test_every_other_ascii_character_becomes_underscore(code):
    assert sanitized_topic_name(f"a{chr(code)}b") == "a_b"


def test_the_example_of_the_issue():
    assert NAMES.data('we "ird"', "s.t.a b") == "golden.we__ird_.s.t.a_b"


def test_unicode_counts_utf16_code_units():
    assert sanitized_topic_name("tëst/ü") == "t_st__"
    assert sanitized_topic_name("emoji😀") == "emoji__"  # a surrogate pair in Java: two characters
    assert sanitized_topic_name("日本") == "__"


def test_blank_parts_are_left_out():
    assert NAMES.data("public", "") == "golden.public"
    assert NAMES.data(" \t", "t") == "golden.t"
    assert NAMES.data("public", " x ") == "golden.public._x_"


def test_other_topic_kinds():
    names = TopicNames(prefix="shop", delimiter="-", transaction_name="tx", heartbeat_prefix="hb")
    assert names.transaction() == "shop-tx"
    assert names.heartbeat() == "hb-shop"
    assert names.data("public", "t") == "shop-public-t"


def test_from_config_defaults():
    cfg = validate_connector({"connector.class": "postgres", "topic.prefix": "golden", "database.hostname": "h",
                              "database.user": "u", "database.dbname": "d"})
    names = TopicNames.from_config(cfg)
    assert names == NAMES
    assert names.transaction() == "golden.transaction"
    assert names.heartbeat() == "__debezium-heartbeat.golden"
