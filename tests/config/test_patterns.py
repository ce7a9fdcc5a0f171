"""The one parser of pattern property names, in validation and where the properties are applied."""

from __future__ import annotations

import hashlib

import pytest

from headwater.config import ConfigErrors
from headwater.config.patterns import (
    JAVA_DIGESTS,
    MaskChars,
    MaskHash,
    PatternError,
    SelectOverride,
    Truncate,
    hide_salt,
    parse_pattern,
)
from headwater.connectors.registry import validate_connector
from headwater.events.columns import ColumnOptions, java_serialized_string

BASE = {"connector.class": "postgres", "topic.prefix": "p", "database.hostname": "h",
        "database.user": "u", "database.dbname": "d"}


@pytest.mark.parametrize("name, parsed", [
    ("column.truncate.to.12.chars", Truncate(12)),
    ("column.mask.with.0.chars", MaskChars(0)),
    ("column.mask.with.5.chars", MaskChars(5)),
    ("column.mask.hash.SHA-256.with.salt.salty", MaskHash("SHA-256", "salty", False)),
    ("column.mask.hash.v2.SHA-256.with.salt.salty", MaskHash("SHA-256", "salty", True)),
    ("column.mask.hash.SHA-512/224.with.salt.x", MaskHash("SHA-512/224", "x", False)),
    ("column.mask.hash.v2.SHA-512/256.with.salt.x", MaskHash("SHA-512/256", "x", True)),
    ("column.mask.hash.sha3-512.with.salt.a.b.c", MaskHash("sha3-512", "a.b.c", False)),
    ("column.mask.hash.MD5.with.salt.with.salt.x", MaskHash("MD5", "with.salt.x", False)),
    ("snapshot.select.statement.overrides.public.orders", SelectOverride("public.orders")),
    ("table.include.list", None),
    ("column.include.list", None),
    ("column.propagate.source.type", None),
])
def test_every_family_parses(name, parsed):
    assert parse_pattern(name) == parsed


@pytest.mark.parametrize("name, words", [
    ("column.mask.hash.MD2.with.salt.x", ["'MD2'", "hashlib does not"]),
    ("column.mask.hash.WHIRLPOOL.with.salt.x", ["'WHIRLPOOL'", "not a digest"]),
    ("column.mask.hash.v2.with.salt.x", ["'v2'"]),
    ("column.mask.hash.SHA-256.salt.x", ["does not match"]),
    ("column.truncate.to.x.chars", ["does not match"]),
    ("column.mask.with.-1.chars", ["does not match"]),
])
def test_a_broken_name_of_a_family_is_refused(name, words):
    with pytest.raises(PatternError) as exc:
        parse_pattern(name)
    for w in words:
        assert w in str(exc.value) or w in exc.value.hint


def test_every_supported_digest_is_accepted_and_applied():
    for java, py in JAVA_DIGESTS.items():
        name = f"column.mask.hash.{java}.with.salt.s"
        if py is None:
            with pytest.raises(ConfigErrors):
                validate_connector({**BASE, name: "public.t.c"})
            continue
        cfg = validate_connector({**BASE, name: "public.t.c"})
        (masker,), params = ColumnOptions.from_config(cfg).maskers("public.t.c", None)
        assert params == {"masked": "true"}
        assert masker("v") == hashlib.new(py, b"s" + java_serialized_string("v")).hexdigest()


def test_sha512_224_is_validated_and_digests_like_java():
    cfg = validate_connector({**BASE, "column.mask.hash.v2.SHA-512/224.with.salt.pepper": "public.t.secret"})
    opts = ColumnOptions.from_config(cfg)
    (masker,), _ = opts.maskers("public.t.secret", None)
    assert masker("hello") == hashlib.new("sha512_224", b"pepperhello").hexdigest()
    assert opts.maskers("public.t.other", None) == ([], {})


def test_column_options_take_all_families_from_the_parser():
    cfg = validate_connector({**BASE, "column.truncate.to.3.chars": "public.t.a",
                              "column.mask.with.4.chars": "public.t.a",
                              "snapshot.select.statement.overrides.public.t": "SELECT 1",
                              "snapshot.select.statement.overrides": "public.t"})
    opts = ColumnOptions.from_config(cfg)
    assert [n for n, _ in opts.truncate] == [3] and [n for n, _ in opts.mask_chars] == [4]
    funcs, params = opts.maskers("public.t.a", None)
    assert [f("abcdef") for f in funcs] == ["abc", "****"]
    assert params == {"truncateLength": "3", "masked": "true"}
    assert cfg.extra["snapshot.select.statement.overrides.public.t"] == "SELECT 1"


def test_a_pattern_value_must_hold_valid_regexes():
    with pytest.raises(ConfigErrors) as exc:
        validate_connector({**BASE, "column.mask.with.4.chars": "public.t.(("})
    assert exc.value.errors[0].property == "column.mask.with.4.chars"
    assert "regular expression" in exc.value.errors[0].message


def test_the_salt_is_hidden_from_errors_and_printed_properties():
    name = "column.mask.hash.WHIRLPOOL.with.salt.TopSecretSalt"
    with pytest.raises(ConfigErrors) as exc:
        validate_connector({**BASE, name: "public.t.c"})
    assert "TopSecretSalt" not in str(exc.value)
    assert "column.mask.hash.WHIRLPOOL.with.salt.********" in str(exc.value)
    with pytest.raises(ConfigErrors) as exc:
        validate_connector({**BASE, "column.mask.hash.SHA-256.with.salt.TopSecretSalt": "(("})
    assert "TopSecretSalt" not in str(exc.value)
    cfg = validate_connector({**BASE, "column.mask.hash.SHA-256.with.salt.TopSecretSalt": "public.t.c"})
    assert "TopSecretSalt" not in str(cfg.masked())
    assert hide_salt("column.mask.with.4.chars") == "column.mask.with.4.chars"
    with pytest.raises(ConfigErrors) as exc:
        validate_connector({**BASE, "column.mask.hash.SHA-256.salt.TopSecretSalt": "public.t.c"})
    assert "TopSecretSalt" not in str(exc.value) and "column.mask.hash.SHA-256.salt.********" in str(exc.value)
