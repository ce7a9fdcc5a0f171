"""Serialization rates of the event formats, in one process: JSON, Avro, CloudEvents, from typed blocks.

    .venv/bin/python -m bench.formats [--rows 200000]

A throwaway PostgreSQL server gets the benchmark table (`bench.data`: bigint key, text, integer,
numeric(12,2), timestamptz, boolean) with `--rows` rows; headwater's engine snapshots it into typed
blocks (`output="typed"`) held in memory; then each format writes the keys and values of all blocks,
timed alone (best of `--repeat`), and the result is printed as events/s. Timings on a loaded machine
are comparable within one run only.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from functools import partial

from bench.data import DBNAME, PUBLICATION, load_snapshot_table, new_server
from headwater.connectors.registry import validate_connector
from headwater.engine import Engine
from headwater.events.formats.avro import AvroBlockWriter
from headwater.events.formats.avro_columns import container_file, encode_column
from headwater.events.formats.converters import Converters, parse_converters
from headwater.events.formats.json import JsonOptions
from headwater.events.typed import TypedBlock
from headwater.spark.converted import converted_lines


def snapshot_blocks(rows: int) -> list[TypedBlock]:
    """The typed blocks of a `rows`-row snapshot of the benchmark table."""
    server = new_server()  # started
    try:
        load_snapshot_table(server, rows)
        config = validate_connector({"connector.class": "postgres", **server.connector_properties(DBNAME),
                                     "topic.prefix": "bench", "slot.name": "formats_slot",
                                     "publication.name": PUBLICATION, "snapshot.mode": "initial"})
        engine = Engine(config, output="typed")
        try:
            return [b for batch in engine.blocks(once=True) for b in batch]
        finally:
            engine.close()
    finally:
        server.stop()


def converters(props: dict[str, str]) -> Converters:
    return Converters(*parse_converters(props, JsonOptions()))


def write_all(blocks: list[TypedBlock], c: Converters) -> list:
    """The keys and values of every block."""
    return [(c.keys(b), c.values(b)) for b in blocks]


def container(blocks: list[TypedBlock]) -> None:
    """What the avro sink does: values encoded column-wise into Avro container files (in memory)."""
    writer = AvroBlockWriter()
    for block in blocks:
        schema = block.value_schema
        assert schema is not None
        text, _ = writer.schema(schema)
        container_file(text, encode_column(block.batch.column("value"), schema, block.topic))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    started = time.perf_counter()
    blocks = snapshot_blocks(args.rows)
    events = sum(len(b) for b in blocks)
    print(f"snapshot: {events} events in {len(blocks)} blocks, {time.perf_counter() - started:.1f} s")
    registry = tempfile.mkdtemp(prefix="hw-formats-registry-")
    cases: dict[str, Callable[[], object]] = {}
    for name, props in {
        "JSON (JsonConverter, no schemas)": {},
        "JSON with schemas": {"key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"},
        "Avro (Confluent wire format)": {"key.converter": "avro", "key.converter.schema.registry.url": registry,
                                         "value.converter": "avro", "value.converter.schema.registry.url": registry},
        "CloudEvents JSON (data without schema)": {"value.converter": "cloudevents",
                                                   "value.converter.json.schemas.enable": "false"},
        "CloudEvents JSON, Avro data": {"value.converter": "cloudevents", "value.converter.data.serializer.type": "avro",
                                        "value.converter.avro.schema.registry.url": registry},
        "CloudEvents Avro": {"value.converter": "cloudevents", "value.converter.serializer.type": "avro",
                             "value.converter.data.serializer.type": "avro",
                             "value.converter.avro.schema.registry.url": registry},
    }.items():
        c = converters(props)
        cases[name] = partial(write_all, blocks, c)
        cases[name + " -> jsonl lines"] = partial(converted_lines, blocks, c)
    cases["Avro container file (avro sink)"] = lambda: container(blocks)
    best = {name: float("inf") for name in cases}
    for _ in range(args.repeat):  # round after round, so that a change in the machine's load hits every case
        for name, run in cases.items():
            best[name] = min(best[name], _timed(run))
    print(f"{'format':<56} {'events/s':>10} {'s':>7}")
    for name, seconds in best.items():
        print(f"{name:<56} {events / seconds:>10,.0f} {seconds:>7.2f}")


def _timed(run: Callable[[], object]) -> float:
    t = time.perf_counter()
    run()
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
