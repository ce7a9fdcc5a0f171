"""Tests of headwater.cli: the command line."""
