"""Tests of headwater.engine: running a connector without Spark."""
