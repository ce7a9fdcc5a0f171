"""The pipeline on Spark: the `headwater` streaming source, the exactly-once sinks, and the query builder."""
