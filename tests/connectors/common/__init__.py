"""Tests of headwater.connectors.common, the shared connector layer (no server needed)."""
