"""Debezium's single message transformations (SMTs) and Kafka Connect's predicates on typed blocks.

A transformation works column-wise on a `TypedBlock` (`base.Transform.apply`: a block in, zero or
more blocks out); `registry` maps Debezium's and Kafka's class names and short names to the classes;
`chain` reads `transforms`, `transforms.<alias>.*`, `predicates`, `predicates.<alias>.*` and
`errors.tolerance` from a connector's properties and applies them in order to the blocks of a batch;
`blocks` holds the column helpers the transformations share.
"""

from __future__ import annotations

from headwater.transforms.chain import TransformChain, parse_chain

__all__ = ["TransformChain", "parse_chain"]
