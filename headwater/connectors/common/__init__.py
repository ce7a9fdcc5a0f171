"""The shared connector layer: what every connector (log-based or trigger-based) builds on.

Each database package under `headwater.connectors` keeps only what is its own (its log reader,
its type table, the connector-specific tail of the `source` block, its locking); phases, record
building, column-wise encoding, snapshot planning and the streaming planner live here.
"""
