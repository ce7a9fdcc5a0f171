"""The change-log connector on local Spark (`spark.readStream.format("headwater")` into the jsonl sink):
the same events as the embedded engine, snapshot and streamed changes, across a restart from the
checkpoint. Spark's Python workers import the connector from the repository (PYTHONPATH)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from headwater.spark.source import register
from tests.connectors.changelog.scenario import STREAMED, Model, check_events, dsn, properties
from tests.connectors.changelog.test_engine import CONTEXT, run
from tests.golden_support import UUID7
from tests.spark_support import read_sink

pytestmark = pytest.mark.spark

ROOT = str(Path(__file__).resolve().parents[3])


@pytest.fixture(scope="module")
def spark():
    paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    if ROOT not in paths:  # before Spark starts its Python workers
        os.environ["PYTHONPATH"] = os.pathsep.join([ROOT, *filter(None, paths)])
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("headwater-changelog-test")
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


def spark_run(spark, props: dict, out: Path, checkpoint: Path) -> None:
    """Everything available now, into the jsonl sink (a restart carries on from the checkpoint)."""
    df = spark.readStream.format("headwater").option("headwater.properties", json.dumps(props)).load()
    query = (df.writeStream.format("headwater-jsonl").option("path", str(out))
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    query.awaitTermination()


def without_times(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events without the processing times and the snapshot's time (the two runs read at other moments)."""
    out = []
    for e in events:
        value = e["value"]
        if value is not None:
            value = {k: v for k, v in value.items() if k not in ("ts_ms", "ts_us", "ts_ns")}
            if value["op"] == "r":
                value["source"] = {k: v for k, v in value["source"].items() if k not in ("ts_ms", "ts_us", "ts_ns")}
        headers = e.get("headers") or {}
        out.append({"topic": e["topic"], "key": e["key"], "value": value,
                    "headers": {k: v for k, v in headers.items() if not k.startswith(CONTEXT)}})
    return out


def contexts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each event's Debezium 3 context headers."""
    return [{k: v for k, v in (e.get("headers") or {}).items() if k.startswith(CONTEXT)} for e in events]


def test_spark_writes_the_engines_events(spark, pg_server, pg_db, tmp_path):
    model = Model(dsn(pg_server, pg_db))
    model.setup(accounts=25, orders=12)
    props = properties(pg_server, pg_db)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    snapshot = model.snapshot()
    engine = run(props, tmp_path / "offsets.json")
    spark_run(spark, props, out, checkpoint)
    check_events(read_sink(out), snapshot, pg_db)
    first = len(read_sink(out))

    changes = [c for ops in STREAMED for c in model.transaction(*ops)]
    engine += run(props, tmp_path / "offsets.json")
    spark_run(spark, props, out, checkpoint)
    events = read_sink(out)
    check_events(events, snapshot + changes, pg_db)
    assert without_times(events) == without_times(engine)
    # Debezium 3's context headers on every data change record; one run id per start of the query
    data = [(i, c) for i, (e, c) in enumerate(zip(events, contexts(events), strict=True))
            if e["value"] is None or e["value"].get("op")]
    assert all(c.keys() == {CONTEXT + n for n in ("connectorLogicalName", "taskId", "connectorName", "runId")}
               and c[CONTEXT + "connectorLogicalName"] == "shop" and c[CONTEXT + "connectorName"] == "changelog"
               and c[CONTEXT + "taskId"] == "0" for _, c in data)
    runs = [{c[CONTEXT + "runId"] for i, c in data if (i < first) == before} for before in (True, False)]
    assert all(len(r) == 1 and UUID7.fullmatch(next(iter(r))) for r in runs) and runs[0] != runs[1]
