"""Test helpers for batches of events: the JSON rows of a batch made with JSON output."""

from __future__ import annotations

from collections.abc import Iterator

from headwater.events.batch import Event, Events
from headwater.events.typed import TypedEvents


def json_rows(batch: Events) -> Iterator[Event]:
    """The events of a batch a JSON-output connector made (typed blocks are not rows)."""
    assert not isinstance(batch, TypedEvents), "a JSON-output batch was expected, got typed blocks"
    return batch.rows()
