"""The change-log connector on local Spark (`spark.readStream.format("headwater")` into the jsonl sink):
the same events as the embedded engine, snapshot and streamed changes, across a restart from the
checkpoint. Spark's Python workers import the connector from the repository (the shared session's
PYTHONPATH)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.connectors.changelog.scenario import STREAMED, Model, check_events, dsn, properties
from tests.connectors.changelog.test_engine import run
from tests.spark_support import read_sink

pytestmark = pytest.mark.spark


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
        out.append({"topic": e["topic"], "key": e["key"], "value": value, "headers": e.get("headers") or {}})
    return out


def test_spark_writes_the_engines_events(spark, pg_server, pg_db, tmp_path):
    model = Model(dsn(pg_server, pg_db))
    model.setup(accounts=25, orders=12)
    props = properties(pg_server, pg_db)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"

    snapshot = model.snapshot()
    engine = run(props, tmp_path / "offsets.json")
    spark_run(spark, props, out, checkpoint)
    check_events(read_sink(out), snapshot, pg_db)

    changes = [c for ops in STREAMED for c in model.transaction(*ops)]
    engine += run(props, tmp_path / "offsets.json")
    spark_run(spark, props, out, checkpoint)
    events = read_sink(out)
    check_events(events, snapshot + changes, pg_db)
    assert without_times(events) == without_times(engine)
