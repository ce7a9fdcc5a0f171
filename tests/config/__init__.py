"""Tests of headwater.config and the connector registry: properties, validation, refusals."""
