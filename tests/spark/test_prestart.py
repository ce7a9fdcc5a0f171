"""`headwater.spark.prestart`: a query's read planning and tasks run in the workers started ahead of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

# A fresh session as `headwater run` makes it (planners' workers end after their job), the prestart job
# importing a module nothing else imports (`wave`), then a streaming query of a Python source: its read
# planning (where the reader that the tasks run is made) and its two tasks say whether `wave` was already
# imported in their process, and which process that was.
QUERY = """
import json, os, sys, tempfile
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from headwater.pipeline_config import parse_config
from headwater.spark import prestart
from headwater.spark.pipeline import spark_session

class Reader(DataSourceStreamReader):
    def __init__(self):
        self.planner = (os.getpid(), "wave" in sys.modules)
    def initialOffset(self):
        return {"n": 0}
    def latestOffset(self, start, limit):
        return {"n": 2}
    def partitions(self, start, end):
        return [InputPartition(i) for i in range(start["n"], end["n"])]
    def read(self, partition):
        yield (json.dumps({"planner": self.planner, "task": (os.getpid(), "wave" in sys.modules)}),)
    def commit(self, end):
        pass

class Probe(DataSource):
    @classmethod
    def name(cls):
        return "prestart-probe"
    def schema(self):
        return "facts STRING"
    def streamReader(self, schema):
        return Reader()

work = tempfile.mkdtemp()
cfg = parse_config({"name": "t", "source": {"connector.class": "postgres", "topic.prefix": "t",
                                            "database.hostname": "127.0.0.1", "database.user": "u",
                                            "database.dbname": "d"},
                    "sink": {"type": "jsonl", "path": work + "/sink"},
                    "spark": {"master": "local[2]", "checkpoint": work + "/checkpoint"}})
spark = spark_session(cfg)
if sys.argv[1] == "prestart":
    prestart.run(spark, ["wave"], 2)
spark.dataSource.register(Probe)
rows = []
query = (spark.readStream.format("prestart-probe").load().writeStream
         .foreachBatch(lambda df, _: rows.extend(r.facts for r in df.collect()))
         .option("checkpointLocation", work + "/checkpoint").trigger(availableNow=True).start())
query.awaitTermination()
print(json.dumps([json.loads(r) for r in rows]))
spark.stop()
"""


def _facts(mode: str) -> list[dict]:
    env = {k: v for k, v in os.environ.items() if k not in ("HEADWATER_PLANNERS_REUSED", "PYTHONPATH")}
    run = subprocess.run([sys.executable, "-c", QUERY, mode], capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_the_query_runs_in_the_workers_started_ahead_of_it():
    facts = _facts("prestart")
    assert len(facts) == 2
    assert all(f["planner"][1] for f in facts), facts  # the read planning ran in the prestart's planner worker
    assert all(f["task"][1] for f in facts), facts  # both tasks ran in the prestart's task workers
    assert len({f["task"][0] for f in facts}) <= 2


def test_without_it_the_query_starts_its_own():  # the probe above can fail
    facts = _facts("plain")
    assert len(facts) == 2
    assert not any(f["planner"][1] or f["task"][1] for f in facts), facts
