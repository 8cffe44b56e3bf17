"""Opening, closing, transactions, metadata, and the owning layer."""

from __future__ import annotations

import gc
import weakref

import pytest

import atoll
from conftest import DOG, PERSON, run_python


def test_open_close_reopen_keeps_data(path, schema):
    with atoll.open(path, schema=schema, schema_version=1) as realm:
        with realm.write():
            stored = realm.create("Person", {"_id": 1, "name": "Ann", "age": 30})
        assert stored == {"_id": 1, "name": "Ann", "age": 30}
    assert realm.closed
    with atoll.open(path, schema=schema, schema_version=1) as realm:
        assert realm.get("Person", 1) == {"_id": 1, "name": "Ann", "age": 30}
        assert realm.get("Person", 2) is None
        assert len(realm.objects("Person")) == 1
    # without a schema, the file's schema is used
    with atoll.open(str(path)) as realm:
        assert realm.get("Person", 1) == {"_id": 1, "name": "Ann", "age": 30}
        assert realm.schema_version == 1
        assert sorted(c["name"] for c in realm.schema) == sorted(c["name"] for c in schema)


def test_open_accepts_pathlike_and_str(path, schema):
    atoll.open(path, schema=schema).close()
    atoll.open(str(path), schema=schema).close()
    assert path.exists()


def test_schema_is_returned_in_object_form(path):
    with atoll.open(path, schema=[PERSON, {"name": "K", "primaryKey": "k", "properties": {
            "k": "string", "n": {"type": "int", "indexed": True, "optional": True, "default": 5},
            "p": "Person?", "l": "int[]"}}]) as realm:
        classes = {c["name"]: c for c in realm.schema}
        assert set(classes) == {"Person", "K"}
        k = classes["K"]
        assert k["primaryKey"] == "k"
        props = k["properties"]
        assert props["k"]["type"] == "string"
        assert props["n"]["type"] == "int"
        assert props["n"]["optional"] is True
        assert props["n"]["indexed"] is True
        assert props["n"]["default"] == 5
        assert props["p"]["objectType"] == "Person"
        assert props["l"]["type"] == "list"
        assert props["l"]["objectType"] == "int"


def test_schema_default_is_used_on_create(realm):
    with realm.write():
        assert realm.create("Keyed", {"_id": "a"}) == {"_id": "a", "n": 5}
        assert realm.create("Keyed", {"_id": "b", "n": 7}) == {"_id": "b", "n": 7}


def test_schema_version_and_mismatch(path, schema):
    with atoll.open(path, schema=schema, schema_version=3) as realm:
        assert realm.schema_version == 3
    with pytest.raises(atoll.SchemaMismatchError) as info:
        atoll.open(path, schema=schema, schema_version=2)
    assert "version" in info.value.message.lower()
    changed = [dict(c) for c in schema]
    person = next(c for c in changed if c["name"] == "Person")
    person["properties"] = dict(person["properties"], age="string?")
    with pytest.raises(atoll.SchemaMismatchError) as info:
        atoll.open(path, schema=changed, schema_version=3)
    assert "age" in info.value.message
    assert isinstance(info.value, atoll.SchemaError)


def test_additive_schema_change_is_applied(path):
    with atoll.open(path, schema=[PERSON], schema_version=1) as realm:
        with realm.write():
            realm.create("Person", {"_id": 1, "name": "Ann"})
    person2 = {"name": "Person", "primaryKey": "_id",
               "properties": dict(PERSON["properties"], email="string?")}
    with atoll.open(path, schema=[person2, {"name": "Cat", "primaryKey": "_id",
                                            "properties": {"_id": "int"}}],
                    schema_version=2) as realm:
        assert realm.get("Person", 1) == {"_id": 1, "name": "Ann", "age": None, "email": None}
        assert {c["name"] for c in realm.schema} == {"Person", "Cat"}
        assert realm.schema_version == 2


def test_bad_schemas(path):
    with pytest.raises(atoll.SchemaError) as info:
        atoll.open(path, schema=[{"name": "A", "properties": {"x": "nope"}}])
    assert type(info.value) is atoll.SchemaError and "nope" in info.value.message
    with pytest.raises(atoll.SchemaError) as info:
        atoll.open(path, schema=[{"name": "A", "properties": {"x": "Missing?"}}])
    assert type(info.value) is atoll.SchemaError and "Missing" in info.value.message


def test_in_memory(tmp_path, schema):
    with atoll.open(in_memory=True, schema=schema) as a:
        with a.write():
            a.create("Person", {"_id": 1, "name": "Ann"})
        assert a.get("Person", 1)["name"] == "Ann"
        with atoll.open(in_memory=True, schema=schema) as b:   # private to each handle
            assert b.get("Person", 1) is None
    shared = tmp_path / "mem.realm"
    with atoll.open(shared, in_memory=True, schema=schema) as a:
        with a.write():
            a.create("Person", {"_id": 2, "name": "Bob"})
        with atoll.open(shared, in_memory=True, schema=schema) as b:  # same path: shared
            assert b.get("Person", 2) == {"_id": 2, "name": "Bob", "age": None}
    assert not shared.exists()
    with atoll.open(shared, in_memory=True, schema=schema) as c:  # the last one closed
        assert c.get("Person", 2) is None


def test_read_only(path, schema):
    with atoll.open(path, schema=schema) as realm:
        with realm.write():
            realm.create("Person", {"_id": 1, "name": "Ann"})
    with atoll.open(path, read_only=True) as realm:
        assert realm.get("Person", 1)["name"] == "Ann"
        with pytest.raises(atoll.ReadOnlyError):
            realm.begin_write()
        with pytest.raises(atoll.ReadOnlyError):
            with realm.write():
                pass
        assert not realm.in_write


def test_write_commits_and_cancels_on_exception(realm):
    with realm.write() as r:
        assert r is realm
        assert realm.in_write
        realm.create("Person", {"_id": 1, "name": "Ann"})
    assert not realm.in_write
    with pytest.raises(KeyError):
        with realm.write():
            realm.create("Person", {"_id": 2, "name": "Bob"})
            assert realm.get("Person", 2)["name"] == "Bob"   # reads its own writes
            raise KeyError("boom")
    assert not realm.in_write
    assert realm.get("Person", 2) is None
    assert realm.get("Person", 1)["name"] == "Ann"


def test_explicit_transactions(realm):
    assert realm.in_write is False
    realm.begin_write()
    assert realm.in_write is True
    with pytest.raises(atoll.AlreadyInWriteError) as info:
        realm.begin_write()
    assert info.value.code == 10
    realm.create("Person", {"_id": 1, "name": "Ann"})
    realm.cancel_write()
    assert realm.get("Person", 1) is None
    realm.begin_write()
    realm.create("Person", {"_id": 1, "name": "Ann"})
    realm.commit()
    assert realm.get("Person", 1)["name"] == "Ann"
    with pytest.raises(atoll.NotInWriteError):
        realm.commit()
    with pytest.raises(atoll.NotInWriteError):
        realm.cancel_write()


def test_version_counts_commits_that_changed_something(realm):
    assert realm.version == 0
    with realm.write():
        realm.create("Person", {"_id": 1, "name": "Ann"})
    assert realm.version == 1
    with realm.write():
        pass
    assert realm.version == 1
    with realm.write():
        realm.create("Person", {"_id": 1, "name": "Ann"}, update="modified")  # no change
    assert realm.version == 1
    with realm.write():
        realm.delete("Person", 1)
    assert realm.version == 2


def test_open_write_transaction_at_close_is_not_kept(path, schema):
    realm = atoll.open(path, schema=schema)
    with realm.write():
        realm.create("Person", {"_id": 1, "name": "Ann"})
    realm.begin_write()
    realm.create("Person", {"_id": 2, "name": "Bob"})
    realm.delete("Person", 1)
    realm.close()
    with atoll.open(path, schema=schema) as again:
        assert again.get("Person", 2) is None
        assert again.get("Person", 1) == {"_id": 1, "name": "Ann", "age": None}
        assert again.version == 1


def test_use_after_close_raises_closed_error(realm):
    with realm.write():
        realm.create("Person", {"_id": 1, "name": "Ann"})
    results = realm.objects("Person")
    realm.close()
    realm.close()  # idempotent
    assert results.closed
    calls = [
        lambda: realm.begin_write(), lambda: realm.commit(), lambda: realm.cancel_write(),
        lambda: realm.in_write, lambda: realm.schema, lambda: realm.schema_version,
        lambda: realm.version, lambda: realm.changes(),
        lambda: realm.create("Person", {"_id": 2, "name": "B"}),
        lambda: realm.create_many("Person", []), lambda: realm.get("Person", 1),
        lambda: realm.delete("Person", 1), lambda: realm.objects("Person"),
        lambda: len(results), lambda: results[0], lambda: list(results),
        lambda: results.delete_all(), lambda: results.filter("age > 1"),
    ]
    for i, call in enumerate(calls):
        with pytest.raises(atoll.ClosedError) as info:
            call()
        assert info.value.code == 12, i
    with pytest.raises(atoll.ClosedError):
        with realm.write():
            pass


def test_realm_close_closes_live_results_first(realm):
    a = realm.objects("Person")
    b = a.filter("age > 1")
    assert not a.closed and not b.closed
    realm.close()
    assert a.closed and b.closed
    a.close()  # idempotent


def test_results_close_and_finalizer(realm):
    results = realm.objects("Person")
    assert len(results) == 0
    results.close()
    results.close()
    with pytest.raises(atoll.ClosedError):
        len(results)
    r = realm.objects("Person")
    finalizer = r._finalizer
    ref = weakref.ref(r)
    del r
    gc.collect()
    assert ref() is None
    assert not finalizer.alive          # freed by the finalizer
    assert len(realm._results) == 0


def test_realm_finalizer_closes_the_handle(path, schema):
    realm = atoll.open(path, schema=schema)
    realm.begin_write()
    realm.create("Person", {"_id": 1, "name": "Ann"})
    finalizer = realm._finalizer
    del realm
    gc.collect()
    assert not finalizer.alive
    with atoll.open(path, schema=schema) as again:   # the open transaction was cancelled
        assert again.get("Person", 1) is None
        with again.write():                          # and the write lock released
            again.create("Person", {"_id": 1, "name": "Ann"})


def test_interpreter_exit_with_open_handles_is_clean(path):
    proc = run_python("""
        import sys, atoll
        realm = atoll.open(sys.argv[1], schema=[{"name": "P", "primaryKey": "_id",
                                                 "properties": {"_id": "int"}}])
        with realm.write():
            realm.create("P", {"_id": 1})
        results = realm.objects("P")
        cycle = [realm, results]; cycle.append(cycle)
        realm.begin_write()
        realm.create("P", {"_id": 2})
        print("ok", len(results))
    """, str(path))
    assert (proc.returncode, proc.stdout.strip()) == (0, "ok 2"), proc.stderr
    with atoll.open(path) as realm:
        assert [o["_id"] for o in realm.objects("P")] == [1]


def test_repr(realm, path):
    assert repr(realm) == f"<atoll.Realm {str(path)!r} open>"
    r = realm.objects("Dog").filter("age > $0", 2)
    assert repr(r) == "<atoll.Results Dog 'age > $0' [2]>"
    realm.close()
    assert repr(realm) == f"<atoll.Realm {str(path)!r} closed>"
    assert repr(r) == "<atoll.Results Dog 'age > $0' [2] closed>"


@pytest.mark.change_log_values
def test_changes_after_a_write(realm):
    import datetime as dt
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    with realm.write():
        realm.create("Person", {"_id": 1, "name": "Ann", "age": 30})
    with realm.write():
        realm.create("Person", {"_id": 1, "age": 31}, update="modified")
    with realm.write():
        realm.delete("Person", 1)
    after = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)
    log = realm.changes()
    assert [e["version"] for e in log] == [1, 2, 3]
    for e in log:
        assert before <= e["timestamp"] <= after
        assert set(e) == {"version", "timestamp", "instructions"}
    first = log[0]["instructions"]
    assert (first[0]["op"], first[0]["class"], first[0]["primaryKey"]) == ("create", "Person", 1)
    sets = {tuple(i["path"]): i["value"] for i in first[1:] if i["op"] == "set"}
    assert sets.get(("name",)) == "Ann" and sets.get(("age",)) == 30
    assert all(i["class"] == "Person" and i["primaryKey"] == 1 for i in first)
    assert log[1]["instructions"] == [
        {"op": "set", "class": "Person", "primaryKey": 1, "path": ["age"], "value": 31}]
    assert [(i["op"], i["class"], i["primaryKey"]) for i in log[2]["instructions"]] == \
        [("erase", "Person", 1)]
    assert [e["version"] for e in realm.changes(after_version=1)] == [2, 3]
    assert [e["version"] for e in realm.changes(after_version=1, max_entries=1)] == [2]
    assert realm.changes(after_version=3) == []
    assert realm.changes(after_version=1000) == []


def test_a_change_log_keeps_values_only_when_asked(path, schema):
    with atoll.open(path, schema=schema) as plain:
        with plain.write():
            plain.create("Person", {"_id": 1, "name": "Ann", "age": 30})
        with pytest.raises(atoll.InvalidArgumentError, match="entry 1 was recorded without values"):
            plain.changes()
        with pytest.raises(TypeError, match="change_log_values must be a bool"):
            atoll.open(path, change_log_values="yes")
        # Another handle asks; from the next commit on, every handle's commits keep values.
        with atoll.open(path, change_log_values=True) as asking:
            with plain.write():
                plain.create("Person", {"_id": 1, "age": 31}, update="modified")
            asking.refresh()
            assert asking.changes(after_version=1) == [
                {"version": 2, "timestamp": asking.changes(after_version=1)[0]["timestamp"],
                 "instructions": [{"op": "set", "class": "Person", "primaryKey": 1, "path": ["age"],
                                   "value": 31}]}]
    with atoll.open(path) as again:            # the file keeps the setting
        with again.write():
            again.delete("Person", 1)
        assert [i["op"] for i in again.changes(after_version=2)[0]["instructions"]] == ["erase"]


def test_durability_is_full_by_default_and_normal_when_asked(path, schema):
    for durability in atoll.DURABILITY_MODES:
        with atoll.open(path, schema=schema, schema_version=1, durability=durability) as realm:
            with realm.write():
                realm.create("Person", {"_id": 1, "name": durability, "age": 1}, update="modified")
            assert realm.get("Person", 1)["name"] == durability
    with pytest.raises(ValueError):
        atoll.open(path, durability="fast")
    with pytest.raises(TypeError):
        atoll.open(path, durability=True)
    with pytest.raises(ValueError):
        atoll.file_exists({"path": str(path), "durability": "FULL"})


def test_bad_arguments_to_open(path):
    with pytest.raises(TypeError):
        atoll.open(None)
    with pytest.raises(TypeError):
        atoll.open(123)
    with pytest.raises(TypeError):
        atoll.open(path, schema="Dog")
    with pytest.raises(TypeError):
        atoll.open(path, schema={"name": "Dog"})
    with pytest.raises(TypeError):
        atoll.open(path, schema_version="1")
    with pytest.raises(TypeError):
        atoll.open(path, read_only="yes")
    with pytest.raises(TypeError):
        atoll.open(path, write_timeout_ms=1.5)
    with pytest.raises(atoll.InvalidArgumentError) as info:
        atoll.open(path, schema_version=-1)
    assert "schemaVersion" in info.value.message or "schema version" in info.value.message
    with pytest.raises(atoll.FileError) as info:
        atoll.open(path.parent / "no" / "such" / "dir" / "x.realm")
    assert "x.realm" in info.value.message
    with pytest.raises(atoll.FileError):
        atoll.open(path.parent / "absent.realm", read_only=True)
    with pytest.raises(ValueError):
        atoll.open(str(path) + "\x00.realm")
