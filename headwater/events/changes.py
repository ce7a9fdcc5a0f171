"""Spark's change-feed type of a Debezium operation (`_change_type` of the source's rows)."""

from __future__ import annotations

#: op -> _change_type; other records (truncates, messages, transaction metadata) and tombstones have none
CHANGE_TYPES = {"c": "insert", "r": "insert", "u": "update_postimage", "d": "delete"}
