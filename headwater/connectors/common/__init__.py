"""The shared connector layer: what every connector (log-based or trigger-based) builds on.

Each database package under `headwater.connectors` keeps only what is its own (its log reader,
its type table, the connector-specific tail of the `source` block, its locking). Here: the
snapshot -> stream lifecycle (`phases`), snapshot planning (`snapshot`), the lock-free chunked
snapshot's merge, progress and stream filter (`chunkmerge`, `chunkprogress`), the transaction buffer
and streaming planner (`txbuffer`, `messages`, `codec`, `planner`), records built row-wise and
column-wise (`records`, `columnar`, `source_info`, `topics`), table filters (`filters`), and
Debezium's semantic types and the Java behaviour its JSON shows (`semantics`, `java`).
"""
