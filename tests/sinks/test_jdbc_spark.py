"""The jdbc sink in headwater's Spark streaming query: a PostgreSQL table mirrored into a second
PostgreSQL database and into MariaDB by `run --once`'s query (in the tests' shared local Spark
session), a batch Spark runs again changing nothing, a batch that fails in one table applied to
none (its error shown by the real `headwater` CLI), and (slow) the CLI killed with `kill -9` twice
while writes go on, the target equal to the source afterwards."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from tests.sinks.jdbc_support import mariadb_rows, mariadb_url, pg_rows, pg_url
from tests.spark.test_pipeline import Writer, _wait, drop_db, fresh_db
from tests.spark_support import (
    batch_ids,
    cli,
    committed_batches,
    kill_group,
    kill_in_flight,
    run_once,
    start_cli,
)

pytestmark = pytest.mark.spark

ROWS = "SELECT id, v, note FROM t ORDER BY id"


def jdbc_config(tmp: Path, pg_server, source_db: str, target_db: str, spark: dict | None = None,
                sink: dict | None = None) -> Path:
    cfg = {
        "name": "mirror",
        "source": {"connector.class": "postgres", **pg_server.connector_properties(source_db), "topic.prefix": "src",
                   "slot.name": "jdbc_slot", "table.include.list": "public.t", "skipped.operations": "none"},
        "sink": {**(sink or pg_url(pg_server, target_db)), "mirror": True},
        "spark": {"master": "local[2]", "checkpoint": str(tmp / "state" / "checkpoint"), **(spark or {})},
    }
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def test_run_once_mirrors_and_a_replayed_batch_changes_nothing(spark, pg_server, tmp_path):
    source, target = fresh_db(pg_server, "jdbc_src"), fresh_db(pg_server, "jdbc_dst")
    try:
        pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL, note text); "
                          "INSERT INTO t SELECT g, g, md5(g::text) FROM generate_series(1, 2000) g", source)
        config = jdbc_config(tmp_path, pg_server, source, target)
        run_once(spark, config)
        assert pg_rows(pg_server, target, ROWS) == pg_rows(pg_server, source, ROWS)
        pg_server.execute("UPDATE t SET v = -v WHERE id % 7 = 0; DELETE FROM t WHERE id % 11 = 0; "
                          "UPDATE t SET id = id + 10000 WHERE id % 13 = 0; INSERT INTO t VALUES (0, 0, NULL)", source)
        run_once(spark, config)
        assert pg_rows(pg_server, target, ROWS) == pg_rows(pg_server, source, ROWS)

        # Spark runs the last batch again when its commit is missing: the sink finds it applied
        checkpoint = tmp_path / "state" / "checkpoint"
        last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
        (checkpoint / "commits" / str(last)).unlink()
        pg_server.execute("UPDATE t SET note = 'untouched by the replay' WHERE id = 0", target)
        run_once(spark, config)
        assert committed_batches(checkpoint) == last + 1
        assert pg_rows(pg_server, target, "SELECT note FROM t WHERE id = 0") == [("untouched by the replay",)]
        recorded = pg_rows(pg_server, target, "SELECT batch_id, count(*), sum(events) FROM headwater_sink_batches "
                                              "GROUP BY batch_id")
        assert all(n == 1 for _, n, _ in recorded)
        assert [events for b, _, events in recorded if b == last][0] > 0  # the changes of the second run
    finally:
        drop_db(pg_server, source)
        pg_server.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')


def test_run_once_mirrors_into_mariadb(spark, pg_server, mariadb_server, mariadb_db, tmp_path):
    source = fresh_db(pg_server, "jdbc_msrc")
    try:
        pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL, note text); "
                          "INSERT INTO t SELECT g, g, md5(g::text) FROM generate_series(1, 1000) g", source)
        config = jdbc_config(tmp_path, pg_server, source, "", sink=mariadb_url(mariadb_server, mariadb_db))
        run_once(spark, config)
        pg_server.execute("UPDATE t SET v = -v WHERE id % 7 = 0; DELETE FROM t WHERE id % 11 = 0; "
                          "UPDATE t SET id = id + 10000 WHERE id % 13 = 0; TRUNCATE t; "
                          "INSERT INTO t VALUES (0, 0, NULL), (1, 1, 'one')", source)
        run_once(spark, config)
        assert mariadb_rows(mariadb_server, mariadb_db, ROWS) == pg_rows(pg_server, source, ROWS)
    finally:
        drop_db(pg_server, source)


@pytest.mark.slow
@pytest.mark.parametrize("into", ["postgresql", "mariadb"])
def test_kill_9_again_and_again_while_writes_go_on(spark, pg_server, tmp_path, request, into):
    source, target = fresh_db(pg_server, "jdbc_ksrc"), fresh_db(pg_server, "jdbc_kdst")
    if into == "mariadb":
        maria, maria_db = request.getfixturevalue("mariadb_server"), request.getfixturevalue("mariadb_db")
        sink = mariadb_url(maria, maria_db)

        def target_rows() -> list:
            return mariadb_rows(maria, maria_db, ROWS)
    else:
        sink = pg_url(pg_server, target)

        def target_rows() -> list:
            return pg_rows(pg_server, target, ROWS)
    try:
        pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL, note text); "
                          "INSERT INTO t SELECT g, 0, md5(g::text) FROM generate_series(1, 5000) g", source)
        config = jdbc_config(tmp_path, pg_server, source, target, sink=sink,
                             spark={"trigger.interval": "1 second", "maxEventsPerTrigger": 2000})
        checkpoint = tmp_path / "state" / "checkpoint"
        log = tmp_path / "headwater.log"
        proc = start_cli("run", str(config), log=log)
        _wait(lambda: committed_batches(checkpoint) >= 1, 600)  # Spark starts slowly on a loaded machine
        writer = Writer(pg_server.dsn(source), first_id=5001)
        writer.start()
        try:
            # a streamed batch killed in flight (planned, not committed: the next run plays it again),
            # then, once the next run has committed it, a kill a moment later, usually inside a batch
            replayed = kill_in_flight(proc, checkpoint)
            proc = start_cli("run", str(config), log=log)
            _wait(lambda: max(batch_ids(checkpoint, "commits")) >= replayed, 300)
            time.sleep(1.2)
        finally:
            kill_group(proc)
            writer.stop.set()
            writer.join(60)
        assert writer.error is None, writer.error
        assert writer.ops > 50
        run_once(spark, config)  # what the kills left behind (`run --once`'s query, in the shared session)
        assert target_rows() == pg_rows(pg_server, source, ROWS)
    finally:
        drop_db(pg_server, source)
        pg_server.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')


def test_a_target_that_cannot_be_reached_fails_at_start(pg_server, tmp_path):
    source = fresh_db(pg_server, "jdbc_usrc")
    try:
        sink = {**pg_url(pg_server, "no_such_database"), "connection.password": "wrong-secret-pw"}
        config = jdbc_config(tmp_path, pg_server, source, "", sink=sink)
        proc = cli("run", str(config), "--once", check=False)
        assert proc.returncode == 1, proc.stderr
        assert "cannot connect to postgresql" in proc.stderr and "no_such_database" in proc.stderr
        assert "wrong-secret-pw" not in proc.stderr + proc.stdout
    finally:
        drop_db(pg_server, source)


def test_batch_atomic_applies_every_table_of_a_batch_or_none(spark, pg_server, tmp_path):
    source, target = fresh_db(pg_server, "jdbc_asrc"), fresh_db(pg_server, "jdbc_adst")
    try:
        pg_server.execute("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL, note text); "
                          "CREATE TABLE u (id int PRIMARY KEY, v text); "
                          "INSERT INTO t SELECT g, g, md5(g::text) FROM generate_series(1, 500) g; "
                          "INSERT INTO u VALUES (1, 'fits'), (2, 'too long for the target')", source)
        pg_server.execute("CREATE TABLE u (id int PRIMARY KEY, v varchar(4))", target)  # refuses row 2
        path = jdbc_config(tmp_path, pg_server, source, target,
                           sink={**pg_url(pg_server, target), "batch.atomic": True})
        cfg = yaml.safe_load(path.read_text())
        cfg["source"]["table.include.list"] = "public.t,public.u"
        path.write_text(yaml.safe_dump(cfg))
        proc = cli("run", str(path), "--once", check=False)
        assert proc.returncode != 0
        assert "table u" in proc.stderr and "{id=2}" in proc.stderr
        # t's table was made (DDL commits first) but none of the batch's rows is there, in any table
        assert pg_rows(pg_server, target, "SELECT count(*) FROM t") == [(0,)]
        assert pg_rows(pg_server, target, "SELECT count(*) FROM u") == [(0,)]
        assert pg_rows(pg_server, target, "SELECT count(*) FROM headwater_sink_batches") == [(0,)]
        pg_server.execute("ALTER TABLE u ALTER COLUMN v TYPE text", target)
        run_once(spark, path)
        assert pg_rows(pg_server, target, ROWS) == pg_rows(pg_server, source, ROWS)
        assert pg_rows(pg_server, target, "SELECT id, v FROM u ORDER BY id") == [(1, "fits"),
                                                                                  (2, "too long for the target")]
    finally:
        drop_db(pg_server, source)
        pg_server.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')
