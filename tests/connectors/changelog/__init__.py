"""A second connector, built in the tests from the shared connector layer: a Databus-style trigger log.

The test writes the captured tables and, through triggers of its own, a change-log table
(`hw_changelog`: `seq`, `txid`, `tbl`, `op`, `before`, `after`, `committed_at`). The connector reads
both with plain SQL (psycopg2, no replication protocol): the snapshot in primary-key chunks under one
exported snapshot, then the log rows after the snapshot's last `seq`, grouped into transactions and
planned by the shared streaming planner. It imports nothing from `headwater.connectors.postgres`:
it is the proof that a connector is the shared layer plus a few modules of its own.

The log's contract: rows are appended in commit order (the writers serialize on the log table until
they commit, as the tests' trigger does with a table lock), so a `seq` is a commit-ordered position.
"""
