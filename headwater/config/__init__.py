"""Configuration: Debezium's property names, types and defaults, validation, and the YAML file."""

from headwater.config.errors import ConfigError, ConfigErrors
from headwater.config.loader import PipelineConfig, load_config
from headwater.config.properties import ConnectorConfig

__all__ = ["ConfigError", "ConfigErrors", "ConnectorConfig", "PipelineConfig", "load_config"]
