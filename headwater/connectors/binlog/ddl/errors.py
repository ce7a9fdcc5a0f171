"""The error raised for DDL the parser cannot read."""

from __future__ import annotations


class DdlParseError(ValueError):
    """A statement that could not be parsed (the schema history decides whether to skip it)."""
