"""Python values <-> Extended JSON (no library calls)."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import uuid

import pytest

from atoll import Link, ObjectId, ejson

UTC = dt.timezone.utc


def test_dates_encode_as_iso_with_milliseconds_z():
    d = dt.datetime(2024, 5, 1, 12, 30, 45, 123456, tzinfo=UTC)
    assert ejson.encode(d) == {"$date": "2024-05-01T12:30:45.123Z"}
    plus2 = dt.timezone(dt.timedelta(hours=2))
    assert ejson.encode(dt.datetime(2024, 5, 1, 14, 0, tzinfo=plus2)) == \
        {"$date": "2024-05-01T12:00:00.000Z"}
    assert ejson.encode(dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)) == \
        {"$date": {"$numberLong": "-1"}}
    assert ejson.encode(dt.datetime(1900, 1, 1, tzinfo=UTC)) == \
        {"$date": {"$numberLong": "-2208988800000"}}


def test_naive_datetimes_are_refused():
    with pytest.raises(TypeError, match="naive datetime"):
        ejson.dumps({"born": dt.datetime(2024, 1, 1)})
    with pytest.raises(TypeError, match="not a datetime"):
        ejson.dumps(dt.date(2024, 1, 1))


def test_dates_decode_from_every_form():
    want = dt.datetime(2024, 5, 1, 12, 30, 45, 123000, tzinfo=UTC)
    ms = 1714566645123
    for text in ('{"$date": "2024-05-01T12:30:45.123Z"}',
                 '{"$date": "2024-05-01T14:30:45.123+02:00"}',
                 '{"$date": "2024-05-01T12:30:45.123456Z"}',
                 f'{{"$date": {ms}}}',
                 f'{{"$date": {{"$numberLong": "{ms}"}}}}'):
        got = ejson.loads(text)
        assert got.replace(microsecond=got.microsecond // 1000 * 1000) == want, text
        assert got.tzinfo is not None and got.utcoffset() == dt.timedelta(0)
    assert ejson.loads('{"$date": "2024-05-01T12:30:45Z"}') == want.replace(microsecond=0)
    assert ejson.loads('{"$date": {"$numberLong": "-1"}}') == \
        dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=UTC)


def test_uuid_binary_decimal_objectid():
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert ejson.encode(u) == {"$uuid": "12345678-1234-5678-1234-567812345678"}
    assert ejson.loads('{"$uuid": "12345678-1234-5678-1234-567812345678"}') == u
    assert ejson.loads('{"$binary": {"base64": "EjRWeBI0VngSNFZ4EjRWeA==", "subType": "04"}}') == u
    assert ejson.encode(b"\x00\x01\xff") == {"$binary": {"base64": "AAH/", "subType": "00"}}
    assert ejson.encode(bytearray(b"hi")) == {"$binary": {"base64": "aGk=", "subType": "00"}}
    assert ejson.loads('{"$binary": {"base64": "AAH/", "subType": "00"}}') == b"\x00\x01\xff"
    assert ejson.encode(decimal.Decimal("-12.50")) == {"$numberDecimal": "-12.50"}
    d = ejson.loads('{"$numberDecimal": "1E+3"}')
    assert isinstance(d, decimal.Decimal) and d == 1000
    oid = ObjectId("0123456789abcdef01234567")
    assert ejson.encode(oid) == {"$oid": "0123456789abcdef01234567"}
    assert ejson.loads('{"$oid": "0123456789abcdef01234567"}') == oid


def test_special_floats():
    assert ejson.encode([math.nan, math.inf, -math.inf, 1.5]) == [
        {"$numberDouble": "NaN"}, {"$numberDouble": "Infinity"},
        {"$numberDouble": "-Infinity"}, 1.5]
    back = ejson.loads('[{"$numberDouble": "NaN"}, {"$numberDouble": "Infinity"}, '
                       '{"$numberDouble": "-Infinity"}, {"$numberDouble": "2.5"}]')
    assert math.isnan(back[0]) and back[1:] == [math.inf, -math.inf, 2.5]
    assert ejson.loads('{"$numberLong": "9007199254740993"}') == 9007199254740993
    assert ejson.loads('{"$numberInt": "-7"}') == -7
    # How `atoll export` writes a float held in a mixed value.
    assert ejson.loads('{"$numberFloat": "0.1"}') == 0.1


def test_plain_values_and_nesting():
    value = {"a": [1, True, None, "ü🐕", {"b": 2.25}], "t": (1, 2)}
    assert ejson.loads(ejson.dumps(value)) == {"a": [1, True, None, "ü🐕", {"b": 2.25}],
                                              "t": [1, 2]}
    assert ejson.dumps("ü") == '"ü"'   # UTF-8, not \\u escapes


def test_wrappers_only_when_alone():
    assert ejson.loads('{"$date": "x", "other": 1}') == {"$date": "x", "other": 1}
    assert ejson.loads('{"$unknown": 1}') == {"$unknown": 1}


def test_unencodable_values_are_type_errors():
    with pytest.raises(TypeError, match="object"):
        ejson.dumps({"x": object()})
    with pytest.raises(TypeError, match="keys must be str"):
        ejson.dumps({1: "one"})
    with pytest.raises(TypeError, match="keys must be str"):
        ejson.dumps({"tags": {frozenset({1}): 1}})
    with pytest.raises(TypeError, match="Link.class_name must be a str"):
        Link(5, 1)


def test_sets_encode_as_arrays():
    assert sorted(ejson.encode({3, 1, 2})) == [1, 2, 3]
    assert ejson.encode(frozenset({"a"})) == ["a"]
    assert ejson.encode({"tags": set()}) == {"tags": []}
    # Non-finite floats inside a set take the $numberDouble form like anywhere else.
    assert ejson.encode({"w": {math.inf}}) == {"w": [{"$numberDouble": "Infinity"}]}
    assert ejson.encode([frozenset({math.nan})]) == [[{"$numberDouble": "NaN"}]]
    assert ejson.loads(ejson.dumps({ObjectId("65f0a1b2c3d4e5f60718293a")})) == \
        [ObjectId("65f0a1b2c3d4e5f60718293a")]


def test_links_are_dbrefs_both_ways():
    oid = ObjectId("65f0a1b2c3d4e5f60718293a")
    u = uuid.UUID("f81d4fae-7dec-11d0-a765-00a0c91e6bf6")
    assert ejson.encode(Link("Dog", 5)) == {"$ref": "Dog", "$id": 5}
    assert ejson.encode(Link("Cat", oid)) == {"$ref": "Cat", "$id": {"$oid": str(oid)}}
    assert ejson.encode({"any": [Link("G", u)]}) == \
        {"any": [{"$ref": "G", "$id": {"$uuid": str(u)}}]}
    assert ejson.loads('{"$ref": "Dog", "$id": 5}') == Link("Dog", 5)
    assert ejson.loads('{"$id": "x", "$ref": "Dog"}') == Link("Dog", "x")
    assert ejson.loads('{"$ref": "Cat", "$id": {"$oid": "65f0a1b2c3d4e5f60718293a"}}') == \
        Link("Cat", oid)
    # Not links: a third key, a $ref that is not a string.
    assert ejson.loads('{"$ref": "Dog", "$id": 5, "x": 1}') == {"$ref": "Dog", "$id": 5, "x": 1}
    assert ejson.loads('{"$ref": 1, "$id": 5}') == {"$ref": 1, "$id": 5}
    # Frozen and hashable: links can be set elements and dict keys.
    assert len({Link("Dog", 1), Link("Dog", 1), Link("Dog", 2)}) == 2
    with pytest.raises(AttributeError):
        Link("Dog", 1).class_name = "Cat"  # type: ignore[misc]


def test_round_trip_of_every_type():
    value = {
        "date": dt.datetime(2001, 2, 3, 4, 5, 6, 789000, tzinfo=UTC),
        "old": dt.datetime(1955, 11, 5, 6, 15, tzinfo=UTC),
        "u": uuid.uuid4(), "bin": bytes(range(256)), "dec": decimal.Decimal("3.14159"),
        "oid": ObjectId(), "nan": [math.inf], "n": None, "b": False, "i": -2**63, "f": 0.1,
        "link": Link("Dog", ObjectId()),
    }
    assert ejson.loads(ejson.dumps(value)) == value


def test_enums_are_stored_as_their_raw_values():
    import enum

    class Size(enum.Enum):
        SMALL = "small"
        LARGE = "large"

    class Level(enum.IntEnum):
        LOW = 1

    assert ejson.encode({"size": Size.LARGE, "level": Level.LOW, "sizes": [Size.SMALL]}) == \
        {"size": "large", "level": 1, "sizes": ["small"]}
    assert Size(ejson.loads('"large"')) is Size.LARGE
