"""Tests of headwater.spark: the Spark data source, sinks and tables."""
