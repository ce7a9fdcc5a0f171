"""Test helpers for batches of events: the JSON rows of a batch made with JSON output."""

from __future__ import annotations

from collections.abc import Iterator

from headwater.events.batch import Event, Events
from headwater.events.typed import TypedEvents


def json_rows(batch: Events) -> Iterator[Event]:
    """The events of a batch a JSON-output connector made (typed blocks are not rows)."""
    assert not isinstance(batch, TypedEvents), "a JSON-output batch was expected, got typed blocks"
    return batch.rows()


RUN_ID_HEADER = "__debezium.context.runId"


def any_run(headers: list[tuple[str, str]] | None) -> list[tuple[str, str]] | None:
    """An event's headers with the run id's value (different in every engine; Debezium 3's context
    headers) replaced by one stand-in, for comparing the events of two engines."""
    return None if headers is None else [(k, "<run id>" if k == RUN_ID_HEADER else v) for k, v in headers]
