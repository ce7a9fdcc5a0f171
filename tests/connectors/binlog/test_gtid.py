"""GTIDs of both servers, without a server: MariaDB's per-domain positions and MySQL's `uuid:interval` sets
(MySQL's written to the spec and MySQL's documented set syntax: no MySQL server runs here)."""

from __future__ import annotations

import pytest

from headwater.connectors.binlog.gtid import MariaGtids, MySqlGtids
from headwater.connectors.binlog.positions import BinlogPosition, split_pos, stream_pos

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"


def test_mariadb_keeps_the_last_gtid_of_each_domain():
    g = MariaGtids()
    state = ""
    for gtid in ("0-1-1", "0-1-2", "1-7-40", "0-2-3"):
        state = g.add(state, gtid)
    assert state == "0-2-3,1-7-40"
    assert g.normalise(" 1-7-40, 0-2-3 ") == "0-2-3,1-7-40"
    with pytest.raises(ValueError, match="domain-server-sequence"):
        g.normalise("0-1")


def test_mysql_sets_merge_intervals_per_source():
    g = MySqlGtids()
    state = ""
    for n in (1, 2, 3, 5, 4, 9):
        state = g.add(state, f"{A}:{n}")
    state = g.add(state, f"{B}:7")
    assert state == f"{A}:1-5:9,{B}:7"
    assert g.normalise(f"{B}:1-3,\n{A}:1-2") == f"{A}:1-2,{B}:1-3"


def test_mysql_source_filters_choose_the_uuids_kept():
    assert MySqlGtids(includes=["3e11.*"]).normalise(f"{A}:1-5,{B}:1-2") == f"{A}:1-5"
    assert MySqlGtids(excludes=["3e11.*"]).normalise(f"{A}:1-5,{B}:1-2") == f"{B}:1-2"
    assert MySqlGtids(excludes=["3e11.*"]).add(f"{B}:1", f"{A}:9") == f"{B}:1"


def test_a_malformed_mysql_set_is_refused():
    with pytest.raises(ValueError, match="not a MySQL GTID set"):
        MySqlGtids().normalise("zz:1-")


def test_positions_order_across_files_and_round_trip():
    assert stream_pos("binlog.000002", 4) > stream_pos("binlog.000001", 999_999)
    assert split_pos("binlog.000001", stream_pos("binlog.000012", 345)) == ("binlog.000012", 345)
    pos = BinlogPosition("binlog.000003", 1234, "0-1-9", 2, stream_pos("binlog.000003", 1300), 9999)
    assert BinlogPosition.from_offset(pos.to_offset()) == pos
    assert pos.to_offset() == {"file": "binlog.000003", "pos": 1234, "gtids": "0-1-9", "event": 2,
                               "txn": stream_pos("binlog.000003", 1300), "commit": 9999}
