"""Column-level options shared by relational connectors: filters, masks, truncation, key columns, names.

These follow Debezium's common properties: `column.include.list` / `column.exclude.list`,
`column.mask.with.<n>.chars`, `column.truncate.to.<n>.chars`,
`column.mask.hash[.v2].<algorithm>.with.salt.<salt>`, `message.key.columns`,
and the schema/field name adjustment modes (source-type propagation is part of type conversion).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from headwater.config.patterns import JAVA_DIGESTS, MaskChars, MaskHash, Truncate, parse_pattern
from headwater.config.properties import ConnectorConfig

Masker = Callable[[Any], Any]


def compile_list(values: list[str] | None) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(v, re.IGNORECASE) for v in (values or ()))


def matches(patterns: tuple[re.Pattern[str], ...], name: str) -> bool:
    return any(p.fullmatch(name) for p in patterns)


def java_serialized_string(value: str) -> bytes:
    """Java's ObjectOutputStream form of a String (what Debezium's v1 hash strategy digests)."""
    data = value.encode("utf-8").replace(b"\x00", b"\xc0\x80")
    if len(data) <= 0xFFFF:
        return b"\xac\xed\x00\x05\x74" + len(data).to_bytes(2, "big") + data
    return b"\xac\xed\x00\x05\x7c" + len(data).to_bytes(8, "big") + data


def hash_masker(algorithm: str, salt: str, v2: bool, length: int | None) -> Masker:
    name = JAVA_DIGESTS.get(algorithm.upper())
    if name is None:
        raise ValueError(f"unsupported hash algorithm {algorithm!r}")

    def mask(value: Any) -> Any:
        if value is None:
            return None
        h = hashlib.new(name)
        h.update(salt.encode("utf-8"))
        text = str(value)
        h.update(text.encode("utf-8") if v2 else java_serialized_string(text))
        out = h.hexdigest()
        if length is not None and length > 0 and len(out) > length:
            out = out[:length]
        return out

    return mask


def _truncator(n: int) -> Masker:
    """`column.truncate.to.<n>.chars`: a value cut to `n` characters, null kept."""
    return lambda v: v if v is None or len(v) <= n else v[:n]


def _masker(n: int) -> Masker:
    """`column.mask.with.<n>.chars`: `n` asterisks in place of any value, null too."""
    return lambda v: "*" * n


@dataclass(frozen=True)
class ColumnOptions:
    """The compiled column options of one connector configuration (picklable)."""

    include: tuple[re.Pattern[str], ...] = ()
    exclude: tuple[re.Pattern[str], ...] = ()
    truncate: tuple[tuple[int, tuple[re.Pattern[str], ...]], ...] = ()
    mask_chars: tuple[tuple[int, tuple[re.Pattern[str], ...]], ...] = ()
    mask_hash: tuple[tuple[str, str, bool, tuple[re.Pattern[str], ...]], ...] = ()
    key_columns: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = ()
    schema_adjust: str = "none"
    field_adjust: str = "none"

    @classmethod
    def from_config(cls, cfg: ConnectorConfig) -> ColumnOptions:
        trunc, mask, hashes = [], [], []
        for name, value in cfg.extra.items():
            p = parse_pattern(name)
            if isinstance(p, Truncate):
                trunc.append((p.length, compile_list(value)))
            elif isinstance(p, MaskChars):
                mask.append((p.length, compile_list(value)))
            elif isinstance(p, MaskHash):
                hashes.append((p.algorithm, p.salt, p.v2, compile_list(value)))
        keys = []
        for item in (cfg.get("message.key.columns") or "").split(";"):
            item = item.strip()
            if not item:
                continue
            table_rx, _, cols = item.rpartition(":")
            keys.append((re.compile(table_rx, re.IGNORECASE), tuple(c.strip() for c in cols.split(",") if c.strip())))
        return cls(
            include=compile_list(cfg.get("column.include.list")),
            exclude=compile_list(cfg.get("column.exclude.list")),
            truncate=tuple(trunc), mask_chars=tuple(mask), mask_hash=tuple(hashes),
            key_columns=tuple(keys),
            schema_adjust=cfg["schema.name.adjustment.mode"],
            field_adjust=cfg["field.name.adjustment.mode"],
        )

    def included(self, fq_column: str) -> bool:
        if self.include:
            return matches(self.include, fq_column)
        return not matches(self.exclude, fq_column)

    def key_columns_for(self, fq_table: str) -> tuple[str, ...] | None:
        for rx, cols in self.key_columns:
            if rx.fullmatch(fq_table):
                return cols
        return None

    def maskers(self, fq_column: str, length: int | None) -> tuple[list[Masker], dict[str, str]]:
        """The column's value functions (truncation, then masks, then hashes, as Debezium applies
        them; a character mask replaces null too, the others keep it) and the schema parameters
        they add."""
        out: list[Masker] = []
        params: dict[str, str] = {}
        for n, pats in self.truncate:
            if matches(pats, fq_column):
                out.append(_truncator(n))
                params["truncateLength"] = str(n)
        for n, pats in self.mask_chars:
            if matches(pats, fq_column):
                out.append(_masker(n))
                params["masked"] = "true"
        for alg, salt, v2, pats in self.mask_hash:
            if matches(pats, fq_column):
                out.append(hash_masker(alg, salt, v2, length))
                params["masked"] = "true"
        return out, params


_AVRO_INVALID = re.compile(r"[^A-Za-z0-9_]")
_AVRO_INVALID_DOTTED = re.compile(r"[^A-Za-z0-9_.]")


def _replace(rx: re.Pattern[str], name: str, mode: str) -> str:
    if mode == "avro_unicode":
        return rx.sub(lambda m: f"_u{ord(m.group()):04x}", name)
    return rx.sub("_", name)


def adjust_field_name(name: str, mode: str) -> str:
    """Debezium's field name adjustment: invalid characters become `_`, a leading digit gets `_` before it."""
    if mode == "none" or not name:
        return name
    if name[0].isdigit():
        name = "_" + name
    return _replace(_AVRO_INVALID, name, mode)


def adjust_schema_name(name: str, mode: str) -> str:
    """Debezium's schema name adjustment: characters other than letters, digits, `_` and `.` become `_`."""
    if mode == "none":
        return name
    return _replace(_AVRO_INVALID_DOTTED, name, mode)
