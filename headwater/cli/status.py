"""The metrics part of `headwater status`: the lines shown from a pipeline's metrics file.

The file (`observe.metrics`) holds the last values the running pipeline wrote; a stopped pipeline
shows those, with how long ago they were written. Shown: the snapshot's state and rows per table,
the streaming counters under Debezium's names, and the last notifications.
"""

from __future__ import annotations

import time
from typing import Any

SNAPSHOT_SHOWN = ("SnapshotRunning", "SnapshotCompleted", "SnapshotAborted", "SnapshotPaused",
                  "SnapshotDurationInSeconds", "TotalTableCount", "RemainingTableCount", "TotalNumberOfEventsSeen",
                  "ChunkId", "ChunkFrom", "ChunkTo", "TableFrom", "TableTo")
STREAMING_SHOWN = ("Connected", "TotalNumberOfEventsSeen", "TotalNumberOfCreateEventsSeen",
                   "TotalNumberOfUpdateEventsSeen", "TotalNumberOfDeleteEventsSeen", "NumberOfEventsFiltered",
                   "NumberOfCommittedTransactions", "LastTransactionId", "MilliSecondsBehindSource",
                   "MilliSecondsSinceLastEvent", "LastEvent", "SourceEventPosition")
NOTIFICATIONS_SHOWN = 5


def metrics_lines(doc: dict[str, Any]) -> list[str]:
    """The lines `headwater status` prints for the metrics file `doc`."""
    age = max(0.0, time.time() - doc["written_ms"] / 1000)
    lines = [f"metrics (written {age:,.0f} s ago):", "  snapshot:"]
    snap, stream = doc["snapshot"], doc["streaming"]
    lines += [f"    {name}: {snap[name]}" for name in SNAPSHOT_SHOWN if snap.get(name) not in ("", None)]
    lines += [f"    RowsScanned {table}: {rows}" for table, rows in sorted(snap["RowsScanned"].items())]
    lines.append("  streaming:")
    lines += [f"    {name}: {stream[name]}" for name in STREAMING_SHOWN if stream.get(name) not in ("", None)]
    recent = doc.get("notifications") or []
    if recent:
        lines.append("last notifications:")
        for n in recent[-NOTIFICATIONS_SHOWN:]:
            data = ", ".join(f"{k}={v}" for k, v in n["additional_data"].items() if k != "connector_name")
            at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(n["timestamp"] / 1000))
            lines.append(f"  {at} UTC {n['aggregate_type']} {n['type']}" + (f" ({data})" if data else ""))
    return lines
