"""The transformation chain from Python: on the typed blocks of a batch, or on a Spark DataFrame of
blocks (the headwater source's `headwater.output=blocks` rows: `topic`, `block` as Arrow IPC).

    from headwater.transforms.dataframe import transform_blocks
    df = spark.readStream.format("headwater").options(**props, **{"headwater.output": "blocks"}).load()
    flat = transform_blocks(df, {"transforms": "unwrap",
                                 "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState"})

`properties` are Kafka Connect's chain properties (`transforms`, `transforms.<alias>.*`, `predicates`,
...; other keys, such as the connector's own, are ignored), checked at once. The DataFrame's blocks are
transformed by Spark's tasks (`mapInArrow`); each row keeps its `_order`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from headwater.events.arrays import binary_array, string_array
from headwater.events.typed import TypedEvents, from_ipc, ipc_bytes
from headwater.transforms.chain import TransformChain, parse_chain, split_properties

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def chain_of(properties: Mapping[str, Any]) -> TransformChain:
    """The chain `properties` configure (ConfigErrors naming every problem; ValueError without one)."""
    chain = parse_chain(split_properties(properties)[1])
    if chain is None:
        raise ValueError("no transformation: set transforms (and transforms.<alias>.type)")
    return chain


def transform_events(events: TypedEvents, properties: Mapping[str, Any]) -> TypedEvents:
    """The typed blocks of one batch through the chain, in the batch's order."""
    return chain_of(properties).apply(events)


def transform_blocks(df: DataFrame, properties: Mapping[str, Any]) -> DataFrame:
    """A DataFrame of blocks (`topic`, `block`) through the chain, by Spark's tasks."""
    chain_of(properties)  # refuse bad properties here, before the query runs
    props = dict(split_properties(properties)[1])

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        chain = chain_of(props)
        for batch in batches:
            out = chain.apply_blocks([from_ipc(data) for data in batch.column("block").to_pylist()])
            if out:
                yield pa.RecordBatch.from_arrays([string_array([b.topic for b in out]),
                                                  binary_array([ipc_bytes(b) for b in out])], names=["topic", "block"])

    return df.mapInArrow(run, df.schema)
