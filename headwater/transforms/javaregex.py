"""Java regular expressions as the transformations' options give them, on Python's `re`.

Debezium's and Kafka's options hold Java regexes and `Matcher.replaceFirst` replacement strings.
`java_pattern` compiles a Java regex after rewriting the constructs Python spells differently (named
groups `(?<name>...)` and back-references `\\k<name>`); `java_replace` gives a replacement string
with Java's meaning: `$n` and `${name}` insert a group, a backslash takes the next character
literally, everything else is literal.
"""

from __future__ import annotations

import re

_NAMED_GROUP = re.compile(r"(?<!\\)\(\?<(?=[A-Za-z])")
_NAMED_BACKREF = re.compile(r"\\k<([A-Za-z][A-Za-z0-9]*)>")


def java_pattern(pattern: str) -> re.Pattern[str]:
    """The compiled Java regex `pattern` (re.error when Python cannot take it)."""
    return re.compile(_NAMED_BACKREF.sub(r"(?P=\1)", _NAMED_GROUP.sub("(?P<", pattern)))


def java_replace(match: re.Match[str], replacement: str) -> str:
    """`replacement` expanded for `match` as Java's `Matcher.appendReplacement` does."""
    out: list[str] = []
    i, n = 0, len(replacement)
    groups = match.re.groups
    while i < n:
        c = replacement[i]
        if c == "\\" and i + 1 < n:
            out.append(replacement[i + 1])
            i += 2
        elif c == "$" and i + 1 < n and replacement[i + 1] == "{":
            end = replacement.index("}", i + 2)
            out.append(match.group(replacement[i + 2:end]) or "")
            i = end + 1
        elif c == "$" and i + 1 < n and replacement[i + 1].isdigit():
            number = int(replacement[i + 1])
            i += 2
            while i < n and replacement[i].isdigit() and number * 10 + int(replacement[i]) <= groups:
                number = number * 10 + int(replacement[i])
                i += 1
            out.append(match.group(number) or "")
        else:
            out.append(c)
            i += 1
    return "".join(out)
