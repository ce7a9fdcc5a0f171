"""Tokens of one MySQL/MariaDB statement, with their original text, for the DDL parser.

Lexing is sqlglot's MySQL tokenizer (quoting, escapes, comments, numbers); this module keeps each
token's source text (Debezium reports ENUM members and some defaults exactly as written), unwraps
MySQL's executable comments (`/*!50100 ... */`, `/*M!100301 ... */`, whose content the server runs)
and gives the parser a cursor over the tokens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from sqlglot.dialects.mysql import MySQL
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from headwater.connectors.binlog.ddl.errors import DdlParseError

_EXECUTABLE_COMMENT = re.compile(r"/\*M?!\d*|'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\"|`(?:[^`]|``)*`")


class _Tokenizer(MySQL.Tokenizer):  # type: ignore[misc]
    """MySQL's tokenizer without "commands" (RENAME, REPLACE, ...) whose rest it would keep as one string."""

    COMMANDS: ClassVar[set[TokenType]] = set()


_TOKENIZER = _Tokenizer()


def _unwrap_executable_comments(sql: str) -> str:
    """`sql` with `/*!NNNNN` openers and their `*/` replaced by spaces (offsets kept)."""
    out = list(sql)
    pos = 0
    while True:
        m = _EXECUTABLE_COMMENT.search(sql, pos)
        if m is None:
            return "".join(out)
        if m.group(0).startswith("/*"):
            end = sql.find("*/", m.end())
            if end < 0:
                return "".join(out)
            for i in range(m.start(), m.end()):
                out[i] = " "
            out[end] = out[end + 1] = " "
        pos = m.end()


@dataclass(frozen=True)
class Token:
    """One token: `kind` is word, ident (back-quoted), string, number, or the punctuation itself."""

    kind: str
    text: str  # unquoted text of a word, identifier or string
    raw: str  # the token as written
    start: int
    end: int  # exclusive

    @property
    def upper(self) -> str:
        return self.text.upper() if self.kind == "word" else ""


_STRINGS = {TokenType.STRING, TokenType.NATIONAL_STRING, TokenType.RAW_STRING}
_BITS = {TokenType.BIT_STRING, TokenType.HEX_STRING, TokenType.BYTE_STRING}


def _kind(token_type: TokenType, raw: str) -> str:
    if token_type == TokenType.IDENTIFIER:
        return "ident"
    if token_type in _STRINGS:
        return "string"
    if token_type in _BITS:
        return "bits"
    if token_type == TokenType.NUMBER:
        return "number"
    if raw[:1].isalpha() or raw[:1] in "_$" or raw[:1].isdigit():
        return "word"
    return raw


def tokenize(sql: str) -> list[Token]:
    """The tokens of `sql`; raises DdlParseError when it cannot be lexed."""
    source = _unwrap_executable_comments(sql)
    try:
        raw_tokens = _TOKENIZER.tokenize(source)
    except TokenError as exc:
        raise DdlParseError(f"cannot tokenize statement: {exc}") from exc
    tokens: list[Token] = []
    for t in raw_tokens:
        raw = source[t.start:t.end + 1]
        kind = _kind(t.token_type, raw)
        if kind == "word" and " " in t.text:  # sqlglot's two-word keywords (PRIMARY KEY, ...): one token per word
            for m in re.finditer(r"\S+", raw):
                tokens.append(Token("word", m.group(0), m.group(0), t.start + m.start(), t.start + m.end()))
            continue
        tokens.append(Token(kind, t.text, raw, t.start, t.end + 1))
    return tokens


class Cursor:
    """A position in a statement's tokens with the small look-ahead helpers the grammar needs."""

    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.tokens = tokenize(sql)
        self.i = 0

    def peek(self, offset: int = 0) -> Token | None:
        j = self.i + offset
        return self.tokens[j] if j < len(self.tokens) else None

    def at_end(self) -> bool:
        return self.i >= len(self.tokens) or self.tokens[self.i].kind == ";"

    def is_word(self, *words: str, offset: int = 0) -> bool:
        t = self.peek(offset)
        return t is not None and t.kind == "word" and t.text.upper() in words

    def is_kind(self, kind: str, offset: int = 0) -> bool:
        t = self.peek(offset)
        return t is not None and t.kind == kind

    def accept(self, *words: str) -> bool:
        """Consume the words in sequence if all are next; True if consumed."""
        for k, w in enumerate(words):
            if not self.is_word(w, offset=k):
                return False
        self.i += len(words)
        return True

    def accept_kind(self, kind: str) -> Token | None:
        if self.is_kind(kind):
            return self.next()
        return None

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise self.error(f"expected {' '.join(words)}")

    def expect_kind(self, kind: str) -> Token:
        t = self.accept_kind(kind)
        if t is None:
            raise self.error(f"expected {kind!r}")
        return t

    def next(self) -> Token:
        t = self.peek()
        if t is None:
            raise self.error("unexpected end of statement")
        self.i += 1
        return t

    def name(self) -> str:
        """An identifier: a bare word, a back-quoted name, or (where MySQL allows it) a string."""
        t = self.peek()
        if t is None or t.kind not in ("word", "ident", "string"):
            raise self.error("expected a name")
        self.i += 1
        return t.text

    def qualified_name(self, database: str | None) -> tuple[str | None, str]:
        """`db.name` or `name` (with the current database)."""
        first = self.name()
        if self.is_kind("."):
            self.i += 1
            return first, self.name()
        return database, first

    def skip_parens(self) -> str:
        """Consume a balanced `( ... )` and return its source text."""
        open_token = self.expect_kind("(")
        depth = 1
        while depth:
            t = self.next()
            if t.kind == "(":
                depth += 1
            elif t.kind == ")":
                depth -= 1
        return self.sql[open_token.start:self.tokens[self.i - 1].end]

    def skip_to_comma(self) -> None:
        """Consume tokens up to (not including) a top-level `,` or `)` or the end."""
        depth = 0
        while not self.at_end():
            t = self.peek()
            assert t is not None
            if t.kind == "(":
                depth += 1
            elif t.kind == ")":
                if depth == 0:
                    return
                depth -= 1
            elif t.kind == "," and depth == 0:
                return
            self.i += 1

    def text(self, start: int, end: int | None = None) -> str:
        """Source text of tokens [start, end) (end defaults to the cursor)."""
        stop = self.i if end is None else end
        if stop <= start:
            return ""
        return self.sql[self.tokens[start].start:self.tokens[stop - 1].end]

    def error(self, message: str) -> DdlParseError:
        t = self.peek()
        where = f" at {t.raw!r} (offset {t.start})" if t is not None else " at the end"
        return DdlParseError(f"{message}{where}: {self.sql[:200]!r}")
