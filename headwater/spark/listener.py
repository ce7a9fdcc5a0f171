"""Python `StreamingQueryListener`s that read each query progress as its JSON.

pyspark builds the `QueryProgressEvent` it hands a Python listener from the JVM's progress object
field by field: one py4j round trip per field and per map entry, and every Java iterator's end
raised and converted as an exception (a few class lookups by reflection each). That took ~0.1 s of
the JVM's CPU and as much of the driver's per micro-batch: at 2,000 changes/s, ~25 s of the JVM's
`spark-listener-group-streams` thread in a 45-second run (jstack, py-spy). `json_listener(impl)`
makes `impl` (a class with `onQueryStarted`, `onQueryProgress`, `onQueryIdle`, `onQueryTerminated`)
a listener whose progress events come from two calls, the progress and its `json()`, read by
pyspark's own `QueryProgressEvent.fromJson`: the same fields, `observedMetrics` as rows.
"""

from __future__ import annotations

import json
from typing import Any


def _jvm_side(pylistener: Any) -> Any:
    """pyspark's JVM wrapper of `pylistener`, with the progress taken as JSON."""
    from pyspark import SparkContext
    from pyspark.sql.streaming.listener import JStreamingQueryListener, QueryProgressEvent

    class JsonProgress(JStreamingQueryListener):
        def onQueryProgress(self, jevent: Any) -> None:
            progress = json.loads(jevent.progress().json())
            self.pylistener.onQueryProgress(QueryProgressEvent.fromJson({"progress": progress}))

    jvm: Any = SparkContext._jvm
    return jvm.PythonStreamingQueryListenerWrapper(JsonProgress(pylistener))


def _jlistener(self: Any) -> Any:
    if not hasattr(self, "_jlistenerobj"):
        self._jlistenerobj = _jvm_side(self)
    return self._jlistenerobj


def json_listener(impl: type) -> type:
    """`impl` as a `StreamingQueryListener` (for `spark.streams.addListener`) reading progress as JSON."""
    from pyspark.sql.streaming import StreamingQueryListener

    return type(impl.__name__, (impl, StreamingQueryListener), {"_jlistener": property(_jlistener)})
