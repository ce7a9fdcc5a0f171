"""PostgreSQL's positions: LSN text forms, the epoch, and a streaming position's offset fields."""

from __future__ import annotations

import datetime as dt

from headwater.connectors.postgres.positions import PG_EPOCH_US, StreamPosition, lsn_int, lsn_text


def test_lsn_text_and_int():
    for text, value in [("0/0", 0), ("0/16B3748", 0x16B3748), ("A/FF", (10 << 32) + 255),
                        ("FFFFFFFF/FFFFFFFF", (1 << 64) - 1)]:
        assert lsn_int(text) == value and lsn_text(value) == text
    assert lsn_int("a/ff") == (10 << 32) + 255
    assert lsn_int(None) is None and lsn_text(None) is None


def test_pg_epoch():
    assert int(dt.datetime(2000, 1, 1, tzinfo=dt.UTC).timestamp()) * 1_000_000 == PG_EPOCH_US


def test_offset_fields_round_trip():
    pos = StreamPosition(lsn_commit=100, txid=7, msg=3, lsn=90, ts_usec=5, last_commit_lsn=80, last_commit_ts=4)
    off = pos.to_offset()
    assert "snapshot" not in off and "epoch" not in off  # the lifecycle's, not the position's
    assert StreamPosition.from_offset(off) == pos
    assert StreamPosition.from_offset({"lsn_commit": 100}).last_commit_lsn == 100  # offsets written without it
