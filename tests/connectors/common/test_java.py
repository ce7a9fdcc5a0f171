"""The Java emulation in connectors/common/java.py against values printed by a real JDK 17.0.15
(Double.toString, Float.toString, String.hashCode, HashMap order, Math.round, casts, BigInteger,
BigDecimal, UUID and java.time), written down here so that the test needs no JVM."""

from __future__ import annotations

import struct
from decimal import Decimal

import pytest

from headwater.connectors.common import java
from headwater.events import calendar


def _double(bits: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def _float(bits: int) -> float:
    return struct.unpack("<f", struct.pack("<I", bits))[0]


@pytest.mark.parametrize("bits, text", [
    (0x3EE4F8B588E368F1, "1.0E-5"),
    (0x4059000000000000, "100.0"),
    (0x416312D000000000, "1.0E7"),
    (0x3FD3333333333334, "0.30000000000000004"),  # 0.1 + 0.2
    (0x438F67EA69ED3795, "2.82879384806159008E17"),  # JDK 17 is not always shortest (JDK-4511638)
    (0x44B52D02C7E14AF6, "9.999999999999999E22"),  # the double nearest 1.0E23
    (0x3F50624DD2F1A9FC, "0.001"),
    (0x3F689374BC6A7EFA, "0.003"),
    (0x8000000000000000, "-0.0"),
    (0x1, "4.9E-324"),
    (0x3, "1.5E-323"),
    (0x7FEFFFFFFFFFFFFF, "1.7976931348623157E308"),
    (0x40FE240C9FBE76C9, "123456.789"),
    (0x416312CFE0000000, "9999999.0"),
    (0x3F1A36E2EB1C432D, "1.0E-4"),
])
def test_double_to_string(bits, text):
    assert java.java_double_to_string(_double(bits)) == text


@pytest.mark.parametrize("bits, text", [
    (0x3DCCCCCD, "0.1"),
    (0x501502F9, "1.0E10"),
    (0x00800000, "1.17549435E-38"),  # not the shortest digits (1.1754944E-38)
    (0x7F7FFFFF, "3.4028235E38"),
    (0x1, "1.4E-45"),
    (0x3727C5AC, "1.0E-5"),
    (0x47F12065, "123456.79"),
    (0x3E99999A, "0.3"),
    (0x4B800000, "1.6777216E7"),
    (0x4B189680, "1.0E7"),
])
def test_float_to_string(bits, text):
    assert java.java_float_to_string(_float(bits)) == text


def test_special_doubles_and_jackson():
    assert [java.java_double_to_string(x) for x in (float("nan"), float("inf"), float("-inf"))] == \
        ["NaN", "Infinity", "-Infinity"]
    assert [java.jackson_double(x) for x in (float("nan"), float("inf"), float("-inf"), 1.5)] == \
        ["NaN", "Infinity", "-Infinity", 1.5]
    assert java.jackson_quote('a\u0001\n"\\\t') == '"a\\u0001\\n\\"\\\\\\t"'
    assert java.jackson_quote("été") == '"été"'


def test_string_hash_code():
    cases = {"": 0, "a": 97, "Aa": 2112, "BB": 2112, "hello": 99162322, "headwater": -197156041,
             "été": 227742, "\U0001F600": 1772899, "polygenelubricants": -2147483648}
    assert {s: java.java_string_hash(s) for s in cases} == cases


def test_hashmap_iteration_order():
    keys = ["zeta", "alpha", "Aa", "BB", "m", "key10", "key2"]
    assert [keys[i] for i in java.hashmap_order(keys)] == ["zeta", "Aa", "BB", "key2", "alpha", "m", "key10"]


def test_rounding_and_casts():
    assert [java.java_round(x) for x in (2.5, -2.5, -0.5)] == [3, -2, 0]
    assert [java.d2l(x) for x in (1e30, float("nan"), -1e30, -2.9)] == [java.LONG_MAX, 0, java.LONG_MIN, -2]
    assert java.to_int(2**31) == -(2**31) and java.to_int(-1) == -1
    assert java.signed_bytes(b"\x00\x7f\x80\xff") == [0, 127, -128, -1]
    assert java.java_int("+12") == 12
    with pytest.raises(ValueError):
        java.java_int("2147483648")


def test_big_numbers():
    assert java.to_byte_array(-129) == bytes([0xFF, 0x7F])
    assert java.to_byte_array(32768) == bytes([0, 0x80, 0])
    assert java.plain_stripped(Decimal("1.2300")) == "1.23"
    assert str(java.java_double_decimal(0.1 + 0.2)) == "0.30000000000000004"
    assert java.plain_string(-12345, 3) == "-12.345"
    assert java.rescale(150, 2, 4) == 15000
    with pytest.raises(ValueError):
        java.rescale(155, 2, 1)  # ArithmeticException: rounding necessary


def test_uuid_and_java_time():
    assert java.name_uuid_from_bytes(b"headwater") == "1eb6aee9-af41-346f-8f40-782c6fcd3ead"
    assert java.iso_date(106762939) == "+294276-12-31"
    assert java.iso_date(-719528) == "0000-01-01"
    assert java.iso_local_timestamp(1577836800500000) == "2020-01-01T00:00:00.5Z"
    assert java.iso_time_utc(86_400_000_000) == "00:00:00Z"  # 24:00 wraps
    assert calendar.days_from_civil(*calendar.civil_from_days(-141438)) == -141438
