"""Partial row images: the columns a rows event does not carry (`binlog_row_image` NOBLOB or MINIMAL).

A rows event says, per image, which columns it carries (its columns-present bitmaps). With FULL every
column is there. With NOBLOB (global, or set by one session) the server leaves out BLOB and TEXT
columns that do not identify the row and that the statement did not change (an insert leaves out
those it did not set); with MINIMAL it leaves out every column it can. The decoders (`rows.py`, the
library path of `streaming.py`, the lock-free snapshot's window) put `ABSENT` where a column is left
out. As Debezium's binlog connectors do after 3.6 (`BinlogStreamingChangeEventSource.alignRowToTable`
on its development branch; 3.6.3, the version the recorded events come from, stops on every partial
image: "internal schema size N, but row size M"), an absent BLOB/TEXT column (its type name holds
BLOB or TEXT, Debezium's `RowImageUtils.isBlobOrTextColumn`; here MariaDB's JSON, a LONGTEXT, too)
is written as `unavailable.value.placeholder` (`__debezium_unavailable_value`: its bytes in a BLOB,
its text in a TEXT column, converted as any value of the column), in `before` and `after` alike:
`ABSENT` is the records' `unavailable` marker and the placeholder each such column's converter's
`toast_placeholder` (`types.converter`). `check_images` stops the stream at any other absent column
(MINIMAL): it cannot be told from a NULL and its type has no placeholder (Debezium's branch writes
NULL there); nor can an absent key column be a key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from headwater.connectors.binlog.schema import Table
from headwater.connectors.errors import SourceError

DEFAULT_PLACEHOLDER = "__debezium_unavailable_value"


class _Absent:
    """The value of a column a row image does not carry."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"

    def __reduce__(self) -> str:
        return "ABSENT"  # one object, also after pickling


ABSENT = _Absent()


def is_blob_or_text(type_name: str) -> bool:
    """A BLOB or TEXT family column (TINYBLOB .. LONGTEXT): the columns NOBLOB leaves out."""
    upper = type_name.upper()
    return "BLOB" in upper or "TEXT" in upper


def placeholder_able(type_name: str) -> bool:
    """Whether an absent value of a column of this type is written as the placeholder."""
    return is_blob_or_text(type_name) or type_name.upper().split("(")[0].strip() == "JSON"


def placeholder_bytes(placeholder: str) -> bytes:
    """`unavailable.value.placeholder` as bytes: `hex:<digits>` gives raw bytes, else its UTF-8."""
    return bytes.fromhex(placeholder[4:]) if placeholder.startswith("hex:") else placeholder.encode()


class ImageCheck:
    """Which columns of a table may be absent from an image (`check`): placeholder-able columns outside the key."""

    def __init__(self, table: Table, key: Sequence[str]):
        keys = set(key)
        self.names = [c.name for c in table.columns]
        self.allowed = [placeholder_able(c.type_name) and c.name not in keys for c in table.columns]

    def check(self, images: Sequence[Sequence[tuple[Any, ...]]], where: str) -> None:
        """SourceError naming the columns if an image lacks a column that may not be absent (`where`: "at
        <file>:<pos> for <table>", or "in ...")."""
        refused: set[int] = set()
        for row in images:
            for image in row:
                for i, v in enumerate(image):
                    if v is ABSENT and not self.allowed[i]:
                        refused.add(i)
        if refused:
            raise partial_image_error(where, [self.names[i] for i in sorted(refused)])


def partial_image_error(where: str, missing: Sequence[str]) -> SourceError:
    return SourceError(
        f"a rows event {where} has a partial row image (without {', '.join(missing)}): the session that "
        "wrote it had binlog_row_image=MINIMAL, and columns other than BLOB/TEXT ones (or key columns) cannot be "
        "told from NULLs. Set binlog_row_image=FULL (or NOBLOB) in the server's configuration and in every session "
        "that writes the captured tables; the event stays in the binlog, so drop the stored offsets (the Spark "
        "checkpoint or the engine's offset file) to take a new snapshot after it")
