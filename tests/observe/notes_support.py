"""The notification records of Debezium's recordings (tests/data/notifications) and of headwater's output,
made comparable: without what differs in every run (each record's id and time)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from headwater.events.batch import Event

DATA = Path(__file__).resolve().parent.parent / "data" / "notifications"
TOPIC = "io.debezium.notification"


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A notification record without what differs in every run (its id and time)."""
    key, value = record["key"], record["value"]
    payload = {k: v for k, v in value["payload"].items() if k not in ("id", "timestamp")}
    assert key["payload"]["id"] == value["payload"]["id"]
    assert isinstance(value["payload"]["timestamp"], int)
    return {"topic": record["topic"], "key_schema": key["schema"], "value_schema": value["schema"], "payload": payload}


def recorded(name: str) -> list[dict[str, Any]]:
    """Every record of a recording, as {topic, key, value} (key and value parsed)."""
    return [json.loads(line) for line in (DATA / name).read_text().splitlines()]


def golden(name: str) -> list[dict[str, Any]]:
    """The comparable notification records of a recording."""
    return [comparable(r) for r in recorded(name) if r["topic"] == TOPIC]


def as_records(events: list[Event]) -> list[dict[str, Any]]:
    """headwater's events as a recording's records."""
    return [{"topic": e.topic, "key": json.loads(e.key or "null"), "value": json.loads(e.value or "null")}
            for e in events]


def renamed(notes: list[dict[str, Any]], names: dict[str, str]) -> list[dict[str, Any]]:
    """Notifications with the tables' names (and row counts) in their additional data replaced."""
    def one(v: str) -> str:
        return ",".join(names.get(p, p) for p in v.split(","))

    return [{**n, "payload": {**n["payload"], "additional_data": {
        k: one(v) for k, v in n["payload"]["additional_data"].items()}}} for n in notes]
