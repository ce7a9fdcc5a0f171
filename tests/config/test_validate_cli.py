"""Configuration validation: every kind of bad configuration is refused, naming the property and the fix.

These run the real CLI (`headwater validate`) in a subprocess, as a user would.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from headwater.config import ConfigErrors
from headwater.pipeline_config import load_config, parse_config

GOOD: dict[str, Any] = {
    "name": "inventory",
    "source": {
        "connector.class": "postgres",
        "database.hostname": "127.0.0.1",
        "database.port": 5432,
        "database.user": "postgres",
        "database.password": "s3cret-pw",
        "database.dbname": "inventory",
        "topic.prefix": "dbserver1",
        "table.include.list": "inventory.customers,inventory.orders",
        "snapshot.mode": "initial",
    },
    "sink": {"type": "jsonl", "path": "out/"},
    "spark": {"master": "local[2]", "checkpoint": "state/checkpoint"},
}


def validate(tmp_path: Path, data: dict | str, env: dict | None = None) -> subprocess.CompletedProcess:
    path = tmp_path / "config.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return subprocess.run([sys.executable, "-m", "headwater.cli.main", "validate", str(path)],
                          capture_output=True, text=True, env={**os.environ, **(env or {})})


def with_source(**changes) -> dict:
    source: dict[str, Any] = dict(GOOD["source"])
    cfg = {**GOOD, "source": source}
    for k, v in changes.items():
        k = k.replace("__", ".")
        if v is None:
            source.pop(k, None)
        else:
            source[k] = v
    return cfg


def test_good_configuration_is_accepted_and_password_hidden(tmp_path):
    res = validate(tmp_path, GOOD)
    assert res.returncode == 0, res.stderr
    assert "valid" in res.stdout
    assert "s3cret-pw" not in res.stdout + res.stderr
    assert "********" in res.stdout


def test_debezium_class_name_and_defaults(tmp_path):
    cfg = parse_config(with_source(**{"connector.class": "io.debezium.connector.postgresql.PostgresConnector"}))
    assert cfg.source.connector == "postgres"
    assert cfg.source["slot.name"] == "debezium"
    assert cfg.source["publication.name"] == "dbz_publication"
    assert cfg.source["tombstones.on.delete"] is True
    assert cfg.source["skipped.operations"] == ["t"]
    assert cfg.source["decimal.handling.mode"] == "precise"


@pytest.mark.parametrize("case, change, prop, words", [
    ("unknown property", {"slot.nmae": "x"}, "source.slot.nmae", ["unknown property", "did you mean slot.name"]),
    ("wrong type", {"database.port": "fivefour"}, "source.database.port", ["whole number"]),
    ("wrong boolean", {"tombstones.on.delete": "maybe"}, "source.tombstones.on.delete", ["true or false"]),
    ("value not allowed", {"snapshot.mode": "sometimes"}, "source.snapshot.mode",
     ["not allowed", "initial", "when_needed"]),
    ("missing required", {"database.hostname": None}, "source.database.hostname", ["is required"]),
    ("include and exclude", {"table.exclude.list": "inventory.x"}, "source.table.include.list / table.exclude.list",
     ["cannot be used together"]),
    ("bad slot name", {"slot.name": "My-Slot"}, "source.slot.name", ["lower-case"]),
    ("not implemented", {"incremental.snapshot.allow.schema.changes": "true"},
     "source.incremental.snapshot.allow.schema.changes", ["does not implement"]),
    ("notification channel", {"notification.enabled.channels": "jmx"}, "source.notification.enabled.channels",
     ["jmx not allowed"]),
    ("notification topic", {"notification.enabled.channels": "sink"}, "source.notification.sink.topic.name",
     ["needs a topic"]),
    ("signal channel", {"signal.enabled.channels": "source,kafka"}, "source.signal.enabled.channels",
     ["kafka not allowed"]),
    ("signal table", {"signal.data.collection": "sig"}, "source.signal.data.collection", ["<schema>.<table>"]),
    ("watermarking", {"incremental.snapshot.watermarking.strategy": "none"},
     "source.incremental.snapshot.watermarking.strategy", ["insert_insert"]),
    ("bad regex", {"table.include.list": "inv(("}, "source.table.include.list", ["regular expression"]),
])
def test_bad_source_properties_are_refused(tmp_path, case, change, prop, words):
    res = validate(tmp_path, with_source(**{k.replace(".", "__"): v for k, v in change.items()}))
    assert res.returncode == 2, case
    assert prop in res.stderr, res.stderr
    for w in words:
        assert w in res.stderr, (case, res.stderr)
    assert "fix:" in res.stderr
    assert "Traceback" not in res.stderr
    assert "s3cret-pw" not in res.stderr + res.stdout


def test_unknown_connector_and_unimplemented_connector(tmp_path):
    res = validate(tmp_path, with_source(**{"connector.class": "cassandra"}))
    assert res.returncode == 2 and "connector.class" in res.stderr and "postgres" in res.stderr
    res = validate(tmp_path, with_source(**{"connector.class": "oracle"}))
    assert res.returncode == 2 and "not implemented" in res.stderr


def test_sink_and_spark_sections(tmp_path):
    res = validate(tmp_path, {**GOOD, "sink": {"type": "kafka"}})
    assert res.returncode == 2 and "sink.type" in res.stderr and "jsonl" in res.stderr
    res = validate(tmp_path, {**GOOD, "sink": {"type": "jsonl"}})
    assert res.returncode == 2 and "sink.path" in res.stderr
    res = validate(tmp_path, {**GOOD, "spark": {"mastr": "local"}})
    assert res.returncode == 2 and "spark.mastr" in res.stderr and "did you mean master" in res.stderr
    res = validate(tmp_path, {**GOOD, "snk": {}})
    assert res.returncode == 2 and "did you mean sink" in res.stderr


def test_environment_variables_are_resolved(tmp_path):
    data = with_source(**{"database.password": "${HW_TEST_PASSWORD}", "database.hostname": "${HW_HOST:-db.local}"})
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    os.environ["HW_TEST_PASSWORD"] = "from-env"
    try:
        cfg = load_config(path)
    finally:
        del os.environ["HW_TEST_PASSWORD"]
    assert cfg.source["database.password"] == "from-env"
    assert cfg.source["database.hostname"] == "db.local"
    res = validate(tmp_path, data)
    assert res.returncode == 2 and "HW_TEST_PASSWORD" in res.stderr and "is not set" in res.stderr


def test_all_errors_reported_together():
    bad = with_source(**{"slot.nmae": "x", "database.port": "x", "snapshot.mode": "x"})
    with pytest.raises(ConfigErrors) as exc:
        parse_config(bad)
    props = {e.property for e in exc.value.errors}
    assert {"source.slot.nmae", "source.database.port", "source.snapshot.mode"} <= props


def test_invalid_yaml_and_missing_file(tmp_path):
    res = validate(tmp_path, "name: [unclosed\n")
    assert res.returncode == 2 and "not valid YAML" in res.stderr
    res = subprocess.run([sys.executable, "-m", "headwater.cli.main", "validate", str(tmp_path / "nope.yaml")],
                         capture_output=True, text=True)
    assert res.returncode == 2 and "cannot read" in res.stderr


def test_version_and_help():
    res = subprocess.run([sys.executable, "-m", "headwater.cli.main", "--version"], capture_output=True, text=True)
    assert res.returncode == 0 and "headwater" in res.stdout
    res = subprocess.run([sys.executable, "-m", "headwater.cli.main", "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "run" in res.stdout and "validate" in res.stdout and "status" in res.stdout
