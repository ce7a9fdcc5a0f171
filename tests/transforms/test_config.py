"""Transformations in the pipeline's YAML: accepted in the `source` block as Debezium's properties,
refused before anything starts (exit 2 from the CLI) when unknown or wrong, and refused as a
top-level block with the hint to move them."""

from __future__ import annotations

import copy

import pytest
import yaml

from headwater.config import ConfigErrors
from headwater.pipeline_config import parse_config
from tests.config.test_validate_cli import GOOD, validate

CHAIN = {"transforms": "unwrap,route", "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
         "transforms.unwrap.drop.tombstones": False, "transforms.unwrap.add.fields": ["op", "source.ts_ms"],
         "transforms.route.type": "ByLogicalTableRouter", "transforms.route.topic.regex": "dbserver1\\.(.*)",
         "transforms.route.topic.replacement": "all", "transforms.route.predicate": "notHeartbeat",
         "transforms.route.negate": True, "predicates": "notHeartbeat",
         "predicates.notHeartbeat.type": "TopicNameMatches", "predicates.notHeartbeat.pattern": "__debezium.*",
         "errors.tolerance": "all"}


def config(**source) -> dict:
    data = copy.deepcopy(GOOD)
    data["source"].update(source)
    return data


def test_a_chain_in_the_source_block_is_accepted_and_kept(tmp_path):
    cfg = parse_config(config(**CHAIN), tmp_path)
    assert cfg.source.transforms["transforms.unwrap.add.fields"] == ["op", "source.ts_ms"]
    props = cfg.source.as_properties()
    assert props["transforms"] == "unwrap,route" and props["transforms.unwrap.drop.tombstones"] == "false"
    assert props["transforms.unwrap.add.fields"] == "op,source.ts_ms"


@pytest.mark.parametrize("extra, message", [
    ({"transforms.unwrap.type": "ExtractNewRecordStat"},
     "source.transforms.unwrap.type: unknown transformation 'ExtractNewRecordStat' "
     "(did you mean ExtractNewRecordState?)"),
    ({"transforms.unwrap.add.feilds": "op"},
     "source.transforms.unwrap.add.feilds: not an option of ExtractNewRecordState "
     "(did you mean transforms.unwrap.add.fields?)"),
    ({"predicates.notHeartbeat.type": "TopicNameMatch"},
     "source.predicates.notHeartbeat.type: unknown predicate 'TopicNameMatch' (did you mean TopicNameMatches?)"),
])
def test_bad_chains_are_refused_by_name(tmp_path, extra, message):
    with pytest.raises(ConfigErrors) as exc:
        parse_config(config(**{**CHAIN, **extra}), tmp_path)
    assert message in str(exc.value)


def test_the_cli_exits_2_naming_the_option(tmp_path):
    proc = validate(tmp_path, config(**{**CHAIN, "transforms.unwrap.delete.tombstone.handling.mode": "keep"}))
    assert proc.returncode == 2, proc.stderr
    assert "source.transforms.unwrap.delete.tombstone.handling.mode: 'keep' is not allowed" in proc.stderr
    assert "drop, tombstone, rewrite, rewrite-with-tombstone" in proc.stderr


def test_a_top_level_transforms_block_is_refused_with_a_hint(tmp_path):
    data = {**config(), "transforms": [{"type": "unwrap"}]}
    with pytest.raises(ConfigErrors, match="put them in the source block"):
        parse_config(yaml.safe_load(yaml.safe_dump(data)), tmp_path)
