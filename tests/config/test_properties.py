"""Honest configuration: what headwater accepts it implements; other Debezium properties are refused by name."""

from __future__ import annotations

import pytest

from headwater.config import ConfigErrors
from headwater.config.common import COMMON, REFUSED_PREFIXES, RENAMED
from headwater.config.properties import Property, parse_value
from headwater.config.secrets import MASK, mask_secrets
from headwater.connectors.postgres.properties import DEFINITIONS
from headwater.connectors.registry import validate_connector

BASE = {"connector.class": "postgres", "topic.prefix": "p", "database.hostname": "h",
        "database.user": "u", "database.dbname": "d", "database.password": "s3cret-pw"}

# refused by the shared layer and not accepted by the PostgreSQL connector's own definitions (signals,
# incremental snapshots and notifications are PostgreSQL's only so far)
ACCEPTED = {p.name for p in DEFINITIONS if not p.refused}
REFUSED = sorted({p.name for p in COMMON + DEFINITIONS if p.refused} - ACCEPTED)


def errors_of(**props: object) -> dict[str, str]:
    with pytest.raises(ConfigErrors) as exc:
        validate_connector({**BASE, **{k.replace("__", "."): v for k, v in props.items()}})
    text = str(exc.value)
    assert "s3cret-pw" not in text
    return {e.property: f"{e.message} ({e.hint})" for e in exc.value.errors}


def test_the_formerly_ignored_properties_are_refused():
    assert {"max.batch.size", "max.queue.size", "max.queue.size.in.bytes", "poll.interval.ms",
            "snapshot.delay.ms", "snapshot.fetch.size", "snapshot.max.threads", "snapshot.lock.timeout.ms",
            "topic.cache.size", "custom.metric.tags"} <= set(REFUSED)


@pytest.mark.parametrize("name", REFUSED)
def test_each_refused_property_is_named_with_a_reason(name):
    errs = errors_of(**{name.replace(".", "__"): "1"})
    assert list(errs) == [name]
    assert "a Debezium property headwater does not implement: " in errs[name]


@pytest.mark.parametrize("name, instead", [("max.batch.size", "headwater.max.batch.events"),
                                           ("max.queue.size", "headwater.stream.buffer.bytes"),
                                           ("poll.interval.ms", "spark.trigger.interval"),
                                           ("snapshot.fetch.size", "headwater.snapshot.chunk.rows")])
def test_a_refusal_says_what_to_use_instead(name, instead):
    assert instead in errors_of(**{name.replace(".", "__"): "10"})[name]


@pytest.mark.parametrize("prefix", [p for p, _, _ in REFUSED_PREFIXES])
def test_refused_families(prefix):
    name = prefix + ("x" if prefix.endswith(".") else ".schemas.enable")
    errs = errors_of(**{name.replace(".", "__"): "true"})
    assert list(errs) == [name] and "does not implement" in errs[name]


@pytest.mark.parametrize("old", sorted(RENAMED))
def test_old_names_point_to_the_new_ones(old):
    errs = errors_of(**{old.replace(".", "__"): "x"})
    assert RENAMED[old] in errs[old]


@pytest.mark.parametrize("name, value, words", [
    ("tasks.max", "4", ["must be 1", "one reader"]),
    ("event.processing.failure.handling.mode", "warn", ["'warn' is not allowed", "allowed values: fail",
                                                         "warn and skip are not implemented"]),
    ("xmin.fetch.interval.ms", "1000", ["must be 0", "xmin"]),
    ("plugin.name", "wal2json", ["allowed values: pgoutput", "decoderbufs"]),
    ("topic.naming.strategy", "io.debezium.schema.DefaultTopicNamingStrategy", ["SchemaTopicNamingStrategy"]),
    ("database.port", "70000", ["from 1 to 65535"]),
    ("headwater.pgoutput.protocol.version", "3", ["from 1 to 2"]),
    ("headwater.max.batch.events", "0", ["must be positive"]),
    ("heartbeat.interval.ms", "-5", ["must not be negative"]),
    ("errors.max.retries", "-2", ["at least -1"]),
    ("headwater.pgoutput.decoding.work.mem.kb", "32", ["below PostgreSQL's minimum", "64 or more"]),
])
def test_values_headwater_does_not_implement_are_refused(name, value, words):
    errs = errors_of(**{name.replace(".", "__"): value})
    for w in words:
        assert w in errs[name], errs


@pytest.mark.parametrize("name, value, expected", [
    ("tasks.max", "1", 1),
    ("event.processing.failure.handling.mode", "FAIL", "fail"),
    ("xmin.fetch.interval.ms", "0", 0),
    ("topic.naming.strategy", "io.debezium.schema.SchemaTopicNamingStrategy",
     "io.debezium.schema.SchemaTopicNamingStrategy"),
    ("schema.refresh.mode", "columns_diff_exclude_unchanged_toast", "columns_diff_exclude_unchanged_toast"),
    ("snapshot.mode", "schema_only", "no_data"),
    ("errors.max.retries", "-1", -1),
    ("headwater.pgoutput.decoding.work.mem.kb", "0", 0),
    ("headwater.pgoutput.decoding.work.mem.kb", "64", 64),
])
def test_values_headwater_implements_are_accepted(name, value, expected):
    assert validate_connector({**BASE, name: value})[name] == expected


def test_postgres_only_properties_are_not_common():
    common = {p.name for p in COMMON}
    # the only overlap: what the shared layer refuses and PostgreSQL already implements (signals,
    # incremental snapshots, notifications), overriding the refusal
    overlap = common & {p.name for p in DEFINITIONS}
    assert overlap <= {p.name for p in COMMON if p.refused} and overlap <= ACCEPTED
    assert {"topic.prefix", "table.include.list", "column.exclude.list", "heartbeat.interval.ms",
            "errors.max.retries"} <= common
    assert "slot.name" not in common and "database.dbname" not in common


def test_secrets_never_appear_in_errors_or_printed_properties():
    errs = errors_of(database__pasword="s3cret-pw", slot__name="Bad-Slot")
    assert "database.pasword" in errs and "did you mean database.password" in errs["database.pasword"]
    cfg = validate_connector({**BASE, "database.sslpassword": "key-pw"})
    printed = str(cfg.masked())
    assert "s3cret-pw" not in printed and "key-pw" not in printed and MASK in printed
    assert mask_secrets({"signal.token": "t0k", "x.y": "z"}) == {"signal.token": MASK, "x.y": "z"}


def test_a_bad_secret_value_is_not_repeated_in_its_error():
    _, err = parse_value(Property("signal.token", "int"), "s3cret-pw")
    assert err is not None and "s3cret-pw" not in str(err) and MASK in err.message
    _, err = parse_value(Property("retries", "int"), "notanumber")
    assert err is not None and "notanumber" in err.message
