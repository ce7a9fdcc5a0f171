"""Kafka Connect's predicates: TopicNameMatches, RecordIsTombstone, HasHeaderKey."""

from __future__ import annotations

import numpy as np

from headwater.config.properties import prop
from headwater.events.arrays import valid_mask
from headwater.events.typed import TypedBlock
from headwater.transforms.base import Predicate
from headwater.transforms.blocks import header_values
from headwater.transforms.regex import java_regex
from headwater.transforms.registry import register

_PACKAGE = "org.apache.kafka.connect.transforms.predicates."


@register
class TopicNameMatches(Predicate):
    """Records whose topic matches the regex `pattern` as a whole (Java's `Matcher.matches`)."""

    CLASS_NAMES = (_PACKAGE + "TopicNameMatches",)
    SHORT_NAME = "TopicNameMatches"
    OPTIONS = (prop("pattern", required=True),)

    def configure(self) -> None:
        self.pattern = java_regex(self, "pattern", self.values["pattern"])

    def test(self, block: TypedBlock) -> np.ndarray:
        return np.full(len(block), self.pattern.fullmatch(block.topic) is not None)


@register
class RecordIsTombstone(Predicate):
    """Records whose value is null."""

    CLASS_NAMES = (_PACKAGE + "RecordIsTombstone",)
    SHORT_NAME = "RecordIsTombstone"

    def test(self, block: TypedBlock) -> np.ndarray:
        return ~valid_mask(block.batch.column("value"))


@register
class HasHeaderKey(Predicate):
    """Records with at least one header named `name` (an exact name, not a regex)."""

    CLASS_NAMES = (_PACKAGE + "HasHeaderKey",)
    SHORT_NAME = "HasHeaderKey"
    OPTIONS = (prop("name", required=True),)

    def test(self, block: TypedBlock) -> np.ndarray:
        found = header_values(block, self.values["name"])
        return np.zeros(len(block), dtype=bool) if found is None else found[2]
