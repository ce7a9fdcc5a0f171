"""PostgreSQL's streaming positions: their offset fields, read back and written."""

from __future__ import annotations

from headwater.connectors.postgres.positions import StreamPosition


def test_offset_fields_round_trip():
    pos = StreamPosition(lsn_commit=100, txid=7, msg=3, lsn=90, ts_usec=5, last_commit_lsn=80, last_commit_ts=4)
    off = pos.to_offset()
    assert "snapshot" not in off and "epoch" not in off  # the lifecycle's, not the position's
    assert StreamPosition.from_offset(off) == pos
    assert StreamPosition.from_offset({"lsn_commit": 100}).last_commit_lsn == 100  # offsets written without it
