"""The pipeline's YAML file: `name`, `source` (connector properties), `transforms`, `sink`, `spark`.

`${VAR}` (or `${VAR:-default}`) in any value is replaced from the environment. Everything is
validated before anything connects; all problems are reported together as `ConfigErrors`. The
file spans the layers (the source block is validated by the connector registry), so it is read
here, above `config/` and `connectors/`, not in `config/`, which imports no connector.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from headwater.config.errors import ConfigError, ConfigErrors
from headwater.config.properties import ConnectorConfig
from headwater.connectors.registry import validate_connector

ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
TOP_LEVEL = ("name", "source", "transforms", "sink", "spark")
SECTION_KEYS = {
    "sink": ["type", "path", "schemas.enable", "replace.null.with.default"],
    "spark": ["master", "checkpoint", "app.name", "trigger.interval", "maxEventsPerTrigger", "conf"],
}


class SinkConfig(BaseModel):
    """Where events go: `jsonl` files, `parquet` datasets, or the `console`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    type: Literal["jsonl", "parquet", "console"]
    path: str | None = None
    schemas_enable: bool = Field(False, alias="schemas.enable")
    replace_null_with_default: bool = Field(True, alias="replace.null.with.default")


class SparkConfig(BaseModel):
    """How Spark runs the pipeline."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    master: str = "local[*]"
    checkpoint: str = "state/checkpoint"
    app_name: str | None = Field(None, alias="app.name")
    trigger_interval: str = Field("0 seconds", alias="trigger.interval")
    max_events_per_trigger: int | None = Field(None, alias="maxEventsPerTrigger", gt=0)
    conf: dict[str, str] = Field(default_factory=dict)


class PipelineConfig(BaseModel):
    """A validated configuration file."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    name: str
    source: ConnectorConfig
    transforms: list[dict[str, Any]] = Field(default_factory=list)
    sink: SinkConfig
    spark: SparkConfig = Field(default_factory=lambda: SparkConfig.model_validate({}))
    base_dir: Path = Path(".")

    def resolve(self, path: str) -> Path:
        """A path from the file, relative to the directory the command runs in."""
        return Path(path).expanduser()


ENGINE_ONLY = ("notification.enabled.channels", "headwater.metrics.port")  # source properties Spark refuses


def resolve_env(value: Any, where: str, errors: list[ConfigError]) -> Any:
    """Replace ${VAR} references in strings (recursively) from the environment."""
    if isinstance(value, str):
        def sub(m: re.Match[str]) -> str:
            var, default = m.group(1), m.group(2)
            if var in os.environ:
                return os.environ[var]
            if default is not None:
                return default
            errors.append(ConfigError(where, f"environment variable {var} is not set",
                                      f"export {var}=... or write ${{{var}:-default}}"))
            return ""
        return ENV_REF.sub(sub, value)
    if isinstance(value, dict):
        return {k: resolve_env(v, f"{where}.{k}" if where else str(k), errors) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_env(v, f"{where}[{i}]", errors) for i, v in enumerate(value)]
    return value


def _pydantic_errors(section: str, exc: ValidationError) -> list[ConfigError]:
    out = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        prop = f"{section}.{loc}" if loc else section
        kind = err["type"]
        if kind == "extra_forbidden":
            known = SECTION_KEYS[section]
            close = difflib.get_close_matches(str(err["loc"][-1]), known, n=1)
            hint = f"did you mean {close[0]}?" if close else "allowed: " + ", ".join(known)
            out.append(ConfigError(prop, "unknown property", hint))
        elif kind == "literal_error":
            out.append(ConfigError(prop, f"{err['input']!r} is not allowed",
                                   "allowed values: " + err["ctx"]["expected"].replace("'", "")))
        elif kind == "missing":
            out.append(ConfigError(prop, "is required", f"add {loc} to the {section} block"))
        else:
            out.append(ConfigError(prop, err["msg"], f"got {err.get('input')!r}"))
    return out


def parse_config(data: Any, base_dir: Path = Path(".")) -> PipelineConfig:
    """Validate an already-loaded YAML document."""
    errors: list[ConfigError] = []
    if not isinstance(data, dict):
        raise ConfigErrors([ConfigError("(file)", "the configuration must be a YAML mapping",
                                        "start from the example in the README")])
    for key in data:
        if key not in TOP_LEVEL:
            close = difflib.get_close_matches(str(key), TOP_LEVEL, n=1)
            errors.append(ConfigError(str(key), "unknown top-level key",
                                      f"did you mean {close[0]}?" if close else "allowed: " + ", ".join(TOP_LEVEL)))
    data = resolve_env(data, "", errors)

    name = data.get("name")
    if not name or not isinstance(name, str):
        errors.append(ConfigError("name", "is required", "give the pipeline a name, e.g. name: inventory"))

    source = None
    raw_source = data.get("source")
    if not isinstance(raw_source, dict):
        errors.append(ConfigError("source", "is required", "add a source block with the connector's properties"))
    else:
        props = dict(raw_source)
        if name and "name" not in props:
            props["name"] = name
        try:
            source = validate_connector(props)
        except ConfigErrors as exc:
            errors.extend(ConfigError(f"source.{e.property}", e.message, e.hint) for e in exc.errors)
        for key in ENGINE_ONLY:  # the engine has them; a Spark query does not see its events on the driver
            if source is not None and source.get(key):
                errors.append(ConfigError(f"source.{key}", "not available on Spark yet (the embedded engine has it)",
                                          "remove it; headwater status shows the positions without it"))

    transforms = data.get("transforms") or []
    if transforms:
        errors.append(ConfigError("transforms", "transformations are not implemented in headwater yet",
                                  "remove the transforms block"))

    sink = None
    if not isinstance(data.get("sink"), dict):
        errors.append(ConfigError("sink", "is required", "add sink: {type: jsonl, path: out/}"))
    else:
        try:
            sink = SinkConfig.model_validate(data["sink"])
            if sink.type in ("jsonl", "parquet") and not sink.path:
                errors.append(ConfigError("sink.path", f"is required for the {sink.type} sink",
                                          "add path: out/ to the sink block"))
        except ValidationError as exc:
            errors.extend(_pydantic_errors("sink", exc))

    spark = SparkConfig.model_validate({})
    if data.get("spark") is not None:
        if not isinstance(data["spark"], dict):
            errors.append(ConfigError("spark", "must be a mapping", "for example spark: {master: local[2]}"))
        else:
            try:
                spark = SparkConfig.model_validate(data["spark"])
            except ValidationError as exc:
                errors.extend(_pydantic_errors("spark", exc))

    if errors:
        raise ConfigErrors(errors)
    assert source is not None and sink is not None  # else an error was recorded above
    return PipelineConfig(name=name, source=source, transforms=[], sink=sink, spark=spark, base_dir=base_dir)


def load_config(path: str | Path) -> PipelineConfig:
    """Read and validate a configuration file."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise ConfigErrors([ConfigError(str(p), f"cannot read the file: {exc.strerror}",
                                        "check the path")]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "the file"
        raise ConfigErrors([ConfigError(f"{p}:{where}", "is not valid YAML",
                                        str(getattr(exc, "problem", exc)))]) from None
    return parse_config(data, p.parent)
