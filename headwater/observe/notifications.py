"""Debezium's notifications (`notification.enabled.channels`): the record, its channels, its schemas.

A `Notification` has Debezium's fields (`id`, `aggregate_type`, `type`, `additional_data`,
`timestamp`). `Notifier.notify` sends one to the configured channels:

- `log`: one INFO line on the `headwater.notifications` logger, as Debezium's LogNotificationChannel
  writes it (`[Notification Service]  {id='…', aggregateType='…', …}`);
- `sink`: a record on the topic `notification.sink.topic.name`, with Debezium's key and value
  schemas (`io.debezium.connector.common.NotificationKey` / `.Notification`), handed over with the
  next batch (`take_records`; `take_notifications` for a runner that makes the records elsewhere:
  `records` makes them).

Every notification is also kept in `recent` (the last `RECENT` of them) for `headwater status`.
`initial_snapshot` and `incremental_snapshot` build the two aggregate types' notifications; the
incremental snapshot (signals) calls `incremental_snapshot(signal_id, kind, {"data_collections": …,
…})` with Debezium's additional-data names.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import deque
from collections.abc import Mapping

from headwater.config.properties import ConnectorConfig
from headwater.connectors.common import notifications as common
from headwater.connectors.common.notifications import Notification
from headwater.events.typed import BlockBuilder, TypedEvents

log = logging.getLogger("headwater.notifications")

INITIAL_SNAPSHOT = "Initial Snapshot"
INCREMENTAL_SNAPSHOT = "Incremental Snapshot"

INITIAL_STATUSES = ("STARTED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "COMPLETED", "ABORTED", "SKIPPED")
INCREMENTAL_STATUSES = ("STARTED", "PAUSED", "RESUMED", "ABORTED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED",
                        "COMPLETED")
CHANNELS = ("log", "sink")
RECENT = 20

KEY_SCHEMA = common.KEY_SCHEMA.to_json()
VALUE_SCHEMA = common.VALUE_SCHEMA.to_json()


def records(topic: str, notes: list[Notification]) -> TypedEvents:
    """The `sink` channel's records of `notes` on `topic`, with Debezium's key and value schemas."""
    b = BlockBuilder()
    for n in notes:
        b.add(topic, KEY_SCHEMA, {"id": n.id}, VALUE_SCHEMA, n.to_dict(), None, 0, n.timestamp * 1000)
    return b.take()


class Notifier:
    """Sends notifications to the channels of `notification.enabled.channels` (none: only `recent`)."""

    def __init__(self, config: ConnectorConfig):
        self.channels: list[str] = list(config.get("notification.enabled.channels") or [])
        self.topic: str | None = config.get("notification.sink.topic.name")
        self.connector_name: str = config["topic.prefix"]
        self.recent: deque[Notification] = deque(maxlen=RECENT)
        self._sink: list[Notification] = []
        if "log" in self.channels:
            log.setLevel(logging.INFO)

    def notify(self, n: Notification) -> None:
        self.recent.append(n)
        if "log" in self.channels:
            log.info("%s", n.log_text())
        if "sink" in self.channels and self.topic is not None:
            self._sink.append(n)

    def take_notifications(self) -> list[Notification]:
        """The notifications for the `sink` channel since the last call."""
        out, self._sink = self._sink, []
        return out

    def take_records(self) -> TypedEvents | None:
        """The `sink` channel's records since the last call, or None when there are none."""
        notes = self.take_notifications()
        return records(str(self.topic), notes) if notes else None

    def initial_snapshot(self, kind: str, data: Mapping[str, str] | None = None) -> Notification:
        """Send an `Initial Snapshot` notification of type `kind`, with `connector_name` and `data` as
        additional data."""
        if kind not in INITIAL_STATUSES:
            raise ValueError(f"{kind!r} is not an initial-snapshot status ({', '.join(INITIAL_STATUSES)})")
        n = Notification(str(uuid.uuid4()), INITIAL_SNAPSHOT, kind,
                         {"connector_name": self.connector_name, **(data or {})}, int(time.time() * 1000))
        self.notify(n)
        return n

    def incremental_snapshot(self, signal_id: str, kind: str, data: Mapping[str, str] | None = None) -> Notification:
        """Send an `Incremental Snapshot` notification of type `kind`: its id is the `execute-snapshot`
        signal's id; `data` holds Debezium's additional data for `kind` (`data_collections`,
        `current_collection_in_progress`, `maximum_key`, `last_processed_key`, `data_collection`,
        `scanned_collection`, `total_rows_scanned`, `status`); `connector_name` is added."""
        if kind not in INCREMENTAL_STATUSES:
            raise ValueError(f"{kind!r} is not an incremental-snapshot status ({', '.join(INCREMENTAL_STATUSES)})")
        n = Notification(signal_id, INCREMENTAL_SNAPSHOT, kind,
                         {"connector_name": self.connector_name, **(data or {})}, int(time.time() * 1000))
        self.notify(n)
        return n
