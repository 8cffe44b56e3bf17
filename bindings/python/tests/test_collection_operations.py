"""Element operations on list, set and dictionary properties (Realm.list_insert, list_set,
list_erase, list_move, set_insert, set_erase, dictionary_set, dictionary_erase): resulting
contents, change-log instructions, embedded and linked elements, mixed values, errors that
change nothing, and the exact changes list observers get from them.

The Swift equivalents are in Tests/AtollStoreTests/CollectionOperationsTests.swift.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
import uuid

import pytest

import atoll
from atoll import Link, Move, ObjectId
from conftest import wants_change_log_values

SCHEMA = [
    {"name": "Person", "primaryKey": "id", "properties": {
        "id": "int", "numbers": "int[]", "dogs": "Dog[]", "addresses": "Address[]",
        "tags": "string<>", "scores": "int{}", "homes": "Address{}", "anything": "mixed[]",
        "pack": "Dog<>", "kennel": "Dog{}", "bag": "mixed{}", "maybe": "int?[]",
        "dates": "date[]", "oids": "objectId<>", "prices": "decimal128{}", "uuids": "uuid[]",
        "blobs": "data[]",
    }},
    {"name": "Dog", "primaryKey": "id", "properties": {"id": "int", "name": "string?"}},
    {"name": "Address", "embedded": True, "properties": {"city": "string"}},
    {"name": "Bag", "properties": {"items": "int[]"}},          # no primary key
]

P = ("Person", 1)   # the object most tests work on


@pytest.fixture
def realm(request, tmp_path):
    r = atoll.open(tmp_path / "ops.realm", schema=SCHEMA, notifications="host",
                   change_log_values=wants_change_log_values(request))
    with r.write():
        r.create("Person", {"id": 1, "numbers": [1, 2, 3]})
    yield r
    r.close()


def numbers(realm):
    return realm.get(*P)["numbers"]


def instructions(realm, after_version, class_name="Person"):
    """The instructions recorded after a version, without "class" and "primaryKey" (checked to
    be those of the object), for one class."""
    out = []
    for entry in realm.changes(after_version=after_version):
        for i in entry["instructions"]:
            if i["class"] != class_name:
                continue
            i = dict(i)
            assert i.pop("class") == class_name
            if class_name == "Person":
                assert i.pop("primaryKey") == 1
            out.append(i)
    return out


def take(inbox):
    got = list(inbox)
    inbox.clear()
    return got


# MARK: - Lists

@pytest.mark.change_log_values
def test_list_insert_set_erase_move(realm):
    v = realm.version
    with realm.write():
        assert realm.list_insert(*P, "numbers", 0, 0) is None     # 0 1 2 3
        realm.list_insert(*P, "numbers", 4, 9)                    # 0 1 2 3 9
        realm.list_insert(*P, "numbers", 2, 5)                    # 0 1 5 2 3 9
        assert realm.list_set(*P, "numbers", 2, 50) is None       # 0 1 50 2 3 9
        assert realm.list_erase(*P, "numbers", 0) is None         # 1 50 2 3 9
        assert realm.list_move(*P, "numbers", 4, 0) is None       # 9 1 50 2 3
        realm.list_move(*P, "numbers", 1, 3)                      # 9 50 2 1 3
        realm.list_move(*P, "numbers", 2, 2)                      # the same
        assert numbers(realm) == [9, 50, 2, 1, 3]                 # inside the transaction
    assert numbers(realm) == [9, 50, 2, 1, 3]
    assert realm.version == v + 1
    assert instructions(realm, v) == [
        {"op": "listInsert", "path": ["numbers"], "index": 0, "value": 0},
        {"op": "listInsert", "path": ["numbers"], "index": 4, "value": 9},
        {"op": "listInsert", "path": ["numbers"], "index": 2, "value": 5},
        {"op": "listSet", "path": ["numbers"], "index": 2, "value": 50},
        {"op": "listErase", "path": ["numbers"], "index": 0},
        {"op": "listMove", "path": ["numbers"], "index": 4, "toIndex": 0, "value": 9},
        {"op": "listMove", "path": ["numbers"], "index": 1, "toIndex": 3, "value": 1},
    ]
    assert len(realm.objects("Person").filter("numbers[FIRST] == 9 AND numbers.@count == 5")) == 1


def test_list_operations_on_an_empty_list_and_at_the_ends(realm):
    with realm.write():
        realm.list_insert(*P, "maybe", 0, None)                   # None in an int?[] list
        realm.list_insert(*P, "maybe", 1, 2)
        realm.list_insert(*P, "maybe", 0, 1)
        realm.list_set(*P, "maybe", 1, 7)
        realm.list_move(*P, "maybe", 0, 2)
        assert realm.get(*P)["maybe"] == [7, 2, 1]
        realm.list_erase(*P, "maybe", 2)
        realm.list_erase(*P, "maybe", 0)
        realm.list_erase(*P, "maybe", 0)
    assert realm.get(*P)["maybe"] == []


def test_index_like_objects_are_accepted(realm):
    class Index:
        def __init__(self, n):
            self.n = n

        def __index__(self):
            return self.n

    with realm.write():
        realm.list_insert(*P, "numbers", Index(3), 4)
        realm.list_move(*P, "numbers", Index(3), Index(0))
        realm.list_set(*P, "numbers", Index(1), 10)
        realm.list_erase(*P, "numbers", Index(3))
    assert numbers(realm) == [4, 10, 2]


@pytest.mark.change_log_values
def test_a_class_without_a_primary_key_is_named_by_its_row_key(realm):
    with realm.write():
        realm.create("Bag", {"_atoll_key": 40, "items": [1]})
    v = realm.version
    with realm.write():
        realm.list_insert("Bag", 40, "items", 0, 0)
        realm.list_insert("Bag", 40, "items", 2, 2)
    assert realm.objects("Bag").to_list() == [{"items": [0, 1, 2]}]
    log = realm.changes(after_version=v)[0]["instructions"]
    assert [(i["op"], i["primaryKey"], i["index"]) for i in log] == \
        [("listInsert", 40, 0), ("listInsert", 40, 2)]


# MARK: - Sets and dictionaries

@pytest.mark.change_log_values
def test_set_insert_and_erase(realm):
    v = realm.version
    with realm.write():
        assert realm.set_insert(*P, "tags", "a") is True
        assert realm.set_insert(*P, "tags", "b") is True
        assert realm.set_insert(*P, "tags", "a") is False          # already there: no change
        assert realm.set_erase(*P, "tags", "a") is True
        assert realm.set_erase(*P, "tags", "zz") is False          # not there: no change
        assert realm.set_insert(*P, "tags", "c") is True
    assert realm.get(*P)["tags"] == ["b", "c"]
    assert instructions(realm, v) == [
        {"op": "setInsert", "path": ["tags"], "value": "a"},
        {"op": "setInsert", "path": ["tags"], "value": "b"},
        {"op": "setErase", "path": ["tags"], "value": "a"},
        {"op": "setInsert", "path": ["tags"], "value": "c"},
    ]
    # nothing that changes nothing is recorded
    with realm.write():
        assert realm.set_insert(*P, "tags", "b") is False
        assert realm.set_erase(*P, "tags", "a") is False
    assert realm.version == v + 1


@pytest.mark.change_log_values
def test_dictionary_set_and_erase(realm):
    v = realm.version
    with realm.write():
        assert realm.dictionary_set(*P, "scores", "x", 1) is None
        realm.dictionary_set(*P, "scores", "x", 2)                 # replaces
        realm.dictionary_set(*P, "scores", "a", 3)
        realm.dictionary_set(*P, "scores", "ключ", 4)              # any non-empty text
        assert realm.dictionary_erase(*P, "scores", "a") is True
        assert realm.dictionary_erase(*P, "scores", "a") is False  # no longer there
    assert realm.get(*P)["scores"] == {"x": 2, "ключ": 4}
    assert instructions(realm, v) == [
        {"op": "dictionarySet", "path": ["scores", "x"], "value": 1},
        {"op": "dictionarySet", "path": ["scores", "x"], "value": 2},
        {"op": "dictionarySet", "path": ["scores", "a"], "value": 3},
        {"op": "dictionarySet", "path": ["scores", "ключ"], "value": 4},
        {"op": "dictionaryErase", "path": ["scores", "a"]},
    ]


# MARK: - Values

@pytest.mark.change_log_values
def test_values_are_written_as_create_writes_them(realm):
    when = dt.datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=dt.timezone.utc)
    before_1970 = dt.datetime(1960, 1, 2, tzinfo=dt.timezone.utc)
    oid = ObjectId()
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    v = realm.version
    with realm.write():
        realm.list_insert(*P, "dates", 0, when)
        realm.list_insert(*P, "dates", 1, before_1970)
        realm.list_set(*P, "dates", 1, when.astimezone(dt.timezone(dt.timedelta(hours=2))))
        assert realm.set_insert(*P, "oids", oid) is True
        assert realm.set_insert(*P, "oids", ObjectId(str(oid))) is False   # equal: not added
        realm.dictionary_set(*P, "prices", "p", decimal.Decimal("1.50"))
        realm.list_insert(*P, "uuids", 0, u)
        realm.list_insert(*P, "blobs", 0, b"\x00\xff")
        realm.list_insert(*P, "blobs", 1, bytearray(b"ab"))
    got = realm.get(*P)
    assert got["dates"] == [when, when]
    assert got["oids"] == [oid]
    assert got["prices"] == {"p": decimal.Decimal("1.50")}
    assert got["uuids"] == [u]
    assert got["blobs"] == [b"\x00\xff", b"ab"]
    values = [i.get("value") for i in instructions(realm, v)]
    assert values == [when, before_1970, when, oid, decimal.Decimal("1.50"), u, b"\x00\xff", b"ab"]
    with realm.write():
        with pytest.raises(TypeError, match="naive"):
            realm.list_insert(*P, "dates", 0, dt.datetime(2020, 1, 1))
        with pytest.raises(TypeError):
            realm.list_insert(*P, "numbers", 0, object())
    assert realm.get(*P)["dates"] == [when, when]


@pytest.mark.change_log_values
def test_mixed_lists_and_dictionaries(realm):
    v = realm.version
    with realm.write():
        realm.create("Dog", {"id": 5, "name": "five"})
        realm.list_insert(*P, "anything", 0, Link("Dog", 5))
        realm.list_insert(*P, "anything", 1, [1, "two"])
        realm.list_insert(*P, "anything", 2, {"nested": [True, None, 1.5]})
        realm.list_insert(*P, "anything", 0, None)
        realm.list_insert(*P, "anything", 4, "text")
        realm.list_set(*P, "anything", 0, 7)
        realm.dictionary_set(*P, "bag", "k", [1, Link("Dog", 5)])
        realm.dictionary_set(*P, "bag", "d", dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc))
    got = realm.get(*P)
    assert got["anything"] == [7, Link("Dog", 5), [1, "two"], {"nested": [True, None, 1.5]},
                               "text"]
    assert got["bag"] == {"d": dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc),
                          "k": [1, Link("Dog", 5)]}
    assert [i.get("value") for i in instructions(realm, v)] == [
        Link("Dog", 5), [1, "two"], {"nested": [True, None, 1.5]}, None, "text", 7,
        [1, Link("Dog", 5)], dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)]
    with realm.write():
        with pytest.raises(atoll.NotFoundError, match="42"):
            realm.list_insert(*P, "anything", 0, Link("Dog", 42))
    assert realm.get(*P)["anything"] == got["anything"]


# MARK: - Embedded objects and links

@pytest.mark.change_log_values
def test_embedded_elements_belong_to_their_collection(realm):
    v = realm.version
    with realm.write():
        realm.list_insert(*P, "addresses", 0, {"city": "Oslo"})
        realm.list_insert(*P, "addresses", 1, {"city": "Rome"})
        realm.list_set(*P, "addresses", 0, {"city": "Bern"})       # Oslo is deleted
        realm.dictionary_set(*P, "homes", "h", {"city": "Kyiv"})
        realm.dictionary_set(*P, "homes", "h", {"city": "Lima"})   # Kyiv is deleted
        realm.dictionary_set(*P, "homes", "g", {"city": "Riga"})
    assert len(realm.objects("Address")) == 4                      # Bern, Rome, Lima, Riga
    got = realm.get(*P)
    assert got["addresses"] == [{"city": "Bern"}, {"city": "Rome"}]
    assert got["homes"] == {"g": {"city": "Riga"}, "h": {"city": "Lima"}}
    assert [(i["op"], i.get("value")) for i in instructions(realm, v)] == [
        ("listInsert", {"city": "Oslo"}), ("listInsert", {"city": "Rome"}),
        ("listSet", {"city": "Bern"}), ("dictionarySet", {"city": "Kyiv"}),
        ("dictionarySet", {"city": "Lima"}), ("dictionarySet", {"city": "Riga"})]
    with realm.write():
        realm.list_erase(*P, "addresses", 1)
        assert realm.dictionary_erase(*P, "homes", "h") is True
        assert realm.dictionary_erase(*P, "homes", "h") is False
        realm.list_move(*P, "addresses", 0, 0)
    assert len(realm.objects("Address")) == 2
    got = realm.get(*P)
    assert got["addresses"] == [{"city": "Bern"}]
    assert got["homes"] == {"g": {"city": "Riga"}}
    assert sorted(a["city"] for a in realm.objects("Address")) == ["Bern", "Riga"]


@pytest.mark.change_log_values
def test_links_by_primary_key_and_as_whole_objects(realm):
    with realm.write():
        realm.create("Dog", {"id": 5, "name": "five"})
    v = realm.version
    with realm.write():
        realm.list_insert(*P, "dogs", 0, 5)                              # by primary key
        realm.list_insert(*P, "dogs", 0, {"id": 6, "name": "new"})       # created
        realm.list_insert(*P, "dogs", 2, 5)                              # a list may repeat
        assert realm.set_insert(*P, "pack", 5) is True
        assert realm.set_insert(*P, "pack", 5) is False
        assert realm.set_insert(*P, "pack", {"id": 7, "name": "seven"}) is True
        realm.dictionary_set(*P, "kennel", "a", 6)
        realm.dictionary_set(*P, "kennel", "b", {"id": 8})
        realm.dictionary_set(*P, "kennel", "c", None)                    # links may be null
    got = realm.get(*P)
    assert got["dogs"] == [6, 5, 5]
    assert got["pack"] == [5, 7]
    assert got["kennel"] == {"a": 6, "b": 8, "c": None}
    assert realm.get("Dog", 6) == {"id": 6, "name": "new"}
    assert realm.get("Dog", 7) == {"id": 7, "name": "seven"}
    assert realm.get("Dog", 8) == {"id": 8, "name": None}
    ops = [(i["op"], i.get("value")) for i in instructions(realm, v)]
    assert ops == [("listInsert", Link("Dog", 5)), ("listInsert", Link("Dog", 6)),
                   ("listInsert", Link("Dog", 5)), ("setInsert", Link("Dog", 5)),
                   ("setInsert", Link("Dog", 7)), ("dictionarySet", Link("Dog", 6)),
                   ("dictionarySet", Link("Dog", 8)), ("dictionarySet", None)]
    assert [i["op"] for i in instructions(realm, v, "Dog")].count("create") == 3

    # erasing a link leaves its target alone; a set holds no link to a missing object
    with realm.write():
        realm.list_erase(*P, "dogs", 0)
        assert realm.set_erase(*P, "pack", 7) is True
        assert realm.set_erase(*P, "pack", 99) is False
        assert realm.dictionary_erase(*P, "kennel", "a") is True
    got = realm.get(*P)
    assert (got["dogs"], got["pack"], got["kennel"]) == ([5, 5], [5], {"b": 8, "c": None})
    assert sorted(d["id"] for d in realm.objects("Dog")) == [5, 6, 7, 8]

    # an existing object given whole is a duplicate, and the failed call changes nothing
    v = realm.version
    with realm.write():
        with pytest.raises(atoll.DuplicatePrimaryKeyError, match="5"):
            realm.list_insert(*P, "dogs", 0, {"id": 5, "name": "again"})
        with pytest.raises(atoll.DuplicatePrimaryKeyError):
            realm.list_set(*P, "dogs", 0, {"id": 6})
        with pytest.raises(atoll.DuplicatePrimaryKeyError):
            realm.set_insert(*P, "pack", {"id": 7})
        with pytest.raises(atoll.DuplicatePrimaryKeyError):
            realm.dictionary_set(*P, "kennel", "z", {"id": 8})
        with pytest.raises(atoll.NotFoundError, match="Dog"):
            realm.list_insert(*P, "dogs", 0, 42)
        with pytest.raises(atoll.MissingValueError):
            realm.list_insert(*P, "dogs", 0, None)
        assert realm.get(*P) == got
        assert realm.get("Dog", 5) == {"id": 5, "name": "five"}
    assert realm.version == v


# MARK: - Errors

def _ops():
    """(name, call) for a call of each operation that would succeed on the fixture's object."""
    return [
        ("list_insert", lambda r: r.list_insert(*P, "numbers", 0, 1)),
        ("list_set", lambda r: r.list_set(*P, "numbers", 0, 1)),
        ("list_erase", lambda r: r.list_erase(*P, "numbers", 0)),
        ("list_move", lambda r: r.list_move(*P, "numbers", 0, 1)),
        ("set_insert", lambda r: r.set_insert(*P, "tags", "a")),
        ("set_erase", lambda r: r.set_erase(*P, "tags", "a")),
        ("dictionary_set", lambda r: r.dictionary_set(*P, "scores", "a", 1)),
        ("dictionary_erase", lambda r: r.dictionary_erase(*P, "scores", "a")),
    ]


@pytest.mark.parametrize("name, call", _ops())
def test_every_operation_needs_a_write_transaction(realm, name, call):
    before, v = realm.get(*P), realm.version
    with pytest.raises(atoll.NotInWriteError) as info:
        call(realm)
    assert info.value.code == 9 and info.value.message
    assert realm.get(*P) == before and realm.version == v


@pytest.mark.parametrize("name, call", _ops())
def test_every_operation_refuses_a_closed_realm(realm, name, call):
    realm.close()
    with pytest.raises(atoll.ClosedError):
        call(realm)


# Each: a call, the exception, and words of the library's message.
LIBRARY_ERRORS = [
    # indexes out of range
    (lambda r: r.list_insert(*P, "numbers", 4, 1), atoll.InvalidArgumentError,
     ["out of range", "0...3"]),
    (lambda r: r.list_set(*P, "numbers", 3, 1), atoll.InvalidArgumentError, ["out of range"]),
    (lambda r: r.list_erase(*P, "numbers", 3), atoll.InvalidArgumentError, ["0...2"]),
    (lambda r: r.list_move(*P, "numbers", 0, 3), atoll.InvalidArgumentError, ["out of range"]),
    (lambda r: r.list_move(*P, "numbers", 3, 0), atoll.InvalidArgumentError, ["out of range"]),
    (lambda r: r.list_erase(*P, "dogs", 0), atoll.InvalidArgumentError, ["it is empty"]),
    (lambda r: r.list_insert(*P, "numbers", 2**63 - 1, 1), atoll.InvalidArgumentError,
     ["out of range"]),
    # the wrong kind of property
    (lambda r: r.list_insert(*P, "tags", 0, "x"), atoll.InvalidArgumentError, ["not a list"]),
    (lambda r: r.list_erase(*P, "scores", 0), atoll.InvalidArgumentError, ["not a list"]),
    (lambda r: r.list_insert(*P, "id", 0, 1), atoll.InvalidArgumentError, ["not a list"]),
    (lambda r: r.set_insert(*P, "numbers", 1), atoll.InvalidArgumentError, ["not a set"]),
    (lambda r: r.set_erase(*P, "scores", 1), atoll.InvalidArgumentError, ["not a set"]),
    (lambda r: r.dictionary_set(*P, "numbers", "a", 1), atoll.InvalidArgumentError,
     ["not a dictionary"]),
    (lambda r: r.dictionary_erase(*P, "tags", "a"), atoll.InvalidArgumentError,
     ["not a dictionary"]),
    # unknown object, class, property
    (lambda r: r.list_insert("Person", 2, "numbers", 0, 1), atoll.NotFoundError,
     ["Person", "2"]),
    (lambda r: r.set_insert("Person", 2, "tags", "a"), atoll.NotFoundError, ["Person"]),
    (lambda r: r.dictionary_set("Person", 2, "scores", "a", 1), atoll.NotFoundError, ["2"]),
    (lambda r: r.list_insert("Cat", 1, "numbers", 0, 1), atoll.NoSuchClassError, ["Cat"]),
    (lambda r: r.set_erase("Cat", 1, "tags", "a"), atoll.NoSuchClassError, ["Cat"]),
    (lambda r: r.list_insert(*P, "nope", 0, 1), atoll.NoSuchPropertyError, ["nope"]),
    (lambda r: r.dictionary_erase(*P, "nope", "a"), atoll.NoSuchPropertyError, ["nope"]),
    (lambda r: r.list_insert("Person", "1", "numbers", 0, 1), atoll.TypeMismatchError, []),
    # bad dictionary keys
    (lambda r: r.dictionary_set(*P, "scores", "a.b", 1), atoll.InvalidArgumentError, ["a.b"]),
    (lambda r: r.dictionary_set(*P, "scores", "", 1), atoll.InvalidArgumentError, ["key"]),
    (lambda r: r.dictionary_set(*P, "scores", "$a", 1), atoll.InvalidArgumentError, ["$a"]),
    # values of the wrong type, and nulls where none fit
    (lambda r: r.list_insert(*P, "numbers", 0, "x"), atoll.TypeMismatchError, ["int"]),
    (lambda r: r.list_set(*P, "numbers", 0, 1.5), atoll.TypeMismatchError, []),
    (lambda r: r.set_insert(*P, "tags", 5), atoll.TypeMismatchError, ["string"]),
    (lambda r: r.dictionary_set(*P, "scores", "a", "x"), atoll.TypeMismatchError, []),
    (lambda r: r.dictionary_set(*P, "homes", "h", 5), atoll.TypeMismatchError, ["Address"]),
    (lambda r: r.list_insert(*P, "addresses", 0, {"town": "x"}), atoll.NoSuchPropertyError,
     ["town"]),
    (lambda r: r.list_insert(*P, "numbers", 0, None), atoll.MissingValueError, ["null"]),
    (lambda r: r.list_set(*P, "numbers", 0, None), atoll.MissingValueError, []),
    (lambda r: r.set_insert(*P, "tags", None), atoll.MissingValueError, []),
    (lambda r: r.dictionary_set(*P, "scores", "a", None), atoll.MissingValueError, []),
    (lambda r: r.list_insert(*P, "dates", 0, {"$date": "not a date"}), atoll.InvalidJSONError,
     ["$date"]),
]


@pytest.mark.change_log_values
@pytest.mark.parametrize("call, exc, words", LIBRARY_ERRORS)
def test_library_errors_change_nothing(realm, call, exc, words):
    with realm.write():
        realm.set_insert(*P, "tags", "t")
        realm.dictionary_set(*P, "scores", "s", 1)
    before, v = realm.get(*P), realm.version
    with realm.write():
        with pytest.raises(exc) as info:
            call(realm)
        for word in words:
            assert word in info.value.message, info.value.message
        assert realm.get(*P) == before
        realm.list_insert(*P, "numbers", 3, 4)       # the transaction still works
    after = realm.get(*P)
    assert after == dict(before, numbers=[1, 2, 3, 4])
    assert [i["op"] for i in instructions(realm, v)] == ["listInsert"]
    assert realm.version == v + 1


# Each: a call the binding refuses before calling the library, and the exception.
PYTHON_ERRORS = [
    (lambda r: r.list_insert(*P, "numbers", -1, 1), IndexError),
    (lambda r: r.list_set(*P, "numbers", -1, 1), IndexError),
    (lambda r: r.list_erase(*P, "numbers", -1), IndexError),
    (lambda r: r.list_move(*P, "numbers", -1, 0), IndexError),
    (lambda r: r.list_move(*P, "numbers", 0, -3), IndexError),
    (lambda r: r.list_erase(*P, "numbers", 2**64), IndexError),      # ctypes would wrap it to 0
    (lambda r: r.list_insert(*P, "numbers", 2**64 + 1, 1), IndexError),
    (lambda r: r.list_erase(*P, "numbers", True), TypeError),
    (lambda r: r.list_erase(*P, "numbers", 1.0), TypeError),
    (lambda r: r.list_move(*P, "numbers", "0", 1), TypeError),
    (lambda r: r.list_insert(*P, "numbers", None, 1), TypeError),
    (lambda r: r.list_insert(None, 1, "numbers", 0, 1), TypeError),
    (lambda r: r.list_insert(*P, b"numbers", 0, 1), TypeError),
    (lambda r: r.list_insert(*P, "num\x00bers", 0, 1), ValueError),
    (lambda r: r.list_insert("Person", object(), "numbers", 0, 1), TypeError),
    (lambda r: r.dictionary_set(*P, "scores", 1, 1), TypeError),
    (lambda r: r.dictionary_set(*P, "scores", "a\x00b", 1), ValueError),
    (lambda r: r.dictionary_erase(*P, "scores", None), TypeError),
    (lambda r: r.set_insert(*P, "tags", object()), TypeError),
    (lambda r: r.dictionary_set(*P, "bag", "k", {1: 2}), TypeError),
]


@pytest.mark.parametrize("call, exc", PYTHON_ERRORS)
def test_argument_errors_raised_by_the_binding_change_nothing(realm, call, exc):
    before, v = realm.get(*P), realm.version
    with realm.write():
        with pytest.raises(exc) as info:
            call(realm)
        assert not isinstance(info.value, atoll.AtollError)
        assert realm.get(*P) == before
    assert realm.version == v


def test_negative_indexes_do_not_count_from_the_end(realm):
    with realm.write():
        with pytest.raises(IndexError, match=r"index must be >= 0, not -1"):
            realm.list_set(*P, "numbers", -1, 9)
        with pytest.raises(IndexError, match=r"to_index must be >= 0, not -2"):
            realm.list_move(*P, "numbers", 0, -2)
        with pytest.raises(IndexError, match=r"from_index"):
            realm.list_move(*P, "numbers", -2, 0)
    assert numbers(realm) == [1, 2, 3]


# MARK: - List observers

def test_list_observers_get_the_elements_that_moved_and_were_set(realm):
    inbox = []
    with realm.observe_collection(*P, "numbers", inbox.append):
        realm.deliver_notifications()
        (initial,) = take(inbox)
        assert initial.initial and initial.count == 3
        with realm.write():
            realm.list_set(*P, "numbers", 1, 2)            # 1 2 3, set at 1
            realm.list_move(*P, "numbers", 2, 0)           # 3 1 2
            realm.list_insert(*P, "numbers", 3, 7)         # 3 1 2 7
            realm.list_erase(*P, "numbers", 1)             # 3 2 7
        assert take(inbox) == []                           # host delivery: nothing yet
        realm.deliver_notifications()
        (change,) = take(inbox)
    assert numbers(realm) == [3, 2, 7]
    # old 1 2 3: 1 erased, 3 moved from 2 to 0, 2 set (now at 1), 7 inserted at 2
    assert not change.initial and not change.deleted
    assert change.deletions == [0, 2]
    assert change.insertions == [0, 2]
    assert change.moves == [(2, 0)] and change.moves == [Move(2, 0)]
    assert change.modifications == [1]   # set in place: a modification, not delete + insert
    assert change.deleted_keys == [1]
    assert change.inserted_keys == [7]
    assert change.modified_keys == [2]
    assert change.count == 3


def test_set_and_dictionary_observers_see_element_operations(realm):
    with realm.write():
        realm.create("Person", {"id": 2, "tags": ["a", "b"], "scores": {"a": 1, "c": 3}})
    tags, scores = [], []
    with realm.observe_collection("Person", 2, "tags", tags.append), \
            realm.observe_collection("Person", 2, "scores", scores.append):
        realm.deliver_notifications()
        take(tags), take(scores)
        with realm.write():
            realm.set_insert("Person", 2, "tags", "c")
            realm.set_erase("Person", 2, "tags", "a")
            realm.set_insert("Person", 2, "tags", "b")          # there already: no change
            realm.dictionary_set("Person", 2, "scores", "b", 2)
            realm.dictionary_set("Person", 2, "scores", "c", 30)
            realm.dictionary_erase("Person", 2, "scores", "a")
        realm.deliver_notifications()
        (t,), (s,) = take(tags), take(scores)
    assert realm.get("Person", 2)["tags"] == ["b", "c"]
    assert realm.get("Person", 2)["scores"] == {"b": 2, "c": 30}
    assert (t.deletions, t.insertions, t.modifications, t.moves) == ([0], [1], [], [])
    assert (t.deleted_keys, t.inserted_keys, t.modified_keys, t.count) == (["a"], ["c"], [], 2)
    # dictionaries in key order: old a c, new b c
    assert (s.deletions, s.insertions, s.modifications, s.moves) == ([0], [0], [1], [])
    assert (s.deleted_keys, s.inserted_keys, s.modified_keys, s.count) == (["a"], ["b"], ["c"], 2)


def test_observers_are_not_called_for_operations_that_change_nothing(realm):
    with realm.write():
        realm.set_insert(*P, "tags", "a")
    inbox = []
    with realm.observe_collection(*P, "tags", inbox.append):
        realm.deliver_notifications()
        take(inbox)
        with realm.write():
            assert realm.set_insert(*P, "tags", "a") is False
            assert realm.set_erase(*P, "tags", "b") is False
        realm.deliver_notifications()
        assert take(inbox) == []


@pytest.mark.parametrize("seed", [4242, 7])
def test_random_list_operations_give_changes_that_rebuild_the_list(realm, seed):
    rng = random.Random(seed)
    inbox = []
    with realm.observe_collection(*P, "numbers", inbox.append):
        realm.deliver_notifications()
        take(inbox)
        old = numbers(realm)
        next_value = 100
        for round_ in range(80):
            with realm.write():
                for _ in range(rng.randint(1, 5)):
                    count = len(numbers(realm))
                    kind = rng.randrange(4)
                    if kind == 1 and count > 0:
                        realm.list_erase(*P, "numbers", rng.randrange(count))
                    elif kind == 2 and count > 0:
                        realm.list_move(*P, "numbers", rng.randrange(count), rng.randrange(count))
                    elif kind == 3 and count > 0:
                        next_value += 1
                        realm.list_set(*P, "numbers", rng.randrange(count), next_value)
                    else:
                        next_value += 1
                        realm.list_insert(*P, "numbers", rng.randint(0, count), next_value)
            realm.deliver_notifications()
            now = numbers(realm)
            rebuilt = list(old)
            for change in take(inbox):
                for d in reversed(change.deletions):
                    del rebuilt[d]
                for j in change.insertions:
                    rebuilt.insert(j, now[j])
                for j in change.modifications:
                    rebuilt[j] = now[j]
                assert change.count == len(now)
            assert rebuilt == now, f"seed {seed}, round {round_}"
            old = now


def test_add_integer_is_a_counter(tmp_path):
    realm = atoll.open(tmp_path / "c.realm", schema=[{"name": "Counter", "primaryKey": "_id",
                                                      "properties": {"_id": "int", "n": "int", "maybe": "int?", "s": "string"}}],
                       change_log_values=True)
    with realm:
        with realm.write():
            realm.create("Counter", {"_id": 1, "n": 5, "s": "x"})
        v = realm.version
        with realm.write():
            realm.add_integer("Counter", 1, "n", 3)
            realm.add_integer("Counter", 1, "n", -10)
        assert realm.get("Counter", 1)["n"] == -2
        assert realm.changes(after_version=v)[0]["instructions"] == [
            {"op": "addInteger", "class": "Counter", "primaryKey": 1, "path": ["n"], "value": 3},
            {"op": "addInteger", "class": "Counter", "primaryKey": 1, "path": ["n"], "value": -10},
        ]
        with realm.write():
            with pytest.raises(atoll.InvalidArgumentError):
                realm.add_integer("Counter", 1, "s", 1)          # not an int
            with pytest.raises(atoll.InvalidArgumentError):
                realm.add_integer("Counter", 1, "maybe", 1)      # null
            with pytest.raises(atoll.NotFoundError):
                realm.add_integer("Counter", 2, "n", 1)
            with pytest.raises(atoll.InvalidArgumentError):
                realm.add_integer("Counter", 1, "n", -(2 ** 63))  # overflow
            with pytest.raises(TypeError):
                realm.add_integer("Counter", 1, "n", 1.5)
        assert realm.get("Counter", 1)["n"] == -2
        with pytest.raises(atoll.NotInWriteError):
            realm.add_integer("Counter", 1, "n", 1)
