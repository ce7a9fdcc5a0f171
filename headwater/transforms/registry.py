"""Transformations and predicates by Debezium/Kafka class name or short name.

A module of this package registers its classes with the `register` decorator; `transform_class` and
`predicate_class` import every module of the package once (module discovery, so a new module needs no
edit here) and look the name up, refusing an unknown one with the closest known name.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import TypeVar

from headwater.config.errors import ConfigError, ConfigErrors
from headwater.transforms.base import Configurable, Predicate, Transform, suggest

_TRANSFORMS: dict[str, type[Transform]] = {}
_PREDICATES: dict[str, type[Predicate]] = {}
_loaded = False

C = TypeVar("C", bound=type[Configurable])


def register(cls: C) -> C:
    """Class decorator: make `cls` known by its `CLASS_NAMES` and `SHORT_NAME`."""
    table: dict = _PREDICATES if issubclass(cls, Predicate) else _TRANSFORMS
    for name in (*cls.CLASS_NAMES, cls.SHORT_NAME):
        if name in table and table[name] is not cls:
            raise ValueError(f"{name} is registered twice: {table[name].__name__} and {cls.__name__}")
        table[name] = cls
    return cls


def _load() -> None:
    global _loaded
    if not _loaded:
        package = importlib.import_module("headwater.transforms")
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"headwater.transforms.{module.name}")
        _loaded = True


def transform_class(name: str, prop: str) -> type[Transform]:
    """The transformation named `name` (class or short name); `prop` names the property for errors."""
    _load()
    cls = _TRANSFORMS.get(name.strip())
    if cls is None:
        raise ConfigErrors([ConfigError(prop, f"unknown transformation {name!r}", suggest(name, known_transforms()))])
    return cls


def predicate_class(name: str, prop: str) -> type[Predicate]:
    """The predicate named `name` (class or short name)."""
    _load()
    cls = _PREDICATES.get(name.strip())
    if cls is None:
        raise ConfigErrors([ConfigError(prop, f"unknown predicate {name!r}", suggest(name, known_predicates()))])
    return cls


def known_transforms() -> list[str]:
    """Every name a transformation is known by."""
    _load()
    return sorted(_TRANSFORMS)


def known_predicates() -> list[str]:
    """Every name a predicate is known by."""
    _load()
    return sorted(_PREDICATES)
