"""GTIDs of the two servers: MariaDB's `domain-server-sequence` positions and MySQL's `uuid:interval` sets.

A connector's offsets keep the GTIDs of everything delivered (Debezium's `gtids` offset field) as
the server spells them; `GtidFormat` is what the binlog connector needs of them: the GTID of a
transaction as the binlog's GTID event gives it, adding it to the stored state, and the state as text.

- MariaDB (`MariaGtids`): a GTID is `domain-server-sequence`; the state is one GTID per domain,
  the last one seen there (`@@gtid_binlog_pos`, `@slave_connect_state`), e.g. `0-1-42,1-2-7`.
- MySQL (`MySqlGtids`): a GTID is `uuid:sequence`; the state is a set of intervals per source
  UUID (`@@gtid_executed`), e.g. `3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:11-18`, kept with
  pymysqlreplication's `GtidSet`. `gtid.source.includes` / `gtid.source.excludes` choose the
  source UUIDs whose intervals are kept in the state a restart asks the server for.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from pymysqlreplication.gtid import Gtid, GtidSet

from headwater.connectors.common.filters import patterns


class GtidFormat(Protocol):
    """What the binlog connector needs of one server's GTIDs."""

    def add(self, state: str, gtid: str) -> str:
        """`state` (the text of a GTID state, `""` for none) after the transaction `gtid`."""
        ...

    def normalise(self, state: str) -> str:
        """`state` as this format writes it (checks it, too: ValueError when it is not one)."""
        ...


_MARIA = re.compile(r"(\d+)-(\d+)-(\d+)")


class MariaGtids:
    """MariaDB's GTID positions: the last GTID of each replication domain."""

    def parse(self, state: str) -> dict[int, tuple[int, int]]:
        """domain -> (server id, sequence number)."""
        out: dict[int, tuple[int, int]] = {}
        for part in (p.strip() for p in state.split(",")):
            if not part:
                continue
            m = _MARIA.fullmatch(part)
            if m is None:
                raise ValueError(f"{part!r} is not a MariaDB GTID (domain-server-sequence)")
            out[int(m[1])] = (int(m[2]), int(m[3]))
        return out

    def text(self, parsed: dict[int, tuple[int, int]]) -> str:
        return ",".join(f"{d}-{s}-{n}" for d, (s, n) in sorted(parsed.items()))

    def add(self, state: str, gtid: str) -> str:
        parsed = self.parse(state)
        parsed.update(self.parse(gtid))
        return self.text(parsed)

    def normalise(self, state: str) -> str:
        return self.text(self.parse(state))


class MySqlGtids:
    """MySQL's GTID sets, filtered by source UUID (`gtid.source.includes` / `gtid.source.excludes`)."""

    def __init__(self, includes: Sequence[str] | None = None, excludes: Sequence[str] | None = None):
        self.includes = patterns(includes)
        self.excludes = patterns(excludes)

    def kept(self, uuid: str) -> bool:
        """Whether the intervals of source `uuid` are kept (Debezium's anchored regexes on the UUID)."""
        if self.includes is not None:
            return any(p.fullmatch(uuid) for p in self.includes)
        return not (self.excludes is not None and any(p.fullmatch(uuid) for p in self.excludes))

    def parse(self, state: str) -> GtidSet:
        text = "".join(state.split())
        try:
            return GtidSet(text or None)
        except Exception as exc:  # noqa: BLE001 - the library raises bare Exception on bad intervals
            raise ValueError(f"{state!r} is not a MySQL GTID set (uuid:interval[:interval],...): {exc}") from None

    def text(self, gtids: GtidSet) -> str:
        return ",".join(str(g) for g in sorted(gtids.gtids, key=lambda g: g.sid))

    def add(self, state: str, gtid: str) -> str:
        parsed = self.parse(state)
        one = Gtid(gtid)
        if self.kept(one.sid):
            parsed.merge_gtid(one)
        return self.text(parsed)

    def normalise(self, state: str) -> str:
        parsed = self.parse(state)
        return self.text(GtidSet([g for g in parsed.gtids if self.kept(g.sid)]))
