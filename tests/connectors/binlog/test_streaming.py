"""`streaming`'s per-event `source` fields of a column-wise block: each row's JSON of its event's value, as
orjson writes it (texts quoted column-wise when many differ, per value when one needs escaping); what a
task worker imports to unpickle and decode a slice."""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa

from headwater.connectors.binlog.streaming import _ints_json_per_row, _json_per_row
from headwater.events.arrays import int64_array


def _rows(out: pa.Array | bytes, n: int) -> list[bytes]:
    return [out] * n if isinstance(out, bytes) else out.to_pylist()


def test_texts_of_many_events_are_their_json():
    gtids = [f"0-1-{i}" for i in range(100)] + [None, "0-1-5"]
    per_row = np.repeat(np.arange(len(gtids)), 2)
    got = _rows(_json_per_row(gtids, int64_array(per_row)), len(per_row))
    assert got == [orjson.dumps(gtids[e]) for e in per_row]
    queries = [f'INSERT INTO t VALUES ({i}, "a\\b")' for i in range(100)] + ["tab\there"]  # JSON escapes these
    got = _rows(_json_per_row(queries, int64_array(np.arange(len(queries)))), len(queries))
    assert got == [orjson.dumps(q) for q in queries]


def test_one_value_of_every_event_is_written_once():
    assert _json_per_row(["binlog.000001"] * 3, int64_array(np.zeros(5, dtype=np.int64))) == b'"binlog.000001"'
    assert _json_per_row([None, None], int64_array(np.zeros(2, dtype=np.int64))) == b"null"
    assert _ints_json_per_row(np.array([7, 7]), np.array([0, 1, 1])) == b"7"
    assert _rows(_ints_json_per_row(np.array([7, -8]), np.array([0, 1, 1])), 3) == [b"7", b"-8", b"-8"]


def test_a_slice_from_the_codec_unpickles_and_decodes_without_the_driver_side_modules():
    """A task worker unpickles a slice with every work unit: what the codec puts in it must not import the
    driver's source (pymysql's connections for catalog queries, the snapshot, the schema history's DDL
    parser and sqlglot) nor the binlog reader; decoding it names a transaction without a GTID by its start."""
    import pickle
    import subprocess
    import sys
    from types import SimpleNamespace

    from headwater.connectors.binlog import framing as fr
    from headwater.connectors.binlog.positions import stream_pos
    from headwater.connectors.binlog.streaming import BinlogCodec
    from headwater.connectors.common.messages import Segment
    from headwater.connectors.mariadb.context import MariaDbContext
    from headwater.connectors.registry import validate_connector
    from tests.connectors.binlog.test_properties import props

    ctx = MariaDbContext.from_config(validate_connector(props("mariadb", provide__transaction__metadata="true")))
    reader = SimpleNamespace(txn_info={})
    tracker = SimpleNamespace(tables_at=lambda pos: {})
    codec = BinlogCodec(ctx, "mariadb", reader, tracker, lambda: "binlog.000001")  # type: ignore[arg-type]
    begin, commit = stream_pos("binlog.000001", 400), stream_pos("binlog.000001", 500)
    annotate = bytes([fr.MARIADB_ANNOTATE_ROWS]) + bytes(fr.HEADER_SIZE) + b"INSERT INTO t VALUES (1)"
    segment = Segment(7, begin, commit, commit + 30, 1_700_000_000_000, True, True, True, 1, {})
    unit = pickle.dumps(codec.slice({}, [segment], [(begin + 50, annotate)], None))
    heavy = ("sqlglot", "headwater.connectors.binlog.ddl", "headwater.connectors.binlog.source",
             "headwater.connectors.binlog.reader", "headwater.connectors.binlog.snapshot",
             "headwater.connectors.binlog.tracking", "headwater.connectors.mariadb.source")
    code = ("import pickle, sys\n"
            "unit = pickle.loads(sys.stdin.buffer.read())\n"
            "text = str([r for batch in unit.read() for r in batch.to_arrow().to_pylist()])\n"
            "print(text.count('file=binlog.000001,pos=400'), *[m for m in " + repr(heavy) + " if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], input=unit, capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.decode().split() == ["4"]  # (BEGIN and END, each in its key and its value)
