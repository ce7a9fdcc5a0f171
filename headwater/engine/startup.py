"""Opening a connector at start: the first contact with the database, and what a failure then means.

Debezium checks the connection when a connector starts (its connectors' `validateConnection`) and
refuses to start when the database cannot be reached: a wrong host, port or database fails at
once, whatever `errors.max.retries` says (checked with Debezium 3.6.3's embedded engine: a
refused port and a missing database both end the engine within a second). `errors.max.retries`
and `retriable.restart.connector.wait.ms` govern connections lost *after* the start. headwater
does the same by default; a user who sets `errors.max.retries` explicitly (for example -1, when
headwater starts beside a database that is still coming up) has the start retried that many
times as well, `retriable.restart.connector.wait.ms` apart.
"""

from __future__ import annotations

import logging
import threading

from headwater.config.properties import ConnectorConfig
from headwater.connectors.base import Offset, SourceConnector
from headwater.connectors.errors import ConnectError, SourceError

log = logging.getLogger("headwater.engine")


def start_retries(config: ConnectorConfig) -> int:
    """How often an unreachable database is tried again at start: `errors.max.retries` when the user
    set it (-1: without limit), else 0, as Debezium's start-up connection check."""
    return int(config["errors.max.retries"]) if "errors.max.retries" in config.values else 0


def open_connector(connector: SourceConnector, start: Offset, stopping: threading.Event | None = None) -> None:
    """`connector.open(start)`, retried per `start_retries` while the database cannot be reached; raises
    a `SourceError` saying so, and what was tried, when it still cannot."""
    config = connector.config
    retries = start_retries(config)
    wait_s = config["retriable.restart.connector.wait.ms"] / 1000
    stopping = stopping or threading.Event()
    failures = 0
    while True:
        try:
            connector.open(start)
            return
        except ConnectError as exc:
            failures += 1
            if 0 <= retries < failures:
                if failures == 1:
                    raise
                raise SourceError(f"{exc} (tried {failures} times, errors.max.retries={retries})") from None
            log.warning("%s; trying again in %.1fs (attempt %d of %s)", exc, wait_s, failures + 1,
                        "unlimited" if retries < 0 else retries + 1)
            if stopping.wait(wait_s):
                raise
