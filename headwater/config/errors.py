"""Configuration errors that name the property, say what is wrong and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConfigError:
    """One problem with one property: where it is, what is wrong, and a hint to fix it."""

    property: str
    message: str
    hint: str = ""

    def __str__(self) -> str:
        text = f"{self.property}: {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text


class ConfigErrors(Exception):
    """Raised with every problem found, so the user can fix them all at once."""

    def __init__(self, errors: list[ConfigError]):
        self.errors = list(errors)
        super().__init__("\n".join(str(e) for e in self.errors))
