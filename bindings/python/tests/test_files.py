"""A realm's files: copies, compaction, should_compact_on_launch, file_exists, delete_files,
read-only realms, and two processes on one file. Real files in tmp_path; the second process is
a real Python process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import atoll
from conftest import child_env, start_python

ITEM = {"name": "Item", "primaryKey": "_id",
        "properties": {"_id": "int", "name": "string", "payload": "string"}}
PAYLOAD = "x" * 1000
#: What deleting 900 items of 1 KB frees at least (pages are not full).
FREED = 600_000


def fill(realm, first, count):
    with realm.write():
        realm.create_many("Item", [{"_id": i, "name": f"item {i}", "payload": PAYLOAD}
                                   for i in range(first, first + count)])


def make_fragmented(path):
    """A closed realm with 1,000 items written and all but the first 100 deleted."""
    with atoll.open(path, schema=[ITEM], change_log_values=True) as realm:
        fill(realm, 0, 1000)
        with realm.write():
            assert realm.objects("Item").filter("_id >= 100").delete_all() == 900
    return path


def contents(realm):
    return (realm.objects("Item").filter("TRUEPREDICATE SORT(_id ASC)").to_list(),
            realm.version, realm.changes())


def usage(path):
    """What should_compact_on_launch is told about the file now (it answers no)."""
    asked = []
    atoll.open(path, should_compact_on_launch=lambda total, used: asked.append((total, used))
               or False).close()
    assert len(asked) == 1
    return asked[0]


def companions(path):
    return [Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm", "-journal")]


# MARK: - write_copy


def test_compacted_copy_is_smaller_and_holds_the_same_data(tmp_path):
    path = make_fragmented(tmp_path / "source.realm")
    compacted, plain = tmp_path / "compacted.realm", tmp_path / "plain.realm"
    with atoll.open(path) as realm:
        realm.write_copy(compacted)                 # os.PathLike
        realm.write_copy(str(plain), compact=False)
        expected = contents(realm)
    total, used = usage(path)
    assert plain.stat().st_size == total            # every page, free ones included
    assert compacted.stat().st_size + FREED < plain.stat().st_size
    assert len(expected[0]) == 100
    for copy in (compacted, plain):
        with atoll.open(copy) as opened:
            assert contents(opened) == expected
            assert [c["name"] for c in opened.schema] == ["Item"]
            with opened.write():                    # a realm of its own
                opened.create("Item", {"_id": 5000, "name": "new", "payload": ""})
    with atoll.open(path) as realm:
        assert realm.get("Item", 5000) is None


def test_copy_to_an_existing_path_or_inside_a_write_is_refused(tmp_path, realm):
    taken = tmp_path / "taken.realm"
    taken.write_text("keep me")
    with pytest.raises(atoll.FileError, match="exists already"):
        realm.write_copy(taken)
    assert taken.read_text() == "keep me"
    stale = tmp_path / "stale.realm"
    Path(f"{stale}-wal").write_text("old")
    with pytest.raises(atoll.FileError, match="stale.realm-wal' exists already"):
        realm.write_copy(stale, compact=False)
    assert not stale.exists()

    copy = tmp_path / "copy.realm"
    with realm.write():
        realm.create("Person", {"_id": 1, "name": "Ann"})
        with pytest.raises(atoll.AlreadyInWriteError, match="write transaction"):
            realm.write_copy(copy)
        with pytest.raises(atoll.AlreadyInWriteError):
            realm.write_copy_to({"path": str(copy)})
        assert not copy.exists()
    assert realm.get("Person", 1)["name"] == "Ann"  # the transaction went on and committed

    with pytest.raises(atoll.FileError, match="cannot create"):
        realm.write_copy(tmp_path / "absent" / "copy.realm")
    with pytest.raises(TypeError):
        realm.write_copy(b"bytes.realm")
    with pytest.raises(ValueError):
        realm.write_copy("a\x00b")
    with pytest.raises(TypeError):
        realm.write_copy(copy, compact="yes")
    realm.close()
    with pytest.raises(atoll.ClosedError):
        realm.write_copy(copy)


def test_an_in_memory_realm_can_be_copied_to_a_file(tmp_path):
    with atoll.open(in_memory=True, schema=[ITEM]) as memory:
        fill(memory, 0, 10)
        memory.write_copy(tmp_path / "from-memory.realm")
    with atoll.open(tmp_path / "from-memory.realm") as copy:
        assert [o["_id"] for o in copy.objects("Item")] == list(range(10))


def test_copy_to_a_configuration_that_needs_a_migration_leaves_no_file(tmp_path):
    path = make_fragmented(tmp_path / "source.realm")
    copy = tmp_path / "copy.realm"
    changed = dict(ITEM, properties=dict(ITEM["properties"], name="int"))
    with atoll.open(path) as realm:
        with pytest.raises(atoll.SchemaMismatchError,
                           match="does not open with the configuration.*changed type"):
            realm.write_copy_to({"path": copy, "schema": [changed]})
        assert not any(p.exists() for p in companions(copy))

        # With a higher schema_version the copy is migrated (name takes its default, 0).
        migrated = tmp_path / "migrated.realm"
        realm.write_copy_to({"path": migrated, "schema": [changed], "schema_version": 1})
        with atoll.open(migrated, schema=[changed], schema_version=1) as opened:
            assert len(opened.objects("Item").filter("name == 0")) == 100

        # With an added class, the copy gets it; the original does not.
        tag = {"name": "Tag", "properties": {"label": "string"}}
        realm.write_copy_to({"path": copy, "schema": [ITEM, tag], "schema_version": 2})
        assert [c["name"] for c in realm.schema] == ["Item"]
    with atoll.open(copy) as opened:
        assert sorted(c["name"] for c in opened.schema) == ["Item", "Tag"]
        assert opened.schema_version == 2
        assert len(opened.objects("Item")) == 100


def test_configuration_arguments_are_checked(tmp_path, realm):
    with pytest.raises(atoll.InvalidArgumentError, match="in-memory"):
        realm.write_copy_to({"in_memory": True})
    with pytest.raises(TypeError, match="unknown configuration keys \\['schemaVersion'\\]"):
        realm.write_copy_to({"path": str(tmp_path / "x.realm"), "schemaVersion": 1})
    with pytest.raises(TypeError, match="needs a path"):
        atoll.file_exists({})
    with pytest.raises(TypeError, match="a configuration must be a path or a mapping"):
        atoll.delete_files(42)
    with pytest.raises(TypeError, match="schema_version must be an int"):
        atoll.file_exists({"path": "x.realm", "schema_version": "1"})
    assert not (tmp_path / "x.realm").exists()


# MARK: - compact


def test_compact_shrinks_the_file_and_keeps_the_data(tmp_path):
    path = tmp_path / "compact.realm"
    wal = Path(f"{path}-wal")
    with atoll.open(path, schema=[ITEM], change_log_values=True) as realm:
        fill(realm, 0, 1000)
        with realm.write():
            realm.objects("Item").filter("_id >= 100").delete_all()
        before = contents(realm)
        size_before = path.stat().st_size + wal.stat().st_size
        realm.compact()
        size_after = path.stat().st_size + wal.stat().st_size
        assert size_after + FREED < size_before, (size_before, size_after)
        assert wal.stat().st_size == 0
        assert contents(realm) == before
        fill(realm, 2000, 1)                        # still writable
        assert len(realm.objects("Item")) == 101


def test_compact_refusals(path, schema):
    with atoll.open(path, schema=schema) as realm, \
            atoll.open(path, write_timeout_ms=100) as impatient:
        realm.begin_write()
        with pytest.raises(atoll.AlreadyInWriteError, match="compact"):
            realm.compact()
        with pytest.raises(atoll.BusyError, match="cannot compact"):
            impatient.compact()
        realm.cancel_write()
        impatient.compact()
    with atoll.open(path, read_only=True) as reader:
        with pytest.raises(atoll.ReadOnlyError, match="compact.*read-only"):
            reader.compact()


# MARK: - should_compact_on_launch


def test_should_compact_on_launch_is_told_the_sizes_and_compacts_only_when_it_says_so(tmp_path):
    path = make_fragmented(tmp_path / "launch.realm")
    total, used = usage(path)
    assert total % 4096 == 0
    assert total - used > FREED
    assert used > 100_000
    assert usage(path) == (total, used)             # answering no changed nothing

    with atoll.open(path) as other:                 # another handle has it open: not compacted
        asked = []
        atoll.open(path, should_compact_on_launch=lambda t, u: asked.append(t) or True).close()
        assert asked == [total]
        assert len(other.objects("Item")) == 100
    assert usage(path) == (total, used)

    with atoll.open(path, should_compact_on_launch=lambda t, u: True) as realm:
        assert [o["_id"] for o in realm.objects("Item")] == list(range(100))
    after_total, after_used = usage(path)
    assert after_total + FREED < total
    assert after_used == after_total
    assert path.stat().st_size + FREED < total


def test_should_compact_on_launch_is_not_asked_for_read_only_or_in_memory(tmp_path):
    path = make_fragmented(tmp_path / "launch.realm")
    asked = []
    atoll.open(path, read_only=True, should_compact_on_launch=lambda t, u: asked.append(t)).close()
    atoll.open(in_memory=True, should_compact_on_launch=lambda t, u: asked.append(t)).close()
    assert asked == []
    with pytest.raises(TypeError, match="should_compact_on_launch must be a callable"):
        atoll.open(path, should_compact_on_launch=True)


def test_an_exception_in_should_compact_on_launch_is_raised_by_open(tmp_path):
    path = make_fragmented(tmp_path / "launch.realm")
    total, _ = usage(path)

    class Boom(Exception):
        pass

    def broken(total_bytes, used_bytes):
        raise Boom(f"cannot decide about {total_bytes}")

    with pytest.raises(Boom, match=f"cannot decide about {total}"):
        atoll.open(path, should_compact_on_launch=broken)
    assert usage(path)[0] == total                  # not compacted
    assert atoll.delete_files(path)                 # and the realm was closed again

    # A result that is not a bool is taken for its truth.
    make_fragmented(path)
    atoll.open(path, should_compact_on_launch=lambda t, u: "yes").close()
    assert usage(path)[0] + FREED < total


# MARK: - file_exists and delete_files


def test_file_exists_and_delete_files_in_this_process(path, schema):
    assert atoll.file_exists(path) is False
    realm = atoll.open(path, schema=schema)
    with realm.write():
        realm.create("Person", {"_id": 1, "name": "Ann"})
    assert atoll.file_exists(path) is True
    assert atoll.file_exists({"path": str(path), "schema": schema}) is True
    assert atoll.file_exists({"path": str(path), "in_memory": True}) is False
    assert Path(f"{path}-wal").exists() and Path(f"{path}-shm").exists()

    with pytest.raises(atoll.BusyError, match="open in this process \\(1 handle\\)"):
        atoll.delete_files(path)
    assert realm.get("Person", 1)["name"] == "Ann"
    realm.close()

    assert atoll.delete_files({"path": path}) is True
    assert not any(p.exists() for p in companions(path))
    assert atoll.file_exists(path) is False
    assert atoll.delete_files(path) is False        # nothing left: not an error
    assert atoll.delete_files({"path": str(path), "in_memory": True}) is False


HOLDER = """
import sys, atoll
realm = atoll.open(sys.argv[1], read_only=sys.argv[2] == "reader")
len(realm.objects("Item"))
print("open", flush=True)
sys.stdin.readline()
realm.close()
print("closed", flush=True)
"""


@pytest.mark.parametrize("role", ["writer", "reader"])
def test_delete_files_while_open_in_another_process(tmp_path, role):
    path = make_fragmented(tmp_path / "shared.realm")
    total, _ = usage(path)
    # The child holds the realm open until a line arrives on its stdin.
    child = subprocess.Popen([sys.executable, "-u", "-c", textwrap.dedent(HOLDER), str(path), role],
                             env=child_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "open", child.stderr.read()
        with pytest.raises(atoll.BusyError,
                           match=f"open in another process \\(pid {child.pid}\\)"):
            atoll.delete_files(path)
        assert path.exists()
        # Nor is the file compacted at open while the child has it.
        atoll.open(path, should_compact_on_launch=lambda t, u: True).close()
        assert usage(path)[0] == total
    finally:
        out, err = child.communicate("\n", timeout=30)
    assert child.returncode == 0, err
    assert out.split() == ["closed"]
    assert atoll.delete_files(path) is True
    assert not any(p.exists() for p in companions(path))


# MARK: - Read-only realms and two processes


def test_a_read_only_realm_cannot_write_and_leaves_the_file_as_it_was(tmp_path):
    path = make_fragmented(tmp_path / "ro.realm")
    original = path.read_bytes()
    with atoll.open(path, read_only=True) as realm:
        item = {"_id": 7000, "name": "x", "payload": ""}
        with pytest.raises(atoll.ReadOnlyError, match="read-only"):
            realm.begin_write()
        with pytest.raises(atoll.ReadOnlyError):
            with realm.write():
                pass
        for call in (lambda: realm.create("Item", item),
                     lambda: realm.create_many("Item", [item]),
                     lambda: realm.delete("Item", 1),
                     lambda: realm.objects("Item").delete_all(),
                     realm.compact):
            with pytest.raises(atoll.ReadOnlyError, match="read-only"):
                call()
        assert not realm.in_write
        assert len(realm.objects("Item")) == 100
        realm.write_copy(tmp_path / "copy.realm")   # copying is reading
    assert path.read_bytes() == original


WRITER = """
import sys, atoll
with atoll.open(sys.argv[1]) as realm:
    for batch in range(10):
        with realm.write():
            realm.create_many("Item", [{"_id": 1000 + batch * 10 + i, "name": "child",
                                        "payload": ""} for i in range(10)])
"""


def test_two_processes_write_one_file_while_a_read_only_realm_follows(tmp_path):
    path = tmp_path / "two.realm"
    with atoll.open(path, schema=[ITEM]) as writer, \
            atoll.open(path, read_only=True) as reader:
        child = start_python(WRITER, str(path))
        seen = []
        for batch in range(10):
            fill(writer, batch * 10, 10)
            reader.refresh()
            seen.append(len(reader.objects("Item")))
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        assert seen == sorted(seen) and seen[-1] >= 100
        assert len(reader.objects("Item")) == seen[-1]     # its snapshot, until a refresh
        reader.refresh()
        ids = [o["_id"] for o in reader.objects("Item").filter("TRUEPREDICATE SORT(_id ASC)")]
        assert ids == list(range(100)) + list(range(1000, 1100))
        assert reader.version == 20
        writer.refresh()
        assert len(writer.objects("Item").filter("name == 'child'")) == 100


def test_two_realms_in_one_process_read_each_others_commits(tmp_path):
    path = tmp_path / "two.realm"
    with atoll.open(path, schema=[ITEM]) as a, atoll.open(path) as b, \
            atoll.open(path, read_only=True) as reader:
        assert len(reader.objects("Item")) == 0
        for batch in range(5):
            fill(a, batch * 10, 10)
            fill(b, 1000 + batch * 10, 10)
            assert len(reader.objects("Item")) == batch * 20   # the snapshot of the last refresh
            reader.refresh()
            assert len(reader.objects("Item")) == (batch + 1) * 20
        a.refresh()
        assert len(a.objects("Item").filter("_id >= 1000")) == 50
        assert reader.version == 10
    assert os.path.exists(path)
