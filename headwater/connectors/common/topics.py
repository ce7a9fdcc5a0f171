"""Topic names as Debezium's default naming strategy (`SchemaTopicNamingStrategy`) makes them.

A data topic is `<topic.prefix><delimiter><part>...` (a connector's parts: PostgreSQL's schema and
table, MySQL's database and table), blank parts left out, and then every character a Kafka topic
name cannot hold (anything but ASCII letters, digits, `.`, `_` and `-`) replaced by `_`, one `_`
per UTF-16 code unit as Java counts them (a character outside the BMP becomes `__`). The
transaction topic `<prefix><delimiter><topic.transaction>` and the heartbeat topic
`<topic.heartbeat.prefix><delimiter><prefix>` are made of configuration values that Debezium (and
headwater's configuration) refuse unless they are valid topic names, so they are joined as they are. The key, value and envelope schema names of a table
are built from its data topic, so they carry the same replacements.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from headwater.config.properties import ConnectorConfig

REPLACEMENT = "_"
_INVALID = re.compile(r"[^A-Za-z0-9._-]")


def _replacement(match: re.Match[str]) -> str:
    return REPLACEMENT * (2 if ord(match.group()) > 0xFFFF else 1)  # a surrogate pair in Java


def sanitized_topic_name(name: str) -> str:
    """`name` with each character a Kafka topic name cannot hold replaced by `_`."""
    return _INVALID.sub(_replacement, name)


def _blank(part: str) -> bool:
    """Java's `String.trim().isEmpty()`: only characters up to U+0020."""
    return all(c <= " " for c in part)


@dataclass(frozen=True)
class TopicNames:
    """The topic names of one connector configuration (picklable)."""

    prefix: str
    delimiter: str
    transaction_name: str
    heartbeat_prefix: str

    @classmethod
    def from_config(cls, cfg: ConnectorConfig) -> TopicNames:
        return cls(prefix=cfg["topic.prefix"], delimiter=cfg["topic.delimiter"],
                   transaction_name=cfg["topic.transaction"], heartbeat_prefix=cfg["topic.heartbeat.prefix"])

    def data(self, *parts: str) -> str:
        """The topic of a data collection named by `parts` (e.g. schema and table)."""
        return sanitized_topic_name(self.delimiter.join(p for p in (self.prefix, *parts) if not _blank(p)))

    def transaction(self) -> str:
        return f"{self.prefix}{self.delimiter}{self.transaction_name}"

    def heartbeat(self) -> str:
        return f"{self.heartbeat_prefix}{self.delimiter}{self.prefix}"
