"""Debezium's `database.initial.statements`: the statements every connector runs on its normal connections."""

from __future__ import annotations


def split_statements(text: str) -> tuple[str, ...]:
    """Debezium's `database.initial.statements`: `;`-separated, `;;` for a literal semicolon."""
    parts, cur, i = [], [], 0
    while i < len(text):
        if text[i] == ";":
            if text[i + 1:i + 2] == ";":
                cur.append(";")
                i += 2
                continue
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(text[i])
        i += 1
    parts.append("".join(cur).strip())
    return tuple(p for p in parts if p)
