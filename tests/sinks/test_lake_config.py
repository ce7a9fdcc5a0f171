"""The `delta` and `iceberg` sink blocks of a configuration file: what is accepted, and every problem
reported before anything starts (exit 2 from the CLI)."""

from __future__ import annotations

import pytest
import yaml

from headwater.config.errors import ConfigErrors
from headwater.pipeline_config import parse_config
from headwater.sinks.lake_config import DeltaOptions, IcebergOptions
from tests.spark_support import cli

SOURCE = {"connector.class": "postgres", "database.hostname": "h", "database.user": "u",
          "database.password": "p", "database.dbname": "d", "topic.prefix": "x"}


def _sink(sink: dict):
    return parse_config({"name": "t", "source": SOURCE, "sink": sink}).sink


def _problems(sink: dict) -> dict[str, str]:
    with pytest.raises(ConfigErrors) as exc:
        _sink(sink)
    return {e.property: f"{e.message} | {e.hint}" for e in exc.value.errors}


def test_delta_and_iceberg_blocks(monkeypatch):
    monkeypatch.delenv("topic", raising=False)
    sink = _sink({"type": "delta", "path": "lake/", "table.name.format": "${topic}", "partition.by": "a, b",
                  "mirror": True, "storage.options": {"timeout": 5}})
    assert sink.type == "delta"
    assert sink.lake == DeltaOptions("lake/", "${topic}", "merge", ("a", "b"), {"timeout": "5"})
    assert _sink({"type": "delta", "path": "p", "unavailable.value.placeholder": "~"}).lake.placeholder == "~"
    sink = _sink({"type": "iceberg", "catalog.warehouse": "w", "mode": "changelog", "partition.by": ["k"],
                  "catalog.uri": "postgresql+psycopg2://u:pw@h/db", "table.name.format": "cdc.${source.table}"})
    assert sink.lake == IcebergOptions("w", "postgresql+psycopg2://u:pw@h/db", "headwater", "cdc.${source.table}",
                                       "changelog", ("k",))


def test_every_problem_named_with_a_fix():
    problems = _problems({"type": "delta", "pth": "x", "mode": "upsert", "partition.by": [],
                          "table.name.format": "${source.table}_${other.x}"})
    assert problems["sink.pth"].endswith("did you mean path?")
    assert problems["sink.mode"] == "'upsert' is not allowed | allowed values: merge, changelog"
    assert "names no column" in problems["sink.partition.by"]
    assert "${topic} and ${source.FIELD}" in problems["sink.table.name.format"]
    assert problems["sink.path"].startswith("is required")
    problems = _problems({"type": "iceberg", "mirror": True, "mode": "changelog", "catalog.uri": "not a url",
                          "catalog.name": "", "unavailable.value.placeholder": ""})
    assert set(problems) == {"sink.mode", "sink.catalog.uri", "sink.catalog.name", "sink.catalog.warehouse",
                             "sink.unavailable.value.placeholder"}
    assert "mirror: true" in problems["sink.mode"]


def test_the_cli_refuses_a_bad_block_with_exit_2(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"name": "t", "source": SOURCE, "sink": {
        "type": "iceberg", "catalog.warehouse": "w", "catalog.uri": "postgresql://u:hunter2@h/db", "mode": "mirror"}}))
    proc = cli("run", str(path), check=False)
    assert proc.returncode == 2
    assert "sink.mode" in proc.stderr and "hunter2" not in proc.stderr + proc.stdout
