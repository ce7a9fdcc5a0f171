"""Java's regular expressions as the transformations' options give them: compiled (Java's named groups
`(?<name>...)` as Python's), and Java's replacement syntax (`$1`, `${name}`, `\\$`) applied."""

from __future__ import annotations

import re

from headwater.transforms.base import Configurable

_NAMED = re.compile(r"\(\?<([A-Za-z][A-Za-z0-9]*)>")


def java_regex(owner: Configurable, option: str, pattern: str) -> re.Pattern[str]:
    """`pattern` (Java syntax) compiled; a bad one refused as `owner`'s `option`."""
    try:
        return re.compile(_NAMED.sub(r"(?P<\1>", pattern))
    except re.error as exc:
        owner.fail(option, f"not a valid regular expression: {exc}", "give a Java-style regex")


_GROUP = re.compile(r"\\(.)|\$(\d+)|\$\{([A-Za-z][A-Za-z0-9]*)\}|\$")


def java_replacement(template: str, match: re.Match[str]) -> str:
    """Java's `Matcher.replaceFirst(template)` of a whole-string match: `$n` and `${name}` are groups
    (`$12` is group 12 only if there are 12 groups, else group 1 then `2`), `\\x` is a literal x."""
    out, pos = [], 0
    for m in _GROUP.finditer(template):
        out.append(template[pos:m.start()])
        pos = m.end()
        if m.group(1) is not None:
            out.append(m.group(1))
        elif m.group(2) is not None:
            digits = m.group(2)
            n = int(digits[0])
            rest = digits[1:]
            while rest and n * 10 + int(rest[0]) <= (match.re.groups or 0):
                n, rest = n * 10 + int(rest[0]), rest[1:]
            if n > (match.re.groups or 0):
                raise IndexError(f"no group {n} in {match.re.pattern!r}")
            out.append((match.group(n) or "") + rest)
        elif m.group(3) is not None:
            out.append(match.group(m.group(3)) or "")
        else:
            raise ValueError(f"illegal group reference in {template!r}")
    out.append(template[pos:])
    return "".join(out)


def check_replacement(transform: Configurable, option: str, template: str, regex: re.Pattern[str]) -> None:
    """Refuse a replacement that refers to a group the regex does not have."""
    try:
        java_replacement(template, _FakeMatch(regex))  # type: ignore[arg-type]
    except (IndexError, ValueError) as exc:
        transform.fail(option, str(exc), "refer to groups as $1, $2 or ${name}; escape a literal $ as \\$")


class _FakeMatch:
    """Enough of a match for `check_replacement` when the regex does not match the empty string."""

    def __init__(self, regex: re.Pattern[str]):
        self.re = regex

    def group(self, _n: int | str) -> str:
        return ""


