"""Notifications (Debezium's `notification.enabled.channels`) of incremental snapshots.

A `Notification` is Debezium's: `id` (the execute-snapshot signal's), `aggregate_type`
(`Incremental Snapshot`), `type` (`STARTED`, `PAUSED`, `RESUMED`, `ABORTED`, `IN_PROGRESS`,
`TABLE_SCAN_COMPLETED`, `COMPLETED`), `additional_data` (strings) and `timestamp` (ms). Channels:

- `log`: each notification is logged (logger `headwater.notifications`, at INFO, shown by default);
- `sink`: each is a record on `notification.sink.topic.name`, with Debezium's key and value schemas
  (`io.debezium.connector.common.NotificationKey`, `...Notification`), written by the batch that
  made it: the notifications ride in that batch's offset, so a replayed batch writes the same ones.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

from headwater.connectors.base import WorkUnit
from headwater.connectors.common.records import RecordContext
from headwater.events.batch import Events
from headwater.events.connect import INT64, STRING, map_of, primitive, struct

log = logging.getLogger("headwater.notifications")

INCREMENTAL = "Incremental Snapshot"

KEY_SCHEMA = struct("io.debezium.connector.common.NotificationKey", [("id", primitive(STRING))], version=1)
VALUE_SCHEMA = struct("io.debezium.connector.common.Notification", [
    ("id", primitive(STRING)), ("type", primitive(STRING)), ("aggregate_type", primitive(STRING)),
    ("additional_data", map_of(primitive(STRING), primitive(STRING), optional=True)),
    ("timestamp", primitive(INT64))], version=1)


@dataclass(frozen=True)
class Notification:
    """One notification, with Debezium's field names (`timestamp`: ms since the epoch)."""

    id: str
    aggregate_type: str
    type: str
    additional_data: dict[str, str] = field(default_factory=dict)
    timestamp: int = 0

    def log_text(self) -> str:
        """The text Debezium's LogNotificationChannel writes."""
        data = ", ".join(f"{k}={v}" for k, v in self.additional_data.items())
        return (f"[Notification Service]  {{id='{self.id}', aggregateType='{self.aggregate_type}', "
                f"type='{self.type}', additionalData={{{data}}}, timestamp={self.timestamp}}}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Notifier:
    """Makes notifications and sends them to the log channel; collects those for the sink."""

    def __init__(self, channels: list[str] | None, connector_name: str):
        self.log = "log" in (channels or [])
        self.sink = "sink" in (channels or [])
        self.connector_name = connector_name
        self.pending: list[Notification] = []
        if self.log:
            log.setLevel(logging.INFO)

    def __call__(self, id_: str | None, type_: str, **data: str) -> None:
        if not (self.log or self.sink):
            return
        n = Notification(id_ or "", INCREMENTAL, type_, {"connector_name": self.connector_name, **data},
                         time.time_ns() // 1_000_000)
        if self.log:
            log.info("%s", n.log_text())
        if self.sink:
            self.pending.append(n)

    def take(self) -> list[dict[str, Any]]:
        out, self.pending = [n.to_dict() for n in self.pending], []
        return out


class NotificationUnit(WorkUnit):
    """The sink channel's records of a batch's notifications."""

    def __init__(self, topic: str, notifications: list[dict[str, Any]], ctx: RecordContext, version: int):
        self.topic, self.notifications, self.ctx, self.version = topic, notifications, ctx, version

    def read(self) -> Iterator[Events]:
        out = self.ctx.new_output()
        for n in self.notifications:
            out.record(self.topic, KEY_SCHEMA, {"id": n["id"]}, VALUE_SCHEMA, n, None, self.version,
                       n["timestamp"] * 1000)
        if len(out):
            yield out.take()
