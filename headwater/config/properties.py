"""Connector properties: the `Property` definition, parsing of user values, and `ConnectorConfig`.

A connector declares its properties as `Property` rows (a small ConfigDef, as Debezium has): name,
type, default, allowed values or range, and, for Debezium properties headwater does not implement,
why it refuses them and what to use instead. `parse_value` turns one user value into a typed value
or a `ConfigError` naming the property and the fix. Which properties a connector has is the
connectors' business (`headwater.connectors.registry`); this module knows no connector.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from headwater.config.errors import ConfigError
from headwater.config.secrets import MASK, is_secret, mask_secrets


@dataclass(frozen=True)
class Property:
    """One connector property as Debezium defines it (or as headwater adds it, named `headwater.*`)."""

    name: str
    type: str = "string"  # string | int | boolean | list | regexes (a list of regexes) | enum | password
    default: Any = None
    allowed: tuple[str, ...] = ()
    required: bool = False
    doc: str = ""
    aliases: Mapping[str, str] = field(default_factory=dict)  # deprecated value -> value (lower case)
    minimum: int | None = None
    maximum: int | None = None
    why: str = ""  # why the values are limited (added to the hint of a value error), or why it is refused
    refused: bool = False  # a Debezium property headwater does not implement: refused by name
    instead: str = ""  # for a refused property, what to use instead


def prop(name: str, type: str = "string", default: Any = None, allowed: Iterable[str] = (), **kw: Any) -> Property:
    """A property headwater implements."""
    return Property(name, type, default, tuple(allowed), **kw)


NOT_YET = "the feature is not built yet"


def refuse(name: str, why: str = NOT_YET, instead: str = "") -> Property:
    """A Debezium property headwater refuses by name: `why`, and what to use `instead`."""
    return Property(name, refused=True, why=why, instead=instead)


def refusal(name: str, why: str, instead: str) -> ConfigError:
    """The error for a Debezium property (or property family) headwater does not implement."""
    return ConfigError(name, f"a Debezium property headwater does not implement: {why}",
                       instead or "remove it from the configuration")


def _range_error(prop_: Property, value: int) -> ConfigError | None:
    low, high = prop_.minimum, prop_.maximum
    if (low is None or value >= low) and (high is None or value <= high):
        return None
    if high is None:
        message, hint = ((f"must be positive, got {value}", "use a number above 0") if low == 1 else
                         (f"must not be negative, got {value}", "use 0 or more") if low == 0 else
                         (f"must be at least {low}, got {value}", f"use {low} or more"))
    elif low == high:
        message, hint = f"must be {low}, got {value}", f"set {low} or remove it"
    else:
        message, hint = f"must be from {low} to {high}, got {value}", f"use a number from {low} to {high}"
    return ConfigError(prop_.name, message, f"{hint}; {prop_.why}" if prop_.why else hint)


def parse_value(prop_: Property, raw: Any) -> tuple[Any, ConfigError | None]:
    """The typed value of `raw` for `prop_`, or the error naming what is wrong (secret values never shown)."""
    value, err = _parse(prop_, raw)
    if err is not None and is_secret(prop_.name) and raw is not None and repr(raw) in err.message:
        err = ConfigError(err.property, err.message.replace(repr(raw), MASK), err.hint)
    return value, err


def _parse(prop_: Property, raw: Any) -> tuple[Any, ConfigError | None]:
    name = prop_.name
    if raw is None:
        return None, None
    if prop_.type == "int":
        example = f"for example {name}: {prop_.default}"
        if isinstance(raw, bool):
            return None, ConfigError(name, f"expected a whole number, got {raw!r}", example)
        try:
            number = int(str(raw).strip())
        except ValueError:
            return None, ConfigError(name, f"expected a whole number, got {raw!r}", example)
        return number, _range_error(prop_, number)
    if prop_.type == "boolean":
        if isinstance(raw, bool):
            return raw, None
        s = str(raw).strip().lower()
        if s in ("true", "false"):
            return s == "true", None
        return None, ConfigError(name, f"expected true or false, got {raw!r}", f"write {name}: true or {name}: false")
    if prop_.type == "enum":
        s = str(raw).strip()
        low = s.lower()
        low = prop_.aliases.get(low, low)
        canonical = {a.lower(): a for a in prop_.allowed}
        if low in canonical:
            return canonical[low], None
        hint = "allowed values: " + ", ".join(prop_.allowed)
        return None, ConfigError(name, f"{s!r} is not allowed", f"{hint}; {prop_.why}" if prop_.why else hint)
    if prop_.type in ("list", "regexes"):
        items = raw if isinstance(raw, list) else str(raw).split(",")
        values = [str(i).strip() for i in items if str(i).strip()]
        if prop_.allowed:
            bad = [v for v in values if v.lower() not in prop_.allowed]
            if bad:
                hint = "allowed values: " + ", ".join(prop_.allowed)
                return None, ConfigError(name, f"{', '.join(bad)} not allowed",
                                         f"{hint}; {prop_.why}" if prop_.why else hint)
            values = [v.lower() for v in values]
        if prop_.type == "regexes":
            for v in values:
                try:
                    re.compile(v)
                except re.error as exc:
                    return None, ConfigError(name, f"{v!r} is not a valid regular expression: {exc}",
                                             "use anchored Java-style regexes such as public\\.orders")
        return values, None
    if isinstance(raw, (dict, list)):
        return None, ConfigError(name, f"expected a single value, got {type(raw).__name__}", "give a string")
    return str(raw), None


@dataclass
class ConnectorConfig:
    """Validated connector properties: typed values with Debezium's defaults filled in."""

    connector: str
    values: dict[str, Any]
    definitions: dict[str, Property]
    extra: dict[str, Any] = field(default_factory=dict)  # pattern properties (config.patterns), by name
    defaults: dict[str, Any] = field(default_factory=dict)  # parsed defaults of properties not set
    transforms: dict[str, Any] = field(default_factory=dict)  # the transformation chain's properties, as given

    def __getitem__(self, name: str) -> Any:
        if name in self.values:
            return self.values[name]
        if name in self.defaults:
            return self.defaults[name]
        if name in self.definitions:
            return None
        raise KeyError(name)

    def get(self, name: str, default: Any = None) -> Any:
        try:
            value = self[name]
        except KeyError:
            return default
        return default if value is None else value

    def as_properties(self) -> dict[str, str]:
        """Every explicitly set property as strings, the way Debezium would take them."""
        out: dict[str, str] = {}
        for k, v in {**self.values, **self.extra, **self.transforms}.items():
            if isinstance(v, bool):
                out[k] = "true" if v else "false"
            elif isinstance(v, list):
                out[k] = ",".join(v)
            elif v is not None:
                out[k] = str(v)
        return out

    def masked(self) -> dict[str, Any]:
        """`as_properties()` with passwords and hash salts replaced by asterisks, for printing."""
        return mask_secrets(self.as_properties())
