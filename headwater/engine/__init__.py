"""The engine without Spark: run a connector in this process, iterate events, keep offsets in a file."""

from headwater.engine.engine import Engine, OffsetFile

__all__ = ["Engine", "OffsetFile"]
