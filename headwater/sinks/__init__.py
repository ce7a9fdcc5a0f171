"""Sinks that keep tables in step with the captured ones: the shared reduction of a batch to the last
change per key (`changes`) and the targets (`jdbc`; Delta Lake and Iceberg)."""
