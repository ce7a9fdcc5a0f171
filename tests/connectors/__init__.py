"""Tests of headwater.connectors, one package per connector and one for the shared layer."""
