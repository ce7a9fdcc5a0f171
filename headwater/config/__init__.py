"""Configuration machinery: property definitions, parsing, validation, masking, the common properties.

The lowest layer: it imports no connector. Each connector's own properties live in its package and
are found through `headwater.connectors.registry`; the pipeline's YAML file is read by
`headwater.pipeline_config`.
"""

from headwater.config.errors import ConfigError, ConfigErrors
from headwater.config.properties import ConnectorConfig

__all__ = ["ConfigError", "ConfigErrors", "ConnectorConfig"]
