"""`snapshot.mode` `never`, `always`, `recovery` and `configuration_based` on a real MariaDB, through the
engine (`initial` and `no_data` are golden scenarios, `initial_only` is in test_snapshot.py, `when_needed`
in test_faults.py).

- `never`: no snapshot; the first start reads the binlog from its oldest file, so the rows written before
  it arrive as the creates (and updates) that made them, the table's DDL from the binlog;
- `always`: every start snapshots again (its epoch counts up) and streams from that snapshot on;
- `recovery`: a restart rebuilds a lost or broken schema history from the tables as they are, then
  streams on from the stored offset without reading rows;
- `configuration_based`: each of its properties (Debezium's ConfigurationBasedSnapshotter: data at every
  start when asked; the schema only; neither; no stream; a new snapshot on a lost position).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from headwater.connectors.errors import PositionLost
from headwater.connectors.registry import validate_connector
from headwater.devservers.mariadb import MariaDBServer
from headwater.engine import Engine, OffsetFile
from tests.connectors.mariadb.test_faults import purge


def properties(server: MariaDBServer, db: str, **extra: str) -> dict[str, Any]:
    return {"connector.class": "mariadb", **server.connector_properties(db), "database.server.id": "5406",
            "topic.prefix": "m", **{k.replace("__", "."): v for k, v in extra.items()}}


def run(props: dict[str, Any], offsets: Path) -> list[dict[str, Any]]:
    """The values of one `once` run of a new engine (a start of headwater) from `offsets`."""
    engine = Engine(validate_connector(props), OffsetFile(offsets))
    try:
        return [e.value_json() for e in engine.events(once=True) if e.value is not None]
    finally:
        engine.close()


def data(values: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """(op, the row after, or the key before for a delete) of the data events."""
    return [(v["op"], v["after"] if v["after"] is not None else v["before"]["id"]) for v in values if "op" in v]


@pytest.fixture
def table(mariadb_server, mariadb_db):
    mariadb_server.execute("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20));"
                           "INSERT INTO t VALUES (1, 'a'), (2, 'b'); UPDATE t SET v = 'b2' WHERE id = 2", mariadb_db)
    return mariadb_db


def test_never_reads_the_binlog_from_its_start(mariadb_server, table, tmp_path):
    props = properties(mariadb_server, table, snapshot__mode="never")
    first = run(props, tmp_path / "o.json")
    assert data(first) == [("c", {"id": 1, "v": "a"}), ("c", {"id": 2, "v": "b"}), ("u", {"id": 2, "v": "b2"})]
    ddl = [v["ddl"] for v in first if "ddl" in v]
    assert any(d.startswith("CREATE TABLE t") for d in ddl)  # the table's DDL came from the binlog
    assert all(v["source"]["snapshot"] == "false" for v in first if "op" in v)
    mariadb_server.execute("DELETE FROM t WHERE id = 1", table)
    assert data(run(props, tmp_path / "o.json")) == [("d", 1)]  # and a restart goes on from the stored position


def test_always_snapshots_again_at_every_start(mariadb_server, table, tmp_path):
    offsets = tmp_path / "o.json"
    props = properties(mariadb_server, table, snapshot__mode="always", include__schema__changes="false")
    first = run(props, offsets)
    assert data(first) == [("r", {"id": 1, "v": "a"}), ("r", {"id": 2, "v": "b2"})]
    epoch = OffsetFile(offsets).load()["epoch"]  # type: ignore[index]
    mariadb_server.execute("INSERT INTO t VALUES (3, 'c'); DELETE FROM t WHERE id = 1", table)
    again = run(props, offsets)
    # the restart snapshots the table as it is now (no stream of what happened while stopped)
    assert data(again) == [("r", {"id": 2, "v": "b2"}), ("r", {"id": 3, "v": "c"})]
    stored = OffsetFile(offsets).load()
    assert stored is not None and stored["epoch"] == epoch + 1
    # and streams from that snapshot on within one run: a change made during the run is streamed once
    engine = Engine(validate_connector(props), OffsetFile(offsets))
    try:
        snapshot = data([e.value_json() for e in engine.events(once=True) if e.value is not None])
        mariadb_server.execute("UPDATE t SET v = 'c2' WHERE id = 3", table)
        streamed = data([e.value_json() for e in engine.events(once=True) if e.value is not None])
    finally:
        engine.close()
    assert snapshot == [("r", {"id": 2, "v": "b2"}), ("r", {"id": 3, "v": "c"})]
    assert streamed == [("u", {"id": 3, "v": "c2"})]


@pytest.mark.parametrize("history", ["deleted", "broken"])
def test_recovery_rebuilds_the_schema_history_and_streams_on(mariadb_server, table, tmp_path, history):
    offsets, history_file = tmp_path / "o.json", tmp_path / "history.jsonl"
    props = properties(mariadb_server, table, headwater__schema__history__file=str(history_file))
    assert [op for op, _ in data(run(props, offsets))] == ["r", "r"]
    stored = OffsetFile(offsets).load()
    assert history_file.exists()
    if history == "deleted":
        history_file.unlink()
    else:  # an entry that names another table's columns for t: decoding t's rows with it would fail
        history_file.write_text(history_file.read_text().replace('"v"', '"w"'))
    mariadb_server.execute("INSERT INTO t VALUES (3, 'c'); UPDATE t SET v = 'a2' WHERE id = 1", table)
    values = run({**props, "snapshot.mode": "recovery"}, offsets)
    # no rows read again: the changes since the stored offset only, decoded with the rebuilt schema
    assert data(values) == [("c", {"id": 3, "v": "c"}), ("u", {"id": 1, "v": "a2"})]
    assert '"v"' in history_file.read_text() and '"w"' not in history_file.read_text()
    after = OffsetFile(offsets).load()
    assert after is not None and stored is not None and after["epoch"] == stored["epoch"]


def based(**flags: bool) -> dict[str, str]:
    """`configuration_based` with its properties (by their last words, `_` for `.`)."""
    return {"snapshot.mode": "configuration_based",
            **{f"snapshot.mode.configuration.based.{k.replace('_', '.')}": str(v).lower() for k, v in flags.items()}}


def test_configuration_based_with_data_snapshots_at_every_start(mariadb_server, table, tmp_path):
    props = {**properties(mariadb_server, table, include__schema__changes="false"),
             **based(snapshot_data=True, start_stream=True)}
    assert data(run(props, tmp_path / "o.json")) == [("r", {"id": 1, "v": "a"}), ("r", {"id": 2, "v": "b2"})]
    mariadb_server.execute("INSERT INTO t VALUES (3, 'c')", table)
    assert [op for op, _ in data(run(props, tmp_path / "o.json"))] == ["r", "r", "r"]


def test_configuration_based_with_the_schema_only_streams_after_it(mariadb_server, table, tmp_path):
    offsets, history_file = tmp_path / "o.json", tmp_path / "history.jsonl"
    props = {**properties(mariadb_server, table, headwater__schema__history__file=str(history_file)),
             **based(snapshot_schema=True, start_stream=True)}
    first = run(props, offsets)
    assert data(first) == [] and any(v.get("ddl", "").startswith("CREATE TABLE") for v in first)
    mariadb_server.execute("INSERT INTO t VALUES (3, 'c')", table)
    # a restart rebuilds the schema history from the tables (as recovery does), not from the file
    history_file.write_text(history_file.read_text().replace('"v"', '"w"'))
    assert data(run(props, offsets)) == [("c", {"id": 3, "v": "c"})]
    assert '"w"' not in history_file.read_text()


def test_configuration_based_without_snapshots_reads_the_binlog_from_its_start(mariadb_server, table, tmp_path):
    props = {**properties(mariadb_server, table), **based(start_stream=True)}
    assert data(run(props, tmp_path / "o.json")) == [
        ("c", {"id": 1, "v": "a"}), ("c", {"id": 2, "v": "b"}), ("u", {"id": 2, "v": "b2"})]


def test_configuration_based_without_streaming_stops_after_the_snapshot(mariadb_server, table, tmp_path):
    props = {**properties(mariadb_server, table, include__schema__changes="false"), **based(snapshot_data=True)}
    engine = Engine(validate_connector(props), OffsetFile(tmp_path / "o.json"))
    try:
        first = data([e.value_json() for e in engine.events(once=True) if e.value is not None])
        mariadb_server.execute("INSERT INTO t VALUES (3, 'c')", table)
        again = list(engine.events(once=True))
    finally:
        engine.close()
    assert [op for op, _ in first] == ["r", "r"] and again == []


@pytest.mark.parametrize("on_error", [True, False])
def test_configuration_based_on_a_lost_position_snapshots_again_when_asked(mariadb_server, table, tmp_path, on_error):
    offsets = tmp_path / "o.json"
    props = {**properties(mariadb_server, table, include__schema__changes="false"),
             **based(snapshot_data=False, snapshot_schema=True, start_stream=True, snapshot_on_data_error=on_error)}
    run(props, offsets)
    stored = OffsetFile(offsets).load()
    assert stored is not None
    purge(mariadb_server, stored["file"])
    mariadb_server.execute("INSERT INTO t VALUES (3, 'c')", table)
    if on_error:  # the new snapshot is the schema only, as the mode says: the stream goes on from it
        assert data(run(props, offsets)) == []
        mariadb_server.execute("INSERT INTO t VALUES (4, 'd')", table)
        assert data(run(props, offsets)) == [("c", {"id": 4, "v": "d"})]
    else:
        with pytest.raises(PositionLost, match="purged"):
            run(props, offsets)


def test_a_close_as_the_stream_starts_stops_the_binlog_reader(mariadb_server, table):
    """A run that ends right after its snapshot closes the engine while the binlog reader is still
    connecting: the reader must see the close then (an idle stream would otherwise hold its thread in a
    read, and close() in its join, until the join's timeout)."""
    engine = Engine(validate_connector(properties(mariadb_server, table, snapshot__mode="always")), None)
    try:
        assert data([e.value_json() for e in engine.events(once=True) if e.value is not None]) == [
            ("r", {"id": 1, "v": "a"}), ("r", {"id": 2, "v": "b2"})]
        reader = engine.connector.reader  # type: ignore[attr-defined]
    finally:
        engine.close()
    assert reader is not None and reader.thread is not None
    assert not reader.thread.is_alive()  # close() returned once the thread had ended
