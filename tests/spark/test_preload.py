"""The task workers' daemon imports their modules before it forks them (no Spark: the functions alone)."""

from __future__ import annotations

import sys

from headwater.spark.preload import PRELOAD_ENV, is_task_daemon, preload, task_modules


def test_only_the_task_workers_daemon_preloads():
    assert is_task_daemon(["python", "-m", "pyspark.daemon", "pyspark.worker"])
    assert is_task_daemon(["python", "-m", "pyspark.daemon"])
    assert not is_task_daemon(["python", "-m", "pyspark.daemon", "pyspark.sql.worker.create_data_source"])
    assert not is_task_daemon(["python", "-m", "pyspark.sql.streaming.python_streaming_source_runner"])
    assert not is_task_daemon(["python", "script.py", "-m", "pyspark.daemon"])


def test_preload_imports_what_it_can_where_it_should(monkeypatch):
    monkeypatch.setenv(PRELOAD_ENV, "colorsys,headwater_no_such_module")
    monkeypatch.delitem(sys.modules, "colorsys", raising=False)
    assert preload(["python", "-m", "pyspark.daemon", "pyspark.sql.worker.lookup_data_sources"]) == []
    assert "colorsys" not in sys.modules
    assert preload(["python", "-m", "pyspark.daemon", "pyspark.worker"]) == ["colorsys"]
    assert "colorsys" in sys.modules


def test_the_connectors_source_module_is_preloaded():
    assert task_modules("postgres")[-1] == "headwater.connectors.postgres.source"
    assert task_modules("io.debezium.connector.mariadb.MariaDbConnector")[-1].startswith("headwater.connectors.")
