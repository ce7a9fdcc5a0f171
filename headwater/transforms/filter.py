"""The scripting SMTs' common part, and Filter: records kept where an expression holds.

`Scripting` is Debezium's ScriptingTransformation: `language` (`expressions.LANGUAGES`; Debezium's
`jsr223.*` engines run as the Groovy/JavaScript subset `expressions` evaluates column-wise),
`topic.regex` (records of other topics pass unchanged), `null.handling.mode` for records with a null
value (`keep` them, `drop` them, or `evaluate` the expression on them too). `Filter` keeps the rows
whose `condition` is true (null or false drops them).
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import numpy as np

from headwater.config.properties import Property, prop
from headwater.events.arrays import valid_mask
from headwater.events.typed import TypedBlock
from headwater.transforms.base import Transform, TransformError
from headwater.transforms.blocks import take
from headwater.transforms.expressions import LANGUAGES, ExpressionError, Node, Value, evaluate, parse, truth
from headwater.transforms.regex import java_regex
from headwater.transforms.registry import register

NULL_HANDLING = ("keep", "drop", "evaluate")


class Scripting(Transform):
    """A transformation driven by an expression (see the module's docstring)."""

    EXPRESSION: ClassVar[str] = ""  # the option holding the expression
    COMMON: ClassVar[tuple[Property, ...]] = (prop("language", "enum", required=True, allowed=LANGUAGES,
                   why="headwater evaluates Groovy/JavaScript property access and logic, or Python"),
              prop("topic.regex", default=""),
              prop("null.handling.mode", "enum", default="keep", allowed=NULL_HANDLING))

    def configure(self) -> None:
        regex = self.values["topic.regex"]
        self.topics = java_regex(self, "topic.regex", regex) if regex else None
        text = self.values[self.EXPRESSION]
        try:
            self.expression: Node = parse(text, self.values["language"])
        except ExpressionError as exc:
            self.fail(self.EXPRESSION, str(exc), "see the README for the expressions headwater accepts")

    def apply(self, block: TypedBlock) -> list[TypedBlock]:
        if self.topics is not None and self.topics.fullmatch(block.topic) is None:
            return [block]
        present = valid_mask(block.batch.column("value"))
        mode = self.values["null.handling.mode"]
        if mode == "evaluate" or present.all():
            return self.run(block)
        nulls = [] if mode == "drop" else [take(block, ~present)]
        return [*self.run(take(block, present)), *nulls] if present.any() else nulls

    def value(self, block: TypedBlock) -> Value:
        try:
            return evaluate(self.expression, block)
        except ExpressionError as exc:
            raise TransformError(f"{self.EXPRESSION}: {exc}") from exc

    @abstractmethod
    def run(self, block: TypedBlock) -> list[TypedBlock]:
        """The expression's effect on the rows it applies to."""


@register
class Filter(Scripting):
    """io.debezium.transforms.Filter: keeps the records whose `condition` is true."""

    CLASS_NAMES = ("io.debezium.transforms.Filter",)
    SHORT_NAME = "Filter"
    EXPRESSION = "condition"
    OPTIONS = (*Scripting.COMMON, prop("condition", required=True))

    def run(self, block: TypedBlock) -> list[TypedBlock]:
        try:
            keep = truth(self.value(block), len(block))
        except ExpressionError as exc:
            raise TransformError(f"condition: {exc}") from exc
        if isinstance(keep, np.ndarray):
            return [take(block, keep)] if keep.any() else []
        return [block] if keep else []
