"""Signals (Debezium's signalling): their properties, parsing, and the file channels.

A signal is `(id, type, data)`: `data` a JSON object (or nothing). Channels, as Debezium names
them in `signal.enabled.channels`:

- `source`: rows inserted into the signalling table `signal.data.collection` (columns id, type,
  data, in that order); they arrive through the change log and are acted on in log order, by the
  connector's stream scan (`connectors.common.incremental`);
- `file`: one JSON object per line (`{"id": ..., "type": ..., "data": {...}}`) in `signal.file`,
  read every `signal.poll.interval.ms`. The byte position up to which a file was read is kept in
  the offsets, so a line acted on is never acted on again after a restart, and a line is acted on
  only once the batch that read it is committed;
- the command line (`headwater signal CONFIG TYPE --data JSON`) appends such a line to a file
  beside the offsets (`headwater.signal.cli.file`, set by `headwater run` and the engine), read as
  the file channel is, whatever `signal.enabled.channels` says.

A malformed signal raises `BadSignal` with the reason; the caller logs it and goes on.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from headwater.config.errors import ConfigError
from headwater.config.properties import ConnectorConfig, Property, prop
from headwater.connectors.common.filters import matches_any

log = logging.getLogger("headwater.signals")

EXECUTE_SNAPSHOT = "execute-snapshot"
STOP_SNAPSHOT = "stop-snapshot"
PAUSE_SNAPSHOT = "pause-snapshot"
RESUME_SNAPSHOT = "resume-snapshot"
LOG = "log"
SIGNAL_TYPES = (EXECUTE_SNAPSHOT, STOP_SNAPSHOT, PAUSE_SNAPSHOT, RESUME_SNAPSHOT, LOG)
WINDOW_OPEN = "snapshot-window-open"  # the watermark rows headwater writes to the signalling table
WINDOW_CLOSE = "snapshot-window-close"

CHANNELS = ("source", "file")
CLI_FILE = "headwater.signal.cli.file"
CLI_FILE_NAME = "signals.jsonl"
READ_ONLY = "headwater.incremental.snapshot.read.only"
DEBEZIUM_READ_ONLY = "read.only"  # Debezium's name of the same mode (its read-only incremental snapshots)
BATCH_ROWS = "headwater.incremental.snapshot.batch.rows"  # the most rows one batch of an incremental snapshot reads

PROPERTIES: list[Property] = [
    prop("signal.data.collection", doc="the signalling table, <schema>.<table> (columns id, type, data)"),
    prop("signal.enabled.channels", "list", "source", allowed=CHANNELS),
    prop("signal.file", default="file-signals.txt", doc="the file channel's file: one JSON signal per line"),
    prop("signal.poll.interval.ms", "int", 5000, minimum=0),
    prop("incremental.snapshot.chunk.size", "int", 1024, minimum=1),
    prop("incremental.snapshot.watermarking.strategy", "enum", "insert_insert", ("insert_insert", "insert_delete")),
    prop(READ_ONLY, "boolean", False,
         doc="incremental snapshots write nothing to the database: a streamed change supersedes a chunk row when "
             "the chunk's SELECT did not see it (PostgreSQL: pg_current_snapshot(); MariaDB: the binlog position "
             "of the SELECT's consistent snapshot; MySQL: the executed GTID set read before it)"),
    prop(DEBEZIUM_READ_ONLY, "boolean", False, doc=f"Debezium's name of {READ_ONLY} (either sets it)"),
    prop(BATCH_ROWS, "int", 400_000, minimum=1,
         doc="the most rows one batch (a Spark micro-batch) of an incremental snapshot reads: whole chunks of "
             "incremental.snapshot.chunk.size rows, at least one, read side by side by Spark's executors "
             "(maxEventsPerTrigger lowers it; incremental.snapshot.chunk.size reads one chunk a batch, as Debezium)"),
    prop(CLI_FILE, doc="the file `headwater signal` appends to (set by headwater run and the engine)"),
]

_TABLE = re.compile(r'^("[^"]+"|[^."]+)\.("[^"]+"|[^."]+)$')


def check_properties(values: dict[str, Any], errors: list[ConfigError]) -> None:
    """Checks of the signal properties beyond their types."""
    table = values.get("signal.data.collection")
    if table is not None and not _TABLE.match(table):
        errors.append(ConfigError("signal.data.collection", f"{table!r} is not <schema>.<table>",
                                  "for example public.debezium_signal (quote a part that holds a dot)"))
    ours, theirs = values.get(READ_ONLY), values.get(DEBEZIUM_READ_ONLY)
    if ours is not None and theirs is not None and ours != theirs:
        errors.append(ConfigError(READ_ONLY, f"is {str(ours).lower()} but {DEBEZIUM_READ_ONLY} is "
                                  f"{str(theirs).lower()}: they name one setting",
                                  f"set one of them (Debezium's name is {DEBEZIUM_READ_ONLY})"))


def read_only(config: ConnectorConfig) -> bool:
    """Whether incremental snapshots write nothing (`headwater.incremental.snapshot.read.only`, or
    Debezium's `read.only`)."""
    return bool(config.get(READ_ONLY) or config.get(DEBEZIUM_READ_ONLY))


def split_table(name: str) -> tuple[str, str]:
    """`schema.table` (each part optionally double-quoted) as its two parts."""
    m = _TABLE.match(name)
    if not m:
        raise ValueError(f"{name!r} is not <schema>.<table>")
    return m.group(1).strip('"'), m.group(2).strip('"')


def with_cli_file(config: ConnectorConfig, path: str | Path) -> ConnectorConfig:
    """`config` reading the command line's signals from `path`, when its connector takes signals and
    the user named no file."""
    if CLI_FILE not in config.definitions or config.get(CLI_FILE):
        return config
    return dataclasses.replace(config, values={**config.values, CLI_FILE: str(path)})


def with_signal_table(config: ConnectorConfig, schema_list: str | None = None) -> ConnectorConfig:
    """`config` capturing the signalling table too, as Debezium does (its rows are change events
    like any other table's) when `table.include.list` (or the schema include list `schema_list`, the
    binlog connectors' `database.include.list`) would leave it out."""
    table = config.get("signal.data.collection")
    if not table:
        return config
    schema, _ = split_table(table)
    name = ".".join(split_table(table))
    values = dict(config.values)
    include = config.get("table.include.list")
    if include and not matches_any(include, name):
        values["table.include.list"] = [*include, re.escape(name)]
    if schema_list:
        schemas = config.get(schema_list)
        if schemas and not matches_any(schemas, schema):
            values[schema_list] = [*schemas, re.escape(schema)]
    return config if values == config.values else dataclasses.replace(config, values=values)


def cli_file(config: ConnectorConfig, checkpoint: str | Path) -> Path | None:
    """Where `headwater signal` leaves signals for a pipeline whose offsets are in `checkpoint`;
    None when its connector takes no signals."""
    if CLI_FILE not in config.definitions:
        return None
    return Path(config.get(CLI_FILE) or Path(checkpoint) / CLI_FILE_NAME)


class BadSignal(ValueError):
    """A signal that cannot be acted on; the message says why."""


@dataclass(frozen=True)
class Signal:
    """One signal, checked."""

    id: str
    type: str
    data: dict[str, Any] = field(default_factory=dict)
    channel: str = "source"

    def describe(self) -> str:
        return f"signal {self.id!r} ({self.type}, from the {self.channel} channel)"


def parse_signal(id_: Any, type_: Any, data: Any, channel: str) -> Signal:
    """A checked signal from its three fields (`data` JSON text, a dict, or None)."""
    if not isinstance(id_, str) or not id_:
        raise BadSignal("its id is missing")
    if type_ not in SIGNAL_TYPES:
        raise BadSignal(f"type {type_!r} is not one of {', '.join(SIGNAL_TYPES)}")
    if data is None or data == "":
        parsed: Any = {}
    elif isinstance(data, str):
        try:
            parsed = json.loads(data)
        except json.JSONDecodeError as exc:
            raise BadSignal(f"its data is not JSON: {exc}") from None
    else:
        parsed = data
    if not isinstance(parsed, dict):
        raise BadSignal(f"its data must be a JSON object, got {type(parsed).__name__}")
    signal = Signal(id_, type_, parsed, channel)
    _check(signal)
    return signal


def _regexes(value: Any, what: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadSignal(f"{what} must be an array of strings")
    for v in value:
        try:
            re.compile(v)
        except re.error as exc:
            raise BadSignal(f"{what}: {v!r} is not a regular expression: {exc}") from None
    return value


def _check(s: Signal) -> None:
    d = s.data
    if s.type == EXECUTE_SNAPSHOT:
        if "data-collections" not in d:
            raise BadSignal("execute-snapshot needs data-collections")
        _regexes(d["data-collections"], "data-collections")
        kind = str(d.get("type", "incremental")).lower()
        if kind not in ("incremental", "blocking"):
            raise BadSignal(f"snapshot type {d.get('type')!r} is not incremental or blocking")
        conds = d.get("additional-conditions")
        if conds is not None:
            for c in conds if isinstance(conds, list) else [conds]:
                if not isinstance(c, dict) or not isinstance(c.get("data-collection"), str) \
                        or not isinstance(c.get("filter"), str):
                    raise BadSignal("each additional-conditions entry needs data-collection and filter strings")
        if d.get("additional-condition") is not None and not isinstance(d["additional-condition"], str):
            raise BadSignal("additional-condition must be a string")
        if d.get("surrogate-key") is not None and not isinstance(d["surrogate-key"], str):
            raise BadSignal("surrogate-key must be a column name")
    elif s.type == STOP_SNAPSHOT:
        if "type" not in d:
            raise BadSignal("stop-snapshot needs data.type (incremental)")
        if str(d["type"]).lower() != "incremental":
            raise BadSignal(f"stop-snapshot of type {d['type']!r}: only incremental snapshots can be stopped")
        if d.get("data-collections") is not None:
            _regexes(d["data-collections"], "data-collections")
    elif s.type == LOG and not isinstance(d.get("message"), str):
        raise BadSignal("a log signal needs data.message")


def parse_line(line: str, channel: str) -> Signal:
    """A signal from one line of a signal file."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise BadSignal(f"the line is not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise BadSignal("the line is not a JSON object")
    return parse_signal(obj.get("id"), obj.get("type"), obj.get("data"), channel)


def read_file(path: Path, pos: int, channel: str) -> Iterator[tuple[Signal | None, int]]:
    """The signals in the complete lines of `path` after byte `pos`, each with the position after
    its line (None for a line that is blank or malformed: that is logged). A file shorter than `pos`
    was replaced: it is read from its start."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    if size < pos:
        log.warning("signal file %s is shorter than the position read (%d bytes): reading it from its start",
                    path, pos)
        pos = 0
    with open(path, "rb") as f:
        f.seek(pos)
        for raw in f:
            if not raw.endswith(b"\n"):
                return  # a line still being written
            pos += len(raw)
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                yield None, pos
                continue
            try:
                yield parse_line(line, channel), pos
            except BadSignal as exc:
                log.warning("skipping a malformed signal in %s: %s (%s)", path, exc, line[:200])
                yield None, pos


def append_signal(path: Path, type_: str, data: dict[str, Any] | None, id_: str | None = None) -> Signal:
    """Check a signal and append it to the signal file `path` (durably), for a running or stopped pipeline."""
    signal = parse_signal(id_ or str(uuid.uuid4()), type_, data or {}, "file")
    path.parent.mkdir(parents=True, exist_ok=True)
    line = json.dumps({"id": signal.id, "type": signal.type, "data": signal.data}) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())
    return signal
