"""`Observer.blocking` without a database: the notifications and snapshot metrics of a blocking snapshot from
the offsets of the streaming batches (what the engine and the Spark observer hand it), for a snapshot
abandoned before its first batch, one abandoned at a table after others were read, and one carried over a
restart of the observer (Spark's state in the metrics file)."""

from __future__ import annotations

from typing import Any

from headwater.connectors.common import incremental as inc
from headwater.connectors.registry import validate_connector
from headwater.observe.facts import BatchFacts
from headwater.observe.metrics import read_file
from headwater.observe.observer import Observer

SIGNAL = {"id": "b1", "tables": ["public.a", "public.b"], "statements": {}}


def _observer() -> Observer:
    return Observer(validate_connector({"connector.class": "postgres", "database.hostname": "h", "database.user": "u",
                                        "database.dbname": "d", "topic.prefix": "p",
                                        "notification.enabled.channels": "log"}))


def _kinds(o: Observer) -> list[tuple[str, dict[str, str]]]:
    return [(n.type, {k: v for k, v in n.additional_data.items() if k != "connector_name"}) for n in o.notifier.recent]


def _rows(table: str, n: int, last: bool) -> BatchFacts:
    """The facts of `n` snapshot rows of `table` (the last one marked the table's last when `last`)."""
    return BatchFacts(ops={"r": n}, topics=[(0, f"p.{table}", table, n)],
                      table_ends=[(n - 1, table)] if last else [], size=n)


def test_abandoned_before_its_first_batch():
    o = _observer()
    stream: dict[str, Any] = {"snapshot": "streaming", "lsn": 5}
    assert o.blocking({**stream, inc.BLOCKING_PENDING: SIGNAL}) is False  # signalled: nothing yet
    assert o.blocking({**stream, inc.BLOCKING_ABANDONED: {"id": "b1", "tables": SIGNAL["tables"],
                                                         "table": "public.b"}}) is False
    assert _kinds(o) == [("STARTED", {}),
                         ("IN_PROGRESS", {"current_collection_in_progress": "public.b",
                                          "data_collections": "public.a,public.b"}),
                         ("TABLE_SCAN_COMPLETED", {"scanned_collection": "public.b", "status": "SQL_EXCEPTION"}),
                         ("ABORTED", {})]
    snapshot = o.metrics.values()["snapshot"]
    assert snapshot["SnapshotAborted"] is True and snapshot["SnapshotRunning"] is False
    assert o.blocking(stream) is False and len(o.notifier.recent) == 4  # the next batch: nothing more


def test_abandoned_with_no_table_named_after_a_table_was_read():
    o = _observer()
    assert o.blocking({"lsn": 5, inc.BLOCKING: {**SIGNAL, "chunk_range": [0, 2]}}) is True
    o.seen_facts(_rows("public.a", 3, last=True), snapshot=True)
    assert o.metrics.values()["snapshot"]["SnapshotRunning"] is True
    assert o.blocking({"lsn": 5, inc.BLOCKING_ABANDONED: {"id": "b1", "tables": SIGNAL["tables"]}}) is False
    assert [k for k, _ in _kinds(o)] == ["STARTED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "ABORTED"]
    assert _kinds(o)[2][1]["total_rows_scanned"] == "3"


def test_completed_after_batches_and_a_restart_of_the_observer(tmp_path):
    o = _observer()
    running = {"lsn": 5, inc.BLOCKING: {**SIGNAL, "chunk_range": [0, 2]}}
    assert o.blocking(running) is True
    o.seen_facts(_rows("public.a", 2, last=True), snapshot=True)
    again = _observer()  # Spark's observer of the next run, from the metrics file's state
    o.metrics.write_file(tmp_path / "metrics.json", [n.to_dict() for n in o.notifier.recent])
    doc = read_file(tmp_path / "metrics.json")
    assert doc is not None
    again.restore(doc, o.state())
    assert again.blocking({**running, inc.BLOCKING: {**SIGNAL, "chunk_range": [2, 3]}}) is True  # the same snapshot
    again.seen_facts(_rows("public.b", 1, last=True), snapshot=True)
    assert again.blocking({"lsn": 9}) is False
    assert [k for k, _ in _kinds(again)] == ["STARTED", "IN_PROGRESS", "TABLE_SCAN_COMPLETED", "IN_PROGRESS",
                                            "TABLE_SCAN_COMPLETED", "COMPLETED"]
    snapshot = again.metrics.values()["snapshot"]
    assert snapshot["SnapshotCompleted"] is True and snapshot["RowsScanned"] == {"public.a": 2, "public.b": 1}


def test_the_snapshot_metrics_count_a_blocking_snapshot_on_top_of_the_initial_ones():
    """As Debezium's meter, which a blocking snapshot does not reset: the tables of both snapshots, the other
    tables' rows kept, a table read again counted from zero."""
    o = _observer()
    o.opened(["public.x", "public.a"], snapshot_due=True)
    o.snapshot_started(["public.x", "public.a"])
    o.seen_facts(_rows("public.x", 4, last=True), snapshot=True)
    o.seen_facts(_rows("public.a", 2, last=True), snapshot=True)
    o.snapshot_finished()
    assert o.blocking({"lsn": 5, inc.BLOCKING: {**SIGNAL, "chunk_range": [0, 1]}}) is True
    snapshot = o.metrics.values()["snapshot"]
    assert snapshot["SnapshotRunning"] is True and snapshot["RemainingTableCount"] == 2
    assert snapshot["TotalTableCount"] == 3 and snapshot["CapturedTables"] == ["public.x", "public.a", "public.b"]
    o.seen_facts(_rows("public.a", 3, last=True), snapshot=True)
    o.seen_facts(_rows("public.b", 1, last=True), snapshot=True)
    o.blocking({"lsn": 6})
    snapshot = o.metrics.values()["snapshot"]
    assert snapshot["RowsScanned"] == {"public.x": 4, "public.a": 3, "public.b": 1}
    assert snapshot["RemainingTableCount"] == 0 and snapshot["SnapshotCompleted"] is True
