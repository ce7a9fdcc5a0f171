"""Debezium's properties whose names carry parameters, and the one parser of those names.

The families (as Debezium's ColumnMappers and snapshot code match them):

- `column.truncate.to.<n>.chars`: truncate matching character columns to n characters;
- `column.mask.with.<n>.chars`: replace matching values with n asterisks;
- `column.mask.hash.<algorithm>.with.salt.<salt>` and `column.mask.hash.v2.<algorithm>.with.salt.<salt>`:
  pseudonyms, the salted digest of the value (v1 digests Java's serialized String, v2 its UTF-8
  bytes); `<algorithm>` is a Java MessageDigest name without dots (`SHA-256`, `SHA-512/224`, ...),
  `<salt>` is everything after `.with.salt.`;
- `snapshot.select.statement.overrides.<schema>.<table>`: the SELECT the snapshot uses for a table.

Validation (which refuses a name of a family that does not parse) and the code that applies the
properties both call `parse_pattern`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Java's MessageDigest names -> hashlib's (None: Java has it, Python does not)
JAVA_DIGESTS: dict[str, str | None] = {
    "MD2": None, "MD5": "md5", "SHA-1": "sha1", "SHA1": "sha1", "SHA-224": "sha224",
    "SHA-256": "sha256", "SHA-384": "sha384", "SHA-512": "sha512",
    "SHA-512/224": "sha512_224", "SHA-512/256": "sha512_256", "SHA3-224": "sha3_224",
    "SHA3-256": "sha3_256", "SHA3-384": "sha3_384", "SHA3-512": "sha3_512"}


@dataclass(frozen=True)
class Truncate:
    """`column.truncate.to.<length>.chars`"""

    length: int


@dataclass(frozen=True)
class MaskChars:
    """`column.mask.with.<length>.chars`"""

    length: int


@dataclass(frozen=True)
class MaskHash:
    """`column.mask.hash[.v2].<algorithm>.with.salt.<salt>`"""

    algorithm: str  # as written (Java's names are case-insensitive)
    salt: str
    v2: bool


@dataclass(frozen=True)
class SelectOverride:
    """`snapshot.select.statement.overrides.<schema>.<table>`"""

    table: str


PatternProperty = Truncate | MaskChars | MaskHash | SelectOverride

_TRUNCATE = re.compile(r"column\.truncate\.to\.(\d+)\.chars")
_MASK = re.compile(r"column\.mask\.with\.(\d+)\.chars")
_HASH = re.compile(r"column\.mask\.hash\.(v2\.)?([^.]+)\.with\.salt\.(.+)", re.DOTALL)
_OVERRIDE = re.compile(r"snapshot\.select\.statement\.overrides\.(.+)", re.DOTALL)
_HASH_PREFIX = "column.mask.hash."
# names that belong to a family: one that does not parse is refused rather than taken as unknown
FAMILY_PREFIXES = ("column.truncate.", "column.mask.", "snapshot.select.statement.overrides.")
FORMS = ("column.truncate.to.<n>.chars, column.mask.with.<n>.chars, "
         "column.mask.hash[.v2].<algorithm>.with.salt.<salt>")


class PatternError(ValueError):
    """A name of a pattern family whose parameters are wrong; the message says what and how to fix it."""

    def __init__(self, message: str, hint: str):
        super().__init__(message)
        self.message, self.hint = message, hint


def parse_pattern(name: str) -> PatternProperty | None:
    """The parameters `name` carries; None if it is of no family; PatternError if they are wrong."""
    if m := _TRUNCATE.fullmatch(name):
        return Truncate(int(m.group(1)))
    if m := _MASK.fullmatch(name):
        return MaskChars(int(m.group(1)))
    if m := _HASH.fullmatch(name):
        algorithm = m.group(2)
        if JAVA_DIGESTS.get(algorithm.upper()) is None:
            known = ", ".join(k for k, v in JAVA_DIGESTS.items() if v is not None)
            why = "Java has it, Python's hashlib does not" if algorithm.upper() in JAVA_DIGESTS else \
                "not a digest headwater knows"
            raise PatternError(f"hash algorithm {algorithm!r}: {why}", "use one of: " + known)
        return MaskHash(algorithm, m.group(3), bool(m.group(1)))
    if m := _OVERRIDE.fullmatch(name):
        return SelectOverride(m.group(1))
    if name.startswith(FAMILY_PREFIXES):
        raise PatternError("does not match a column property's form", "the forms are " + FORMS)
    return None


def hide_salt(name: str) -> str:
    """`name` with a hash salt replaced by asterisks (the salt is a secret, kept out of printed text);
    in a hash name that does not parse, whatever follows `.salt.` is taken for the salt."""
    if not name.startswith(_HASH_PREFIX):
        return name
    if m := _HASH.fullmatch(name):
        return name[:m.start(3)] + "********"
    at = name.find(".salt.")
    return name if at < 0 else name[:at + len(".salt.")] + "********"
