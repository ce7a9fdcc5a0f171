"""Errors of the connector contract, raised by every connector and understood by the engine and CLI.

`SourceError` is a problem with the source database that the user must act on (its message says
what to do); `ConnectError` is one that retrying may mend (the server could not be reached);
`PositionLost` means the database can no longer serve the stored position (a dropped or
invalidated slot, a purged binlog), so changes may have been lost.
"""

from __future__ import annotations


class SourceError(RuntimeError):
    """A problem with the source database that the user must act on; the message says what to do."""


class ConnectError(SourceError):
    """The server could not be reached (retriable, per `errors.max.retries`)."""


class PositionLost(SourceError):
    """The database can no longer serve the position asked for (slot or log gone)."""
