"""headwater: change data capture for Python and Apache Spark, with Debezium's events."""

__version__ = "0.1.0"
