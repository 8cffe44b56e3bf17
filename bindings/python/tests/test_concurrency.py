"""Several handles, several processes, several threads on one file."""

from __future__ import annotations

import threading
import time

import pytest

import atoll
from conftest import PERSON, run_python, start_python

CHILD_OPEN = """
import sys, time, atoll
realm = atoll.open(sys.argv[1])
"""


def make_file(path):
    with atoll.open(path, schema=[PERSON], schema_version=1, change_log_values=True) as realm:
        with realm.write():
            realm.create("Person", {"_id": 0, "name": "seed"})


def test_two_realms_on_one_file(path):
    make_file(path)
    with atoll.open(path) as a, atoll.open(path) as b:
        a.begin_write()
        a.create("Person", {"_id": 1, "name": "Ann"})
        assert a.get("Person", 1) is not None
        assert b.get("Person", 1) is None            # not committed yet: b does not see it
        assert b.version == 1
        a.commit()
        assert b.get("Person", 1) is None            # committed, but b reads its snapshot
        assert b.version == 1
        assert b.refresh() is True                   # moves b's snapshot to a's commit
        assert b.get("Person", 1) == {"_id": 1, "name": "Ann", "age": None}
        assert b.version == 2
        assert b.refresh() is False                  # nothing newer
        with b.write():
            b.create("Person", {"_id": 2, "name": "Bob"})
        assert a.get("Person", 2) is None            # a reads as of its own commit
        a.refresh()
        assert a.get("Person", 2)["name"] == "Bob"
        assert [e["version"] for e in a.changes()] == [1, 2, 3]


def test_second_handle_waits_for_the_first_writer_in_process(path):
    make_file(path)
    with atoll.open(path) as a, atoll.open(path) as b:
        a.begin_write()
        a.create("Person", {"_id": 1, "name": "Ann"})
        done = []

        def second():
            b.begin_write()                           # waits for a to commit
            done.append((time.monotonic(), b.get("Person", 1)))
            b.create("Person", {"_id": 2, "name": "Bob"})
            b.commit()
        t = threading.Thread(target=second)
        t.start()
        time.sleep(0.3)
        assert done == []
        committed = time.monotonic()
        a.commit()
        t.join(10)
        assert not t.is_alive()
        assert done[0][0] >= committed
        assert done[0][1] == {"_id": 1, "name": "Ann", "age": None}  # sees a's commit
        a.refresh()
        assert a.get("Person", 2)["name"] == "Bob"


def test_another_process_writes_while_we_read(path):
    make_file(path)
    child = start_python(CHILD_OPEN + """
print("ready", flush=True)
for batch in range(20):
    with realm.write():
        realm.create_many("Person", [{"_id": 1 + batch * 10 + i, "name": "c"} for i in range(10)])
    time.sleep(0.01)
print("done", flush=True)
""", str(path))
    try:
        assert child.stdout.readline().strip() == "ready"
        seen = []
        with atoll.open(path) as realm:
            people = realm.objects("Person").filter("TRUEPREDICATE SORT(_id ASC)")
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                realm.refresh()                            # reads see the last refresh
                rows = people.to_list()
                ids = [p["_id"] for p in rows]
                assert ids == list(range(len(ids)))        # one consistent snapshot
                assert (len(ids) - 1) % 10 == 0            # whole transactions only
                seen.append(len(ids))
                if len(ids) == 201:
                    break
            assert seen == sorted(seen)                    # never goes back
            assert seen[-1] == 201
            assert realm.version == 21
        assert child.wait(30) == 0, child.stderr.read()
    finally:
        child.kill()
        child.wait()


def test_begin_write_waits_for_another_process(path):
    make_file(path)
    child = start_python(CHILD_OPEN + """
realm.begin_write()
print("locked", flush=True)
time.sleep(0.5)
realm.create("Person", {"_id": 99, "name": "child"})
realm.commit()
print("committed", flush=True)
time.sleep(0.5)
""", str(path))
    try:
        with atoll.open(path) as realm:
            assert child.stdout.readline().strip() == "locked", child.stderr.read()
            t0 = time.monotonic()
            assert realm.get("Person", 0)["name"] == "seed"   # readers never block
            assert time.monotonic() - t0 < 0.3
            realm.begin_write()
            waited = time.monotonic() - t0
            try:
                assert waited >= 0.3, waited
                assert realm.get("Person", 99) == {"_id": 99, "name": "child", "age": None}
                realm.create("Person", {"_id": 100, "name": "parent"})
            finally:
                realm.commit()
            assert realm.get("Person", 100)["name"] == "parent"
            assert realm.version == 3
        assert child.wait(30) == 0, child.stderr.read()
    finally:
        child.kill()
        child.wait()


def test_write_timeout_gives_busy_error(path):
    make_file(path)
    child = start_python(CHILD_OPEN + """
realm.begin_write()
print("locked", flush=True)
time.sleep(1.5)
realm.commit()
print("committed", flush=True)
""", str(path))
    try:
        with atoll.open(path, write_timeout_ms=200) as realm:
            assert child.stdout.readline().strip() == "locked", child.stderr.read()
            t0 = time.monotonic()
            with pytest.raises(atoll.BusyError) as info:
                realm.begin_write()
            waited = time.monotonic() - t0
            assert 0.15 <= waited < 1.2, waited
            assert info.value.code == 14 and info.value.message
            assert realm.in_write is False
            assert child.stdout.readline().strip() == "committed"
            with realm.write():
                realm.create("Person", {"_id": 1, "name": "after"})
        assert child.wait(30) == 0
    finally:
        child.kill()
        child.wait()


def test_killed_writer_releases_the_lock(path):
    make_file(path)
    child = start_python(CHILD_OPEN + """
realm.begin_write()
realm.create("Person", {"_id": 7, "name": "lost"})
print("locked", flush=True)
time.sleep(60)
""", str(path))
    try:
        assert child.stdout.readline().strip() == "locked"
        child.kill()
        child.wait()
        with atoll.open(path, write_timeout_ms=5000) as realm:
            with realm.write():
                realm.create("Person", {"_id": 8, "name": "kept"})
            assert realm.get("Person", 7) is None
            assert realm.get("Person", 8)["name"] == "kept"
    finally:
        child.kill()
        child.wait()


def test_eight_threads_hammering_one_realm(path, schema):
    n_threads, n_iter = 8, 40
    realm = atoll.open(path, schema=schema, schema_version=1)
    shared = realm.objects("Person").filter("TRUEPREDICATE SORT(_id ASC)")
    errors = []
    start = threading.Barrier(n_threads)

    def worker(t):
        try:
            start.wait()
            for i in range(n_iter):
                key = t * 1000 + i
                with realm.write():
                    realm.create("Person", {"_id": key, "name": f"t{t}-{i}", "age": i})
                    if i % 5 == 0:
                        realm.create_many("Dog", [{"_id": key, "name": "d", "owner": key,
                                                   "tags": [str(t)] * (i % 3)}])
                got = realm.get("Person", key)
                assert got == {"_id": key, "name": f"t{t}-{i}", "age": i}, got
                assert len(shared) >= i + 1
                rows = shared[0:5]
                assert rows == sorted(rows, key=lambda p: p["_id"])
                mine = realm.objects("Person").filter("name BEGINSWITH $0", f"t{t}-")
                assert len(mine) == i + 1
                mine.close()
                if i % 10 == 9:
                    assert len(list(realm.objects("Dog").filter("owner._id == $0", key - 9))) \
                        == 1
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append((t, repr(e)))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not any(th.is_alive() for th in threads)
    assert errors == []
    assert len(shared) == n_threads * n_iter
    assert [p["_id"] for p in shared] == sorted(t * 1000 + i for t in range(n_threads)
                                                for i in range(n_iter))
    assert len(realm.objects("Dog")) == n_threads * (n_iter // 5)
    assert realm.version == n_threads * n_iter
    realm.close()
    with atoll.open(path) as again:                      # and it is all on disk
        assert len(again.objects("Person")) == n_threads * n_iter


@pytest.mark.change_log_values
def test_threads_share_one_transaction_of_the_handle(realm):
    """A write transaction belongs to the handle: threads may write into it (the library
    serializes their calls)."""
    realm.begin_write()
    errors = []

    def worker(t):
        try:
            for i in range(50):
                realm.create("Person", {"_id": t * 100 + i, "name": "x"})
        except BaseException as e:  # noqa: BLE001
            errors.append(repr(e))
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    realm.commit()
    assert errors == []
    assert len(realm.objects("Person")) == 400
    assert realm.version == 1
    assert len(realm.changes()[0]["instructions"]) >= 400


def test_threads_take_turns_and_time_out(path, schema):
    with atoll.open(path, schema=schema, write_timeout_ms=100) as realm:
        realm.begin_write()
        outcome = []

        def other():
            try:
                realm.begin_write()
                outcome.append("began")
            except atoll.AtollError as e:
                outcome.append(type(e))
        t = threading.Thread(target=other)
        t.start()
        t.join(5)
        assert outcome == [atoll.BusyError]
        realm.commit()
        t = threading.Thread(target=other)
        t.start()
        t.join(5)
        assert outcome == [atoll.BusyError, "began"]
        assert realm.in_write
        realm.cancel_write()          # another thread may end it: it belongs to the handle
        assert not realm.in_write


def test_close_while_other_threads_read(path, schema):
    realm = atoll.open(path, schema=schema)
    with realm.write():
        realm.create_many("Person", [{"_id": i, "name": "p"} for i in range(200)])
    results = realm.objects("Person")
    outcomes = []
    go = threading.Event()

    def reader():
        go.set()
        try:
            while True:
                assert len(results) == 200
                assert len(list(results)) == 200
                assert realm.get("Person", 5)["_id"] == 5
        except atoll.ClosedError:
            outcomes.append("closed")
        except BaseException as e:  # noqa: BLE001
            outcomes.append(repr(e))
    threads = [threading.Thread(target=reader) for _ in range(4)]
    for th in threads:
        th.start()
    go.wait()
    time.sleep(0.2)
    realm.close()
    for th in threads:
        th.join(30)
    assert outcomes == ["closed"] * 4


def test_subprocess_sees_parent_commits(path):
    make_file(path)
    with atoll.open(path) as realm:
        with realm.write():
            realm.create("Person", {"_id": 5, "name": "from parent"})
        proc = run_python(CHILD_OPEN + "print(realm.get('Person', 5)['name'])", str(path))
        assert (proc.returncode, proc.stdout.strip()) == (0, "from parent"), proc.stderr
