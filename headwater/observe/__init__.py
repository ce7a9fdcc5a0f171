"""Watching a running connector: Debezium's snapshot and streaming metrics, notifications, the
metrics file `headwater status` reads, and the optional Prometheus endpoint."""
