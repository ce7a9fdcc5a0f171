"""SchemaHistory: recording, replay to a position, the durable file and the schema.history.internal rules."""

from __future__ import annotations

import json

import pytest

from headwater.connectors.binlog.ddl import DdlParseError, SchemaState
from headwater.connectors.binlog.history import (
    HistoryEntry,
    HistoryFile,
    InconsistentSchemaError,
    SchemaHistory,
    at_or_before,
    inconsistent_schema_action,
    is_ddl_candidate,
)

STATEMENTS = [
    ("CREATE DATABASE shop CHARACTER SET latin1", None),
    ("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(10))", "shop"),
    ("ALTER TABLE items ADD COLUMN price DECIMAL(8,2) NOT NULL DEFAULT 0 AFTER id", "shop"),
    ("RENAME TABLE items TO goods, goods TO wares", "shop"),
    ("CREATE TABLE logs (msg TEXT) CHARSET utf8mb4", "shop"),
    ("DROP TABLE logs", "shop"),
]


def _pos(i: int) -> dict:
    return {"file": "binlog.000002", "pos": 100 * (i + 1)}


def _history() -> SchemaHistory:
    history = SchemaHistory()
    for i, (sql, db) in enumerate(STATEMENTS):
        history.apply(sql, db, _pos(i))
    return history


def test_replay_of_the_entries_gives_the_same_tables_at_every_position(tmp_path):
    history = _history()
    wares = history.table("shop", "wares")
    assert wares is not None and [c.name for c in wares.columns] == ["id", "price", "name"]
    assert wares.columns[2].charset == "latin1" and wares.primary_key == ("id",)
    assert history.table("shop", "items") is None and history.table("shop", "logs") is None
    file = HistoryFile(tmp_path / "history.jsonl")
    file.append(history.entries)
    loaded = file.load()
    assert loaded == history.entries
    assert SchemaHistory.restore(loaded).tables() == history.tables()
    at_create = SchemaHistory.restore(loaded, upto=at_or_before(_pos(1)))
    assert [c.name for c in at_create.tables()[("shop", "items")].columns] == ["id", "name"]
    at_logs = SchemaHistory.restore(loaded, upto=at_or_before(_pos(4)))
    assert at_logs.tables()[("shop", "logs")].columns[0].charset == "utf8mb4"


def test_recover_drops_entries_beyond_the_committed_offset_and_a_torn_line(tmp_path):
    file = HistoryFile(tmp_path / "history.jsonl")
    file.append(_history().entries)
    with open(file.path, "a") as f:
        f.write('{"position": {"file": "binlog.000002", "pos"')  # a crash mid-append
    kept = file.recover(at_or_before(_pos(2)))
    assert [e.ddl for e in kept] == [s for s, _ in STATEMENTS[:3]]
    assert file.load() == kept
    assert all(json.loads(line) for line in file.path.read_text().splitlines())


def test_entries_are_json_and_record_the_resulting_tables():
    entry = _history().entries[3]
    data = json.loads(json.dumps(entry.to_json()))
    assert HistoryEntry.from_json(data) == entry
    assert [(c["type"], c["id"], c["previous"]) for c in data["tableChanges"]] == [
        ("ALTER", ["shop", "goods"], ["shop", "items"]), ("ALTER", ["shop", "wares"], ["shop", "goods"])]


def test_unparseable_ddl_fails_unless_skipped():
    with pytest.raises(DdlParseError, match="skip.unparseable.ddl"):
        SchemaHistory().apply("CREATE TABLE t (a NOSUCHTYPE)", "db", _pos(0))
    history = SchemaHistory(skip_unparseable_ddl=True)
    history.apply("CREATE TABLE t (a INT)", "db", _pos(0))
    skipped = history.apply("CREATE TABLE t2 (a INT); CREATE TABLE t3 (a NOSUCHTYPE)", "db", _pos(1))
    # recorded and emitted without table changes, as Debezium does; nothing of the statement applied
    assert [(e.database, e.ddl, e.table_changes) for e in skipped] == [
        ("db", "CREATE TABLE t2 (a INT); CREATE TABLE t3 (a NOSUCHTYPE)", ())]
    assert list(history.tables()) == [("db", "t")] and len(history.entries) == 2
    restored = SchemaHistory.restore(history.entries, skip_unparseable_ddl=True)
    assert restored.tables() == history.tables()
    with pytest.raises(DdlParseError):
        SchemaHistory.restore(history.entries)


def test_store_only_captured_tables_ddl_records_only_captured_tables():
    history = SchemaHistory(store_only_captured_tables_ddl=True, table_filter=lambda db, t: t == "kept")
    assert history.apply("CREATE TABLE other (a INT)", "db", _pos(0)) == []
    assert history.apply("ALTER TABLE other ADD b INT", "db", _pos(1)) == []
    events = history.apply("CREATE TABLE kept (a INT)", "db", _pos(2))
    assert [e.ddl for e in events] == ["CREATE TABLE kept (a INT)"]
    assert list(history.tables()) == [("db", "kept")]
    assert [e.ddl for e in history.entries] == ["CREATE TABLE kept (a INT)"]
    everything = SchemaHistory()
    everything.apply("CREATE TABLE other (a INT)", "db", _pos(0))
    assert list(everything.tables()) == [("db", "other")]


def test_events_of_uncaptured_databases_are_recorded_but_not_returned():
    history = SchemaHistory(database_filter=lambda db: db == "a")
    assert history.apply("CREATE TABLE b.t (x INT)", "a", _pos(0)) == []
    assert history.table("b", "t") is not None and len(history.entries) == 1
    assert len(history.apply("CREATE TABLE a.t (x INT)", "a", _pos(1))) == 1


def test_statements_that_are_not_ddl_are_not_recorded():
    assert not is_ddl_candidate("BEGIN")
    assert not is_ddl_candidate("insert into t values (1)")
    assert not is_ddl_candidate("DROP TEMPORARY TABLE IF EXISTS `tmp` /* generated by server */")
    assert is_ddl_candidate("GRANT SELECT ON *.* TO x")
    history = SchemaHistory()
    assert history.apply("COMMIT", "db", _pos(0)) == [] and history.entries == []
    grant = history.apply("GRANT SELECT ON db.* TO 'u'@'%'", "db", _pos(1))
    assert [(e.database, e.ddl, e.table_changes) for e in grant] == [("db", "GRANT SELECT ON db.* TO 'u'@'%'", ())]


def test_truncate_records_nothing_and_names_the_table():
    history = SchemaHistory()
    history.apply("CREATE TABLE t (a INT)", "db", _pos(0))
    result = history.apply("TRUNCATE TABLE t", "db", _pos(1))
    assert result == [] and result.truncated == [("db", "t")]
    assert len(history.entries) == 1


def test_inconsistent_schema_handling_mode():
    with pytest.raises(InconsistentSchemaError, match="db.t at binlog position"):
        inconsistent_schema_action("fail", ("db", "t"), _pos(0))
    assert inconsistent_schema_action("warn", ("db", "t"), _pos(0)) is False
    assert inconsistent_schema_action("skip", ("db", "t"), _pos(0)) is False


def test_replaying_the_ddl_corpus_gives_the_same_tables_at_every_position(tmp_path):
    from tests.connectors.binlog.test_ddl_corpus import corpus_files, generated

    history = SchemaHistory()
    history.state.database_charsets.update({"hw_ddl": "utf8mb4", "hw_ddl_other": "latin1"})
    database = "hw_ddl"
    seen = {}
    for n, statement in enumerate(corpus_files() + generated()):
        history.apply(statement.sql, database, {"file": "binlog.000003", "pos": n})
        if statement.sql.upper().startswith("USE "):
            database = statement.sql.split()[1]
        if n % 50 == 0:
            seen[n] = history.tables()
    file = HistoryFile(tmp_path / "history.jsonl")
    file.append(history.entries)
    entries = file.load()
    assert entries == history.entries and len(entries) > 700

    def start() -> SchemaState:
        return SchemaState(database_charsets={"hw_ddl": "utf8mb4", "hw_ddl_other": "latin1"})

    assert SchemaHistory.restore(entries, state=start()).tables() == history.tables()
    for n, tables in seen.items():
        upto = at_or_before({"file": "binlog.000003", "pos": n})
        assert SchemaHistory.restore(entries, upto=upto, state=start()).tables() == tables
