"""What the CLI prints for a failed run: headwater's message found in Spark's wrapping (no server)."""

from __future__ import annotations

import logging

from headwater.cli.failures import DropPy4J, source_error, summary
from headwater.connectors.errors import ConnectError, SourceError

# the text of the StreamingQueryException Spark raised for a source whose database refused the
# connection (abridged from a real run: Spark's message, the worker's traceback, the Java trace)
SPARK_TEXT = """[PYTHON_STREAMING_DATA_SOURCE_RUNTIME_ERROR] Failed when Python streaming data source perform \
latestOffset: Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/pyspark/sql/streaming/python_streaming_source_runner.py", line 279, in main
    latest_offset_func(reader, infile, outfile)
  File "/repo/headwater/connectors/postgres/connection.py", line 141, in connect
    raise _connect_error(msg)(f"cannot connect to PostgreSQL ({_target(params)}): {msg}") from None
headwater.connectors.errors.ConnectError: cannot connect to PostgreSQL (host 127.0.0.1, port 1, database shop, \
user postgres): Connection refused [is the server running?]
 SQLSTATE: 38000
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.pythonStreamingDataSourceRuntimeError(QueryExecutionErrors.scala:1890)
\tat org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner.latestOffset(PythonStreamingSourceRunner.scala:198)
"""


def test_a_workers_source_error_is_rebuilt_from_sparks_text():
    found = source_error(RuntimeError(SPARK_TEXT))
    assert type(found) is ConnectError
    assert str(found) == ("cannot connect to PostgreSQL (host 127.0.0.1, port 1, database shop, user postgres): "
                          "Connection refused [is the server running?]")


def test_a_source_error_is_itself():
    exc = SourceError("slot gone")
    assert source_error(exc) is exc


def test_other_errors_are_summed_up_in_one_line():
    text = SPARK_TEXT.replace("headwater.connectors.errors.ConnectError", "KeyError")
    assert source_error(RuntimeError(text)) is None
    assert summary(RuntimeError(text)).startswith("KeyError: cannot connect to PostgreSQL")
    assert summary(ValueError("bad\nsecond line")) == "ValueError: bad"


def test_py4js_records_are_dropped():
    def record(name: str, path: str) -> logging.LogRecord:
        return logging.LogRecord(name, logging.ERROR, path, 1, "Exception while sending command.", None, None)

    keep = DropPy4J()
    assert not keep.filter(record("py4j.clientserver", "/venv/py4j/clientserver.py"))
    assert not keep.filter(record("root", "/venv/lib/python3.11/site-packages/py4j/java_gateway.py"))
    assert keep.filter(record("headwater.postgres", "/repo/headwater/connectors/postgres/source.py"))
