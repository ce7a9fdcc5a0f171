"""A snapshot chunk's rows (the text protocol's: tuples, or `TextRows` read in bulk) into `r` events, a block at a time, column-wise.

Building each snapshot record as a dict costs ~15 us a row. Here a block of rows is turned into
columns: a column whose values are all text (or NULL) becomes an Arrow string array that the
common column-wise encoder (`common/columnar.py`) writes by its kernels where the column's text
kind has one (integers, text, DECIMAL in precise mode: `types.json_text_kind`) and otherwise value by
value; a column holding bytes (the binary character set: BINARY, BLOBs, BIT, spatial) goes value by
value through the converter as a row does. JSON events come as `PieceEvents`: their key and value
are joined where they are written (the `jsonl` sink: straight into its lines). The JSON is byte for
byte the row-wise path's (a test compares them); `COLUMN_WISE` False gives the row-wise path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import islice
from typing import Any

import orjson
import pyarrow as pa

from headwater.connectors.binlog.records import BinlogMaker
from headwater.connectors.binlog.textrows import TextRows
from headwater.connectors.common.columnar import SnapshotBlockEncoder, column_json_parts, typed_column
from headwater.connectors.common.records import TableRecords, ValueColumn
from headwater.connectors.common.snapshot import marker
from headwater.events.arrays import binary_array
from headwater.events.batch import Events
from headwater.events.typed import connect_type

COLUMN_WISE = True


def _converted(values: Sequence[Any], col: ValueColumn) -> list[Any]:
    """The values converted as `compile_fill` converts a row's (text by `from_text`, bytes by `from_binary`)."""
    fill = col.null_value if col.optional else col.missing
    out = []
    for v in values:
        if v is None:
            v = fill
        elif v.__class__ is str:
            v = col.from_text(v)
        else:
            v = col.from_binary(v)
        for m in col.maskers:
            v = m(v)
        out.append(v)
    return out


class _Block:
    """One block of rows as columns: text columns as Arrow strings, others as the rows' values. From the
    rows as tuples (`rows`), or from the server's text rows read in bulk (`text`: each column one array)."""

    def __init__(self, te: TableRecords, rows: Sequence[tuple] | None = None, text: TextRows | None = None):
        self.te, self.rows = te, rows
        self.text: dict[int, pa.Array | None] = {}
        self.values: dict[int, list[Any]] = {}
        self.arrays = text.columns() if text is not None else None

    def _column(self, index: int) -> tuple[list[Any], pa.Array | None]:
        if self.arrays is not None:  # the server's text rows: text as it is, bytes as Python values
            if index not in self.text:
                array = self.arrays[index]
                if array.type == pa.string():
                    self.text[index] = array
                else:
                    self.text[index], self.values[index] = None, array.to_pylist()
            return self.values.get(index, []), self.text[index]
        assert self.rows is not None
        values = [r[index] for r in self.rows]
        if index not in self.text:
            texts = all(v is None or v.__class__ is str for v in values)
            self.text[index] = binary_array([None if v is None else v.encode() for v in values], pa.string()) \
                if texts else None
        return values, self.text[index]

    def json(self, col: ValueColumn) -> pa.Array | list:
        """The column's JSON (valid UTF-8: from Arrow strings, or written by orjson), as parts for a join."""
        values, text = self._column(col.index)
        if text is not None:
            return column_json_parts(text, col, self.te.ctx.text_kernels)
        dumps = orjson.dumps
        return binary_array([dumps(v) for v in _converted(values, col)])

    def typed(self, col: ValueColumn, schema: dict) -> pa.Array:
        values, text = self._column(col.index)
        if text is not None:
            return typed_column(text, col, schema, self.te.ctx.text_kernels)
        typ, convert = connect_type(schema)
        return pa.array([None if v is None else convert(v) for v in _converted(values, col)], type=typ)


def _blocks(rows: Iterable[tuple] | TextRows, size: int) -> Iterator[tuple[Sequence[tuple] | TextRows, bool]]:
    """`rows` in blocks of `size`, each with whether it is the last."""
    if isinstance(rows, TextRows):
        n = len(rows)
        for start in range(0, n, size):
            yield rows.slice(start, min(start + size, n)), start + size >= n
        return
    it = iter(rows)
    block = list(islice(it, size))
    while block:
        following = list(islice(it, size))
        yield block, not following
        block = following


def snapshot_events(te: TableRecords, maker: BinlogMaker, rows: Iterable[tuple] | TextRows, *, ts_us: int,
                    version: int, position: dict[str, Any],
                    ends: tuple[bool, bool, bool, bool] | None) -> Iterator[Events]:
    """The `r` events of a chunk's `rows` (in the table's column order; tuples, or the server's text rows),
    `batch_rows` at a time; `ends`: (first table, last table, first chunk, last chunk) for the
    `source.snapshot` markers, None for an incremental snapshot's rows (each `incremental`)."""
    first_table, last_table, first_chunk, last_chunk = ends or (False, False, False, False)
    default = "true" if ends is not None else "incremental"
    encoder = SnapshotBlockEncoder(te, maker, ts_us=ts_us, version=version, **position) if COLUMN_WISE else None
    sources: dict[str, orjson.Fragment] = {}
    first = True
    for block, last in _blocks(rows, te.ctx.batch_rows):
        n = len(block)
        marks: dict[int, str] = {}
        if ends is not None:
            marks[0] = marker(first_table, last_table, first_chunk and first, last_chunk and last and n == 1)
            if n > 1:
                marks[n - 1] = marker(first_table, last_table, False, last_chunk and last)
        if encoder is not None:
            b = _Block(te, text=block) if isinstance(block, TextRows) else _Block(te, block)
            yield encoder.encode([], {i: m for i, m in marks.items() if m != default}, default, rows=n,
                                 json_of=b.json, typed_of=b.typed, utf8_json=True, pieces=True)
        else:
            tuples = block.tuples() if isinstance(block, TextRows) else block
            for i, values in enumerate(tuples):
                mark = marks.get(i, default)
                src = sources.get(mark)
                if src is None:
                    src = sources[mark] = orjson.Fragment(maker.snapshot_source(te, ts_us, mark, position))
                maker.emit(te, "r", te.key(values), None, te.row(values), src, None, version, ts_us)
            yield maker.take()
        first = False
