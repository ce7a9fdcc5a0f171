"""What the metrics and notifications need of one batch of events, read column-wise.

`batch_facts(batch)` gives a `BatchFacts` of the batch's change events (those with an `op`: not
tombstones, transaction or heartbeat records): the count per `op`, per topic the count and the
captured table (`schema.table`, or `db.table`, from the `source` block of one of its events), the
distinct `_commit_version`s (one per transaction: the commit's position), the snapshot records
marked the last of their table (`source.snapshot` `last_in_data_collection` or `last`: a table's
last record, so only the last event of each topic, or typed block, is looked at), and the last
event's topic, `op` and `source` block. Only `op`, `topic` and `_commit_version` are read for every
event, by Arrow and numpy kernels (none that makes a pyarrow scalar from a Python value, which
imports pandas); a `source` block is read for the first and last event of each topic (typed: of
each block) and for the batch's last event, from the struct columns of typed blocks or the JSON
text of JSON rows.

The commit versions are kept as their count and the first and last (ascending): a log is read in
commit order, so the facts of consecutive pieces of one batch (Spark partitions, each reading its
piece on an executor) `merge` into the batch's, a transaction that goes on from one piece into the
next counted once. `to_json`/`from_json` carry the facts from an executor to the driver, and with them
`abandoned`: the tables whose blocking-snapshot unit met a query error (`WorkUnit.abandoned`), which the
runner of the units adds (no event says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from headwater.events.arrays import int64_values
from headwater.events.batch import Events
from headwater.events.typed import TypedEvents


@dataclass
class BatchFacts:
    """The change events of one batch (see the module's docstring)."""

    ops: dict[str, int] = field(default_factory=dict)
    # (place of its first event, topic, table, events), in order
    topics: list[tuple[int, str, str | None, int]] = field(default_factory=list)
    # (place, table) of the events marked the last of their table's snapshot, in order
    table_ends: list[tuple[int, str]] = field(default_factory=list)
    transactions: int = 0  # distinct commit versions
    first_version: int | None = None  # the least of them
    last_version: int | None = None  # the greatest
    last_topic: str = ""
    last_op: str = ""
    last_source: dict[str, Any] = field(default_factory=dict)
    size: int = 0  # the records of the batch the places count (greater than every place)
    abandoned: list[str] = field(default_factory=list)  # tables a blocking snapshot's unit met a query error reading

    @property
    def events(self) -> int:
        return sum(self.ops.values())

    def to_json(self) -> dict[str, Any]:
        return {"ops": self.ops, "topics": self.topics, "table_ends": self.table_ends,
                "transactions": self.transactions, "first_version": self.first_version,
                "last_version": self.last_version, "last_topic": self.last_topic, "last_op": self.last_op,
                "last_source": self.last_source, "size": self.size, "abandoned": self.abandoned}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> BatchFacts:
        return cls(dict(d["ops"]), [(int(p), t, table, int(n)) for p, t, table, n in d["topics"]],
                   [(int(p), t) for p, t in d["table_ends"]], int(d["transactions"]), d["first_version"],
                   d["last_version"], d["last_topic"], d["last_op"], dict(d["last_source"]), int(d["size"]),
                   list(d.get("abandoned") or []))


def merge(parts: Sequence[BatchFacts]) -> BatchFacts:
    """The facts of consecutive pieces of one batch, in order (see the module's docstring)."""
    out = BatchFacts()
    base = 0
    per_topic: dict[str, list[Any]] = {}  # topic -> [first place, table, events]
    for f in parts:
        for op, n in f.ops.items():
            out.ops[op] = out.ops.get(op, 0) + n
        for place, topic, table, n in f.topics:
            entry = per_topic.get(topic)
            if entry is None:
                per_topic[topic] = [base + place, table, n]
            else:
                entry[2] += n
        out.table_ends += [(base + place, table) for place, table in f.table_ends]
        out.abandoned += f.abandoned
        if f.transactions:
            continued = out.last_version is not None and f.first_version == out.last_version
            out.transactions += f.transactions - int(continued)
            if out.first_version is None:
                out.first_version = f.first_version
            out.last_version = f.last_version
        if f.events:
            out.last_topic, out.last_op, out.last_source = f.last_topic, f.last_op, f.last_source
        base += f.size
    out.topics = sorted((first, t, table, n) for t, (first, table, n) in per_topic.items())
    out.size = base
    return out


LAST_MARKERS = ("last_in_data_collection", "last")


def table_name(source: dict[str, Any]) -> str | None:
    """The captured table a `source` block names: `schema.table` (PostgreSQL) or `db.table` (binlog)."""
    table = source.get("table")
    if table is None:
        return None
    first = source.get("schema") or source.get("db")
    return f"{first}.{table}" if first else str(table)


def _counts(values: pa.Array) -> dict[Any, int]:
    """Value -> count, in order of first appearance."""
    vc = pc.value_counts(values)
    return dict(zip(vc.field("values").to_pylist(), vc.field("counts").to_pylist(), strict=True))


def _table_end(facts: BatchFacts, place: int, source: dict[str, Any]) -> None:
    """Note the event at `place` when its `source` marks it the last of its table's snapshot."""
    table = table_name(source)
    if source.get("snapshot") in LAST_MARKERS and table is not None:
        facts.table_ends.append((place, table))


def batch_facts(batch: Events | TypedEvents) -> BatchFacts:
    """The facts of `batch`'s change events."""
    if isinstance(batch, TypedEvents):
        return _typed_facts(batch)
    return _json_facts(batch.to_arrow())


def _json_source(value: str) -> dict[str, Any]:
    doc = orjson.loads(value)
    payload = doc.get("payload", doc) if "schema" in doc and "payload" in doc else doc
    source: dict[str, Any] = payload.get("source") or {}
    return source


def _json_facts(b: pa.RecordBatch) -> BatchFacts:
    changes = b.filter(pc.is_valid(b.column("op")))
    facts = BatchFacts(size=b.num_rows)
    if changes.num_rows == 0:
        return facts
    topic, value = changes.column("topic"), changes.column("value")
    facts.ops = _counts(changes.column("op"))
    encoded = pc.dictionary_encode(topic)
    codes = int64_values(encoded.indices.cast(pa.int64()))
    names = encoded.dictionary.to_pylist()
    _, firsts, counts = np.unique(codes, return_index=True, return_counts=True)
    _, from_end = np.unique(codes[::-1], return_index=True)
    for code, (first, n, back) in enumerate(zip(firsts.tolist(), counts.tolist(), from_end.tolist(), strict=True)):
        facts.topics.append((first, names[code], table_name(_json_source(value[first].as_py())), n))
        last = changes.num_rows - 1 - back
        _table_end(facts, last, _json_source(value[last].as_py()))
    facts.topics.sort()
    facts.table_ends.sort()
    _versions(facts, changes.column("_commit_version"))
    last = changes.num_rows - 1
    facts.last_topic, facts.last_op = topic[last].as_py(), changes.column("op")[last].as_py()
    facts.last_source = _json_source(value[last].as_py())
    return facts


def _versions(facts: BatchFacts, versions: pa.Array | pa.ChunkedArray) -> None:
    """The count, least and greatest of the distinct commit versions."""
    distinct = pc.unique(versions)
    facts.transactions = len(distinct)
    if len(distinct):
        bounds = pc.min_max(distinct)
        facts.first_version, facts.last_version = bounds["min"].as_py(), bounds["max"].as_py()


def _source_of(block: pa.RecordBatch, row: int) -> dict[str, Any]:
    value = block.column("value")
    if not pa.types.is_struct(value.type) or value.type.get_field_index("source") < 0:
        return {}
    source: dict[str, Any] = pc.struct_field(value, "source")[row].as_py() or {}
    return source


def _typed_facts(batch: TypedEvents) -> BatchFacts:
    facts = BatchFacts(size=len(batch))
    per_topic: dict[str, list[Any]] = {}  # topic -> [first place, table, events]
    versions: list[pa.Array] = []
    last_order = -1
    for block in batch:
        b = block.batch
        changes = b.filter(pc.is_valid(b.column("op")))
        if changes.num_rows == 0:
            continue
        for op, n in _counts(changes.column("op")).items():
            facts.ops[op] = facts.ops.get(op, 0) + n
        orders = int64_values(changes.column("_order"))
        first, last = int(orders.min()), int(orders.max())
        entry = per_topic.get(block.topic)
        if entry is None:
            per_topic[block.topic] = [first, table_name(_source_of(changes, 0)), changes.num_rows]
        else:
            entry[0] = min(entry[0], first)
            entry[2] += changes.num_rows
        versions.append(changes.column("_commit_version"))
        _table_end(facts, last, _source_of(changes, int(orders.argmax())))
        if last > last_order:
            last_order = last
            row = int(orders.argmax())
            facts.last_topic, facts.last_op = block.topic, changes.column("op")[row].as_py()
            facts.last_source = _source_of(changes, row)
    facts.topics = sorted((first, t, table, n) for t, (first, table, n) in per_topic.items())
    facts.table_ends.sort()
    if versions:
        _versions(facts, pa.chunked_array(versions))
    return facts
