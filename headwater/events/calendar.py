"""The proleptic Gregorian calendar as day numbers since 1970-01-01 (Kafka Connect's `Date`).

Java's `java.time` and Connect's logical types count days in the proleptic Gregorian calendar,
any year (year 0 is 1 BC); Python's `datetime` stops at years 1 and 9999, so these do the
arithmetic by hand (Howard Hinnant's civil-date algorithms).
"""

from __future__ import annotations

from functools import lru_cache


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
