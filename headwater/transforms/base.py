"""The base classes of transformations and predicates: options declared, parsed and validated.

A `Transform` or `Predicate` class declares the Debezium/Kafka class names it stands for
(`CLASS_NAMES`), a short name (`SHORT_NAME`) and its options as `config.properties.Property` rows
named without the `transforms.<alias>.` prefix (`OPTIONS`). The constructor takes the options as
given (the prefix removed), refuses unknown ones with the closest known name, parses each with
`parse_value`, and raises `ConfigErrors` naming `transforms.<alias>.<option>`; a subclass reads the
parsed values from `self.values` and checks the rest in `configure`, calling `self.fail`.

`Transform.apply` takes one block and gives the blocks it becomes: fewer rows (filtering), several
blocks (routing by topic), new key, value or header schemas (flattening). The `_order` of every
row it keeps is unchanged, so the chain can restore the batch's order. `Predicate.test` gives a
boolean per row.
"""

from __future__ import annotations

import difflib
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, NoReturn

import numpy as np

from headwater.config.errors import ConfigError, ConfigErrors
from headwater.config.properties import Property, parse_value
from headwater.events.typed import TypedBlock


class Configurable:
    """Options declared by the class, parsed from a dict of strings (see the module's docstring)."""

    CLASS_NAMES: ClassVar[tuple[str, ...]] = ()
    SHORT_NAME: ClassVar[str] = ""
    OPTIONS: ClassVar[tuple[Property, ...]] = ()
    KIND: ClassVar[str] = "transforms"

    def __init__(self, alias: str, options: Mapping[str, Any]):
        self.alias = alias
        self.prefix = f"{self.KIND}.{alias}."
        known = {p.name: p for p in self.OPTIONS}
        errors: list[ConfigError] = []
        self.values: dict[str, Any] = {}
        for name, raw in options.items():
            definition = known.get(name)
            if definition is None:
                errors.append(ConfigError(self.prefix + name, f"not an option of {self.SHORT_NAME}",
                                          suggest(name, known, self.prefix)))
                continue
            value, err = parse_value(_renamed(definition, self.prefix + name), raw)
            if err is not None:
                errors.append(err)
            else:
                self.values[name] = value
        for p in self.OPTIONS:
            if p.name not in self.values:
                if p.required and p.name not in options:
                    errors.append(ConfigError(self.prefix + p.name, "is required",
                                              f"add {self.prefix}{p.name}: <value>"))
                self.values[p.name] = parse_value(p, p.default)[0] if p.default is not None else None
        if errors:
            raise ConfigErrors(errors)
        self.configure()

    def configure(self) -> None:
        """Checks across options and derived settings (raise with `fail`)."""

    def fail(self, option: str, message: str, hint: str = "") -> NoReturn:
        """Refuse the value of `option`."""
        raise ConfigErrors([ConfigError(self.prefix + option, message, hint)])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.alias!r})"


def _renamed(p: Property, name: str) -> Property:
    return Property(name, p.type, p.default, p.allowed, p.required, p.doc, p.aliases, p.minimum, p.maximum, p.why)


def suggest(name: str, known: Mapping[str, Any] | list[str], prefix: str = "") -> str:
    """A hint naming the closest known name to `name`, or all of them when none is close."""
    names = list(known)
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.5)
    if close:
        return f"did you mean {prefix}{close[0]}?"
    return "known: " + ", ".join(names) if names else "it takes no options"


class Transform(Configurable, ABC):
    """A single message transformation."""

    KIND = "transforms"

    @abstractmethod
    def apply(self, block: TypedBlock) -> list[TypedBlock]:
        """The blocks `block` becomes (none: every row dropped), each row keeping its `_order`."""


class Predicate(Configurable, ABC):
    """A Kafka Connect predicate: which records a transformation applies to."""

    KIND = "predicates"

    @abstractmethod
    def test(self, block: TypedBlock) -> np.ndarray:
        """Per row, whether the predicate matches (a numpy bool array)."""


class TransformError(Exception):
    """A transformation failed on the events of a block (`errors.tolerance` decides what follows)."""
