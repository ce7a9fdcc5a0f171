"""GTIDs of the two servers: MariaDB's `domain-server-sequence` positions and MySQL's `uuid:interval` sets.

A connector's offsets keep the GTIDs of everything delivered (Debezium's `gtids` offset field) as
the server spells them; `GtidFormat` is what the binlog connector needs of them: the GTID of a
transaction as the binlog's GTID event gives it, adding it to the stored state, and the state as text.

- MariaDB (`MariaGtids`): a GTID is `domain-server-sequence`; the state is one GTID per domain,
  the last one seen there (`@@gtid_binlog_pos`, `@slave_connect_state`), e.g. `0-1-42,1-2-7`.
- MySQL (`MySqlGtids`): a GTID is `uuid:sequence`; the state is a set of intervals per source
  UUID (`@@gtid_executed`), e.g. `3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:11-18`, kept as a
  `GtidSet` (interval arithmetic: union, difference, containment; python-mysql-replication's own
  set raises on overlapping intervals and has no difference of sets). `gtid.source.includes` /
  `gtid.source.excludes` choose the source UUIDs whose intervals are kept. A restart from a stored
  set asks the server with COM_BINLOG_DUMP_GTID (`dump_gtid_payload`) for the set Debezium's MySQL
  connector builds (`MySqlGtids.dump_set`), after checking the server still holds every transaction
  after it (`MySqlGtids.lost`, also what `snapshot.mode=when_needed` asks).
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Sequence
from typing import Protocol

from headwater.connectors.common.filters import patterns


class GtidFormat(Protocol):
    """What the binlog connector needs of one server's GTIDs."""

    def add(self, state: str, gtid: str) -> str:
        """`state` (the text of a GTID state, `""` for none) after the transaction `gtid`."""
        ...

    def normalise(self, state: str) -> str:
        """`state` as this format writes it (checks it, too: ValueError when it is not one)."""
        ...

    def tracker(self, state: str) -> GtidTracker:
        """A running state from `state` on, for the reader (one transaction after another)."""
        ...


class GtidTracker(Protocol):
    """A GTID state that transactions are added to one by one; `state()` is a cheap snapshot and
    `text(snapshot)` the state as `GtidFormat.add` would have written it (only asked for where an
    offset needs it)."""

    def add(self, gtid: str) -> None:
        ...

    def state(self) -> object:
        ...

    def text(self, snapshot: object) -> str:
        ...


class TextTracker:
    """Any format's running state kept as its text (`GtidFormat.add` per transaction)."""

    def __init__(self, fmt: GtidFormat, state: str):
        self.fmt, self.current = fmt, state

    def add(self, gtid: str) -> None:
        self.current = self.fmt.add(self.current, gtid)

    def state(self) -> object:
        return self.current

    def text(self, snapshot: object) -> str:
        return str(snapshot)


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

    def tracker(self, state: str) -> GtidTracker:
        return MariaTracker(self, state)


class MariaTracker:
    """MariaDB's running state as domain -> (server id, sequence number), a GTID added without a regex; a
    snapshot is the items as a tuple (a domain or two), its text made only when asked for."""

    def __init__(self, fmt: MariaGtids, state: str):
        self.fmt = fmt
        self.parsed = fmt.parse(state)
        self.snapshot: tuple[tuple[int, tuple[int, int]], ...] = tuple(self.parsed.items())

    def add(self, gtid: str) -> None:
        domain, server, seq = gtid.split("-")
        self.add_ids(int(domain), int(server), int(seq))

    def add_ids(self, domain: int, server: int, seq: int) -> None:
        """`add` of a GTID given as its numbers (as the reader reads them from a GTID event)."""
        self.parsed[domain] = (server, seq)
        self.snapshot = tuple(self.parsed.items())

    def state(self) -> object:
        return self.snapshot

    def text(self, snapshot: object) -> str:
        return self.fmt.text(dict(snapshot))  # type: ignore[call-overload]


_UUID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
_INTERVAL = re.compile(r"(\d+)(?:-(\d+))?")
Intervals = tuple[tuple[int, int], ...]  # sorted, disjoint, not adjacent: (first, last + 1)


def _normal(intervals: list[tuple[int, int]]) -> Intervals:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(i for i in intervals if i[0] < i[1]):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _minus(a: Intervals, b: Intervals) -> Intervals:
    out: list[tuple[int, int]] = []
    for lo, hi in a:
        for blo, bhi in b:
            if bhi <= lo or blo >= hi:
                continue
            if blo > lo:
                out.append((lo, blo))
            lo = max(lo, bhi)
            if lo >= hi:
                break
        if lo < hi:
            out.append((lo, hi))
    return _normal(out)


class GtidSet:
    """A MySQL GTID set (`uuid:interval[:interval],...`): per source UUID (lower case) its transaction
    numbers as half-open intervals, the form MySQL's replication protocol sends them in."""

    def __init__(self, sets: dict[str, Intervals] | None = None):
        self.sets = {u: i for u, i in (sets or {}).items() if i}

    @classmethod
    def parse(cls, text: str) -> GtidSet:
        """The set MySQL writes (`@@gtid_executed`, Debezium's `gtids` offset field); ValueError if not one."""
        sets: dict[str, list[tuple[int, int]]] = {}
        for part in "".join(text.split()).split(","):
            if not part:
                continue
            uuid, *intervals = part.split(":")
            if not _UUID.fullmatch(uuid) or not intervals:
                raise ValueError(f"{part!r} is not uuid:interval[:interval]")
            for interval in intervals:
                m = _INTERVAL.fullmatch(interval)
                first, last = (int(m[1]), int(m[2] or m[1])) if m else (0, -1)
                if m is None or first < 1 or last < first:
                    raise ValueError(f"{interval!r} in {part!r} is not an interval n or n-m (1 <= n <= m)")
                sets.setdefault(uuid.lower(), []).append((first, last + 1))
        return cls({u: _normal(i) for u, i in sets.items()})

    def __str__(self) -> str:
        return ",".join(f"{u}:" + ":".join(str(lo) if hi == lo + 1 else f"{lo}-{hi - 1}" for lo, hi in i)
                        for u, i in sorted(self.sets.items()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GtidSet) and self.sets == other.sets

    def __or__(self, other: GtidSet) -> GtidSet:
        keys = self.sets.keys() | other.sets.keys()
        return GtidSet({u: _normal([*self.sets.get(u, ()), *other.sets.get(u, ())]) for u in keys})

    def __sub__(self, other: GtidSet) -> GtidSet:
        return GtidSet({u: _minus(i, other.sets.get(u, ())) for u, i in self.sets.items()})

    def __and__(self, other: GtidSet) -> GtidSet:
        return self - (self - other)

    def __le__(self, other: GtidSet) -> bool:
        """Whether every transaction of this set is in `other`."""
        return not (self - other).sets

    def retain(self, keep: Callable[[str], bool]) -> GtidSet:
        """The intervals of the UUIDs `keep` accepts."""
        return GtidSet({u: i for u, i in self.sets.items() if keep(u)})

    def replaced_by(self, other: GtidSet) -> GtidSet:
        """This set with each UUID of `other` holding `other`'s intervals instead (Debezium's `GtidSet.with`)."""
        return GtidSet({**self.sets, **other.sets})

    def encoded(self) -> bytes:
        """The set as COM_BINLOG_DUMP_GTID carries it: the number of UUIDs, then per UUID its 16 bytes, the
        number of intervals and each interval's first and end (exclusive), all integers 8 bytes little-endian."""
        out = [struct.pack("<Q", len(self.sets))]
        for u, intervals in sorted(self.sets.items()):
            out.append(bytes.fromhex(u.replace("-", "")) + struct.pack("<Q", len(intervals)))
            out += [struct.pack("<QQ", lo, hi) for lo, hi in intervals]
        return b"".join(out)


COM_BINLOG_DUMP_GTID = 0x1E
BINLOG_THROUGH_GTID = 0x04


def dump_gtid_payload(server_id: int, gtids: GtidSet, file: str = "", pos: int = 4) -> bytes:
    """COM_BINLOG_DUMP_GTID's body (after the command byte): flags (BINLOG_THROUGH_GTID), the replica's
    server id, the binlog file name (empty: the server finds the file from the set) and position, and the
    GTID set the replica has executed; the server sends every transaction not in it."""
    data = gtids.encoded()
    name = file.encode()
    return (struct.pack("<HII", BINLOG_THROUGH_GTID, server_id, len(name)) + name + struct.pack("<QI", pos, len(data))
            + data)


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
        try:
            return GtidSet.parse(state)
        except ValueError as exc:
            raise ValueError(f"{state!r} is not a MySQL GTID set (uuid:interval[:interval],...): {exc}") from None

    def add(self, state: str, gtid: str) -> str:
        one = self.parse(gtid)
        return str(self.parse(state) | one.retain(self.kept))

    def normalise(self, state: str) -> str:
        return str(self.parse(state).retain(self.kept))

    def tracker(self, state: str) -> GtidTracker:
        return TextTracker(self, state)

    def dump_set(self, state: str, executed: str, purged: str) -> GtidSet:
        """The set a restart from the offset's `state` asks the server for, as Debezium's MySQL connector
        builds it: the offset's intervals of the kept UUIDs; for a UUID the offset does not know, the
        server's purged intervals (those it can no longer send), and nothing else (the server sends all of
        such a new source's transactions it has)."""
        offset = self.parse(state).retain(self.kept)
        known = self.parse(executed).retain(lambda u: self.kept(u) and u in offset.sets)
        return known.replaced_by(self.parse(purged)).replaced_by(offset)

    def lost(self, state: str, executed: str, purged: str) -> str | None:
        """Why the server cannot resume from the offset's `state` (None when it can), as Debezium decides it:
        the server must have executed every transaction of the state, and must still hold every kept
        transaction after it (none of them purged)."""
        offset = self.parse(state)
        if not offset.sets:
            return None
        available = self.parse(executed)
        if not available.sets:
            return "the server has no GTIDs (gtid_mode is OFF), but the offset holds the GTID set " + state
        if not offset <= available:
            return (f"the server's GTID set {available} lacks transactions of the stored GTID set {offset} "
                    f"({offset - available})")
        missing = (available.retain(self.kept) - offset) & self.parse(purged)
        if missing.sets:
            return f"the server purged the transactions {missing} after the stored GTID set {offset}"
        return None
