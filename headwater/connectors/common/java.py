"""The Java behaviour that shows through in Debezium's JSON, for every connector.

Debezium runs on the JVM and Kafka Connect's JsonConverter writes with Jackson, so the exact text
of many values is Java's:

- java.time: the ISO
  formats (over `headwater.events.calendar`'s proleptic Gregorian day numbers) of dates, times and timestamps (`iso_date`, `iso_time_utc`, `iso_timestamp_utc`,
  `iso_local_timestamp`), and java.util.GregorianCalendar's Julian dates before 1582-10-15
  (`julian_days`);
- numbers: Integer.parseInt (`java_int`), Math.round (`java_round`), the (long) cast of a double
  (`d2l`), the (int) cast of a long (`to_int`), byte[] values (`signed_bytes`),
  BigInteger.toByteArray (`to_byte_array`), BigDecimal's setScale, toPlainString and valueOf(double) (`rescale`, `plain_string`,
  `plain_stripped`, `java_double_decimal`), and JDK 17's Float.toString and Double.toString
  (`java_float_to_string`, `java_double_to_string`: FloatingDecimal, not always the shortest digits);
- String.hashCode and java.util.HashMap's iteration order (`java_string_hash`, `hashmap_order`),
  UUID.nameUUIDFromBytes (`name_uuid_from_bytes`);
- Jackson: string escaping (`jackson_quote`) and NaN/Infinity written as strings (`jackson_double`).

Pure functions; the ones on hot paths are cached per distinct value.
"""

from __future__ import annotations

import hashlib
import math
import struct
import uuid
from decimal import Decimal
from functools import lru_cache
from typing import Any

from headwater.events.calendar import civil_from_days

MICROS_PER_SECOND = 1_000_000
MICROS_PER_DAY = 86_400_000_000
LONG_MAX, LONG_MIN = 2**63 - 1, -(2**63)
INT_MAX, INT_MIN = 2**31 - 1, -(2**31)


# ----------------------------------------------------------------------------- java.time


def julian_days(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a Julian calendar date (astronomical year)."""
    a = (14 - m) // 12
    y2, m2 = y + 4800 - a, m + 12 * a - 3
    return d + (153 * m2 + 2) // 5 + 365 * y2 + y2 // 4 - 32083 - 2440588


@lru_cache(maxsize=65536)
def iso_date(days: int) -> str:
    """java.time's ISO_LOCAL_DATE of an epoch day: 4-digit years, '-' below 0, '+' above 9999."""
    y, m, d = civil_from_days(days)
    if 0 <= y <= 9999:
        return f"{y:04d}-{m:02d}-{d:02d}"
    if y < 0:
        return f"-{-y:04d}-{m:02d}-{d:02d}"
    return f"+{y}-{m:02d}-{d:02d}"


_TWO = tuple(f"{i:02d}" for i in range(100))


def iso_timestamp_utc(micros: int, digits: int) -> str:
    """Debezium's ZonedTimestamp of UTC microseconds: ISO date-time, `digits` fraction digits, 'Z'."""
    days, us = divmod(micros, MICROS_PER_DAY)
    secs, frac = divmod(us, MICROS_PER_SECOND)
    two = _TWO
    text = f"{iso_date(days)}T{two[secs // 3600]}:{two[secs // 60 % 60]}:{two[secs % 60]}"
    if digits == 0:
        return text + "Z"
    return f"{text}.{str(frac + 1_000_000)[1:digits + 1]}Z"


def iso_local_timestamp(micros: int) -> str:
    """Debezium's IsoTimestamp: java.time's ISO_LOCAL_DATE_TIME (fraction without trailing zeros) and 'Z'."""
    days, us = divmod(micros, MICROS_PER_DAY)
    return f"{iso_date(days)}T{iso_time_utc(us)}"


def iso_time_utc(micros_of_day: int) -> str:
    """Debezium's ZonedTime: 'HH:MM:SS[.fraction without trailing zeros]Z'."""
    secs, frac = divmod(micros_of_day % MICROS_PER_DAY, MICROS_PER_SECOND)
    hh, rest = divmod(secs, 3600)
    mm, ss = divmod(rest, 60)
    if frac:
        return f"{hh:02d}:{mm:02d}:{ss:02d}.{frac:06d}".rstrip("0") + "Z"
    return f"{hh:02d}:{mm:02d}:{ss:02d}Z"


# -------------------------------------------------------------------------------- numbers


def java_int(s: str | None) -> int:
    """Integer.parseInt: decimal digits with an optional sign, within 32 bits (0 for None)."""
    if s is None:
        return 0
    v = int(s)
    if not INT_MIN <= v <= INT_MAX or not s.lstrip("+-").isdigit():
        raise ValueError(f"not a Java int: {s!r}")
    return v


def java_round(x: float) -> int:
    """Math.round(double): the closest long, ties towards positive infinity."""
    f = math.floor(x)
    return int(f) + (1 if x - f >= 0.5 else 0)


def d2l(x: float) -> int:
    """Java's (long) cast of a double: truncation, saturating at the long range, NaN -> 0."""
    if x != x:
        return 0
    if x >= 9.223372036854775807e18:
        return LONG_MAX
    if x <= -9.223372036854775808e18:
        return LONG_MIN
    return int(x)


def java_double_decimal(x: float) -> Decimal:
    """BigDecimal.valueOf(double): the decimal of Double.toString(x) (shortest round-trip digits)."""
    return Decimal(repr(x))


def plain_stripped(d: Decimal, max_scale: int | None = None) -> str:
    """BigDecimal [setScale(max, DOWN)].stripTrailingZeros().toPlainString()."""
    exponent = d.as_tuple().exponent
    if max_scale is not None and isinstance(exponent, int) and exponent < -max_scale:
        d = d.quantize(Decimal(1).scaleb(-max_scale), rounding="ROUND_DOWN")
    if d == 0:
        return "0"
    return format(d.normalize(), "f")


def signed_bytes(data: bytes) -> list[int]:
    """The values of a Java byte[] (signed, -128..127)."""
    return [b - 256 if b > 127 else b for b in data]


def to_int(n: int) -> int:
    """Java's (int) cast of a long: the low 32 bits, signed."""
    return (n + 2**31) % 2**32 - 2**31


def to_byte_array(n: int) -> bytes:
    """Java BigInteger.toByteArray: minimal big-endian two's complement (at least one byte)."""
    bits = n.bit_length() if n >= 0 else (~n).bit_length()
    return n.to_bytes(bits // 8 + 1, "big", signed=True)


def rescale(unscaled: int, scale: int, new_scale: int) -> int:
    """The unscaled value at `new_scale`; ArithmeticException (ValueError) if digits would be lost."""
    if new_scale >= scale:
        return unscaled * 10 ** (new_scale - scale)
    q, r = divmod(unscaled, 10 ** (scale - new_scale))
    if r:
        raise ValueError("Rounding necessary")
    return q


def _int_text(n: int) -> str:
    return str(n) if n.bit_length() < 13000 else format(Decimal(n), "f")


def plain_string(unscaled: int, scale: int) -> str:
    """BigDecimal.toPlainString of (unscaled, scale >= 0)."""
    if scale <= 0:
        return _int_text(unscaled * 10 ** -scale)
    sign = "-" if unscaled < 0 else ""
    digits = _int_text(abs(unscaled)).rjust(scale + 1, "0")
    return f"{sign}{digits[:-scale]}.{digits[-scale:]}"


# Java's Float.toString and Double.toString (JDK 17's FloatingDecimal, which is not always the
# shortest representation: Jackson writes float4 values this way, so the digits matter).

_INSIGNIFICANT = (0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7,
                  8, 8, 8, 9, 9, 9, 9, 10, 10, 10, 11, 11, 11, 12, 12, 12, 12, 13, 13, 13, 14, 14, 14,
                  15, 15, 15, 15, 16, 16, 16, 17, 17, 17, 18, 18, 18, 19)


_N5BITS = tuple(0 if i == 0 else (5**i).bit_length() for i in range(27))


def _wrap(v: int, bits: int) -> int:
    return (v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))


def _estimate_dec_exp(fract_bits: int, bin_exp: int) -> int:
    d2 = struct.unpack("<d", struct.pack("<Q", 0x3FF0000000000000 | (fract_bits & 0xFFFFFFFFFFFFF)))[0]
    d = (d2 - 1.5) * 0.289529654 + 0.176091259 + bin_exp * 0.301029995663981
    return math.floor(d)


def _java_dtoa(bin_exp: int, fract_bits: int, n_sig: int) -> tuple[str, int]:
    """FloatingDecimal.BinaryToASCIIBuffer.dtoa: (digits, decimal exponent) with value 0.DIGITS x 10^exp."""
    tail_zeros = (fract_bits & -fract_bits).bit_length() - 1
    n_fract_bits = 53 - tail_zeros
    n_tiny_bits = max(0, n_fract_bits - bin_exp - 1)
    if -21 <= bin_exp <= 62 and n_tiny_bits < 27 and n_fract_bits + _N5BITS[n_tiny_bits] < 64 \
            and n_tiny_bits == 0:
        p2 = bin_exp - n_sig - 1
        insignificant = _INSIGNIFICANT[p2] if bin_exp > n_sig and 1 < p2 < len(_INSIGNIFICANT) else 0
        lvalue = fract_bits << (bin_exp - 52) if bin_exp >= 52 else fract_bits >> (52 - bin_exp)
        dec_exp = 0
        if insignificant:
            pow10 = 10**insignificant
            residue = lvalue % pow10
            lvalue //= pow10
            dec_exp += insignificant
            if residue >= pow10 >> 1:
                lvalue += 1
        text = str(lvalue)
        return text.rstrip("0") or "0", dec_exp + len(text)
    dec_exp = _estimate_dec_exp(fract_bits, bin_exp)
    b5 = max(0, -dec_exp)
    b2 = b5 + n_tiny_bits + bin_exp
    s5 = max(0, dec_exp)
    s2 = s5 + n_tiny_bits
    m5 = b5
    m2 = b2 - n_sig
    fract_bits >>= tail_zeros
    b2 -= n_fract_bits - 1
    common = min(b2, s2)
    b2 -= common
    s2 -= common
    m2 -= common
    if n_fract_bits == 1:
        m2 -= 1
    if m2 < 0:
        b2 -= m2
        s2 -= m2
        m2 = 0
    b_bits = n_fract_bits + b2 + (_N5BITS[b5] if b5 < 27 else b5 * 3)
    ten_s_bits = s2 + 1 + (_N5BITS[s5 + 1] if s5 + 1 < 27 else (s5 + 1) * 3)
    digits: list[int] = []
    b = fract_bits * 5**b5 << b2
    s = 5**s5 << s2
    m = 5**m5 << m2
    tens = s * 10
    width = 32 if b_bits < 32 and ten_s_bits < 32 else 64 if b_bits < 64 and ten_s_bits < 64 else 0
    if width:  # Java's int/long arithmetic: m may overflow, and so may b + m
        q, b = divmod(b, s)
        b *= 10
        m = _wrap(m * 10, width)
        low = b < m
        high = _wrap(b + m, width) > tens
        if q == 0 and not high:
            dec_exp -= 1
        else:
            digits.append(q)
        if dec_exp < -3 or dec_exp >= 8:
            high = low = False
        while not low and not high:
            q, b = divmod(b, s)
            b *= 10
            m = _wrap(m * 10, width)
            if m > 0:
                low = b < m
                high = _wrap(b + m, width) > tens
            else:
                low = high = True
            digits.append(q)
        low_diff = (b << 1) - tens
    else:  # FDBigInteger arithmetic: the same loop, with "high" meaning b + m >= 10 s
        q, b = divmod(b, s)
        b *= 10
        m *= 10
        low = b < m
        high = b + m >= tens
        if q == 0 and not high:
            dec_exp -= 1
        else:
            digits.append(q)
        if dec_exp < -3 or dec_exp >= 8:
            high = low = False
        while not low and not high:
            q, b = divmod(b, s)
            b *= 10
            m *= 10
            low = b < m
            high = b + m >= tens
            digits.append(q)
        low_diff = (b << 1) - tens if high and low else 0
    dec_exp += 1
    if high and (not low or low_diff > 0 or (low_diff == 0 and digits[-1] & 1)):
        i = len(digits) - 1
        while digits[i] == 9 and i > 0:
            digits[i] = 0
            i -= 1
        if digits[i] == 9:
            dec_exp += 1
            digits[0] = 1
        else:
            digits[i] += 1
    return "".join(map(str, digits)), dec_exp


def _java_format(negative: bool, digits: str, dec_exp: int) -> str:
    sign = "-" if negative else ""
    n = len(digits)
    if 0 < dec_exp < 8:
        if n <= dec_exp:
            return f"{sign}{digits}{'0' * (dec_exp - n)}.0"
        return f"{sign}{digits[:dec_exp]}.{digits[dec_exp:]}"
    if -3 < dec_exp <= 0:
        return f"{sign}0.{'0' * -dec_exp}{digits}"
    e = dec_exp - 1
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{e}"


def _java_fp_to_string(bits: int, width: int) -> str:
    """Java 17's Float.toString (width 32) or Double.toString (width 64) of an IEEE value's bits."""
    frac_bits = 23 if width == 32 else 52
    exp_bits = width - 1 - frac_bits
    exp_max = (1 << exp_bits) - 1
    negative = bool(bits >> (width - 1))
    fract = bits & ((1 << frac_bits) - 1)
    bin_exp = (bits >> frac_bits) & exp_max
    if bin_exp == exp_max:
        return "NaN" if fract else ("-Infinity" if negative else "Infinity")
    if bin_exp == 0:
        if fract == 0:
            return "-0.0" if negative else "0.0"
        lz = width - fract.bit_length()
        shift = lz - exp_bits
        fract <<= shift
        bin_exp = 1 - shift
        n_sig = width - lz
    else:
        fract |= 1 << frac_bits
        n_sig = frac_bits + 1
    digits, dec_exp = _java_dtoa(bin_exp - (exp_max >> 1), fract << (52 - frac_bits), n_sig)
    return _java_format(negative, digits, dec_exp)


def java_float_to_string(x: float) -> str:
    """Java 17's Float.toString of the float32 nearest to `x`."""
    return _java_fp_to_string(struct.unpack("<I", struct.pack("<f", x))[0], 32)


def java_double_to_string(x: float) -> str:
    """Java 17's Double.toString."""
    return _java_fp_to_string(struct.unpack("<Q", struct.pack("<d", x))[0], 64)


# --------------------------------------------------------------------- hashing, Jackson


def java_string_hash(s: str) -> int:
    """String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def hashmap_order(keys: list[str]) -> list[int]:
    """The indexes of `keys` (inserted in this order, distinct) in java.util.HashMap iteration order."""
    n = 16
    while len(keys) > n * 3 // 4:
        n *= 2
    buckets: dict[int, list[int]] = {}
    for i, k in enumerate(keys):
        h = java_string_hash(k) & 0xFFFFFFFF
        buckets.setdefault((h ^ (h >> 16)) & (n - 1), []).append(i)
    return [i for b in sorted(buckets) for i in buckets[b]]


def name_uuid_from_bytes(data: bytes) -> str:
    """java.util.UUID.nameUUIDFromBytes: an MD5 (version 3) UUID of the bytes."""
    h = bytearray(hashlib.md5(data).digest())
    h[6] = (h[6] & 0x0F) | 0x30
    h[8] = (h[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(h)))


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def jackson_quote(s: str) -> str:
    """A JSON string literal as Jackson writes it (short escapes, \\u00XX for other controls)."""
    if s.isprintable() and '"' not in s and "\\" not in s:
        return f'"{s}"'
    out = []
    for c in s:
        e = _JSON_ESCAPES.get(c)
        if e is not None:
            out.append(e)
        elif c < " ":
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def jackson_double(x: float) -> Any:
    """A double as Jackson writes it: NaN and the infinities as the strings "NaN", "Infinity", "-Infinity"."""
    if x != x:
        return "NaN"
    if x == float("inf"):
        return "Infinity"
    if x == float("-inf"):
        return "-Infinity"
    return x
