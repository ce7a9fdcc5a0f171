"""The pipeline on Spark: local Spark, real PostgreSQL, jsonl sink.

- `run --once`'s query (in the tests' shared Spark session) writes exactly Debezium's events (compared
  with the recorded golden files);
- killing the real `headwater run`'s whole process group with SIGKILL again and again while writes go
  on loses nothing and duplicates nothing (checked against an independent test_decoding slot);
- SIGTERM stops after the batch in flight, and the next run carries on; Debezium's metrics are on the
  Prometheus endpoint while it runs and in `headwater status` after, counted across both runs.
"""

from __future__ import annotations

import json
import random
import re
import signal
import threading
import time
import urllib.request

import psycopg2
import pytest

from headwater.connectors.postgres.pgoutput import str_to_lsn
from headwater.devservers.common import free_port
from tests.golden_support import assert_events_equal, load_scenario, run_psql_script, scenario_dirs
from tests.spark_support import (
    batch_ids,
    cli,
    committed_batches,
    kill_group,
    kill_in_flight,
    read_sink,
    run_once,
    start_cli,
    write_config,
)

pytestmark = pytest.mark.spark

GOLDEN = {d.name: d for d in scenario_dirs("postgres")}


def fresh_db(pg_server, name: str) -> str:
    pg_server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    pg_server.create_database(name)
    return name


def drop_db(pg_server, name: str) -> None:
    pg_server.execute(f"SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '{name}'")
    pg_server.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("scenario", ["crud", "transaction_metadata"])
def test_run_once_writes_debezium_events(spark, pg_server, tmp_path, scenario):
    sc = load_scenario(GOLDEN[scenario])
    db = fresh_db(pg_server, "golden")
    try:
        run_psql_script(pg_server, db, sc.setup)
        config = write_config(tmp_path, pg_server, db, source=dict(sc.properties),
                              sink={"schemas.enable": True}, name="golden")
        progress = run_once(spark, config)
        assert sc.during is not None
        run_psql_script(pg_server, db, sc.during)
        progress += run_once(spark, config)
        actual = [{k: v for k, v in e.items() if k != "headers"} for e in read_sink(tmp_path / "out")]
        assert_events_equal(sc.events, actual)
        # Spark's progress counts the events (the tasks write the sink's files and hand Spark a row per
        # event, then the observer's facts row and the commit), as users of Spark read it
        observed = [(p.get("observedMetrics") or {}).get("headwater") for p in progress]
        facts = sum(len(row["facts"] or []) for row in observed if row is not None)
        assert sum(p["numInputRows"] for p in progress) == len(actual) + facts
        # the jsonl contract: one {"topic","key","value"} object per line, .jsonl files only
        assert all(p.suffix == ".jsonl" for p in (tmp_path / "out").iterdir() if p.is_file())
    finally:
        drop_db(pg_server, db)


class Writer(threading.Thread):
    """Inserts, updates and deletes rows of public.t in small transactions until stopped."""

    def __init__(self, dsn: str, first_id: int):
        super().__init__(daemon=True)
        self.dsn = dsn
        self.next_id = first_id
        self.stop = threading.Event()
        self.ops = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            conn = psycopg2.connect(self.dsn)
            rnd = random.Random(7)
            live = list(range(1, self.next_id))
            while not self.stop.is_set():
                with conn, conn.cursor() as cur:
                    for _ in range(rnd.randint(1, 5)):
                        op = rnd.random()
                        if op < 0.5 or len(live) < 10:
                            cur.execute("INSERT INTO t (id, v, note) VALUES (%s, 0, md5(%s::text))",
                                        (self.next_id, self.next_id))
                            live.append(self.next_id)
                            self.next_id += 1
                        elif op < 0.85:
                            cur.execute("UPDATE t SET v = v + 1 WHERE id = %s", (rnd.choice(live),))
                        else:
                            victim = live.pop(rnd.randrange(len(live)))
                            cur.execute("DELETE FROM t WHERE id = %s", (victim,))
                        self.ops += 1
                time.sleep(0.02)
            conn.close()
        except BaseException as exc:  # reported by the test
            self.error = exc


@pytest.mark.slow
def test_sigkill_again_and_again_loses_nothing_and_repeats_nothing(spark, pg_server, tmp_path):
    db = fresh_db(pg_server, "killtest")
    try:
        pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL, note text); "
                          "INSERT INTO t SELECT g, 0, md5(g::text) FROM generate_series(1, 5000) g", db)
        config = write_config(tmp_path, pg_server, db, name="kill",
                              spark={"trigger.interval": "1 second", "maxEventsPerTrigger": 2000})
        checkpoint = tmp_path / "state" / "checkpoint"
        log = tmp_path / "headwater.log"

        # first run: the snapshot, killed once in the middle of it (Spark replays the batch, headwater
        # re-creates the slot and snapshots again), then allowed to finish it
        proc = start_cli("run", str(config), log=log)
        _wait(lambda: (checkpoint / "offsets").exists() and any((checkpoint / "offsets").iterdir()), 300)
        time.sleep(random.uniform(0.5, 3))
        kill_group(proc)
        proc = start_cli("run", str(config), log=log)
        _wait(lambda: committed_batches(checkpoint) >= 1, 300)

        # an independent reference: every change from here on, as test_decoding sees it
        pg_server.execute("SELECT pg_create_logical_replication_slot('reference', 'test_decoding')", db)
        writer = Writer(pg_server.dsn(db), first_id=5001)
        writer.start()
        try:
            # a streamed batch killed in flight (planned, not committed: the next run plays it again), then,
            # once the next run has committed it, a kill at a random moment, usually inside a later batch
            replayed = kill_in_flight(proc, checkpoint)
            proc = start_cli("run", str(config), log=log)
            _wait(lambda: max(batch_ids(checkpoint, "commits")) >= replayed, 300)
            time.sleep(random.uniform(0, 3))
        finally:
            kill_group(proc)
            writer.stop.set()
            writer.join(60)
        assert writer.error is None, writer.error
        assert writer.ops > 100

        run_once(spark, config)  # drain what the kills left behind: `run --once`'s query, in the shared session

        events = read_sink(tmp_path / "out")
        batches = sorted({f.name.split("-part")[0] for f in (tmp_path / "out").glob("*.jsonl")})
        print(f"{writer.ops} writes, {len(events)} events in {len(batches)} batches, 3 runs killed")
        assert len(batches) > 3  # the kills fell between and inside several batches
        # 1. replaying the events gives exactly the table
        state: dict[int, dict] = {}
        for e in events:
            if e["value"] is None:
                continue
            op = e["value"]["op"]
            if op in ("r", "c", "u"):
                state[e["value"]["after"]["id"]] = e["value"]["after"]
            elif op == "d":
                state.pop(e["value"]["before"]["id"], None)
        rows = pg_server.query("SELECT id, v, note FROM t ORDER BY id", db)
        assert len(state) == len(rows)
        assert all(state[i] == {"id": i, "v": v, "note": note} for i, v, note in rows)

        # 2. every change the reference saw is in the sink exactly once (matched by LSN, op and key)
        reference = pg_server.query("SELECT lsn::text, data FROM pg_logical_slot_get_changes('reference', NULL, NULL)", db)
        expected = []
        for lsn, data in reference:
            m = re.match(r"table public\.t: (INSERT|UPDATE|DELETE): id\[integer\]:(\d+)", data)
            if m:
                expected.append((str_to_lsn(lsn), {"INSERT": "c", "UPDATE": "u", "DELETE": "d"}[m.group(1)], int(m.group(2))))
        streamed = [(e["value"]["source"]["lsn"], e["value"]["op"],
                     (e["value"]["after"] or e["value"]["before"])["id"])
                    for e in events if e["value"] is not None and e["value"]["op"] in "cud"]
        assert len(expected) > 100
        seen: dict[tuple[int, str, int], int] = {}
        for s in streamed:
            seen[s] = seen.get(s, 0) + 1
        duplicates = [s for s, n in seen.items() if n > 1]
        assert not duplicates, f"{len(duplicates)} changes written more than once, e.g. {duplicates[:3]}"
        missing = [x for x in expected if x not in seen]
        assert not missing, f"{len(missing)} changes lost, e.g. {missing[:3]}"
        # nothing in the sink that the reference did not see, after the reference started
        first = min(x[0] for x in expected)
        extra = [s for s in streamed if s[0] >= first and s not in set(expected)]
        assert not extra, f"unexpected events {extra[:3]}"
    finally:
        drop_db(pg_server, db)


def test_sigterm_stops_after_the_batch_in_flight(pg_server, tmp_path):
    db = fresh_db(pg_server, "termtest")
    try:
        pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t SELECT g, 0 FROM generate_series(1, 100) g", db)
        port = free_port()
        config = write_config(tmp_path, pg_server, db, spark={"trigger.interval": "1 second"}, name="term",
                              source={"headwater.metrics.port": port})
        checkpoint = tmp_path / "state" / "checkpoint"
        log = tmp_path / "headwater.log"
        proc = start_cli("run", str(config), log=log)
        _wait(lambda: committed_batches(checkpoint) >= 1, 300)
        pg_server.execute("UPDATE t SET v = 1 WHERE id <= 10", db)
        _wait(lambda: len(read_sink(tmp_path / "out")) >= 110, 120)
        # Debezium's metrics on the Prometheus endpoint while it runs (counted once the listener has the batch)
        labels = 'context="{}",name="golden",plugin="postgres"'
        scrape = f"http://127.0.0.1:{port}/metrics"
        _wait(lambda: f"debezium_metrics_TotalNumberOfUpdateEventsSeen{{{labels.format('streaming')}}} 10.0"
              in urllib.request.urlopen(scrape, timeout=10).read().decode(), 30)
        body = urllib.request.urlopen(scrape, timeout=10).read().decode()
        assert f'debezium_metrics_RowsScanned{{{labels.format("snapshot")},table="public.t"}} 100.0' in body
        assert f"debezium_metrics_SnapshotCompleted{{{labels.format('snapshot')}}} 1.0" in body
        assert f"debezium_metrics_Connected{{{labels.format('streaming')}}} 1.0" in body
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=180) == 0, log.read_text()
        pg_server.execute("UPDATE t SET v = 2 WHERE id <= 10", db)
        cli("run", str(config), "--once")
        events = read_sink(tmp_path / "out")
        assert len(events) == 120
        assert [e["value"]["after"]["v"] for e in events[-10:]] == [2] * 10
        status = cli("status", str(config)).stdout
        assert "last committed batch" in status and "confirmed_flush_lsn" in status and "lag_bytes" in status
        assert "last_delivered_commit" in status
        # the metrics file beside the checkpoint: counted across both runs, each batch once
        for line in ("SnapshotCompleted: True", "RowsScanned public.t: 100", "TotalNumberOfEventsSeen: 20",
                     "TotalNumberOfUpdateEventsSeen: 20", "NumberOfCommittedTransactions: 2", "Connected: False"):
            assert line in status, status
    finally:
        drop_db(pg_server, db)


def _wait(cond, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        time.sleep(0.2)


def test_a_local_checkpoint_is_written_through_hadoops_file_system_api(spark, tmp_path):
    """A local checkpoint's logs go through Hadoop's FileSystem API (FileContext forked `readlink` for
    every rename); a checkpoint elsewhere is left to Spark. The class exists in this Spark, and a query
    checkpoints with it (offsets and commits, no temporary files left, no .crc sidecars)."""
    from headwater.spark.pipeline import LOCAL_CHECKPOINT_FILE_MANAGER, checkpoint_options

    key = "spark.sql.streaming.checkpointFileManagerClass"
    assert checkpoint_options("state/checkpoint", {}) == {key: LOCAL_CHECKPOINT_FILE_MANAGER}
    assert checkpoint_options("file:///tmp/checkpoint", {}) == {key: LOCAL_CHECKPOINT_FILE_MANAGER}
    assert checkpoint_options("hdfs://namenode/checkpoint", {}) == {}
    assert checkpoint_options("s3a://bucket/checkpoint", {}) == {}
    assert checkpoint_options("checkpoint", {"spark.hadoop.fs.defaultFS": "hdfs://namenode:8020"}) == {}
    assert spark.conf.get(key) == LOCAL_CHECKPOINT_FILE_MANAGER
    spark.sparkContext._jvm.java.lang.Class.forName(LOCAL_CHECKPOINT_FILE_MANAGER)  # (a Spark that moved it fails here)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("a\nb\n")
    checkpoint = tmp_path / "checkpoint"
    seen: list[int] = []
    query = (spark.readStream.text(str(tmp_path / "in")).writeStream
             .foreachBatch(lambda df, batch_id: seen.append(df.count()))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination(120)
    assert seen == [2]
    assert (checkpoint / "offsets" / "0").is_file() and (checkpoint / "commits" / "0").is_file()
    assert not [p.name for p in checkpoint.rglob("*") if p.name.endswith((".tmp", ".crc"))]


def _config(sink: dict, spark_conf: dict | None = None, master: str = "local[2]", source: dict | None = None):
    from headwater.pipeline_config import parse_config

    return parse_config({
        "name": "inventory",
        "source": {"connector.class": "postgres", "database.hostname": "127.0.0.1", "database.port": 5432,
                   "database.user": "postgres", "database.password": "pw", "database.dbname": "inventory",
                   "topic.prefix": "dbserver1", **(source or {})},
        "sink": sink,
        "spark": {"master": master, "checkpoint": "state/checkpoint", "conf": spark_conf or {}},
    })


def test_a_local_small_driver_caps_a_batch_unless_the_configuration_sizes_it(tmp_path):
    from headwater.spark.pipeline import (
        LOCAL_MAX_BATCH_EVENTS,
        MAX_BATCH_EVENTS,
        small_driver,
        source_options,
    )

    def batch_cap(cfg) -> str | None:
        return json.loads(source_options(cfg, 2, str(tmp_path))["headwater.properties"]).get(MAX_BATCH_EVENTS)

    files = {"type": "jsonl", "path": str(tmp_path / "out")}
    local = _config(files)
    assert small_driver(local)
    assert batch_cap(local) == str(LOCAL_MAX_BATCH_EVENTS)
    # the user's own batch size, memory or collector: headwater leaves the batch to the connector's default
    assert batch_cap(_config(files, source={MAX_BATCH_EVENTS: 300_000})) == "300000"
    for conf in ({"spark.driver.memory": "2g"}, {"spark.driver.extraJavaOptions": "-XX:+UseG1GC"}):
        cfg = _config(files, conf)
        assert not small_driver(cfg)
        assert batch_cap(cfg) is None
    # a cluster's driver, or a sink whose events cross the JVM: neither a small driver nor a cap
    assert batch_cap(_config(files, master="spark://host:7077")) is None
    assert batch_cap(_config({"type": "console"})) is None
