"""The cost of transformations: a 200,000-row snapshot's typed blocks written as JSON events, without
and with the chain `unwrap` (ExtractNewRecordState, rewrite mode, `add.fields=op,source.ts_ms`) +
`route` (ByLogicalTableRouter onto one topic, the source table in the key), in this process.

Both contenders first read the snapshot with the in-process engine (typed blocks; not timed), then
time only their own work over those blocks: `to_event_batch` (what a JSON sink gets), and for the
subject the chain before it (the chain alone is in `details["transform_s"]`). The ratio of the two
rows is what the chain costs per event; the row without it has the limit's role (the most a chain
can reach).
"""

from __future__ import annotations

import time

from bench.cases import SnapshotCase
from bench.headwater_contenders import properties
from bench.measure import Measurement
from bench.model import LIMIT, SUBJECT, Benchmark, Contender, Options, Target
from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from headwater.events.formats.json import JsonOptions, to_event_batch
from headwater.events.typed import TypedEvents
from headwater.transforms.chain import parse_chain

ROWS = 200_000
CHAIN = {
    "transforms": "unwrap,route",
    "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
    "transforms.unwrap.delete.tombstone.handling.mode": "rewrite",
    "transforms.unwrap.add.fields": "op,source.ts_ms",
    "transforms.route.type": "io.debezium.transforms.ByLogicalTableRouter",
    "transforms.route.topic.regex": "bench\\.public\\.(.*)",
    "transforms.route.topic.replacement": "bench.all",
}


def _blocks(case: SnapshotCase) -> list[TypedEvents]:
    """The snapshot's batches of typed blocks (the engine's own time is not measured here)."""
    engine = Engine(validate_connector(properties(case, case.slot_name, "initial")), output="typed")
    try:
        return list(engine.blocks(once=True))
    finally:
        engine.close()


def _measure(name: str, case: SnapshotCase, with_chain: bool) -> Measurement:
    batches = _blocks(case)
    rows = sum(len(b) for b in batches)
    chain = parse_chain(CHAIN) if with_chain else None
    options = JsonOptions()
    transform_s = 0.0
    started = time.perf_counter()
    out = 0
    for batch in batches:
        if chain is not None:
            t = time.perf_counter()
            batch = chain.apply(batch)
            transform_s += time.perf_counter() - t
        out += len(to_event_batch(batch, options))
    seconds = time.perf_counter() - started
    if rows != case.rows or out != rows:
        return Measurement.failed(name, f"read {rows} events and wrote {out}, expected {case.rows}")
    details: dict[str, float | int | None] = {"batches": len(batches)}
    if chain is not None:
        details["transform_s"] = transform_s
        details["transform_events_per_s"] = rows / transform_s if transform_s else None
    return Measurement(name, rows=rows, seconds=seconds, first_to_last_seconds=seconds, data_bytes=case.data_bytes,
                       details=details)


def without_chain(case: SnapshotCase) -> Measurement:
    """The blocks written as JSON events."""
    return _measure("headwater no transforms", case, False)


def with_chain(case: SnapshotCase) -> Measurement:
    """The blocks through unwrap + route, then written as JSON events."""
    return _measure("headwater unwrap+route", case, True)


def benchmarks(opts: Options) -> list[Benchmark]:
    del opts  # the size is fixed: the figure is a ratio per event
    return [Benchmark(
        "pg_transforms", f"Transformations: {ROWS:,} snapshot events as JSON, without and with unwrap + route",
        "postgresql", "snapshot",
        [Contender("headwater no transforms", LIMIT, without_chain, "typed blocks -> JSON events (to_event_batch)"),
         Contender("headwater unwrap+route", SUBJECT, with_chain,
                   "typed blocks -> ExtractNewRecordState + ByLogicalTableRouter -> JSON events")],
        [Target("≥ ½ of the rate without transformations", "rows_per_s", 0.5, LIMIT)],
        {"rows": ROWS},
    )]
