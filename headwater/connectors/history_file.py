"""Where a connector that keeps a schema history (it declares `headwater.schema.history.file`) keeps it.

Light on purpose: the Spark source, the pipeline and the engine import it, and must not load a
connector's package (and its parser) for connectors that keep no history.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from headwater.config.errors import ConfigError, ConfigErrors
from headwater.config.properties import ConnectorConfig

HISTORY_FILE = "headwater.schema.history.file"
HISTORY_FILE_NAME = "schema_history.jsonl"


def with_history_file(config: ConnectorConfig, path: str | Path) -> ConnectorConfig:
    """`config` with its schema history kept in `path`, when its connector keeps one (it declares
    `headwater.schema.history.file`) and the user named no file."""
    if HISTORY_FILE not in config.definitions or config.get(HISTORY_FILE):
        return config
    return dataclasses.replace(config, values={**config.values, HISTORY_FILE: str(path)})


def require_history_file(config: ConnectorConfig, where: str) -> None:
    """Refuse a connector that keeps a schema history but has no file for it, run by `where`, which keeps
    its offsets where the connector cannot see them (a restart would take the tables as they are then)."""
    if HISTORY_FILE in config.definitions and not config.get(HISTORY_FILE):
        raise ConfigErrors([ConfigError(
            HISTORY_FILE, f"the {config.connector} connector needs a schema history file when {where} keeps "
            "the offsets (without it, DDL run while headwater was stopped is lost at a restart)",
            f"set it to a path beside the offsets, e.g. <checkpointLocation>/{HISTORY_FILE_NAME} "
            "(`headwater run` sets that itself)")])
