"""What every connector's ad hoc snapshots (incremental and blocking) share besides the algorithm itself
(`common.incremental`): which captured tables a signal names, the key a table's chunks follow, the
watermark rows' data, and the configuration a blocking snapshot reads its tables with.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Sequence
from typing import Any

from headwater.config.properties import ConnectorConfig
from headwater.connectors.common.filters import matches_any
from headwater.connectors.common.incremental import Collection, TableSkipped
from headwater.connectors.common.snapshot import snapshot_order


def choose_collections(names: Sequence[str], patterns: Sequence[str], signal_table: str | None,
                       include: Sequence[str] | None) -> list[str]:
    """The captured tables (`names`, `schema.table`) an execute-snapshot's `data-collections` regexes
    match, in the initial snapshot's order (`table.include.list`'s, then by name), never the
    signalling table."""
    chosen = [n for n in names if matches_any(list(patterns), n) and n != signal_table]
    return sorted(chosen, key=lambda n: snapshot_order(n, include))


def chunk_key(collection: Collection, columns: Sequence[str], primary_key: Sequence[str]) -> list[str] | None:
    """The columns a table's chunks are ordered by: the signal's surrogate-key (one of `columns`), else
    the primary key; None when it has neither."""
    if collection.surrogate_key:
        if collection.surrogate_key not in columns:
            raise TableSkipped(f"surrogate-key {collection.surrogate_key!r} is not one of its columns")
        return [collection.surrogate_key]
    return list(primary_key) if primary_key else None


def window_timestamp() -> str:
    """The time now as Debezium writes it in a watermark's data (an ISO instant in UTC)."""
    return dt.datetime.now(dt.UTC).isoformat().replace("+00:00", "Z")


def open_data() -> dict[str, str]:
    """The data of an open watermark (`snapshot-window-open`)."""
    return {"openWindowTimestamp": window_timestamp()}


def close_data(opened: dict[str, str]) -> dict[str, str]:
    """The data of the close watermark (`snapshot-window-close`) of the window opened with `opened`."""
    return {**opened, "closeWindowTimestamp": window_timestamp()}


def blocking_config(config: ConnectorConfig, tables: Sequence[str], statements: dict[str, str]) -> ConnectorConfig:
    """`config` as a blocking snapshot reads with it: only `tables` (`schema.table`), each read by its
    SELECT in `statements` when it has one (as `snapshot.select.statement.overrides` would)."""
    return dataclasses.replace(
        config, values={**config.values, "snapshot.include.collection.list": [re.escape(t) for t in tables],
                        "snapshot.select.statement.overrides": list(statements)},
        extra={**config.extra, **{f"snapshot.select.statement.overrides.{t}": q for t, q in statements.items()}})


def key_text(values: Sequence[Any]) -> list[Any]:
    """A chunk key's values as the offsets keep them (JSON): bytes as `{"hex": ...}`."""
    return [{"hex": v.hex()} if isinstance(v, bytes | bytearray) else v for v in values]


def key_values(stored: Sequence[Any]) -> list[Any]:
    """A key kept by `key_text`, as the database takes it as a parameter."""
    return [bytes.fromhex(v["hex"]) if isinstance(v, dict) and "hex" in v else v for v in stored]
