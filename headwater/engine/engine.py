"""Debezium's embedded engine, in Python: a connector's events in this process, offsets in a file.

    engine = Engine(config, OffsetFile("state/offsets.json"))
    for batch in engine.batches(once=True):
        handle(batch)          # the batch's offset is stored, and the database told, when the
                               # next batch is asked for, i.e. after `handle` returned
    engine.close()

`events()` gives the events one at a time as JSON text rows; with `output="typed"` the connector
builds typed blocks (`events.typed`), which `blocks()` hands over as they are, and `events()`
writes as JSON (`events.formats.json`, with the engine's JsonConverter settings). The
connector's post processors (`post.processors`) and transformation chain (`transforms`,
`headwater.transforms`) run on every batch; the connector then builds typed blocks whatever the
output, and JSON output is written after it.

Work units run here, in order (snapshot chunks optionally on threads). The offset file is written
atomically after the caller has processed a batch, then the connector commits that offset to the
database, so a crash never loses a change; the batch in flight at the crash is delivered again.

The engine reports what it runs (`observe.observer`): Debezium's snapshot and streaming metrics,
kept in `<offset file>.metrics.json` (or `metrics_file`) after every batch and on the Prometheus
endpoint when `headwater.metrics.port` is set, and the initial snapshot's notifications, whose
`sink` channel records come in the batches, before the events they announce.

A connector that keeps a schema history (MySQL, MariaDB) keeps it beside the offset file
(`<offset file>.schema_history.jsonl`) unless its `headwater.schema.history.file` names another; one
that takes signals reads the command line's (`headwater signal`) from `<offset file>.signals.jsonl`.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import Offset, SourceConnector, WorkUnit
from headwater.connectors.common.context_headers import ContextHeaders
from headwater.connectors.common.phases import SNAPSHOT_COMPLETED, STREAMING, phase, position
from headwater.connectors.common.signals import with_cli_file
from headwater.connectors.history_file import with_history_file
from headwater.connectors.registry import create_source
from headwater.engine.startup import open_connector
from headwater.events.batch import Event, Events
from headwater.events.formats.json import JsonOptions, to_event_batch
from headwater.events.typed import TypedEvents
from headwater.observe.observer import Observer
from headwater.transforms.chain import parse_chain
from headwater.transforms.reselect import post_processors

log = logging.getLogger("headwater.engine")


class OffsetFile:
    """The last committed offset, as JSON, replaced atomically."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def load(self) -> Offset | None:
        try:
            return json.loads(self.path.read_text())["offset"]
        except FileNotFoundError:
            return None

    def store(self, offset: Offset) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump({"offset": offset}, f, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


class Engine:
    """Runs one connector in-process."""

    def __init__(self, config: ConnectorConfig, offsets: OffsetFile | None = None, *,
                 schemas_enable: bool = False, replace_null_with_default: bool = True,
                 max_events: int | None = None, connector: SourceConnector | None = None, output: str = "json",
                 metrics_file: Path | None = None):
        self.offsets = offsets
        self.max_events = max_events
        self.output = output
        self.json = JsonOptions(schemas_enable, replace_null_with_default)
        if offsets is not None:  # a schema history (binlog connectors) beside the offsets, unless named
            config = with_history_file(config, offsets.path.with_name(f"{offsets.path.name}.schema_history.jsonl"))
            config = with_cli_file(config, offsets.path.with_name(f"{offsets.path.name}.signals.jsonl"))
        self.config = config
        self.chain = parse_chain(config.transforms)
        self.post = post_processors(config)
        self.context_headers = ContextHeaders.start(config)  # this run's (a new run id per engine)
        self.transforms = self.chain is not None or self.post is not None
        self.connector = connector or create_source(config, parallelism=1, schemas_enable=schemas_enable,
                                                    replace_null_with_default=replace_null_with_default,
                                                    output="typed" if self.transforms else output)
        if metrics_file is None and offsets is not None:
            metrics_file = offsets.path.with_name(f"{offsets.path.name}.metrics.json")
        self.observer = Observer(config, metrics_file)
        self.stopping = threading.Event()
        self.offset: Offset | None = None

    def stop(self) -> None:
        self.stopping.set()

    def _commit(self, offset: Offset) -> None:
        if self.offsets is not None:
            self.offsets.store(offset)
        self.connector.commit(offset)
        self.offset = offset

    def batches(self, once: bool = False) -> Iterator[Events | TypedEvents]:
        """Event batches until stopped (or, with `once`, until what the source held at the start)."""
        connector = self.connector
        if self.offset is None:
            stored = self.offsets.load() if self.offsets is not None else None
            self.offset = stored if stored is not None else connector.initial_offset()
            open_connector(connector, self.offset, self.stopping)
            connector.commit(self.offset)
            self.observer.opened(connector.captured_tables, connector.snapshot_due(self.offset),
                                 connector.schema_snapshot_at_open(self.offset))
            yield from self._notifications()
        start = self.offset
        if once:
            connector.available_now = True
            connector.prepare_available_now()
        while not self.stopping.is_set():
            end = connector.latest_offset(start, self.max_events)
            if end == start:
                if once or connector.is_finished(start):
                    return
                continue
            snapshot = phase(end) != STREAMING  # a snapshot batch (or one of its batches: binlog chunks)
            if snapshot:
                yield from self._snapshot(connector.plan(start, end), last=phase(end) == SNAPSHOT_COMPLETED)
            else:
                blocking = self.observer.blocking(end)  # a blocking snapshot's batch is counted as a snapshot's
                yield from self._notifications()
                for unit in connector.plan(start, end):
                    for batch in unit.read():
                        self.observer.seen(batch, snapshot=blocking)
                        if blocking:
                            yield from self._notifications()
                        yield self._out(batch)
                    if blocking and unit.abandoned is not None:  # it met a query error: the snapshot is aborted
                        self.observer.scan_failed(unit.abandoned)
                        yield from self._notifications()
            self._commit(end)
            if not snapshot:
                self.observer.incremental(end)
            self.observer.committed(None if snapshot else position(end))
            start = end

    def _out(self, batch: Events) -> Events:
        """A batch as the engine yields it: with the run's context headers, through the post processors
        and the transformation chain when there are some (the metrics count the connector's events,
        before them)."""
        if self.context_headers is not None:
            batch = self.context_headers.apply(batch, self.json)
        if not self.transforms:
            return batch
        assert isinstance(batch, TypedEvents)
        out = self.post.apply(batch) if self.post is not None else batch  # post processors run first
        out = self.chain.apply(out) if self.chain is not None else out
        return out if self.output == "typed" else to_event_batch(out, self.json)

    def _snapshot(self, units: list[WorkUnit], last: bool) -> Iterator[Events | TypedEvents]:
        """A snapshot batch's events (`last`: the snapshot's last batch), with the initial snapshot's
        notifications and metrics."""
        if not self.observer.snapshot_running:
            self.observer.snapshot_started(self.connector.captured_tables, scans=self.connector.snapshot_scans())
        finished = False
        try:
            yield from self._notifications()
            for unit in units:
                for batch in unit.read():
                    self.observer.seen(batch, snapshot=True)
                    yield from self._notifications()
                    yield self._out(batch)
            if last:
                self.observer.snapshot_finished()
                yield from self._notifications()
            finished = True
        finally:
            if not finished:
                self.observer.snapshot_aborted()

    def _notifications(self) -> Iterator[Events | TypedEvents]:
        """The notification records of the `sink` channel, as this engine's batches are."""
        records = self.observer.take_records()
        if records is not None:
            yield records if self.output == "typed" else to_event_batch(records, self.json)

    def blocks(self, once: bool = False) -> Iterator[TypedEvents]:
        """Batches of typed blocks (an engine made with `output="typed"`)."""
        if self.output != "typed":
            raise ValueError('Engine.blocks() needs an engine made with output="typed"')
        for batch in self.batches(once):
            assert isinstance(batch, TypedEvents)
            yield batch

    def events(self, once: bool = False) -> Iterator[Event]:
        """The events one at a time, as JSON text rows."""
        for batch in self.batches(once):
            yield from (to_event_batch(batch, self.json) if isinstance(batch, TypedEvents) else batch).rows()

    def status(self) -> dict[str, Any]:
        return self.connector.status(self.offset)

    def close(self) -> None:
        self.observer.close()
        self.connector.close()
