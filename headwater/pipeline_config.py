"""The pipeline's YAML file: `name`, `source` (connector properties), `transforms`, `sink`, `spark`.

`${VAR}` (or `${VAR:-default}`) in any value is replaced from the environment (in a transformation's
option, a `${name}` whose variable is not set is left for the transformation: Java's replacement
syntax; in a sink's `table.name.format`, `${topic}` is left for the sink when the environment has
no `topic`). Everything is
validated before anything connects; all problems are reported together as `ConfigErrors`. The
file spans the layers (the source block is validated by the connector registry), so it is read
here, above `config/` and `connectors/`, not in `config/`, which imports no connector.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from headwater.config.errors import ConfigError, ConfigErrors
from headwater.config.pipeline_file import (  # noqa: F401 - here as before
    ENV_REF,
    TABLE_NAME_PLACEHOLDERS,
    SparkConfig,
    resolve_env,
)
from headwater.config.properties import ConnectorConfig
from headwater.connectors.registry import validate_connector
from headwater.events.formats.converters import JSON, ConverterSpec, parse_converters, plain_json
from headwater.events.formats.json import JsonOptions
from headwater.sinks.jdbc.config import JdbcSinkConfig, parse_jdbc_sink
from headwater.sinks.lake_config import LAKE_SINKS, DeltaOptions, IcebergOptions, parse_lake_sink

TOP_LEVEL = ("name", "source", "transforms", "sink", "spark")
SECTION_KEYS = {
    "sink": ["type", "path", "schemas.enable", "replace.null.with.default", "key.converter", "value.converter",
             "codec"],
    "spark": ["master", "checkpoint", "app.name", "trigger.interval", "maxEventsPerTrigger", "conf"],
}


class SinkConfig(BaseModel):
    """Where events go: `jsonl` files, `parquet` datasets, `avro` container files, the `console`, a
    database (`jdbc`, its properties checked by `sinks.jdbc.config`) or `delta`/`iceberg` tables
    (their settings in `lake`, checked by `sinks.lake_config`). `key.converter`/`value.converter`
    and their options (`events.formats.converters`) are validated apart, by `parse_config`, into
    `key_converter`/`value_converter`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, arbitrary_types_allowed=True)
    type: Literal["jsonl", "parquet", "avro", "console", "jdbc", "delta", "iceberg"]
    path: str | None = None
    schemas_enable: bool = Field(False, alias="schemas.enable")
    replace_null_with_default: bool = Field(True, alias="replace.null.with.default")
    codec: Literal["null", "deflate"] = "null"  # the avro sink's container file codec
    jdbc: JdbcSinkConfig | None = None
    lake: DeltaOptions | IcebergOptions | None = None
    _converters: tuple[ConverterSpec, ConverterSpec] = PrivateAttr(
        default_factory=lambda: (ConverterSpec(JSON), ConverterSpec(JSON)))

    @property
    def key_converter(self) -> ConverterSpec:
        return self._converters[0]

    @property
    def value_converter(self) -> ConverterSpec:
        return self._converters[1]

    def set_converters(self, key: ConverterSpec, value: ConverterSpec) -> None:
        self._converters = (key, value)

    def json_options(self) -> JsonOptions | None:
        """The JSON options when the source can write the sink's JSON itself (both converters JSON, alike)."""
        return plain_json(self.key_converter, self.value_converter)


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

    transforms = data.get("transforms") or []
    if transforms:
        errors.append(ConfigError("transforms", "transformations are connector properties, not a top-level block",
                                  "put them in the source block as in a Debezium connector's properties: "
                                  "transforms: unwrap, transforms.unwrap.type: "
                                  "io.debezium.transforms.ExtractNewRecordState"))

    sink = None
    if not isinstance(data.get("sink"), dict):
        errors.append(ConfigError("sink", "is required", "add sink: {type: jsonl, path: out/}"))
    elif data["sink"].get("type") == "jdbc":
        try:
            sink = SinkConfig.model_validate({"type": "jdbc", "jdbc": parse_jdbc_sink(data["sink"])})
            errors.extend(_converters(sink, {}))  # the defaults: the source's options are read from them
        except ConfigErrors as exc:
            errors.extend(exc.errors)
    elif data["sink"].get("type") in LAKE_SINKS:
        try:
            sink = SinkConfig.model_validate({"type": data["sink"]["type"], "lake": parse_lake_sink(data["sink"])})
            errors.extend(_converters(sink, {}))
        except ConfigErrors as exc:
            errors.extend(exc.errors)
    else:
        raw_sink = dict(data["sink"])
        converter_props = {k: raw_sink.pop(k) for k in list(raw_sink)
                           if str(k).startswith(("key.converter", "value.converter"))}
        try:
            sink = SinkConfig.model_validate(raw_sink)
            if sink.type in ("jsonl", "parquet", "avro") and not sink.path:
                errors.append(ConfigError("sink.path", f"is required for the {sink.type} sink",
                                          "add path: out/ to the sink block"))
            if sink.codec != "null" and sink.type != "avro":
                errors.append(ConfigError("sink.codec", f"applies to the avro sink, not to {sink.type}",
                                          "remove codec"))
            errors.extend(_converters(sink, converter_props))
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


def _converters(sink: SinkConfig, props: dict[str, Any]) -> list[ConfigError]:
    """Set the sink's key and value converters from `props` (`key.converter[.*]`, `value.converter[.*]`);
    the problems found."""
    if not props:
        sink.set_converters(*parse_converters({}, JsonOptions(sink.schemas_enable, sink.replace_null_with_default)))
        return []
    if sink.type != "jsonl":
        return [ConfigError(f"sink.{sorted(props)[0]}", f"converters apply to the jsonl sink, not to {sink.type}",
                            "the parquet and avro sinks write typed columns and Avro records themselves; "
                            "remove the converter properties")]
    try:
        key, value = parse_converters(props, JsonOptions(sink.schemas_enable, sink.replace_null_with_default))
    except ConfigErrors as exc:
        return exc.errors
    sink.set_converters(key, value)
    return []


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
