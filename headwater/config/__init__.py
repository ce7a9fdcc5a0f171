"""Configuration: Debezium's property names, types and defaults, validation, and the YAML file.

The YAML loader (pydantic, PyYAML) is imported on first use: Spark's Python workers import the
connector properties through this package and never need it.
"""

from typing import Any

from headwater.config.errors import ConfigError, ConfigErrors
from headwater.config.properties import ConnectorConfig

__all__ = ["ConfigError", "ConfigErrors", "ConnectorConfig", "PipelineConfig", "load_config"]


def __getattr__(name: str) -> Any:
    if name in ("PipelineConfig", "load_config"):
        from headwater.config import loader

        return getattr(loader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
