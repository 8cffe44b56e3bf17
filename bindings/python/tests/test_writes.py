"""Update policies, create_many (all or nothing), delete, and what the change log records."""

from __future__ import annotations

import re

import pytest

import atoll


def sets_of(entry):
    return sorted((tuple(i["path"]), i["value"]) for i in entry["instructions"]
                  if i["op"] == "set")


def test_update_policy_error(realm):
    with realm.write():
        realm.create("Person", {"_id": 1, "name": "Ann", "age": 30})
    v = realm.version
    with realm.write():
        with pytest.raises(atoll.DuplicatePrimaryKeyError) as info:
            realm.create("Person", {"_id": 1, "name": "Ann", "age": 31})
        assert info.value.code == 6
        assert "Person" in info.value.message and "1" in info.value.message
        with pytest.raises(atoll.DuplicatePrimaryKeyError):
            realm.create("Person", {"_id": 1, "name": "Ann"}, update="error")
    assert realm.get("Person", 1) == {"_id": 1, "name": "Ann", "age": 30}
    assert realm.version == v
    assert realm.changes(after_version=v) == []


@pytest.mark.change_log_values
def test_update_policy_modified_records_only_changed_fields(realm):
    with realm.write():
        realm.create("Person", {"_id": 1, "name": "Ann", "age": 30})
    v = realm.version
    with realm.write():
        stored = realm.create("Person", {"_id": 1, "name": "Ann", "age": 31}, update="modified")
    assert stored == {"_id": 1, "name": "Ann", "age": 31}
    log = realm.changes(after_version=v)
    assert len(log) == 1 and log[0]["version"] == v + 1
    assert log[0]["instructions"] == [
        {"op": "set", "class": "Person", "primaryKey": 1, "path": ["age"], "value": 31}]
    # nothing changed: no entry at all
    with realm.write():
        realm.create("Person", {"_id": 1, "name": "Ann", "age": 31}, update="modified")
    assert realm.version == v + 1
    # properties left out are left unchanged
    with realm.write():
        assert realm.create("Person", {"_id": 1, "age": None}, update="modified") == \
            {"_id": 1, "name": "Ann", "age": None}
    assert sets_of(realm.changes(after_version=v + 1)[0]) == [(("age",), None)]


@pytest.mark.change_log_values
def test_update_policy_all_records_every_given_field(realm):
    with realm.write():
        realm.create("Person", {"_id": 1, "name": "Ann", "age": 30})
    v = realm.version
    with realm.write():
        stored = realm.create("Person", {"_id": 1, "name": "Ann", "age": 31}, update="all")
    assert stored == {"_id": 1, "name": "Ann", "age": 31}
    log = realm.changes(after_version=v)
    assert len(log) == 1
    assert sets_of(log[0]) == [(("age",), 31), (("name",), "Ann")]
    assert all(i == {"op": "set", "class": "Person", "primaryKey": 1, "path": i["path"],
                     "value": i["value"]} for i in log[0]["instructions"])
    # unchanged values are still recorded with "all"
    with realm.write():
        realm.create("Person", {"_id": 1, "name": "Ann"}, update="all")
    assert realm.version == v + 2
    assert sets_of(realm.changes(after_version=v + 1)[0]) == [(("name",), "Ann")]


@pytest.mark.change_log_values
def test_modified_with_every_type_unchanged_records_nothing(realm):
    import datetime as dt
    import decimal
    import uuid
    full = {"_id": 1, "name": "Rex", "age": 3, "owner": {"_id": 1, "name": "Ann"},
            "tags": ["a", "b"], "toys": [{"_id": "t", "name": "T"}],
            "address": {"street": "x"}, "vets": [{"street": "v"}],
            "born": dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc), "oid": atoll.ObjectId(),
            "u": uuid.uuid4(), "price": decimal.Decimal("1.50"), "blob": b"xx", "w": 0.1,
            "h": 0.1, "ok": True}
    with realm.write():
        realm.create("Dog", full)
    v = realm.version
    with realm.write():
        realm.create("Dog", full, update="modified")
    assert realm.version == v
    with realm.write():
        realm.create("Dog", dict(full, tags=["a", "c"]), update="modified")
    log = realm.changes(after_version=v)
    assert len(log) == 1
    assert {tuple(i["path"]) for i in log[0]["instructions"]} == {("tags",)}
    assert realm.get("Dog", 1)["tags"] == ["a", "c"]


@pytest.mark.change_log_values
def test_update_policy_creates_when_absent(realm):
    with realm.write():
        assert realm.create("Person", {"_id": 5, "name": "Eve"}, update="modified") == \
            {"_id": 5, "name": "Eve", "age": None}
        assert realm.create("Person", {"_id": 6, "name": "Fay"}, update="all") == \
            {"_id": 6, "name": "Fay", "age": None}
    assert [e["instructions"][0]["op"] for e in realm.changes()] == ["create"]
    ops = [(i["op"], i["primaryKey"]) for i in realm.changes()[0]["instructions"]
           if i["op"] == "create"]
    assert ops == [("create", 5), ("create", 6)]


def test_bad_update_policy_arguments(realm):
    with realm.write():
        with pytest.raises(ValueError, match="sometimes"):
            realm.create("Person", {"_id": 1, "name": "A"}, update="sometimes")
        with pytest.raises(TypeError):
            realm.create("Person", {"_id": 1, "name": "A"}, update=None)
        with pytest.raises(TypeError):
            realm.create("Person", {"_id": 1, "name": "A"}, update=1)
        with pytest.raises(ValueError):
            realm.create_many("Person", [], update="never")
    assert realm.version == 0


def test_create_many(realm):
    rows = [{"_id": i, "name": f"p{i}", "age": i} for i in range(1, 101)]
    with realm.write():
        assert realm.create_many("Person", rows) == 100
        assert realm.create_many("Person", []) == 0
        assert realm.create_many("Person", (r for r in [{"_id": 101, "name": "gen"}])) == 1
    assert len(realm.objects("Person")) == 101
    assert realm.get("Person", 50) == {"_id": 50, "name": "p50", "age": 50}
    with realm.write():
        assert realm.create_many("Person", [{"_id": 1, "name": "one"}, {"_id": 200, "name": "x"}],
                                 update="modified") == 2
    assert realm.get("Person", 1) == {"_id": 1, "name": "one", "age": 1}
    assert len(realm.objects("Person")) == 102


@pytest.mark.parametrize("bad_row, exc", [
    ({"_id": 2, "name": 7}, atoll.TypeMismatchError),
    ({"name": "no key"}, atoll.MissingValueError),
    ({"_id": 2, "name": "x", "wings": 2}, atoll.NoSuchPropertyError),
    ({"_id": 0, "name": "duplicate of the first"}, atoll.DuplicatePrimaryKeyError),
])
def test_create_many_is_all_or_nothing(realm, bad_row, exc):
    with realm.write():
        realm.create("Person", {"_id": 1000, "name": "before"})
    v = realm.version
    rows = [{"_id": 0, "name": "a"}, {"_id": 1, "name": "b"}, bad_row,
            {"_id": 3, "name": "d"}]
    with realm.write():
        with pytest.raises(exc) as info:
            realm.create_many("Person", rows)
        assert re.search(r"\b2\b", info.value.message), info.value.message  # names the index
        assert len(realm.objects("Person")) == 1          # not even inside the transaction
        realm.create("Person", {"_id": 5, "name": "after"})  # the transaction still works
    assert sorted(p["_id"] for p in realm.objects("Person")) == [5, 1000]
    assert realm.version == v + 1


def test_create_many_argument_types(realm):
    with realm.write():
        with pytest.raises(TypeError):
            realm.create_many("Person", None)
        with pytest.raises(TypeError):
            realm.create_many("Person", {"_id": 1, "name": "a"})
        with pytest.raises(TypeError):
            realm.create_many("Person", "rows")
        with pytest.raises(TypeError, match=r"rows\[1\]"):
            realm.create_many("Person", [{"_id": 1, "name": "a"}, 5])
        with pytest.raises(TypeError):
            realm.create_many(None, [])


def test_delete(realm):
    with realm.write():
        realm.create("Person", {"_id": 1, "name": "Ann"})
        realm.create("Person", {"_id": 2, "name": "Bob"})
    with realm.write():
        assert realm.delete("Person", 1) is None
        assert realm.get("Person", 1) is None
        with pytest.raises(atoll.NotFoundError) as info:
            realm.delete("Person", 1)
        assert "1" in info.value.message
        with pytest.raises(atoll.TypeMismatchError):
            realm.delete("Person", "2")
        with pytest.raises(atoll.NoSuchClassError) as info:
            realm.delete("Cat", 2)
        assert "Cat" in info.value.message
    assert [p["_id"] for p in realm.objects("Person")] == [2]


def test_writes_outside_a_transaction(realm):
    with realm.write():
        realm.create("Person", {"_id": 1, "name": "Ann"})
    with pytest.raises(atoll.NotInWriteError) as info:
        realm.create("Person", {"_id": 2, "name": "Bob"})
    assert info.value.code == 9 and info.value.message
    with pytest.raises(atoll.NotInWriteError):
        realm.create_many("Person", [{"_id": 2, "name": "Bob"}])
    with pytest.raises(atoll.NotInWriteError):
        realm.delete("Person", 1)
    with pytest.raises(atoll.NotInWriteError):
        realm.objects("Person").delete_all()
    assert realm.get("Person", 2) is None
    assert realm.get("Person", 1)["name"] == "Ann"
    assert realm.version == 1


def test_a_failed_create_changes_nothing(realm):
    with realm.write():
        realm.create("Person", {"_id": 1, "name": "Ann"})
        with pytest.raises(atoll.TypeMismatchError):
            realm.create("Dog", {"_id": 1, "name": "Rex", "owner": {"_id": 2, "name": "Bob"},
                                 "age": "old"})
    assert realm.get("Person", 2) is None
    assert realm.get("Dog", 1) is None
    assert realm.version == 1


def test_bad_python_values(realm):
    import datetime as dt
    with realm.write():
        with pytest.raises(TypeError):
            realm.create(None, {"_id": 1, "name": "a"})
        with pytest.raises(TypeError):
            realm.create(b"Person", {"_id": 1, "name": "a"})
        with pytest.raises(TypeError):
            realm.create("Person", None)
        with pytest.raises(TypeError):
            realm.create("Person", [("_id", 1)])
        with pytest.raises(TypeError, match="object"):
            realm.create("Person", {"_id": object(), "name": "a"})
        with pytest.raises(TypeError, match="naive"):
            realm.create("Dog", {"_id": 1, "name": "a", "born": dt.datetime(2020, 1, 1)})
        with pytest.raises(TypeError, match="keys must be str"):
            realm.create("Person", {1: 1})
        with pytest.raises(ValueError):
            realm.create("Person\x00Dog", {"_id": 1, "name": "a"})
        with pytest.raises(ValueError):          # a lone surrogate cannot be UTF-8
            realm.create("Person", {"_id": 1, "name": "\ud800"})
        with pytest.raises(atoll.NoSuchClassError) as info:
            realm.create("Cat", {"_id": 1})
        assert "Cat" in info.value.message
        with pytest.raises(atoll.NoSuchPropertyError) as info:
            realm.create("Person", {"_id": 1, "name": "a", "wings": 2})
        assert "wings" in info.value.message
        with pytest.raises(atoll.MissingValueError) as info:
            realm.create("Person", {"_id": 1, "name": None})
        assert "name" in info.value.message
        with pytest.raises(atoll.MissingValueError) as info:
            realm.create("Person", {"name": "no key"})
        assert "_id" in info.value.message
        with pytest.raises(atoll.MissingValueError) as info:
            realm.create("Person", {"_id": None, "name": "a"})
        assert "_id" in info.value.message
        with pytest.raises(TypeError):
            realm.get(None, 1)
        with pytest.raises(TypeError):
            realm.get("Person", object())
        with pytest.raises(atoll.TypeMismatchError, match="got list"):
            realm.get("Person", {1, 2})       # a set is JSON's array: the library refuses it
        with pytest.raises(TypeError):
            realm.delete(3, 1)
        with pytest.raises(TypeError):
            realm.objects(None)
        with pytest.raises(TypeError):
            realm.changes(after_version=None)
        with pytest.raises(ValueError):
            realm.changes(after_version=-1)
    assert realm.version == 0
