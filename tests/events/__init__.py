"""Tests of headwater.events: the change events, their schemas and encodings."""
