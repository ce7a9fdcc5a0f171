"""Python workers started ahead of the query that needs them, while it starts.

A streaming query starts its Python processes one after the other, each when the step before has
answered: the data source's creation, the streaming source runner (which then reaches the
database and reads the first offsets), the read planning, and only then the task workers, through a
daemon of their own. Each of these imports pyspark, pyarrow and headwater after Spark has started
it. `prestart(spark, modules)` runs a tiny batch job of the `headwater-prestart` data source in a
background thread as the query starts: its read planning runs in Spark's planner worker and its
tasks in task workers, forked by the same daemons the query's steps use (Spark keys a daemon by
interpreter, module and environment, which a Python data source's planning and tasks share with any
other one's), and they import `modules` there. The read planning's worker stays to be reused
(`headwater.spark.workerlife.keep_after_job`; it ends after the query's job, as planners' workers
do), and the task workers wait in Spark's pool of idle workers (`spark.python.worker.reuse`). Its
creation step runs alongside the query's (which has started by then) and ends after its job.
So, while the source runner connects and reads, the read planning's daemon and worker and the task
workers are started and have imported what the query's will need; the query then finds them ready.

On a cluster the job's tasks run on the executors, so their daemons and task workers are started
there too (as many tasks as the application has cores; where each lands is the scheduler's choice).

Once per SparkContext: a session that runs many queries starts them once.
"""

from __future__ import annotations

import importlib
import json
import logging
import threading
from collections.abc import Iterator, Sequence

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

log = logging.getLogger("headwater.spark")

NAME = "headwater-prestart"
MODULES_OPTION = "modules"
PARTITIONS_OPTION = "partitions"
THREAD_NAME = "headwater-prestart"

_started: set[str] = set()  # the SparkContexts (application ids) whose workers were started
_lock = threading.Lock()


def _import(modules_json: str) -> None:
    for module in json.loads(modules_json):
        importlib.import_module(module)


def _planner_ready(modules_json: str) -> None:
    """In the read planning's worker: stay after this job, and import `modules` (a JSON list) in a thread,
    so that the job answers at once and its tasks start while the worker imports what the query's
    planning will unpickle (an import the query's job needs meanwhile waits for it to finish)."""
    from headwater.spark.workerlife import keep_after_job

    keep_after_job()
    threading.Thread(target=_import, args=(modules_json,), name=THREAD_NAME, daemon=True).start()


class PrestartReader(DataSourceReader):
    """`partitions` empty partitions whose tasks import `modules`."""

    def __init__(self, partitions: int, modules_json: str):
        self.count = partitions
        self.modules_json = modules_json

    def partitions(self) -> Sequence[InputPartition]:  # in the read planning's worker
        _planner_ready(self.modules_json)
        return [InputPartition(i) for i in range(self.count)]

    def read(self, partition: InputPartition) -> Iterator[tuple]:  # in a task worker
        _import(self.modules_json)
        from headwater.spark.workergc import settle

        settle()  # what the imports made is frozen, as the query's tasks would have it (headwater.spark.workergc)
        return iter(())


class PrestartSource(DataSource):
    """`spark.read.format("headwater-prestart")`: no rows; see the module's docstring."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:  # in the data source creation's worker: the query's has been asked for already
        return "n INT"

    def reader(self, schema) -> PrestartReader:
        return PrestartReader(int(self.options.get(PARTITIONS_OPTION, "1")), self.options.get(MODULES_OPTION, "[]"))


def run(spark, modules: Sequence[str], partitions: int) -> None:
    """The tiny job: plan a read of `PrestartSource` and run its `partitions` tasks."""
    spark.dataSource.register(PrestartSource)
    (spark.read.format(NAME).option(MODULES_OPTION, json.dumps(list(modules)))
     .option(PARTITIONS_OPTION, str(partitions)).load().collect())


def prestart(spark, modules: Sequence[str]) -> threading.Thread | None:
    """Start the workers a query of `spark` will need, in a background thread (None: this SparkContext's
    were started before). A failure is only logged: the query's own steps start what is missing."""
    app = spark.sparkContext.applicationId
    with _lock:
        if app in _started:
            return None
        _started.add(app)
    partitions = spark.sparkContext.defaultParallelism

    def body() -> None:
        try:
            run(spark, modules, partitions)
        except Exception as exc:  # noqa: BLE001 - the query starts its workers itself
            log.debug("starting Spark's Python workers ahead of the query failed: %s", exc)

    thread = threading.Thread(target=body, name=THREAD_NAME, daemon=True)
    thread.start()
    return thread
