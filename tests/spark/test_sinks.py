"""The parquet and console sinks through the CLI, and the exactly-once file commit itself."""

from __future__ import annotations

import datetime as dt
import decimal
import subprocess
import sys
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from headwater.events.batch import EventBatch
from headwater.events.typed import BlockBuilder, ipc_bytes
from headwater.spark import sinks
from headwater.spark.avro import AvroStreamWriter
from headwater.spark.filesink import WRITTEN, FileCommit, commit_files, written_rows
from headwater.spark.sinks import JsonlStreamWriter, jsonl_lines
from tests.spark_support import cli, write_config


def test_commit_replaces_an_earlier_attempt_of_the_same_batch(tmp_path):
    root = tmp_path / "out"
    tmp = root / "_tmp"
    tmp.mkdir(parents=True)

    def attempt(parts: dict[int, str]) -> list[FileCommit]:
        tmp.mkdir(parents=True, exist_ok=True)
        msgs = []
        for pid, text in parts.items():
            f = tmp / f"{pid}-{text}.tmp"
            f.write_text(text)
            msgs.append(FileCommit(pid, [(str(f), "")], 1))
        return msgs

    commit_files(root, 7, attempt({0: "a", 1: "b", 2: "c"}), ".jsonl")
    commit_files(root, 8, attempt({0: "next"}), ".jsonl")
    # batch 7 replayed (after a crash) with other content and fewer partitions: it replaces batch 7 only
    commit_files(root, 7, attempt({0: "A", 1: "B"}), ".jsonl")
    files = sorted(p.name for p in root.glob("*.jsonl"))
    assert files == ["batch-000000000007-part-00000.jsonl", "batch-000000000007-part-00001.jsonl",
                     "batch-000000000008-part-00000.jsonl"]
    assert [(root / f).read_text() for f in files] == ["A", "B", "next"]
    assert not tmp.exists()


def test_source_tasks_write_jsonl_and_hand_spark_a_row_per_event(tmp_path):
    """The source's `files` layout: a task writes the lines itself; Spark gets one row per event, null
    but the last, which holds what the task wrote; the driver's commit takes only that attempt's file."""
    root = tmp_path / "out"
    writer = JsonlStreamWriter(str(root))
    batches = []
    for first in (1, 3):
        b = EventBatch()
        b.append("p.s.t", f'{{"id":{first}}}', f'{{"op":"c","after":{{"id":{first}}}}}', "c", 10, 0)
        b.append('p."t"', f'{{"id":{first + 1}}}', None, None, 10, 0, headers=[("h", '"x"')])  # a tombstone
        batches.append(b.to_arrow())
    aborted = list(written_rows(writer, iter(batches[:1])))  # an attempt whose result Spark never takes
    rows = [r for batch in written_rows(writer, iter(batches)) for r in batch.column(WRITTEN).to_pylist()]
    assert len(rows) == 4 and rows[:3] == [None] * 3
    commit = FileCommit.from_json(rows[3])
    assert commit.rows == 4 and len(commit.files) == 1
    aborted_file = FileCommit.from_json(aborted[-1].column(WRITTEN)[-1].as_py()).files[0][0]
    assert Path(aborted_file).exists()
    commit_files(root, 3, [commit], ".jsonl")
    assert [p.name for p in root.iterdir()] == ["batch-000000000003-part-00000.jsonl"]  # _tmp is gone
    assert (root / "batch-000000000003-part-00000.jsonl").read_bytes() == (
        b'{"topic":"p.s.t","key":{"id":1},"value":{"op":"c","after":{"id":1}}}\n'
        b'{"topic":"p.\\"t\\"","key":{"id":2},"value":null,"headers":{"h":"x"}}\n'
        b'{"topic":"p.s.t","key":{"id":3},"value":{"op":"c","after":{"id":3}}}\n'
        b'{"topic":"p.\\"t\\"","key":{"id":4},"value":null,"headers":{"h":"x"}}\n')
    assert list(written_rows(writer, iter([]))) == []  # no events: no rows, no file


def test_jsonl_lines_of_a_large_batch_are_made_in_slices(tmp_path, monkeypatch):
    """A batch larger than `LINES_AT_ONCE` is written a slice at a time (headers and tombstones across
    the slices' edges): the file is the one the lines of the whole batch make."""
    b = EventBatch()
    for i in range(10):
        value = None if i % 3 == 2 else f'{{"op":"c","after":{{"id":{i}}}}}'
        b.append("p.s.t", f'{{"id":{i}}}', value, None if value is None else "c", i, 0,
                 headers=[("h", f'"{i}"')] if i % 4 else None)
    batch = b.to_arrow()
    monkeypatch.setattr(sinks, "LINES_AT_ONCE", 3)
    assert [len(s) for s in sinks.sliced_lines(batch, 3)] == [3, 3, 3, 1]
    commit = JsonlStreamWriter(str(tmp_path)).write_rows(iter([batch]))
    assert Path(commit.files[0][0]).read_bytes() == b"".join(s.encode() for s in jsonl_lines(batch).to_pylist())


def test_jsonl_lines_when_every_event_has_the_same_headers():
    """Debezium's context headers, the same on every event of a batch: the member written once is each line's."""
    b = EventBatch()
    for i in range(4):
        b.append("p.s.t", f'{{"id":{i}}}', f'{{"op":"r","after":{{"id":{i}}}}}', "r", i, 0,
                 headers=[("h", '"x"'), ("run", '"é"')])
    lines = jsonl_lines(b.to_arrow()).to_pylist()
    assert lines == [f'{{"topic":"p.s.t","key":{{"id":{i}}},"value":{{"op":"r","after":{{"id":{i}}}}},'
                     f'"headers":{{"h":"x","run":"é"}}}}\n' for i in range(4)]


def test_a_source_task_writing_jsonl_does_not_import_pandas(tmp_path):
    """pyarrow imports pandas on its first pa.array or pa.scalar of Python values (~1 s of CPU in each
    task worker): a task of the `files` layout writing JSON lines makes none."""
    b = EventBatch()
    b.append("p.s.t", '{"id":1}', '{"op":"c"}', "c", 10, 0, headers=[("h", '"x"')])
    b.append("p.s.t", '{"id":1}', None, None, 10, 0)
    batch = b.to_arrow()
    with pa.OSFile(str(tmp_path / "events.arrow"), "wb") as f, pa.ipc.new_stream(f, batch.schema) as w:
        w.write_batch(batch)
    script = f"""
import sys
import pyarrow as pa
from headwater.spark.filesink import written_rows
from headwater.spark.sinks import JsonlStreamWriter
batches = list(pa.ipc.open_stream({str(tmp_path / "events.arrow")!r}))
rows = list(written_rows(JsonlStreamWriter({str(tmp_path / "out")!r}), iter(batches)))
assert sum(len(r) for r in rows) == 2
print("pandas" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.spark
def test_parquet_sink_has_typed_columns_per_topic(pg_server, pg_db, tmp_path):
    pg_server.execute(
        "CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, price numeric(8,2), added date, "
        "seen timestamp(6), at timestamptz, ok boolean, raw bytea);"
        "INSERT INTO items VALUES (1, 'pen', 2.50, '2024-02-29', '2024-01-02 03:04:05.123456', "
        "'2024-01-02 03:04:05+02', true, '\\x0102'), (2, 'ink', NULL, NULL, NULL, NULL, NULL, NULL);"
        "CREATE TABLE other (k text PRIMARY KEY); INSERT INTO other VALUES ('x')", pg_db)
    config = write_config(tmp_path, pg_server, pg_db, sink={"type": "parquet"}, name="pq")
    cli("run", str(config), "--once")
    pg_server.execute("UPDATE items SET price = 3.75 WHERE id = 1; DELETE FROM items WHERE id = 2", pg_db)
    cli("run", str(config), "--once")
    out = Path(tmp_path / "out")
    assert sorted(p.name for p in out.iterdir()) == ["golden.public.items", "golden.public.other"]
    table = ds.dataset(out / "golden.public.items", format="parquet").to_table()
    rows = sorted(table.to_pylist(), key=lambda r: (r["_commit_version"], r["id"], r["_op"]))
    assert [r["_op"] for r in rows] == ["r", "r", "u", "d"]
    first = rows[0]
    assert first["price"] == decimal.Decimal("2.50")
    assert first["added"] == dt.date(2024, 2, 29)
    assert first["seen"] == dt.datetime(2024, 1, 2, 3, 4, 5, 123456)
    assert first["at"] == dt.datetime(2024, 1, 2, 1, 4, 5, tzinfo=dt.UTC)
    assert first["ok"] is True and first["raw"] == b"\x01\x02"
    assert str(table.schema.field("price").type) == "decimal128(8, 2)"
    assert rows[2]["price"] == decimal.Decimal("3.75")
    assert rows[3]["id"] == 2 and rows[3]["_change_type"] == "delete"


@pytest.mark.spark
def test_console_sink_prints_events(pg_server, pg_db, tmp_path):
    pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v text); INSERT INTO t VALUES (1, 'hello')", pg_db)
    config = write_config(tmp_path, pg_server, pg_db, sink={"type": "console"}, name="con")
    out = cli("run", str(config), "--once").stdout
    assert "golden.public.t r" in out and '"hello"' in out



def test_avro_sink_files_per_topic_and_schema(tmp_path):
    """The avro sink's task output without Spark: one container file per topic and value schema (two
    schemas of one topic get `-000`, `-001`), records in event order, tombstones left out; a replayed
    batch replaces its files."""
    key = {"type": "struct", "optional": False, "name": "t.Key", "fields": [
        {"type": "int32", "optional": False, "field": "id"}]}
    v1: dict[str, Any] = {"type": "struct", "optional": False, "name": "t.Envelope", "fields": [
        {"type": "int32", "optional": False, "field": "id"}, {"type": "string", "optional": False, "field": "op"}]}
    v2 = {**v1, "fields": [*v1["fields"], {"type": "string", "optional": True, "field": "note"}]}
    b = BlockBuilder()
    b.add("t", key, {"id": 1}, v1, {"id": 1, "op": "c"}, "c", 1, 0)
    b.add("t", key, {"id": 1}, v1, None, None, 1, 0)  # a tombstone
    b.add("t", key, {"id": 2}, v2, {"id": 2, "op": "c", "note": "x"}, "c", 2, 0)
    b.add("t", key, {"id": 3}, v1, {"id": 3, "op": "u"}, "u", 3, 0)
    b.add("u.v", None, None, v1, {"id": 9, "op": "c"}, "c", 3, 0)
    blocks = b.take().blocks
    rows = pa.RecordBatch.from_arrays([pa.array([x.topic for x in blocks]), pa.array([ipc_bytes(x) for x in blocks])],
                                      names=["topic", "block"])
    writer = AvroStreamWriter(str(tmp_path / "out"), {"codec": "deflate"})
    for _ in range(2):  # the second attempt of batch 7 replaces the first's files
        writer.commit([writer.write(iter([rows]))], 7)
    files = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*.avro"))
    assert files == ["t/batch-000000000007-part-00000-000.avro", "t/batch-000000000007-part-00000-001.avro",
                     "u.v/batch-000000000007-part-00000.avro"]
    read = []
    for f in files:
        with open(tmp_path / "out" / f, "rb") as fh:
            read.append([dict(r) for r in fastavro.reader(fh)])
    assert read == [[{"id": 1, "op": "c"}, {"id": 3, "op": "u"}], [{"id": 2, "op": "c", "note": "x"}],
                    [{"id": 9, "op": "c"}]]
