"""`events.pieces.join_pieces` joins rows of parts as Arrow's element-wise join does (`join_parts`), and the
`jsonl` sink's lines of `PieceEvents` are those of their joined JSON rows; `check_utf8` refuses what a cast
to string refuses."""

from __future__ import annotations

import random
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from headwater.connectors.common.columnar import join_parts
from headwater.connectors.common.context_headers import ContextHeaders
from headwater.events.arrays import binary_array
from headwater.events.batch import ArrowEvents, PieceEvents
from headwater.events.formats.json import JsonOptions
from headwater.events.headers import text_header_entries
from headwater.events.pieces import Choice, check_utf8, join_pieces, slice_parts
from headwater.spark.sinks import jsonl_lines, piece_lines, sliced_lines

# values a JSON text may hold: empty, escaped, multi-byte UTF-8, long
VALUES = [b"", b"a", b'"q\\"', b"\\n\\u0000", "ünïcödé 日本 🎉".encode(), b"x" * 300, b"12345678901234567890"]


def _column(rnd: random.Random, n: int, offset: int = 0) -> pa.Array:
    """A binary column of `n` values (sliced from a longer one when `offset`)."""
    values = [rnd.choice(VALUES) for _ in range(n + offset)]
    return binary_array(values).slice(offset, n)


def _rows(rnd: random.Random, n: int) -> tuple[list, list]:
    """Random parts for `n` rows, and the same parts as `join_parts` takes them (a choice as a column)."""
    parts: list = []
    plain: list = []
    for _ in range(rnd.randrange(1, 9)):
        kind = rnd.choice(["literal", "empty", "column", "sliced", "choice"])
        if kind in ("literal", "empty"):
            p = rnd.choice(VALUES[1:]) if kind == "literal" else b""
            parts.append(p)
            plain.append(p)
        elif kind == "choice":
            options = tuple(rnd.choice(VALUES) for _ in range(rnd.randrange(1, 4)))
            which = np.array([rnd.randrange(len(options)) for _ in range(n)], dtype=np.int64)
            parts.append(Choice(options, which))
            plain.append(binary_array([options[i] for i in which]))
        else:
            col = _column(rnd, n, 3 if kind == "sliced" else 0)
            parts.append(col)
            plain.append(col)
    return parts, plain


@pytest.mark.parametrize("seed", range(40))
def test_joined_pieces_are_arrows_element_wise_join(seed: int):
    rnd = random.Random(seed)
    n = rnd.choice([1, 2, 17, 300])
    parts, plain = _rows(rnd, n)
    want = join_parts(plain)
    if not isinstance(want, pa.Array):  # (literals only: one scalar)
        want = pa.repeat(want, n)
    assert join_pieces(parts, n).to_pylist() == want.to_pylist()
    start, stop = sorted(rnd.sample(range(n + 1), 2))
    assert join_pieces(slice_parts(parts, start, stop), stop - start).to_pylist() == want[start:stop].to_pylist()


def test_no_rows_and_no_parts():
    assert join_pieces([b"a", binary_array([])], 0).to_pylist() == []
    assert join_pieces([], 3).to_pylist() == [b"", b"", b""]
    assert join_pieces([b""], 2).to_pylist() == [b"", b""]


def test_a_column_of_another_length_or_with_nulls_is_refused():
    with pytest.raises(ValueError):
        join_pieces([binary_array([b"a", None])], 2)
    with pytest.raises(ValueError):
        join_pieces([binary_array([b"a"])], 2)


@pytest.mark.parametrize("text", [b"\xff", b"\xc3", b"a\xe6\x97", "日本".encode()])
def test_check_utf8_refuses_what_a_cast_refuses(text: bytes):
    joined = join_pieces([b'"', binary_array([b"ok", text]), b'"'], 2)
    try:
        want = joined.cast(pa.string())
    except pa.ArrowInvalid:
        with pytest.raises(pa.ArrowInvalid):
            check_utf8(joined)
        return
    assert check_utf8(joined).equals(want)


def _events(rnd: random.Random, n: int, key: bool, headers: str) -> PieceEvents:
    parts, _ = _rows(rnd, n)
    value = [b'{"v":"', *parts, b'"}']
    events = PieceEvents('to"p\\ic', "r", [b'{"k":', _column(rnd, n), b"}"] if key else None, value, n, 7, 1000,
                         utf8=True)
    if headers == "same":
        entries = text_header_entries([("a", '"x"'), ("b", '"ü"')])
        events.headers = pa.ListArray.from_arrays(pa.array(np.arange(n + 1) * 2, pa.int32()),
                                                  pc.take(entries, pa.array(np.tile([0, 1], n))))
    elif headers == "each":  # (rows with headers of their own, and without)
        entries = text_header_entries([("a", f'"{i}"') for i in range(n)])
        offsets = np.arange(n + 1, dtype=np.int32)
        events.headers = pa.ListArray.from_arrays(pa.array(offsets), entries,
                                                  mask=pa.array([i % 3 == 0 for i in range(n)]))
    return events


@pytest.mark.parametrize("headers", ["none", "same", "each"])
@pytest.mark.parametrize("key", [True, False])
@pytest.mark.parametrize("seed", range(6))
def test_the_lines_of_piece_events_are_those_of_their_json_rows(seed: int, key: bool, headers: str):
    rnd = random.Random(seed)
    n = rnd.choice([1, 5, 300])
    events = _events(rnd, n, key, headers)
    want = b"".join(line.encode() for line in jsonl_lines(events.to_arrow()).to_pylist())
    for at_once in (n, 7):
        assert b"".join(b"".join(v.as_buffer().to_pybytes() for v in lines) for lines in piece_lines(events, at_once)) \
            == want
        assert [len(lines) for lines in piece_lines(events, at_once)] \
            == [len(lines) for lines in sliced_lines(events.to_arrow(), at_once)]


def test_piece_events_not_known_to_be_utf8_are_checked():
    events = PieceEvents("t", "r", None, [b'"', binary_array([b"ok", b"\xff"]), b'"'], 2, 1, 1, utf8=False)
    with pytest.raises(pa.ArrowInvalid):
        events.to_arrow()
    with pytest.raises(pa.ArrowInvalid):
        list(piece_lines(events, 10))
    events.value = [b'"', binary_array([b"ok", "ü".encode()]), b'"']
    assert events.to_arrow().column("value").to_pylist() == ['"ok"', '"ü"']


@pytest.mark.parametrize("times", [1, 2])
@pytest.mark.parametrize("topic", ["p", "p.db.t"])
def test_context_headers_of_piece_events_are_those_of_their_json_rows(times: int, topic: str):
    """Added once (every row's the same entries, kept as such) or again (then a column)."""
    events = replace(_events(random.Random(times), 9, True, "none"), topic=topic)
    rows = ArrowEvents(events.to_arrow())
    for _ in range(times):
        added, joined = (ContextHeaders("p", "mariadb", "run").apply(e, JsonOptions()) for e in (events, rows))
        assert isinstance(added, PieceEvents) and isinstance(joined, ArrowEvents)
        events, rows = added, joined
    assert (events.shared_headers is not None) == (times == 1)
    assert events.to_arrow().equals(rows.to_arrow())
    assert [line for lines in piece_lines(events, 4) for line in lines.to_pylist()] \
        == [line.encode() for line in jsonl_lines(rows.to_arrow()).to_pylist()]
