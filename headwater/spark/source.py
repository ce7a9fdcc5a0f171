"""The `headwater` Spark data source: change events as a Spark stream.

    spark.dataSource.register(HeadwaterDataSource)  # headwater.spark.datasource
    df = spark.readStream.format("headwater").options(**connector_properties).load()

Options are the connector's properties (Debezium's names) plus `maxEventsPerTrigger`,
`schemas.enable` and `replace.null.with.default` (Kafka JsonConverter's settings), and
`headwater.output`, the layout of the rows (`OUTPUT_LAYOUTS`):

- `json` (the default): one row per event, key and value as JsonConverter's JSON text
  (`events.batch.SPARK_SCHEMA_DDL`);
- `blocks`: the connector builds typed blocks (`events.typed`), one row per block
  (`BLOCKS_SCHEMA_DDL`: its topic, and the block as an Arrow IPC stream) whose `_order` column
  gives each event's place among the partition's events; for sinks that take the events apart
  (`headwater-parquet`), so that no stage after the source reads JSON;
- `table`: one table's row images as typed columns (`headwater.topic` names its topic and
  `headwater.row.schema` holds its row's Connect schema; the schema of the rows is given by the
  query: `headwater.spark.tables.table_changes` sets all three);
- `files`: the tasks write the events to the files of a file sink themselves (`headwater.sink` names
  it, `headwater.spark.sinks.sink_spec`), and the rows are one per event, null but the last of each
  task, which says what it wrote (`headwater.spark.filesink`: `headwater run` commits them with
  `FileBatches`): the events never cross Spark's JVM.

The connector's post processors (`post.processors`) and transformation chain (`transforms`,
`headwater.transforms`) run in `read()`, on the executors, on the typed blocks the connector then
builds whatever the layout, before they are written as rows of the layout.

Offsets are the connector's positions; the database is told a position is
consumed only in `commit(end)`, which Spark calls once the batch ending there is committed (and,
for the last committed batch, when the stream starts again: `latestOffset` acknowledges `start`).

The reader lives in Spark's long-lived driver-side Python process; only partitions, each holding
one connector `WorkUnit`, travel to executors, where `read()` yields Arrow record batches.
"""

from __future__ import annotations

import atexit
import json
import logging
from collections.abc import Iterator, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import SourceConnector, WorkUnit
from headwater.connectors.common.context_headers import ContextHeaders
from headwater.connectors.history_file import require_history_file
from headwater.connectors.registry import canonical_names, create_source, validate_connector
from headwater.events.arrays import binary_array, string_array
from headwater.events.arrow import RowImages
from headwater.events.batch import Events, PieceEvents
from headwater.events.formats.json import JsonOptions, to_event_batch
from headwater.events.typed import TypedEvents, ipc_bytes
from headwater.spark.columns import spark_columns
from headwater.spark.filesink import SINK_OPTION, partition_blocks, written_rows
from headwater.spark.layouts import (  # noqa: F401 - here as before
    BLOCKS_SCHEMA_DDL,
    OUTPUT_LAYOUTS,
    OUTPUT_OPTION,
    ROW_SCHEMA_OPTION,
    TOPIC_OPTION,
    output_layout,
)
from headwater.spark.observing import (
    OBSERVE_OPTION,
    Carrier,
    NotesPartition,
    PartitionFacts,
    split,
    write_reader_state,
)
from headwater.spark.workergc import settle
from headwater.transforms.chain import TransformChain, parse_chain
from headwater.transforms.reselect import PostProcessors, post_processors

log = logging.getLogger("headwater.spark")

# Spark lower-cases option keys; the exact properties (a hash salt's case matters) can be passed
# as one JSON option instead.
PROPERTIES_OPTION = "headwater.properties"

ROW_OPS = ("c", "u", "d", "r")  # the events with a row image (not truncates, not tombstones)

READER_OPTIONS = ("maxeventspertrigger", "schemas.enable", "replace.null.with.default", "parallelism",
                  PROPERTIES_OPTION, OUTPUT_OPTION, TOPIC_OPTION, ROW_SCHEMA_OPTION, SINK_OPTION, OBSERVE_OPTION)


class UnitPartition(InputPartition):
    """One Spark partition: one connector work unit."""

    def __init__(self, index: int, unit: WorkUnit):
        super().__init__(index)
        self.unit = unit


def connector_config(options: dict[str, str]) -> ConnectorConfig:
    if options.get(PROPERTIES_OPTION):
        return validate_connector(json.loads(options[PROPERTIES_OPTION]))
    return validate_connector(canonical_names({k: v for k, v in options.items()
                                               if k.lower() not in READER_OPTIONS}))


def _flag(options: dict[str, str], name: str, default: bool) -> bool:
    value = options.get(name)
    return default if value is None else str(value).lower() == "true"


class HeadwaterStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A DataSourceStreamReader over a headwater connector."""

    def __init__(self, options: dict[str, str]):
        self.options = {k.lower(): v for k, v in options.items()}
        self.layout = output_layout(self.options)
        max_events = self.options.get("maxeventspertrigger")
        self.max_events = int(max_events) if max_events else None
        self._connector: SourceConnector | None = None
        self._opened = False
        self._available_now = False
        # this run's context headers: Spark makes the reader that `read()` runs on once per start of the
        # query and pickles it to the executors, so every batch of a run carries the same run id
        self.context_headers = ContextHeaders.start(connector_config(self.options))
        observe = self.options.get(OBSERVE_OPTION)
        self.observe_dir = Path(observe).expanduser() if observe else None
        self._carrier: Carrier | None = None
        self._blocking = False  # the last batch planned started in a blocking snapshot

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_connector"] = None  # connections and threads stay on the driver
        state["_opened"] = False
        state["_carrier"] = None
        state.pop("chain", None)  # parsed again where it runs
        state.pop("post", None)  # its database connection is opened where it runs
        return state

    @cached_property
    def chain(self) -> TransformChain | None:
        """The connector's transformation chain (None without `transforms`)."""
        return parse_chain(connector_config(self.options).transforms)

    @cached_property
    def post(self) -> PostProcessors | None:
        """The connector's post processors (None without `post.processors`), run before the chain."""
        return post_processors(connector_config(self.options))

    @property
    def json_rows(self) -> bool:
        """Whether the rows, or the file sink the rows are written to, take JSON text (else typed blocks)."""
        if self.layout == "files":
            from headwater.spark.sinks import file_writer

            return not file_writer(self.options[SINK_OPTION]).takes_blocks
        return self.layout == "json"

    @property
    def connector(self) -> SourceConnector:
        if self._connector is None:
            cfg = connector_config(self.options)
            require_history_file(cfg, "Spark's checkpoint")
            self._connector = create_source(
                cfg, parallelism=int(self.options.get("parallelism", 2)),
                schemas_enable=_flag(self.options, "schemas.enable", False),
                replace_null_with_default=_flag(self.options, "replace.null.with.default", True),
                output="json" if self.json_rows and self.chain is None and self.post is None else "typed")
            atexit.register(self._close)
        return self._connector

    def _close(self) -> None:
        if self._connector is not None:
            try:
                self._connector.close()
            finally:
                self._connector = None

    def _open(self, start: dict) -> None:
        if not self._opened:
            # (imported here: the driver's alone, a task worker that unpickles the reader does not import it)
            from headwater.engine.startup import open_connector

            open_connector(self.connector, start)  # the database is first reached here
            self.connector.commit(start)  # Spark has committed `start`: the database may release it
            self._opened = True
            if self._available_now:
                self.connector.available_now = True
                self.connector.prepare_available_now()
            if self.observe_dir is not None:
                opened = write_reader_state(self.observe_dir, self.connector.captured_tables,
                                            self.connector.snapshot_due(start), self.connector.snapshot_scans(),
                                            self.connector.schema_snapshot_at_open(start))
                self._carrier = Carrier(self.observe_dir)
                if not self._carrier.acknowledged(opened):
                    log.warning("the pipeline's observer did not answer: its metrics and notifications may lag")

    def initialOffset(self) -> dict:
        return self.connector.initial_offset()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_events) if self.max_events else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        inner, _ = split(start)  # without the observer's notifications the last batch carried
        self._open(inner)
        max_events = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        end = self.connector.latest_offset(inner, max_events)
        if self._carrier is None:
            return start if end == inner else end
        from headwater.connectors.common.incremental import BLOCKING  # (the driver's: see _open)
        from headwater.connectors.common.phases import SNAPSHOT_COMPLETED, phase

        # the batch that ended at `inner` was the initial snapshot's last, or the one after a blocking snapshot's
        # last (its count makes COMPLETED or ABORTED): the observer's notifications of it come with the next batch
        left, self._blocking = self._blocking and not inner.get(BLOCKING), bool(inner.get(BLOCKING))
        return self._carrier.attach(start, end, wait=phase(inner) == SNAPSHOT_COMPLETED or left)

    def prepareForTriggerAvailableNow(self) -> None:
        # Spark calls this before the first latestOffset: what is available now is fixed once the
        # source is open, so that a database that cannot be reached fails as at any start
        self._available_now = True
        if self._opened:
            self.connector.available_now = True
            self.connector.prepare_available_now()

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        (start, _), (end, notes) = split(start), split(end)
        self._open(start)
        out: list[InputPartition] = []
        if notes:  # the observer's notifications first: they announce what the batches before did
            out.append(NotesPartition(0, str(connector_config(self.options)["notification.sink.topic.name"]),
                                      notes))
        if start != end:
            out += [UnitPartition(len(out) + i, u) for i, u in enumerate(self.connector.plan(start, end))]
        return out

    def read(self, partition: InputPartition) -> Iterator:
        yield from self._read(partition)
        settle()  # (Spark's worker collects garbage after each task: see headwater.spark.workergc)

    def _read(self, partition: InputPartition) -> Iterator:
        if isinstance(partition, NotesPartition):
            yield from self._rows(iter([partition.read()]))
            return
        assert isinstance(partition, UnitPartition)
        batches = partition.unit.read()
        facts = PartitionFacts() if self.observe_dir is not None else None
        if facts is not None:
            batches = facts.count(batches)
        yield from self._rows(self._transformed(batches))
        if facts is not None:
            if partition.unit.abandoned is not None:
                facts.abandoned(partition.unit.abandoned)
            row = facts.row(self.layout, partition.value)
            if row is not None:
                yield row

    @property
    def _json_options(self) -> JsonOptions:
        """Kafka JsonConverter's options the reader was given."""
        return JsonOptions(_flag(self.options, "schemas.enable", False),
                           _flag(self.options, "replace.null.with.default", True))

    def _transformed(self, batches: Iterator[Events]) -> Iterator[Events]:
        """The batches through the post processors and the transformation chain (when there are some)."""
        post, chain = self.post, self.chain
        if self.context_headers is not None and self.layout != "table":
            headers, options = self.context_headers, self._json_options
            batches = (headers.apply(batch, options) for batch in batches)
        if post is not None:
            batches = (post.apply(batch) for batch in batches if isinstance(batch, TypedEvents))
        if chain is not None:
            batches = (chain.apply(batch) for batch in batches if isinstance(batch, TypedEvents))
        return batches

    def _rows(self, batches: Iterator[Events]) -> Iterator[pa.RecordBatch]:
        """The batches as rows of the reader's layout."""
        if self.layout == "json":
            yield from self._json_rows(batches)
        elif self.layout == "blocks":
            yield from block_rows(batches)
        elif self.layout == "files":
            yield from self._written_rows(batches)
        else:
            yield from self._table_rows(batches)

    def _written_rows(self, batches: Iterator[Events]) -> Iterator[pa.RecordBatch]:
        """The partition's events written to the file sink's temporary files (see `headwater.spark.filesink`)."""
        from headwater.spark.sinks import file_writer

        writer = file_writer(self.options[SINK_OPTION])
        yield from written_rows(writer, partition_blocks(batches) if writer.takes_blocks
                                else self._json_rows(batches, writer.takes_pieces))

    def _json_rows(self, batches: Iterator[Events], pieces: bool = False) -> Iterator[pa.RecordBatch | PieceEvents]:
        """The events as JSON rows (`SPARK_SCHEMA_DDL`); with `pieces`, `PieceEvents` as they are."""
        options = self._json_options
        for batch in batches:
            if pieces and isinstance(batch, PieceEvents):
                yield batch
            else:
                yield (to_event_batch(batch, options) if isinstance(batch, TypedEvents) else batch).to_arrow()

    def _table_rows(self, batches: Iterator[Events]) -> Iterator[pa.RecordBatch]:
        """The row images of one table's events (see `headwater.spark.tables`)."""
        topic = self.options[TOPIC_OPTION]
        row = json.loads(self.options[ROW_SCHEMA_OPTION])
        columns, _ = spark_columns(row)
        replace_null = _flag(self.options, "replace.null.with.default", True)
        for batch in batches:
            assert isinstance(batch, TypedEvents)
            images = RowImages(row, True, columns, replace_null)
            for block in batch:
                if block.topic == topic:
                    images.add(block, ROW_OPS)
            yield from images.table().to_batches()

    def commit(self, end: dict) -> None:
        self.connector.commit(split(end)[0])

    def stop(self) -> None:
        self._close()


def block_rows(batches: Iterator[Events]) -> Iterator[pa.RecordBatch]:
    """Rows of `BLOCKS_SCHEMA_DDL`, one per typed block, `_order` counted across the batches."""
    seen = 0
    for batch in batches:
        assert isinstance(batch, TypedEvents)
        topics, blocks = [], []
        for block in batch:
            topics.append(block.topic)
            blocks.append(ipc_bytes(block, seen))
        seen += len(batch)
        if blocks:
            yield pa.RecordBatch.from_arrays([string_array(topics), binary_array(blocks)], names=["topic", "block"])
