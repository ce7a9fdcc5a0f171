"""What of the pipeline's YAML file needs no connector: `${VAR}` replacement and the `spark` block.

`headwater.pipeline_config` validates the whole file; this part is apart so that the driver can read
the `spark` block and launch Spark's JVM (`headwater.spark.session.EarlySession`) before it imports
the connectors and the transformation chain to validate the rest.
"""

from __future__ import annotations

import os
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from headwater.config.errors import ConfigError

TABLE_NAME_PLACEHOLDERS = ("topic",)  # what a sink's table.name.format fills in, unless the environment has it
ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class SparkConfig(BaseModel):
    """How Spark runs the pipeline."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    master: str = "local[*]"
    checkpoint: str = "state/checkpoint"
    app_name: str | None = Field(None, alias="app.name")
    trigger_interval: str = Field("0 seconds", alias="trigger.interval")
    max_events_per_trigger: int | None = Field(None, alias="maxEventsPerTrigger", gt=0)
    conf: dict[str, str] = Field(default_factory=dict)


def resolve_env(value: Any, where: str, errors: list[ConfigError]) -> Any:
    """Replace ${VAR} references in strings (recursively) from the environment. In a transformation's
    option (`source.transforms.*`) a reference to a variable that is not set stays as written: it is
    a group of a Java regex replacement (the outbox router's `${routedByValue}`)."""
    if isinstance(value, str):
        def sub(m: re.Match[str]) -> str:
            var, default = m.group(1), m.group(2)
            if var in os.environ:
                return os.environ[var]
            if where.endswith("table.name.format") and var in TABLE_NAME_PLACEHOLDERS:
                return m.group(0)  # filled in per table by the sink
            if default is not None:
                return default
            if where.startswith("source.transforms."):  # Java's group reference, e.g. ${routedByValue}
                return m.group(0)
            errors.append(ConfigError(where, f"environment variable {var} is not set",
                                      f"export {var}=... or write ${{{var}:-default}}"))
            return ""
        return ENV_REF.sub(sub, value)
    if isinstance(value, dict):
        return {k: resolve_env(v, f"{where}.{k}" if where else str(k), errors) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_env(v, f"{where}[{i}]", errors) for i, v in enumerate(value)]
    return value
