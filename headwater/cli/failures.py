"""What the CLI prints when a run fails: headwater's own message, found in what Spark hands back.

An error raised by the source in a Spark Python worker comes back to the driver as a
`StreamingQueryException` whose text wraps the worker's Python traceback in Spark's messages and
a Java stack trace. `source_error` finds the headwater `SourceError` at the end of that traceback
and rebuilds it, so the user reads its message alone; `summary` gives one line for anything else.
"""

from __future__ import annotations

import importlib
import logging
import re

from headwater.connectors.errors import SourceError

# the last line of a Python traceback raised by headwater code: "headwater.pkg.module.Class: message"
# (Spark's own text follows on the next line)
_RAISED = re.compile(r"^(headwater(?:\.\w+)+)\.(\w+): (.*)$", re.MULTILINE)


def source_error(exc: BaseException) -> SourceError | None:
    """The headwater `SourceError` `exc` is or wraps (as the text of a worker's traceback), if any."""
    if isinstance(exc, SourceError):
        return exc
    found = None
    text = str(exc)
    for m in _RAISED.finditer(text):
        found = m
    if found is None:
        return None
    try:
        cls = getattr(importlib.import_module(found.group(1)), found.group(2))
    except (ImportError, AttributeError):
        return None
    if not (isinstance(cls, type) and issubclass(cls, SourceError)):
        return None
    return cls(found.group(3).strip())  # headwater's messages are one line


def summary(exc: BaseException) -> str:
    """One line for an error that is not headwater's: its type and the line that says most."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    # a Python worker's traceback ends with "Type: message"; Spark's own text starts with its class
    for line in reversed(lines):
        if re.match(r"^[\w.]*(Error|Exception)\b.*: ", line) and not line.startswith(("org.apache.", "java.")):
            return line
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"


class DropPy4J(logging.Filter):
    """Drops py4j's log records (its errors while the JVM stops, with their tracebacks): whatever
    fails the run reaches the CLI as an exception."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name.startswith("py4j") or "/py4j/" in record.pathname.replace("\\", "/"))
