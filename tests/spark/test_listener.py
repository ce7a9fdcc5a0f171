"""`json_listener` on local Spark: a listener whose progress is read as JSON gets the progress Spark
reports for each batch (the query's own `recentProgress`), observed metrics included as rows."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from headwater.spark.listener import json_listener

pytestmark = pytest.mark.spark


def test_progress_read_as_json_equals_the_querys_own(spark, tmp_path, monkeypatch):
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.listener import QueryProgressEvent

    def field_by_field(jevent: Any) -> Any:
        raise AssertionError("the progress was read field by field")

    monkeypatch.setattr(QueryProgressEvent, "fromJObject", staticmethod(field_by_field))

    got: list[Any] = []

    class Recorder:
        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            got.append(event.progress)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            pass

    src = tmp_path / "in"
    src.mkdir()
    for n in range(2):
        (src / f"{n}.json").write_text("".join(json.dumps({"v": f"{n}-{i}"}) + "\n" for i in range(3)))
    listener = json_listener(Recorder)()
    spark.streams.addListener(listener)
    try:
        df = (spark.readStream.schema("v string").option("maxFilesPerTrigger", 1).json(str(src))
              .observe("m", F.count(F.lit(1)).alias("n"), F.collect_list("v").alias("vs")))
        query = (df.writeStream.format("noop").option("checkpointLocation", str(tmp_path / "cp"))
                 .trigger(availableNow=True).start())
        query.awaitTermination(120)
        deadline = time.monotonic() + 30
        while len(got) < len(query.recentProgress) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        spark.streams.removeListener(listener)
    assert [p.batchId for p in got] == [p["batchId"] for p in query.recentProgress] == [0, 1]
    for mine, theirs in zip(got, query.recentProgress, strict=True):
        assert mine.numInputRows == theirs["numInputRows"] == 3
        assert mine.durationMs == theirs["durationMs"]
        theirs_end = theirs["sources"][0]["endOffset"]
        assert json.loads(mine.sources[0].endOffset) == (json.loads(theirs_end) if isinstance(theirs_end, str)
                                                         else theirs_end) == {"logOffset": mine.batchId}
        row = mine.observedMetrics["m"]
        assert row["n"] == 3 and len({v[0] for v in row["vs"]}) == 1  # one file a batch
    assert sorted(v for p in got for v in p.observedMetrics["m"]["vs"]) == [f"{n}-{i}" for n in range(2) for i in range(3)]
