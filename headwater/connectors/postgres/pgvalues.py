"""PostgreSQL value formats, and the Java behaviour that shows through in Debezium's values.

Pure functions without database access, used by `types.py`:

- parsers for PostgreSQL's text output (DateStyle ISO, IntervalStyle postgres, bytea_output hex):
  dates, times, timestamps with and without zone, intervals, numerics, money, arrays, hstore;
- decoders for the binary (send/recv) formats of pgoutput's binary mode and COPY BINARY;
- the Java pieces Debezium's JSON inherits: BigInteger.toByteArray, Double.toString, HashMap
  iteration order, Jackson's string escaping, java.time's ISO formats, pgjdbc's PGInterval.

Times are kept as integers (days, microseconds) and calendars are proleptic Gregorian, as in
java.time; the helpers on the hot path are cached per distinct date.
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal
from functools import lru_cache

MICROS_PER_SECOND = 1_000_000
MICROS_PER_DAY = 86_400_000_000
PG_EPOCH_DAYS = 10_957  # 2000-01-01, PostgreSQL's binary epoch, in days since 1970-01-01
LONG_MAX, LONG_MIN = 2**63 - 1, -(2**63)
INT_MAX, INT_MIN = 2**31 - 1, -(2**31)
POW10 = tuple(10**i for i in range(10))


# ------------------------------------------------------------------------------- calendar


@lru_cache(maxsize=65536)
def days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (year 0 = 1 BC)."""
    y -= m <= 2
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


@lru_cache(maxsize=65536)
def civil_from_days(z: int) -> tuple[int, int, int]:
    """The proleptic Gregorian (year, month, day) of a day number since 1970-01-01."""
    z += 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return y + (m <= 2), m, d


@lru_cache(maxsize=65536)
def parse_date(s: str) -> tuple[int, int, int, bool]:
    """'2020-02-29', '0044-03-15 BC', '294276-12-31' -> (year, month, day, bc); year as written."""
    bc = s.endswith(" BC")
    if bc:
        s = s[:-3]
    y, m, d = s.split("-")
    return int(y), int(m), int(d), bc


def date_days(s: str) -> int:
    """Epoch days of a date's text, proleptic (1 BC is year 0), as java.time reads it."""
    y, m, d, bc = parse_date(s)
    return days_from_civil(1 - y if bc else y, m, d)


def date_days_jdbc(s: str) -> int:
    """Epoch days of a date's text as pgjdbc's java.sql.Date.toLocalDate() gives them: the era is lost."""
    y, m, d, _ = parse_date(s)
    return days_from_civil(y, m, d)


def time_micros(t: str) -> int:
    """'HH:MM:SS[.ffffff]' -> microseconds past midnight (24:00:00 allowed)."""
    us = ((int(t[0:2]) * 60 + int(t[3:5])) * 60 + int(t[6:8])) * MICROS_PER_SECOND
    if len(t) > 9:
        f = t[9:]
        us += int(f) * POW10[6 - len(f)]
    return us


_DAYS: dict[str, int] = {}


def days_of(ymd: str) -> int:
    """Epoch days of 'YYYY-MM-DD' (AD), cached per distinct date."""
    d = _DAYS.get(ymd)
    if d is None:
        y, m, dd = ymd.split("-")
        d = days_from_civil(int(y), int(m), int(dd))
        if len(_DAYS) > 200_000:
            _DAYS.clear()
        _DAYS[ymd] = d
    return d


def timestamp_micros(s: str) -> int:
    """'YYYY-MM-DD HH:MM:SS[.ffffff][ BC]' -> microseconds since the epoch (proleptic calendar)."""
    if len(s) >= 19 and s[10] == " " and s[-1] != "C":  # the common case: a 4-digit AD year
        us = days_of(s[:10]) * MICROS_PER_DAY + (
            int(s[11:13]) * 3600 + int(s[14:16]) * 60 + int(s[17:19])) * MICROS_PER_SECOND
        if len(s) > 20:
            f = s[20:]
            us += int(f) * POW10[6 - len(f)]
        return us
    bc = s.endswith(" BC")
    if bc:
        s = s[:-3]
    i = s.index(" ")
    y, m, d = s[:i].split("-")
    y = int(y)
    days = days_from_civil(1 - y if bc else y, int(m), int(d))
    return days * MICROS_PER_DAY + time_micros(s[i + 1:])


def julian_days(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a Julian calendar date (astronomical year)."""
    a = (14 - m) // 12
    y2, m2 = y + 4800 - a, m + 12 * a - 3
    return d + (153 * m2 + 2) // 5 + 365 * y2 + y2 // 4 - 32083 - 2440588


def timestamp_micros_hybrid(s: str) -> int:
    """A timestamp's text as pgjdbc's java.sql.Timestamp counts it: the fields of a date before
    1582-10-15 are read in the Julian calendar (java.util.GregorianCalendar's cutover)."""
    bc = s.endswith(" BC")
    if bc:
        s = s[:-3]
    i = s.index(" ")
    y, m, d = (int(p) for p in s[:i].split("-"))
    if bc:
        y = 1 - y
    days = julian_days(y, m, d) if (y, m, d) < (1582, 10, 15) else days_from_civil(y, m, d)
    return days * MICROS_PER_DAY + time_micros(s[i + 1:])


def offset_seconds(z: str) -> int:
    """'+05', '-03:30', '+00:19:32' -> seconds east of UTC."""
    sign = -1 if z[0] == "-" else 1
    secs = int(z[1:3]) * 3600
    if len(z) > 3:
        secs += int(z[4:6]) * 60
        if len(z) > 6:
            secs += int(z[7:9])
    return sign * secs


def split_zone(s: str, start: int) -> tuple[str, str]:
    """Split 'HH:MM:SS.ffff+05:30' (the sign after index `start`) into the local part and the offset."""
    i = max(s.rfind("+"), s.rfind("-"))
    if i <= start:
        raise ValueError(f"no zone offset in {s!r}")
    return s[:i], s[i:]


def timestamptz_micros(s: str) -> int:
    """'YYYY-MM-DD HH:MM:SS[.ffffff]+ZZ[:ZZ[:ZZ]][ BC]' -> UTC microseconds since the epoch."""
    bc = s.endswith(" BC")
    if bc:
        s = s[:-3]
    i = s.index(" ")
    local, zone = split_zone(s, i + 8)
    if i == 10 and not bc:
        days = days_of(local[:10])
    else:
        y, m, d = local[:i].split("-")
        y = int(y)
        days = days_from_civil(1 - y if bc else y, int(m), int(d))
    return days * MICROS_PER_DAY + time_micros(local[i + 1:]) - offset_seconds(zone) * MICROS_PER_SECOND


def timestamptz_micros_jdbc(s: str) -> int:
    """Like timestamptz_micros, but losing the era (java.sql.Timestamp in arrays)."""
    return timestamptz_micros(s[:-3] if s.endswith(" BC") else s)


def timetz_parts(s: str) -> tuple[int, int]:
    """'HH:MM:SS[.ffffff]+ZZ[:ZZ[:ZZ]]' -> (local microseconds, offset seconds east of UTC)."""
    local, zone = split_zone(s, 7)
    return time_micros(local), offset_seconds(zone)


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


# ------------------------------------------------------------------------------- interval


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


def pginterval(s: str) -> tuple[int, int, int, int, int, float]:
    """pgjdbc's PGInterval of IntervalStyle=postgres text: (years, months, days, hours, minutes, seconds).

    Reproduces PGInterval.setValue and setSeconds/getSeconds exactly (seconds are stored as whole
    seconds plus rounded microseconds), since Debezium computes from these fields.
    """
    years = months = days = hours = minutes = 0
    seconds = 0.0
    value_token: str | None = None
    for i, token in enumerate(s.replace("+", " ").split(), 1):
        if i & 1:
            end_hours = token.find(":")
            if end_hours == -1:
                value_token = token
                continue
            neg = token[0] == "-"
            hours = java_int(token[int(neg):end_hours])
            minutes = java_int(token[end_hours + 1:end_hours + 3])
            end_minutes = token.find(":", end_hours + 1)
            if end_minutes != -1:
                seconds = float(token[end_minutes + 1:])
            if neg:
                hours, minutes, seconds = -hours, -minutes, -seconds
            value_token = None
        elif token.startswith("year"):
            years = java_int(value_token)
        elif token.startswith("mon"):
            months = java_int(value_token)
        elif token.startswith("day"):
            days = java_int(value_token)
        elif token.startswith("hour"):
            hours = java_int(value_token)
        elif token.startswith("min"):
            minutes = java_int(value_token)
        elif token.startswith("sec"):
            seconds = float(value_token) if value_token is not None else 0.0
    total = java_round(seconds * 1_000_000.0)
    whole = abs(total) // 1_000_000 * (1 if total >= 0 else -1)  # Java's truncating long division
    if not INT_MIN <= whole <= INT_MAX:
        raise ValueError("Number of whole seconds should be within Integer.MIN_VALUE...Integer.MAX_VALUE")
    micro = total - whole * 1_000_000
    return years, months, days, hours, minutes, whole + micro / 1_000_000.0


def interval_micros(fields: tuple[int, int, int, int, int, float]) -> int:
    """Debezium's MicroDuration.durationMicros with 365.25/12 days a month (double arithmetic)."""
    years, months, days, hours, minutes, seconds = fields
    ym = (years * 12 + months + 2**31) % 2**32 - 2**31  # Java int arithmetic
    d = ym * 30.4375 + days
    s = ((d * 24.0 + hours) * 60.0 + minutes) * 60.0 + seconds
    return d2l(s * 1_000_000.0)


def java_double_decimal(x: float) -> Decimal:
    """BigDecimal.valueOf(double): the decimal of Double.toString(x) (shortest round-trip digits)."""
    return Decimal(repr(x))


def plain_stripped(d: Decimal, max_scale: int | None = None) -> str:
    """BigDecimal [setScale(max, DOWN)].stripTrailingZeros().toPlainString()."""
    if max_scale is not None and d.as_tuple().exponent < -max_scale:
        d = d.quantize(Decimal(1).scaleb(-max_scale), rounding="ROUND_DOWN")
    if d == 0:
        return "0"
    return format(d.normalize(), "f")


def interval_iso(fields: tuple[int, int, int, int, int, float]) -> str:
    """Debezium's Interval string 'P<y>Y<m>M<d>DT<h>H<m>M<s>S' of PGInterval fields."""
    years, months, days, hours, minutes, seconds = fields
    sec = plain_stripped(java_double_decimal(seconds), 9)
    return f"P{years}Y{months}M{days}DT{hours}H{minutes}M{sec}S"


# -------------------------------------------------------------------------------- numbers


def to_byte_array(n: int) -> bytes:
    """Java BigInteger.toByteArray: minimal big-endian two's complement (at least one byte)."""
    bits = n.bit_length() if n >= 0 else (~n).bit_length()
    return n.to_bytes(bits // 8 + 1, "big", signed=True)


def big_int(digits: str) -> int:
    """int(digits), also beyond Python's 4300-digit limit for str -> int conversion."""
    return int(digits) if len(digits) < 4000 else int(Decimal(digits))


def split_numeric(s: str) -> tuple[int, int]:
    """A numeric's text ('-123.4500') -> (unscaled integer, scale): (-1234500, 4)."""
    dot = s.find(".")
    if dot < 0:
        return big_int(s), 0
    return big_int(s[:dot] + s[dot + 1:]), len(s) - dot - 1


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


def parse_money(s: str) -> Decimal:
    """Debezium's PostgresMoney.parse: drop sign or parentheses, one currency symbol and commas."""
    negative = s[0] in "(-"
    v = s[1:] if s[0] == "-" else s
    v = v.strip("()")
    if v and not v[0].isdigit() and v[0] != ".":
        v = v[1:]
    v = v.replace(",", "")
    return Decimal("-" + v if negative else v)


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


# ------------------------------------------------------------------------ arrays, hstore


def parse_array(s: str, delim: str = ",") -> list:
    """PostgreSQL's array text ('{1,NULL,"a b"}', '[2:3]={5,6}', nested) -> nested lists of str/None."""
    if s[0] == "[":
        s = s[s.index("=") + 1:]
    pos = 0
    n = len(s)

    def parse_level() -> list:
        nonlocal pos
        assert s[pos] == "{"
        pos += 1
        out: list = []
        if s[pos] == "}":
            pos += 1
            return out
        while True:
            c = s[pos]
            if c == "{":
                out.append(parse_level())
            elif c == '"':
                pos += 1
                buf = []
                while True:
                    c = s[pos]
                    if c == "\\":
                        buf.append(s[pos + 1])
                        pos += 2
                    elif c == '"':
                        pos += 1
                        break
                    else:
                        j = pos
                        while j < n and s[j] not in '\\"':
                            j += 1
                        buf.append(s[pos:j])
                        pos = j
                out.append("".join(buf))
            else:
                j = pos
                while s[j] not in (delim, "}"):
                    j += 1
                tok = s[pos:j].strip()
                out.append(None if tok.upper() == "NULL" else tok)
                pos = j
            while s[pos] == " ":
                pos += 1
            if s[pos] == delim:
                pos += 1
                while s[pos] == " ":
                    pos += 1
                continue
            if s[pos] == "}":
                pos += 1
                return out
            raise ValueError(f"bad array literal at {pos}: {s!r}")

    return parse_level()


def parse_hstore(s: str) -> list[tuple[str, str | None]]:
    """hstore's text ('"a"=>"1", "b"=>NULL') -> [(key, value or None)] in text order."""
    out: list[tuple[str, str | None]] = []
    pos, n = 0, len(s)

    def quoted() -> str:
        nonlocal pos
        pos += 1
        buf = []
        while True:
            c = s[pos]
            if c == "\\":
                buf.append(s[pos + 1])
                pos += 2
            elif c == '"':
                pos += 1
                return "".join(buf)
            else:
                buf.append(c)
                pos += 1

    while pos < n:
        while pos < n and s[pos] in " ,":
            pos += 1
        if pos >= n:
            break
        key = quoted()
        while s[pos] == " ":
            pos += 1
        if s[pos:pos + 2] != "=>":
            raise ValueError(f"bad hstore at {pos}: {s!r}")
        pos += 2
        while s[pos] == " ":
            pos += 1
        if s[pos] == '"':
            out.append((key, quoted()))
        else:
            j = pos
            while j < n and s[j] not in " ,":
                j += 1
            out.append((key, None))
            pos = j
    return out


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


# ---------------------------------------------------------------------------- binary formats

_I16, _I32, _I64 = struct.Struct("!h"), struct.Struct("!i"), struct.Struct("!q")
_F32, _F64 = struct.Struct("!f"), struct.Struct("!d")
_TIMETZ = struct.Struct("!qi")
_INTERVAL = struct.Struct("!qii")


def bin_numeric(b: bytes) -> tuple[str, int, int]:
    """numeric_send -> ('n', unscaled, dscale) or ('NaN'|'Infinity'|'-Infinity', 0, 0)."""
    ndigits, weight, sign, dscale = struct.unpack_from("!hhHH", b)
    if sign == 0xC000:
        return "NaN", 0, 0
    if sign == 0xD000:
        return "Infinity", 0, 0
    if sign == 0xF000:
        return "-Infinity", 0, 0
    digits = struct.unpack_from(f"!{ndigits}H", b, 8)
    v = 0
    for dg in digits:
        v = v * 10000 + dg
    # the digits stand for v * 10000^(weight - ndigits + 1); bring that to dscale decimals
    exp10 = 4 * (weight - ndigits + 1) + dscale
    v = v * 10**exp10 if exp10 >= 0 else v // 10 ** (-exp10)
    return "n", -v if sign == 0x4000 else v, dscale


def numeric_text_from_binary(b: bytes) -> str:
    """The text a numeric_send value prints as."""
    kind, v, dscale = bin_numeric(b)
    return plain_string(v, dscale) if kind == "n" else kind


def bin_int(b: bytes) -> int:
    return int.from_bytes(b, "big", signed=True)


def bin_float4(b: bytes) -> float:
    return _F32.unpack(b)[0]


def bin_float8(b: bytes) -> float:
    return _F64.unpack(b)[0]


def bin_timetz(b: bytes) -> tuple[int, int]:
    """timetz_send -> (local microseconds, offset seconds east of UTC)."""
    us, zone_west = _TIMETZ.unpack(b)
    return us, -zone_west


def bin_interval(b: bytes) -> tuple[int, int, int]:
    """interval_send -> (microseconds, days, months)."""
    return _INTERVAL.unpack(b)


def bin_bits(b: bytes) -> str:
    """bit_send/varbit_send -> the bit string '0101...'."""
    nbits = _I32.unpack_from(b)[0]
    if nbits == 0:
        return ""
    return bin(int.from_bytes(b[4:], "big"))[2:].zfill((len(b) - 4) * 8)[:nbits]


def bin_hstore(b: bytes) -> list[tuple[str, str | None]]:
    """hstore_send -> [(key, value or None)] in the order the text form lists them."""
    count = _I32.unpack_from(b)[0]
    pos = 4
    out: list[tuple[str, str | None]] = []
    for _ in range(count):
        n = _I32.unpack_from(b, pos)[0]
        key = b[pos + 4:pos + 4 + n].decode()
        pos += 4 + n
        n = _I32.unpack_from(b, pos)[0]
        pos += 4
        if n < 0:
            out.append((key, None))
        else:
            out.append((key, b[pos:pos + n].decode()))
            pos += n
    return out


def bin_array(b: bytes) -> tuple[int, list[bytes | None]]:
    """array_send -> (number of dimensions, flat list of element payloads or None)."""
    ndim, _flags, _elem = struct.unpack_from("!iiI", b)
    pos = 12
    count = 1 if ndim else 0
    for _ in range(ndim):
        dim, _lb = struct.unpack_from("!ii", b, pos)
        count *= dim
        pos += 8
    out: list[bytes | None] = []
    for _ in range(count):
        n = _I32.unpack_from(b, pos)[0]
        pos += 4
        if n < 0:
            out.append(None)
        else:
            out.append(b[pos:pos + n])
            pos += n
    return ndim, out


# ------------------------------------------------------------------------------ COPY text

_COPY_ESCAPES = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}


def unescape_copy_text(field: str) -> str | None:
    """One field of COPY ... TO STDOUT (text format) -> the value's text (None for \\N)."""
    if "\\" not in field:
        return field
    if field == "\\N":
        return None
    out = []
    i, n = 0, len(field)
    while i < n:
        c = field[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        nxt = field[i + 1]
        e = _COPY_ESCAPES.get(nxt)
        if e is not None:
            out.append(e)
            i += 2
        elif nxt == "x" and i + 2 < n and field[i + 2] in "0123456789abcdefABCDEF":
            j = i + 2
            while j < n and j < i + 4 and field[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(chr(int(field[i + 2:j], 16)))
            i = j
        elif nxt in "01234567":
            j = i + 1
            while j < n and j < i + 4 and field[j] in "01234567":
                j += 1
            out.append(chr(int(field[i + 1:j], 8)))
            i = j
        else:
            out.append(nxt)
            i += 2
    return "".join(out)
