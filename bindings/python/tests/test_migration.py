"""Migrations: atoll.open(..., schema_version=n, migration=callable), the Migration object, a
callable that raises (the file is left as it was, checked byte for byte and through Python's
own sqlite3), delete_realm_if_migration_needed, downgrades, and a Migration kept past its
callable."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

import atoll
from conftest import run_raw

PERSON_V0 = {"name": "Person", "primaryKey": "_id", "properties": {
    "_id": "int", "name": "string", "age": "string?", "nicknames": "string[]"}}
DOG = {"name": "Dog", "primaryKey": "_id", "properties": {
    "_id": "int", "owner": "Person?", "friends": "Person[]", "mood": "mixed"}}
OLD = {"name": "Old", "properties": {"text": "string"}}
V0 = [PERSON_V0, DOG, OLD]

# v1: name -> fullName (renamed), age string? -> int (retyped), Old left out, Toy added.
PERSON_V1 = {"name": "Person", "primaryKey": "_id", "properties": {
    "_id": "int", "fullName": "string", "age": "int", "nicknames": "string[]"}}
TOY = {"name": "Toy", "primaryKey": "_id", "properties": {"_id": "string"}}
V1 = [PERSON_V1, DOG, TOY]


def seed(path):
    with atoll.open(path, schema=V0, change_log_values=True) as realm:
        with realm.write():
            realm.create("Person", {"_id": 1, "name": "Ann", "age": "31", "nicknames": ["A"]})
            realm.create("Person", {"_id": 2, "name": "Bob", "age": None})
            realm.create("Person", {"_id": 3, "name": "Cid", "age": "not a number"})
            realm.create("Dog", {"_id": 1, "owner": 1, "friends": [2, 1],
                                 "mood": atoll.Link("Person", 3)})
            realm.create("Old", {"text": "bye"})
    return path


def migrate_v1(m):
    """The migration every test that needs a working one uses."""
    m.rename_property("Person", "name", "fullName")
    for key, old in m.old_objects("Person"):
        age = old["age"]
        m.set("Person", key, {"age": int(age) if age and age.isdigit() else -1})


def snapshot(path):
    """The file as it is on disk (it must be closed): its bytes, and, read through Python's own
    sqlite3 without any WAL, its tables' SQL and row counts."""
    path = Path(path)
    assert not Path(f"{path}-wal").exists(), "a closed realm leaves no WAL behind"
    data = path.read_bytes()
    db = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    try:
        sql = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema "
                         "ORDER BY type, name").fetchall()
        counts = {name: db.execute(f'SELECT count(*) FROM "{name}"').fetchone()[0]
                  for (kind, name, _, _) in sql if kind == "table"}
    finally:
        db.close()
    return data, sql, counts


class Boom(Exception):
    pass


# MARK: - Migrating

def test_rename_and_retype_keep_the_data_and_links(tmp_path):
    path = seed(tmp_path / "m.realm")
    seen = {}

    def migrate(m):
        seen["versions"] = (m.old_version, m.new_version)
        seen["old"] = {c["name"]: list(c["properties"]) for c in m.old_schema}
        seen["new"] = {c["name"]: list(c["properties"]) for c in m.new_schema}
        seen["old objects"] = m.old_objects("Person")
        migrate_v1(m)

    with atoll.open(path, schema=V1, schema_version=1, migration=migrate) as realm:
        assert seen["versions"] == (0, 1)
        assert seen["old"]["Person"] == ["_id", "name", "age", "nicknames"]
        assert seen["new"]["Person"] == ["_id", "fullName", "age", "nicknames"]
        assert "Old" in seen["old"] and "Toy" in seen["new"] and "Toy" not in seen["old"]
        assert seen["old objects"] == [
            (1, {"_id": 1, "name": "Ann", "age": "31", "nicknames": ["A"]}),
            (2, {"_id": 2, "name": "Bob", "age": None, "nicknames": []}),
            (3, {"_id": 3, "name": "Cid", "age": "not a number", "nicknames": []})]

        assert realm.schema_version == 1
        assert realm.get("Person", 1) == {"_id": 1, "fullName": "Ann", "age": 31,
                                          "nicknames": ["A"]}
        assert realm.get("Person", 2) == {"_id": 2, "fullName": "Bob", "age": -1,
                                          "nicknames": []}
        assert realm.get("Person", 3)["age"] == -1
        # Links of every kind still point at the same objects.
        assert realm.get("Dog", 1) == {"_id": 1, "owner": 1, "friends": [2, 1],
                                       "mood": atoll.Link("Person", 3)}
        assert [d["_id"] for d in realm.objects("Dog").filter("owner.fullName == 'Ann'")] == [1]
        assert len(realm.objects("Dog").filter("ANY friends.age == 31")) == 1
        # A class left out of the new schema stays, with its objects; the new one is there.
        assert len(realm.objects("Old")) == 1
        with realm.write():
            realm.create("Toy", {"_id": "ball"})
        # The migration's writes are one change-log entry.
        migration_entry = realm.changes()[-2]["instructions"]
        assert {"op": "set", "class": "Person", "primaryKey": 1, "path": ["age"],
                "value": 31} in migration_entry

    # The file has the new layout and no leftovers of the old one.
    _, sql, counts = snapshot(path)
    tables = {name for kind, name, _, _ in sql if kind == "table"}
    assert not any(name.startswith("_atoll_old") for name in tables), tables
    db = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
    columns = [row[1] for row in db.execute('PRAGMA table_info("Person")')]
    db.close()
    assert columns == ["_id", "fullName", "age"]
    assert counts["Person"] == 3

    # Reopening with the new schema needs nothing more.
    called = []
    with atoll.open(path, schema=V1, schema_version=1, migration=called.append) as realm:
        assert realm.get("Person", 1)["fullName"] == "Ann"
    assert called == []


def test_without_a_callable_the_changes_apply_with_defaults(tmp_path):
    path = seed(tmp_path / "m.realm")
    with atoll.open(path, schema=V1, schema_version=1) as realm:
        assert realm.get("Person", 1) == {"_id": 1, "fullName": "", "age": 0,
                                          "nicknames": ["A"]}
        assert realm.get("Dog", 1)["owner"] == 1


def test_the_callable_runs_for_any_version_bump_and_only_then(tmp_path):
    path = tmp_path / "m.realm"
    calls = []
    atoll.open(path, schema=V0, schema_version=0, migration=calls.append).close()
    assert calls == []                      # a new file: nothing to migrate
    atoll.open(path, schema=V0, schema_version=0, migration=calls.append).close()
    assert calls == []                      # same version
    added = V0 + [TOY]
    atoll.open(path, schema=added, schema_version=1,
               migration=lambda m: calls.append((m.old_version, m.new_version))).close()
    assert calls == [(0, 1)]                # a bump that only adds still calls it
    with atoll.open(path) as realm:
        assert realm.schema_version == 1
    with pytest.raises(TypeError, match="migration must be a callable"):
        atoll.open(path, migration="migrate")


def test_the_migration_realm_creates_queries_and_deletes(tmp_path):
    path = seed(tmp_path / "m.realm")
    seen = {}

    def migrate(m):
        migrate_v1(m)
        realm = m.realm
        seen["in_write"] = realm.in_write
        seen["schema"] = [c["name"] for c in realm.schema]
        realm.create("Toy", {"_id": "made in the migration"})
        seen["adults"] = [p["_id"] for p in realm.objects("Person").filter("age >= $0", 18)]
        seen["get"] = realm.get("Person", 1)
        realm.delete("Person", 2)
        m.delete_data("Old")
        for call, error in ((realm.begin_write, atoll.AlreadyInWriteError),
                            (realm.commit, atoll.InvalidArgumentError),
                            (realm.cancel_write, atoll.InvalidArgumentError)):
            with pytest.raises(error) as info:
                call()
            seen.setdefault("refusals", []).append(info.value.message)
        with pytest.raises(atoll.AlreadyInWriteError, match="directly"):
            with realm.write():
                pass

    with atoll.open(path, schema=V1, schema_version=1, migration=migrate) as realm:
        assert seen["in_write"] is True
        assert "Toy" in seen["schema"] and "fullName" in str(realm.schema)
        assert seen["adults"] == [1]
        assert seen["get"]["fullName"] == "Ann"
        assert "already" in seen["refusals"][0]
        assert "migration commits its own transaction" in seen["refusals"][1]
        assert "fail its callback" in seen["refusals"][2]
        assert [t["_id"] for t in realm.objects("Toy")] == ["made in the migration"]
        assert realm.get("Person", 2) is None
        assert realm.get("Dog", 1)["friends"] == [1]          # the list dropped Bob
        assert "Old" not in [c["name"] for c in realm.schema]
    with atoll.open(path) as realm:
        assert "Old" not in [c["name"] for c in realm.schema]


def test_migration_calls_report_errors_and_the_migration_goes_on(tmp_path):
    path = seed(tmp_path / "m.realm")
    errors = {}

    def migrate(m):
        for name, call in {
            "unknown class": lambda: m.old_objects("Toy"),
            "unknown key": lambda: m.set("Person", 999, {"age": 1}),
            "wrong value": lambda: m.set("Person", 1, {"age": "old"}),
            "unknown property": lambda: m.rename_property("Person", "nope", "fullName"),
            "old target": lambda: m.rename_property("Person", "name", "age"),
            "still there": lambda: m.rename_property("Person", "nicknames", "fullName"),
            "delete unknown": lambda: m.delete_data("Cat"),
        }.items():
            try:
                call()
            except atoll.AtollError as e:
                errors[name] = (type(e), e.message)
        with pytest.raises(TypeError, match="key must be an int"):
            m.set("Person", "1", {"age": 1})
        with pytest.raises(TypeError, match="mapping"):
            m.set("Person", 1, [("age", 1)])
        migrate_v1(m)

    with atoll.open(path, schema=V1, schema_version=1, migration=migrate) as realm:
        assert realm.get("Person", 1)["age"] == 31
    assert errors["unknown class"] == (atoll.NoSuchClassError,
                                       "the old schema has no class named 'Toy'")
    assert errors["unknown key"] == (atoll.NotFoundError,
                                     "no object of class 'Person' with key 999")
    assert errors["wrong value"][0] is atoll.TypeMismatchError
    assert "age" in errors["wrong value"][1]
    assert errors["unknown property"][0] is atoll.NoSuchPropertyError
    assert "has no property 'nope'" in errors["unknown property"][1]
    assert errors["old target"] == (atoll.InvalidArgumentError, "renameProperty: the old "
                                    "schema already has 'Person.age'")
    assert errors["still there"][0] is atoll.InvalidArgumentError
    assert errors["delete unknown"][0] is atoll.NoSuchClassError


def test_setting_an_int_primary_key_moves_the_object_and_links_follow(tmp_path):
    path = tmp_path / "keys.realm"
    item = {"name": "Item", "primaryKey": "code", "properties": {"code": "string"}}
    box = {"name": "Box", "primaryKey": "_id",
           "properties": {"_id": "int", "item": "Item?", "items": "Item[]"}}
    with atoll.open(path, schema=[item, box]) as realm:
        with realm.write():
            realm.create("Item", {"code": "7"})
            realm.create("Item", {"code": "8"})
            realm.create("Box", {"_id": 1, "item": "7", "items": ["8", "7"]})
    numbered = {"name": "Item", "primaryKey": "_id", "properties": {"_id": "int"}}

    def migrate(m):
        for key, old in m.old_objects("Item"):
            m.set("Item", key, {"_id": int(old["code"])})

    with atoll.open(path, schema=[numbered, box], schema_version=1, migration=migrate) as realm:
        assert realm.get("Box", 1) == {"_id": 1, "item": 7, "items": [8, 7]}
        assert sorted(i["_id"] for i in realm.objects("Item")) == [7, 8]


# MARK: - Failing

def test_a_raising_callable_fails_the_open_and_leaves_the_file_as_it_was(tmp_path):
    path = seed(tmp_path / "m.realm")
    with atoll.open(path) as realm:
        version = realm.version
    before = snapshot(path)

    def migrate(m):
        migrate_v1(m)                       # real work first, all of it rolled back
        m.realm.create("Toy", {"_id": "ball"})
        m.delete_data("Old")
        raise Boom("stop here")

    with pytest.raises(Boom, match="stop here") as info:
        atoll.open(path, schema=V1, schema_version=1, migration=migrate)
    context = info.value.__context__
    assert type(context) is atoll.MigrationError
    assert context.code == 20 and context.status_name == "ATOLL_ERR_MIGRATION"
    assert "migration" in context.message
    assert info.value.__cause__ is None
    # The traceback still reaches into the callable.
    assert any(frame.name == "migrate" for frame in info.traceback)

    after = snapshot(path)
    assert after[1] == before[1]            # sqlite_schema: the same tables and indexes
    assert after[2] == before[2]            # the same row counts
    assert after[0] == before[0]            # byte for byte
    with atoll.open(path, schema=V0) as realm:
        assert realm.schema_version == 0
        assert realm.version == version
        assert realm.get("Person", 1) == {"_id": 1, "name": "Ann", "age": "31",
                                          "nicknames": ["A"]}
        assert len(realm.objects("Old")) == 1
        assert realm.get("Dog", 1)["mood"] == atoll.Link("Person", 3)
    # And the migration can still be done afterwards.
    with atoll.open(path, schema=V1, schema_version=1, migration=migrate_v1) as realm:
        assert realm.get("Person", 1)["age"] == 31


def test_an_atoll_error_in_the_callable_is_raised_with_the_migration_error(tmp_path):
    path = seed(tmp_path / "m.realm")
    before = snapshot(path)
    with pytest.raises(atoll.NoSuchPropertyError, match="has no property 'nope'") as info:
        atoll.open(path, schema=V1, schema_version=1,
                   migration=lambda m: m.rename_property("Person", "nope", "fullName"))
    context = info.value.__context__
    assert type(context) is atoll.MigrationError
    # The library's message is the callback's last error.
    assert "has no property 'nope'" in context.message
    assert snapshot(path) == before


def test_the_callables_own_exception_chain_is_kept(tmp_path):
    path = seed(tmp_path / "m.realm")

    def with_context(m):
        try:
            {}["missing"]
        except KeyError:
            raise Boom("while handling")

    def with_cause(m):
        raise Boom("caused") from ValueError("the cause")

    with pytest.raises(Boom) as info:
        atoll.open(path, schema=V1, schema_version=1, migration=with_context)
    assert type(info.value.__context__) is KeyError         # its own context, not replaced
    with pytest.raises(Boom) as info:
        atoll.open(path, schema=V1, schema_version=1, migration=with_cause)
    assert type(info.value.__cause__) is ValueError
    assert type(info.value.__context__) is atoll.MigrationError

    class Interrupt(BaseException):     # not an Exception: KeyboardInterrupt, SystemExit...
        pass

    def interrupted(m):
        raise Interrupt()

    with pytest.raises(Interrupt):
        atoll.open(path, schema=V1, schema_version=1, migration=interrupted)
    with atoll.open(path) as realm:
        assert realm.schema_version == 0


def test_primary_keys_that_are_not_unique_fail_the_migration(tmp_path):
    path = tmp_path / "dup.realm"
    item = {"name": "Item", "primaryKey": "_id", "properties": {"_id": "int", "tag": "string"}}
    with atoll.open(path, schema=[item]) as realm:
        with realm.write():
            realm.create_many("Item", [{"_id": 1, "tag": "a"}, {"_id": 2, "tag": "a"}])
    before = snapshot(path)
    by_tag = {"name": "Item", "primaryKey": "tag", "properties": {"_id": "int", "tag": "string"}}
    with pytest.raises(atoll.DuplicatePrimaryKeyError, match="not unique"):
        atoll.open(path, schema=[by_tag], schema_version=1, migration=lambda m: None)
    assert snapshot(path) == before


# MARK: - Refusals and deleting instead

def test_downgrades_and_changes_without_a_version_bump_are_refused(tmp_path):
    path = seed(tmp_path / "m.realm")
    calls = []
    with pytest.raises(atoll.SchemaMismatchError, match="needs a migration"):
        atoll.open(path, schema=V1, migration=calls.append)
    with atoll.open(path, schema=V1, schema_version=3, migration=migrate_v1) as realm:
        assert realm.schema_version == 3
    with pytest.raises(atoll.SchemaMismatchError,
                       match="lower than the file's version 3; downgrades are not supported"):
        atoll.open(path, schema=V1, schema_version=2, migration=calls.append)
    assert calls == []
    with atoll.open(path, schema=V1, schema_version=3) as realm:
        assert realm.get("Person", 1)["fullName"] == "Ann"


def test_delete_realm_if_migration_needed(tmp_path):
    path = seed(tmp_path / "m.realm")
    # Additions need no migration: nothing is deleted.
    with atoll.open(path, schema=V0 + [TOY], delete_realm_if_migration_needed=True) as realm:
        assert len(realm.objects("Person")) == 3
    calls = []
    with atoll.open(path, schema=V1, delete_realm_if_migration_needed=True,
                    migration=calls.append, change_log_values=True) as realm:
        assert calls == []
        assert len(realm.objects("Person")) == 0
        assert sorted(c["name"] for c in realm.schema) == ["Dog", "Person", "Toy"]
        assert realm.version == 0                       # the change log starts again
        with realm.write():
            realm.create("Person", {"_id": 1, "fullName": "New"})
        assert [e["version"] for e in realm.changes()] == [1]
    _, sql, counts = snapshot(path)
    assert "Old" not in counts and counts["Person"] == 1
    assert "delete_realm_if_migration_needed" in atoll.CONFIG_KEYS
    with pytest.raises(TypeError, match="delete_realm_if_migration_needed must be a bool"):
        atoll.open(path, delete_realm_if_migration_needed=1)


# MARK: - After the callable

def test_a_migration_kept_past_its_callable_fails_cleanly(tmp_path):
    path = seed(tmp_path / "m.realm")
    kept = {}

    def migrate(m):
        migrate_v1(m)
        kept["m"] = m
        kept["realm"] = m.realm
        kept["results"] = m.realm.objects("Person")
        assert len(kept["results"]) == 3

    with atoll.open(path, schema=V1, schema_version=1, migration=migrate) as realm:
        m, borrowed, results = kept["m"], kept["realm"], kept["results"]
        assert borrowed.closed and results.closed
        for call in (lambda: borrowed.get("Person", 1), lambda: borrowed.objects("Person"),
                     lambda: borrowed.create("Toy", {"_id": "x"}), lambda: borrowed.version,
                     lambda: len(results), lambda: results[0],
                     lambda: m.old_objects("Person"), lambda: m.set("Person", 1, {"age": 2}),
                     lambda: m.rename_property("Person", "name", "fullName"),
                     lambda: m.delete_data("Old")):
            with pytest.raises(atoll.ClosedError):
                call()
        borrowed.close()                            # idempotent, and harmless
        # The plain values stay readable; the realm that was opened is unaffected.
        assert (m.old_version, m.new_version) == (0, 1)
        assert [c["name"] for c in m.old_schema] == ["Person", "Dog", "Old"]
        assert "migrating" not in repr(borrowed) and "over" in repr(m)
        assert realm.get("Person", 1)["age"] == 31


def test_closing_the_migration_realm_closes_only_the_wrapper(tmp_path):
    path = seed(tmp_path / "m.realm")

    def migrate(m):
        with m.realm as realm:
            realm.create("Toy", {"_id": "ball"})
        with pytest.raises(atoll.ClosedError):
            m.realm.create("Toy", {"_id": "bat"})
        migrate_v1(m)                               # the migration goes on

    with atoll.open(path, schema=V1, schema_version=1, migration=migrate) as realm:
        assert [t["_id"] for t in realm.objects("Toy")] == ["ball"]
        assert realm.get("Person", 1)["fullName"] == "Ann"


def test_raw_handles_kept_past_the_callback_report_closed(tmp_path):
    """The C handles themselves, called after the callback (in a child process, so that a
    crash would fail this test only)."""
    path = seed(tmp_path / "m.realm")
    got = run_raw("""
        import atoll
        kept = {}
        def migrate(m):
            kept["migration"] = m._handle
            kept["realm"] = m.realm._handle
            kept["results"] = lib.atoll_results_query(m.realm._handle, b"Person", None, None)
        v1 = json.loads(sys.argv[2])
        realm = atoll.open(sys.argv[1], schema=v1, schema_version=1, migration=migrate)
        h = kept["migration"]
        out([lib.atoll_migration_old_objects(h, b"Person"), err()])
        out([lib.atoll_migration_set(h, b"Person", 1, b"{}"), err()])
        out([lib.atoll_migration_realm(h) is not None and bool(lib.atoll_migration_realm(h)),
             err()])
        out([lib.atoll_migration_delete_data(h, b"Old"), err()])
        out([lib.atoll_object_get(kept["realm"], b"Person", b"1"), err()])
        lib.atoll_realm_close(kept["realm"])        # does nothing to the realm that was opened
        out(realm.get("Person", 1)["_id"])
        n = ctypes.c_size_t(0)
        out([lib.atoll_results_count(kept["results"], ctypes.byref(n)), n.value, err()])
        lib.atoll_results_free(kept["results"])
        realm.close()
    """, str(path), __import__("json").dumps(V1))
    closed = "ATOLL_ERR_CLOSED"
    assert got[0] == [None, [True, closed, got[0][1][2]]]
    assert "the migration is over" in got[0][1][2]
    assert got[1][1][1] == closed and got[1][0] is False
    assert got[2][1][1] == closed and got[2][0] is False
    assert got[3][1][1] == closed
    assert got[4] == [None, [True, closed, "the realm is closed"]]
    assert got[5] == 1
    # Results made on the migration's realm are results of a closed realm now.
    assert got[6][0] is False and got[6][2][1] == closed
    assert "made on a migration's realm" in got[6][2][2]


def test_should_compact_and_migration_in_one_open(tmp_path):
    path = seed(tmp_path / "m.realm")
    asked = []
    with atoll.open(path, schema=V1, schema_version=1, migration=migrate_v1,
                    should_compact_on_launch=lambda total, used: asked.append(total) or True
                    ) as realm:
        assert realm.get("Person", 1)["age"] == 31
    assert len(asked) == 1
