"""Validation of connector properties against the common definitions and one connector's own.

`validate_properties` turns a flat dict of user values into a `ConnectorConfig` of typed values, or
raises `ConfigErrors` naming every bad property with a hint: unknown names (with the closest known
name), Debezium properties headwater does not implement (with the reason and what to use instead),
wrong types, values outside the allowed set or range, missing required properties, include and
exclude lists given together, and the transformation chain's properties (`transforms`,
`transforms.<alias>.*`, `predicates`, `predicates.<alias>.*`, `errors.tolerance`: checked by
`headwater.transforms.chain`, kept as given in `ConnectorConfig.transforms`; and the post
processors' `post.processors` and `<alias>.*`, checked by `headwater.transforms.reselect`, kept in
`extra`). Which connector's definitions apply is decided by the caller
(`headwater.connectors.registry`); this module knows no connector.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from headwater.config import common
from headwater.config.errors import ConfigError, ConfigErrors
from headwater.config.patterns import PatternError, SelectOverride, hide_salt, parse_pattern
from headwater.config.properties import ConnectorConfig, Property, parse_value, refusal
from headwater.transforms.chain import parse_chain, split_properties
from headwater.transforms.reselect import parse_post_processors, split_post_processors

Check = Callable[[dict[str, Any], list[ConfigError]], None]


@dataclass(frozen=True)
class PropertySet:
    """A connector's own properties (beyond the common ones), include/exclude pairs, and checks."""

    definitions: Sequence[Property]
    exclusive: Sequence[tuple[str, str]] = ()
    check: Check | None = None


def all_definitions(own: PropertySet) -> dict[str, Property]:
    """The common properties and the connector's own, by name."""
    return {p.name: p for p in [*common.COMMON, *own.definitions]}


def restore_case(props: Mapping[str, Any], definitions: Iterable[str]) -> dict[str, Any]:
    """`props` with the case of known property names restored (Spark lower-cases option keys)."""
    known = {name.lower(): name for name in definitions}
    return {known.get(str(k).lower(), str(k)): v for k, v in props.items()}


def _suggest(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]}?"
    return "see the connector's property list in the README"


def _other(name: str, raw: Any, definitions: dict[str, Property], extra: dict[str, Any],
           errors: list[ConfigError]) -> None:
    """A name that is not a defined property: a pattern property, a refused family, or unknown."""
    try:
        pattern = parse_pattern(name)
    except PatternError as exc:
        errors.append(ConfigError(hide_salt(name), exc.message, exc.hint))
        return
    if pattern is not None:
        kind = "string" if isinstance(pattern, SelectOverride) else "regexes"
        value, err = parse_value(Property(hide_salt(name), kind), raw)
        if err:
            errors.append(err)
        else:
            extra[name] = value
        return
    refused = next((r for r in common.REFUSED_PREFIXES if name.startswith(r[0])), None)
    if refused is not None:
        errors.append(refusal(name, refused[1], refused[2]))
    elif name in common.RENAMED:
        errors.append(ConfigError(name, "an old Debezium name", f"Debezium now calls it {common.RENAMED[name]}"))
    else:
        errors.append(ConfigError(name, "unknown property", _suggest(name, definitions)))


def validate_properties(connector: str, props: Mapping[str, Any], own: PropertySet) -> ConnectorConfig:
    """Validate `props` for `connector` (short name) with its `own` properties; raise ConfigErrors listing all."""
    errors: list[ConfigError] = []
    definitions = all_definitions(own)
    values: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    props, transforms = split_properties(props)
    try:
        parse_chain(transforms)
    except ConfigErrors as exc:
        errors.extend(exc.errors)
    props, post = split_post_processors(props)  # kept among `extra`, read by reselect.post_processors
    try:
        parse_post_processors(post, connector)
        extra.update(post)
    except ConfigErrors as exc:
        errors.extend(exc.errors)
    for key, raw in props.items():
        name = str(key)
        prop_ = definitions.get(name)
        if prop_ is None:
            _other(name, raw, definitions, extra, errors)
        elif prop_.refused:
            errors.append(refusal(name, prop_.why, prop_.instead))
        elif name == "connector.class":
            values[name] = connector
        else:
            value, err = parse_value(prop_, raw)
            if err:
                errors.append(err)
            else:
                values[name] = value

    named = {e.property for e in errors}
    for prop_ in definitions.values():
        if prop_.required and values.get(prop_.name) in (None, "", []) and prop_.name not in named:
            errors.append(ConfigError(prop_.name, "is required", f"add {prop_.name}: <value> to the source block"))

    for a, b in [*common.EXCLUSIVE_PAIRS, *own.exclusive]:
        if values.get(a) and values.get(b):
            errors.append(ConfigError(f"{a} / {b}", "cannot be used together", f"keep either {a} or {b}"))

    common.check(values, errors)
    if own.check is not None:
        own.check(values, errors)
    if errors:
        raise ConfigErrors(errors)
    defaults = {p.name: parse_value(p, p.default)[0] for p in definitions.values()
                if not p.refused and p.default is not None and p.name not in values}
    return ConnectorConfig(connector, values, definitions, extra, defaults, transforms)
