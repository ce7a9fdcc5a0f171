"""The chain of transformations a connector's properties configure, applied to the blocks of a batch.

`parse_chain` reads Kafka Connect's keys from a connector's flat properties: `transforms` (aliases in
order), `transforms.<alias>.type` (class or short name), `transforms.<alias>.predicate`,
`transforms.<alias>.negate`, the transformation's own `transforms.<alias>.<option>`, `predicates`,
`predicates.<alias>.type` and the predicate's options, and `errors.tolerance` (`none`: a failing event
stops the batch with its topic and key; `all`: it is logged and skipped). `split_properties` separates
these keys from the connector's own.

`TransformChain.apply` runs the steps in order on every block (a step with a predicate runs on the
matching rows only; the others pass through), then gives the batch back in its order: blocks of the
same topic and schemas joined, `_order` renumbered densely in the original order. `apply_blocks`
does the same to loose blocks (a DataFrame's, `transforms.dataframe`) and keeps each row's `_order`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from headwater.config.errors import ConfigError, ConfigErrors
from headwater.config.properties import Property, parse_value
from headwater.events.arrays import int64_array, int64_values
from headwater.events.formats.json import JsonOptions, json_values
from headwater.events.typed import TypedBlock, TypedEvents
from headwater.transforms.base import Predicate, Transform, TransformError, suggest
from headwater.transforms.blocks import take
from headwater.transforms.registry import predicate_class, transform_class

log = logging.getLogger(__name__)

TOLERANCE = Property("errors.tolerance", "enum", "none", ("none", "all"))
_STEP_KEYS = ("type", "predicate", "negate")


def is_chain_key(name: str) -> bool:
    """Whether a connector property belongs to the transformation chain."""
    return (name in ("transforms", "predicates", TOLERANCE.name) or name.startswith("transforms.")
            or name.startswith("predicates."))


def split_properties(props: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The connector's own properties and the chain's."""
    own: dict[str, Any] = {}
    chain: dict[str, Any] = {}
    for k, v in props.items():
        (chain if is_chain_key(str(k)) else own)[str(k)] = v
    return own, chain


@dataclass(frozen=True)
class Step:
    """One transformation, applied where its predicate matches (or does not, `negate`)."""

    transform: Transform
    predicate: Predicate | None = None
    negate: bool = False


def _aliases(props: Mapping[str, Any], key: str, errors: list[ConfigError]) -> list[str]:
    value, err = parse_value(Property(key, "list"), props.get(key))
    if err is not None:
        errors.append(err)
        return []
    aliases = value or []
    dupes = sorted({a for a in aliases if aliases.count(a) > 1})
    if dupes:
        errors.append(ConfigError(key, f"lists {', '.join(dupes)} more than once", "give each alias once"))
    return list(dict.fromkeys(aliases))


def _options(props: Mapping[str, Any], kind: str, aliases: list[str], errors: list[ConfigError]
             ) -> dict[str, dict[str, Any]]:
    """The properties under `<kind>.<alias>.` per alias; a key of an alias not listed is refused."""
    out: dict[str, dict[str, Any]] = {a: {} for a in aliases}
    for k, v in props.items():
        if not k.startswith(kind + "."):
            continue
        rest = k[len(kind) + 1:]
        alias = next((a for a in sorted(aliases, key=len, reverse=True) if rest.startswith(a + ".")), None)
        if alias is None:  # Spark lower-cases option keys, not values: match the alias's case loosely
            alias = next((a for a in sorted(aliases, key=len, reverse=True)
                          if rest.lower().startswith(a.lower() + ".")), None)
        if alias is None:
            errors.append(ConfigError(k, f"its alias is not listed in {kind}",
                                      f"add the alias to {kind}: ({', '.join(aliases) or 'none listed'})"))
        else:
            out[alias][rest[len(alias) + 1:]] = v
    return out


def parse_chain(props: Mapping[str, Any]) -> TransformChain | None:
    """The chain the properties configure (None without `transforms`); ConfigErrors listing every problem."""
    errors: list[ConfigError] = []
    unknown = [k for k in props if not is_chain_key(k)]
    if unknown:
        raise ValueError(f"not transformation properties: {unknown}")
    tolerance, err = parse_value(TOLERANCE, props.get(TOLERANCE.name, TOLERANCE.default))
    if err is not None:
        errors.append(err)
    transforms = _aliases(props, "transforms", errors)
    predicates = _aliases(props, "predicates", errors)
    t_options = _options(props, "transforms", transforms, errors)
    p_options = _options(props, "predicates", predicates, errors)
    built: dict[str, Predicate] = {}
    for alias in predicates:
        options = dict(p_options[alias])
        name = options.pop("type", None)
        prop = f"predicates.{alias}.type"
        if not name:
            errors.append(ConfigError(prop, "is required", "set a predicate class, e.g. TopicNameMatches"))
            continue
        try:
            built[alias] = predicate_class(str(name), prop)(alias, options)
        except ConfigErrors as exc:
            errors.extend(exc.errors)
    steps: list[Step] = []
    for alias in transforms:
        options = dict(t_options[alias])
        name, predicate, negate = (options.pop(k, None) for k in _STEP_KEYS)
        prop = f"transforms.{alias}.type"
        if not name:
            errors.append(ConfigError(prop, "is required", "set a transformation class, e.g. ExtractNewRecordState"))
            continue
        negated, err = parse_value(Property(f"transforms.{alias}.negate", "boolean"), negate)
        if err is not None:
            errors.append(err)
        if predicate is not None and str(predicate) not in predicates:
            errors.append(ConfigError(f"transforms.{alias}.predicate", f"unknown predicate alias {predicate!r}",
                                      suggest(str(predicate), predicates) if predicates else
                                      "list it in predicates and set predicates.<alias>.type"))
        if negated and predicate is None:
            errors.append(ConfigError(f"transforms.{alias}.negate", "needs a predicate",
                                      f"set transforms.{alias}.predicate or remove negate"))
        try:
            transform = transform_class(str(name), prop)(alias, options)
        except ConfigErrors as exc:
            errors.extend(exc.errors)
            continue
        steps.append(Step(transform, built.get(str(predicate)) if predicate is not None else None, bool(negated)))
    if errors:
        raise ConfigErrors(errors)
    if not transforms:
        return None
    return TransformChain(steps, tolerance == "all")


@dataclass
class TransformChain:
    """Transformations applied in order (see the module's docstring)."""

    steps: list[Step]
    tolerate: bool = False  # errors.tolerance=all

    def apply(self, events: TypedEvents) -> TypedEvents:
        """The batch's blocks transformed, in the batch's order, `_order` renumbered densely."""
        return in_order(self.apply_blocks(events.blocks))

    def apply_blocks(self, blocks: list[TypedBlock]) -> list[TypedBlock]:
        """Blocks transformed, those of the same topic and schemas joined; each row keeps its `_order`."""
        for step in self.steps:
            blocks = [out for block in blocks for out in self._step(step, block)]
        return _joined(blocks)

    def _step(self, step: Step, block: TypedBlock) -> list[TypedBlock]:
        if not len(block):
            return []
        if step.predicate is None:
            return self._run(step.transform, block)
        mask = step.predicate.test(block) != step.negate
        if not mask.any():
            return [block]
        if mask.all():
            return self._run(step.transform, block)
        return [take(block, ~mask), *self._run(step.transform, take(block, mask))]

    def _run(self, transform: Transform, block: TypedBlock) -> list[TypedBlock]:
        try:
            return transform.apply(block)
        except Exception as exc:  # a failing event: find it, then stop or skip it (errors.tolerance)
            if len(block) == 1:
                return self._failed(transform, block, exc)
            out: list[TypedBlock] = []
            for i in range(len(block)):
                row = take(block, np.array([i]))
                try:
                    out.extend(transform.apply(row))
                except Exception as row_exc:
                    out.extend(self._failed(transform, row, row_exc))
            return out

    def _failed(self, transform: Transform, row: TypedBlock, exc: Exception) -> list[TypedBlock]:
        """A one-event block `transform` failed on: skipped and logged (`errors.tolerance=all`), or raised."""
        error = _event_error(transform, row, exc)
        if not self.tolerate:
            raise error from exc
        log.warning("skipped: %s", error)
        return []


def _event_error(transform: Transform, row: TypedBlock, exc: Exception) -> TransformError:
    key = json_values(row.batch.column("key"), row.key_schema, JsonOptions())[0]
    return TransformError(f"transforms.{transform.alias} failed on the event of topic {row.topic!r} with key "
                          f"{orjson.dumps(key).decode()}: {exc}")


def _joined(blocks: list[TypedBlock]) -> list[TypedBlock]:
    """Blocks of the same topic and schemas joined (empty ones left out)."""
    groups: dict[Any, list[pa.RecordBatch]] = {}
    for block in blocks:
        if len(block):
            schema = block.batch.schema  # equality of Arrow schemas ignores their metadata: key on both
            groups.setdefault((schema, tuple(sorted(schema.metadata.items()))), []).append(block.batch)
    return [TypedBlock(b[0] if len(b) == 1 else pa.concat_batches(b)) for b in groups.values()]


def in_order(blocks: list[TypedBlock]) -> TypedEvents:
    """Blocks as the events of one batch: in order of their first event, `_order` renumbered densely (gaps
    left by dropped events closed)."""
    joined = [b.batch for b in blocks]
    if not joined:
        return TypedEvents([])
    orders = [int64_values(b.column("_order")) for b in joined]
    everything = np.concatenate(orders)
    rank = np.empty(len(everything), dtype=np.int64)
    rank[np.argsort(everything, kind="stable")] = np.arange(len(everything))
    out, start = [], 0
    for b, o in zip(joined, orders, strict=True):
        i = b.schema.get_field_index("_order")
        out.append(TypedBlock(b.set_column(i, b.schema.field(i), int64_array(rank[start:start + len(o)]))))
        start += len(o)
    out.sort(key=lambda blk: int(int64_values(blk.batch.column("_order")).min()))
    return TypedEvents(out)
