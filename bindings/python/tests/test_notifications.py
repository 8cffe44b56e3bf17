"""Live data: snapshots and refresh, change notifications (results, objects, collections, the
realm), key-path filters, both delivery modes, other handles and processes, tokens, frozen
results, async streams, and misuse.

Exact change sets are checked with host delivery (``notifications="host"``: changes arrive when
the test calls ``deliver_notifications()``), mirroring Tests/AtollStoreTests/NotificationTests
.swift. The notifier thread, other handles and other processes are checked by waiting (with
generous timeouts, never timing assertions) for the expected change.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import gc
import select
import sys
import threading
import time
from typing import Any, Dict, List

import pytest

import atoll
from atoll import (CollectionChange, Move, NotificationToken, ObjectChange, RealmChange,
                   ResultsChange, notifications)
from conftest import run_python, run_raw, start_python

PERSON = {"name": "Person", "primaryKey": "id", "properties": {
    "id": "int", "name": "string", "age": "int", "dog": "Dog?", "dogs": "Dog[]",
    "addresses": "Address[]", "tags": "string<>", "scores": "int{}", "numbers": "int[]"}}
DOG = {"name": "Dog", "primaryKey": "id", "properties": {
    "id": "int", "name": "string", "age": "int",
    "owners": {"type": "linkingObjects", "objectType": "Person", "property": "dogs"}}}
ADDRESS = {"name": "Address", "embedded": True,
           "properties": {"city": "string", "street": "string"}}
TAG = {"name": "Tag", "primaryKey": "name", "properties": {"name": "string", "weight": "int"}}
EVENT = {"name": "Event", "primaryKey": "_id",
         "properties": {"_id": "objectId", "at": "date?", "label": "string"}}
SCHEMA = [PERSON, DOG, ADDRESS, TAG, EVENT]

WAIT = 20.0  # seconds to wait for a change that must come


class Inbox:
    """Collects what a callback receives, from any thread."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._items: List[Any] = []

    def __call__(self, item: Any) -> None:
        with self._cond:
            self._items.append(item)
            self._cond.notify_all()

    def take(self, wait_for: int = 0, timeout: float = WAIT) -> List[Any]:
        """What arrived; with wait_for, first waits (up to timeout) until that many did."""
        with self._cond:
            self._cond.wait_for(lambda: len(self._items) >= wait_for, timeout)
            items, self._items = self._items, []
            return items


@pytest.fixture
def host(tmp_path):
    """A realm with host delivery: nothing is delivered until the test asks."""
    realm = atoll.open(tmp_path / "host.realm", schema=SCHEMA, notifications="host")
    yield realm
    realm.close()


@pytest.fixture
def live(tmp_path):
    """A realm with the default delivery: the library's notifier thread."""
    realm = atoll.open(tmp_path / "live.realm", schema=SCHEMA)
    yield realm
    realm.close()


@pytest.fixture
def unraisable(monkeypatch):
    """What change callbacks raised, as reported through sys.unraisablehook."""
    seen: List[Any] = []
    lock = threading.Lock()

    def hook(args: Any) -> None:
        with lock:
            seen.append((args.exc_type, args.exc_value, args.err_msg, args.object))
    monkeypatch.setattr(sys, "unraisablehook", hook)
    return seen


def people(realm: atoll.Realm, ids) -> None:
    with realm.write():
        for i in ids:
            realm.create("Person", {"id": i, "name": f"p{i}", "age": i})


def wait_readable(realm: atoll.Realm, timeout: float = WAIT) -> bool:
    readable, _, _ = select.select([realm.notification_fd()], [], [], timeout)
    return bool(readable)


def registrations() -> int:
    return len(notifications._live)


# MARK: - Results

def test_results_initial_insert_delete_modify_with_keys(host):
    people(host, range(1, 6))
    inbox = Inbox()
    with host.objects("Person").filter("age >= 2").observe(inbox) as token:
        assert isinstance(token, NotificationToken)
        assert inbox.take() == [], "nothing is delivered before the host asks"
        host.deliver_notifications()
        assert inbox.take() == [ResultsChange(initial=True, count=4)]

        with host.write():
            host.create("Person", {"id": 6, "name": "p6", "age": 6})
            host.delete("Person", 3)
            host.create("Person", {"id": 4, "age": 40}, update="modified")
            host.create("Person", {"id": 1, "age": 10}, update="modified")  # enters the results
        host.deliver_notifications()
        # old: 2 3 4 5; new: 1 2 4 5 6
        assert inbox.take() == [ResultsChange(
            initial=False, deletions=[1], insertions=[0, 4], modifications=[2], moves=[],
            deleted_keys=[3], inserted_keys=[1, 6], modified_keys=[4], count=5)]

        with host.write():
            host.create("Tag", {"name": "x"})
        host.deliver_notifications()
        assert inbox.take() == [], "a commit that does not touch the results delivers nothing"
    assert token.invalidated


def test_sorted_results_report_moves(host):
    people(host, range(1, 6))
    inbox = Inbox()
    token = host.objects("Person").filter("TRUEPREDICATE SORT(age ASC)").observe(inbox)
    host.deliver_notifications()
    inbox.take()
    # 1 2 3 4 5 -> 2 3 4 5 1 (1 moves to the end), and 3 changes its name only.
    with host.write():
        host.create("Person", {"id": 1, "age": 99}, update="modified")
        host.create("Person", {"id": 3, "name": "three"}, update="modified")
    host.deliver_notifications()
    (change,) = inbox.take()
    assert change.moves == [Move(from_index=0, to_index=4)]
    assert change.moves == [(0, 4)]
    assert change.deletions == [0], "a moved object is a deletion at its old index..."
    assert change.insertions == [4], "...and an insertion at its new one"
    assert change.modifications == [1, 4]
    assert change.modified_keys == [3, 1]
    assert change.deleted_keys == [], "moved objects were not deleted"
    assert change.inserted_keys == []
    assert change.count == 5
    token.invalidate()


def test_deleted_keys_of_a_string_primary_key(host):
    with host.write():
        for n in "abc":
            host.create("Tag", {"name": n, "weight": 1})
    inbox = Inbox()
    token = host.objects("Tag").observe(inbox)
    host.deliver_notifications()
    inbox.take()
    with host.write():
        host.delete("Tag", "b")
        host.create("Tag", {"name": "c", "weight": 2}, update="modified")
        host.create("Tag", {"name": "d"})
    host.deliver_notifications()
    (change,) = inbox.take()
    assert change.deletions == [1]
    assert change.deleted_keys == ["b"]
    assert change.modified_keys == ["c"]
    assert change.inserted_keys == ["d"]
    assert change.insertions == [2]
    assert change.modifications == [1]
    token.invalidate()


def test_keys_and_values_are_python_values(host):
    """Keys and values come through the Extended JSON decoder: ObjectId, aware datetime."""
    a, b = atoll.ObjectId(), atoll.ObjectId()
    t0 = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc)
    with host.write():
        host.create("Event", {"_id": a, "at": t0, "label": "a"})
    results, objects = Inbox(), Inbox()
    tokens = [host.objects("Event").observe(results),
              host.observe_object("Event", a, objects)]
    host.deliver_notifications()
    assert results.take() == [ResultsChange(initial=True, count=1)]
    t1 = t0 + dt.timedelta(days=1, milliseconds=5)
    with host.write():
        host.create("Event", {"_id": b, "label": "b"})
        host.create("Event", {"_id": a, "at": t1}, update="modified")
    host.deliver_notifications()
    (change,) = results.take()
    assert change.inserted_keys == [b] and isinstance(change.inserted_keys[0], atoll.ObjectId)
    assert change.modified_keys == [a]
    assert objects.take() == [ObjectChange(deleted=False, changed_properties=["at"],
                                           old={"at": t0}, new={"at": t1})]
    for t in tokens:
        t.invalidate()


def test_classes_without_a_primary_key_use_row_keys(tmp_path):
    note = {"name": "Note", "properties": {"text": "string"}}
    with atoll.open(tmp_path / "n.realm", schema=[note], notifications="host") as realm:
        with realm.write():
            realm.create("Note", {"text": "a", "_atoll_key": 3})
            realm.create("Note", {"text": "b", "_atoll_key": 40})
        results, objects = Inbox(), Inbox()
        tokens = [realm.objects("Note").observe(results),
                  realm.observe_object("Note", 40, objects)]
        realm.deliver_notifications()
        assert results.take() == [ResultsChange(initial=True, count=2)]
        with realm.write():
            realm.create("Note", {"_atoll_key": 40, "text": "B"}, update="modified")
            realm.create("Note", {"_atoll_key": 7, "text": "c"})
            realm.objects("Note").filter("text == $0", "a").delete_all()
        realm.deliver_notifications()
        assert results.take() == [ResultsChange(
            deletions=[0], insertions=[0], modifications=[1], deleted_keys=[3],
            inserted_keys=[7], modified_keys=[40], count=2)]
        assert objects.take() == [ObjectChange(changed_properties=["text"], old={"text": "b"},
                                               new={"text": "B"})]
        with pytest.raises(atoll.TypeMismatchError):
            realm.observe_object("Note", "40", Inbox())
        for t in tokens:
            t.invalidate()


# MARK: - Key paths

def test_key_path_filters_through_links_lists_and_embedded_lists(host):
    with host.write():
        host.create("Dog", {"id": 10, "name": "Rex", "age": 3})
        host.create("Dog", {"id": 11, "name": "Fido", "age": 4})
        host.create("Person", {"id": 1, "name": "Ann", "dogs": [10],
                               "addresses": [{"city": "Oslo", "street": "A"}]})
        host.create("Person", {"id": 2, "name": "Bob", "dogs": [11]})
    every, names, dog_names, cities = Inbox(), Inbox(), Inbox(), Inbox()
    results = host.objects("Person").filter("TRUEPREDICATE SORT(id ASC)")
    tokens = [results.observe(every), results.observe(names, key_paths=["name"]),
              results.observe(dog_names, key_paths=["name", "dogs.name"]),
              results.observe(cities, key_paths=("addresses.city",))]
    host.deliver_notifications()
    for inbox in (every, names, dog_names, cities):
        assert [c.initial for c in inbox.take()] == [True]

    # A dog's age: only the observer without key paths sees Ann change.
    with host.write():
        host.create("Dog", {"id": 10, "age": 5}, update="modified")
    host.deliver_notifications()
    assert [c.modified_keys for c in every.take()] == [[1]]
    assert names.take() == [] and dog_names.take() == [] and cities.take() == []

    # A dog's name: "dogs.name" counts it (Bob's dog).
    with host.write():
        host.create("Dog", {"id": 11, "name": "Max"}, update="modified")
    host.deliver_notifications()
    assert [(c.modifications, c.modified_keys) for c in every.take()] == [([1], [2])]
    assert names.take() == []
    assert [c.modified_keys for c in dog_names.take()] == [[2]]
    assert cities.take() == []

    # A street in a list of embedded objects: not the city (realm-swift #8387) -- but the list
    # is replaced whole, which is a change of the list itself.
    with host.write():
        host.create("Person", {"id": 1, "addresses": [{"city": "Oslo", "street": "B"}]},
                    update="modified")
    host.deliver_notifications()
    assert [c.modified_keys for c in every.take()] == [[1]]
    assert [c.modified_keys for c in cities.take()] == [[1]]
    assert names.take() == [] and dog_names.take() == []

    with host.write():
        host.create("Person", {"id": 2, "name": "Bo"}, update="modified")
    host.deliver_notifications()
    assert [c.modified_keys for c in names.take()] == [[2]]
    assert [c.modified_keys for c in dog_names.take()] == [[2]]
    assert cities.take() == []
    assert len(every.take()) == 1

    # Insertions and deletions count whatever the key paths.
    with host.write():
        host.delete("Person", 1)
    host.deliver_notifications()
    for inbox in (every, names, dog_names, cities):
        assert [(c.deletions, c.deleted_keys, c.count) for c in inbox.take()] == [([0], [1], 1)]

    with pytest.raises(atoll.InvalidArgumentError, match="no property 'nope'"):
        results.observe(Inbox(), key_paths=["nope"])
    with pytest.raises(atoll.InvalidArgumentError, match="not a link"):
        results.observe(Inbox(), key_paths=["name.x"])
    for t in tokens:
        t.invalidate()


# MARK: - Objects

def test_object_changes_with_old_and_new_values_and_deletion(host):
    with host.write():
        host.create("Dog", {"id": 10, "name": "Rex"})
        host.create("Person", {"id": 1, "name": "Ann", "age": 30, "dog": 10})
    inbox, age_only = Inbox(), Inbox()
    token = host.observe_object("Person", 1, inbox)
    filtered = host.observe_object("Person", 1, age_only, key_paths=["age"])

    with host.write():
        host.create("Person", {"id": 1, "name": "Anna", "age": 31}, update="modified")
    host.deliver_notifications()
    assert inbox.take() == [ObjectChange(deleted=False, changed_properties=["name", "age"],
                                         old={"name": "Ann", "age": 30},
                                         new={"name": "Anna", "age": 31})]
    assert [c.changed_properties for c in age_only.take()] == [["age"]]

    # A change of the linked dog counts as a change of `dog`; deleting the dog nulls the link.
    with host.write():
        host.create("Dog", {"id": 10, "name": "Max"}, update="modified")
    host.deliver_notifications()
    assert [c.changed_properties for c in inbox.take()] == [["dog"]]
    with host.write():
        host.delete("Dog", 10)
    host.deliver_notifications()
    assert inbox.take() == [ObjectChange(changed_properties=["dog"], old={"dog": 10},
                                         new={"dog": None})]
    assert age_only.take() == []

    with host.write():
        host.delete("Person", 1)
    host.deliver_notifications()
    (deleted,) = inbox.take()
    assert deleted.deleted is True
    assert deleted.changed_properties == [] and deleted.new == {}
    assert deleted.old["name"] == "Anna" and deleted.old["age"] == 31
    assert [c.deleted for c in age_only.take()] == [True]
    with host.write():
        host.create("Person", {"id": 1})
    host.deliver_notifications()
    assert inbox.take() == [], "nothing after the deletion"
    token.invalidate()
    filtered.invalidate()

    with pytest.raises(atoll.NotFoundError):
        host.observe_object("Person", 99, Inbox())
    with pytest.raises(atoll.NoSuchClassError):
        host.observe_object("Nope", 1, Inbox())


# MARK: - Collections

def test_list_set_and_dictionary_changes(host):
    with host.write():
        host.create("Person", {"id": 1, "numbers": [1, 2, 3, 4], "tags": ["a", "b"],
                               "scores": {"x": 1, "y": 2}})
    lst, st, dct = Inbox(), Inbox(), Inbox()
    tokens = [host.observe_collection("Person", 1, "numbers", lst),
              host.observe_collection("Person", 1, "tags", st),
              host.observe_collection("Person", 1, "scores", dct)]
    host.deliver_notifications()
    assert lst.take() == [CollectionChange(initial=True, count=4)]
    assert [c.initial for c in st.take()] == [True]
    assert [c.count for c in dct.take()] == [2]

    with host.write():
        host.create("Person", {"id": 1, "numbers": [9, 4, 1, 33], "tags": ["b", "c"],
                               "scores": {"y": 20, "z": 3}}, update="modified")
    host.deliver_notifications()
    # old 1 2 3 4 -> new 9 4 1 33: 2 and 3 deleted, 9 and 33 inserted, 1 moved from 0 to 2.
    assert lst.take() == [CollectionChange(
        initial=False, deleted=False, deletions=[0, 1, 2], insertions=[0, 2, 3],
        modifications=[], moves=[Move(0, 2)], deleted_keys=[2, 3], inserted_keys=[9, 33],
        modified_keys=[], count=4)]
    (s,) = st.take()
    assert (s.deletions, s.insertions, s.deleted_keys, s.inserted_keys) == \
        ([0], [1], ["a"], ["c"])
    (d,) = dct.take()
    assert (d.deleted_keys, d.inserted_keys, d.modified_keys) == (["x"], ["z"], ["y"])
    assert (d.deletions, d.insertions, d.modifications) == ([0], [1], [0])
    assert d.count == 2 and not d.deleted

    with host.write():
        host.delete("Person", 1)
    host.deliver_notifications()
    for inbox in (lst, st, dct):
        assert [c.deleted for c in inbox.take()] == [True]
    for t in tokens:
        t.invalidate()


def test_a_list_of_links_reports_changed_targets(host):
    with host.write():
        host.create("Dog", {"id": 10, "name": "Rex"})
        host.create("Dog", {"id": 11, "name": "Fido"})
        host.create("Person", {"id": 1, "dogs": [10, 11]})
    inbox, names = Inbox(), Inbox()
    token = host.observe_collection("Person", 1, "dogs", inbox)
    by_name = host.observe_collection("Person", 1, "dogs", names, key_paths=["name"])
    host.deliver_notifications()
    assert [c.count for c in inbox.take()] == [2]
    names.take()
    with host.write():
        host.create("Dog", {"id": 11, "age": 2}, update="modified")
    host.deliver_notifications()
    assert [c.modifications for c in inbox.take()] == [[1]]
    assert names.take() == [], "an age is not a name"
    with host.write():
        host.delete("Dog", 10)
    host.deliver_notifications()
    (change,) = inbox.take()
    assert (change.deletions, change.deleted_keys, change.count) == ([0], [10], 1)
    token.invalidate()
    by_name.invalidate()


# MARK: - The realm

def test_realm_observer_reports_versions_and_classes(host):
    inbox = Inbox()
    token = host.observe(inbox)
    host.deliver_notifications()
    assert inbox.take() == [], "no initial call"
    # Two commits before a delivery: one call covering both.
    people(host, [1])
    with host.write():
        host.create("Tag", {"name": "t"})
        host.create("Dog", {"id": 1, "name": "Rex"})
    host.deliver_notifications()
    (change,) = inbox.take()
    assert (change.previous_version, change.version) == (0, 2)
    assert sorted(change.classes) == ["Dog", "Person", "Tag"]
    with host.write():
        host.create("Dog", {"id": 1, "name": "Max"}, update="modified")
    host.deliver_notifications()
    assert inbox.take() == [RealmChange(previous_version=2, version=3, classes=["Dog"])]
    host.deliver_notifications()
    assert inbox.take() == [], "no commits, no call"
    token.invalidate()


# MARK: - Delivery

def test_notifier_thread_delivers_commits_of_another_handle(tmp_path):
    path = tmp_path / "two.realm"
    with atoll.open(path, schema=SCHEMA) as writer, atoll.open(path) as reader:
        realm_changes, results = Inbox(), Inbox()
        tokens = [reader.observe(realm_changes), reader.objects("Person").observe(results)]
        assert [c.initial for c in results.take(wait_for=1)] == [True]
        people(writer, [1, 2])
        (change,) = realm_changes.take(wait_for=1)
        assert change.version == 1 and change.classes == ["Person"]
        assert [c.inserted_keys for c in results.take(wait_for=1)] == [[1, 2]]
        assert len(reader.objects("Person")) == 2, "the delivery refreshed the reader"
        for t in tokens:
            t.invalidate()


def test_host_delivery_of_another_handles_commits_through_the_descriptor(tmp_path):
    path = tmp_path / "two.realm"
    with atoll.open(path, schema=SCHEMA) as writer, \
            atoll.open(path, notifications="host") as reader:
        assert reader.notifications == "host"
        fd = reader.notification_fd()
        assert isinstance(fd, int) and fd >= 0 and reader.notification_fd() == fd
        inbox = Inbox()
        token = reader.objects("Person").observe(inbox)
        assert wait_readable(reader)
        reader.deliver_notifications()
        assert [c.initial for c in inbox.take()] == [True]
        people(writer, [1, 2, 3])
        assert len(reader.objects("Person")) == 0, "the reader's snapshot holds until delivery"
        assert wait_readable(reader)
        reader.deliver_notifications()
        assert [c.inserted_keys for c in inbox.take()] == [[1, 2, 3]]
        assert len(reader.objects("Person")) == 3
        token.invalidate()


WRITER_CHILD = """
import sys, atoll
with atoll.open(sys.argv[1]) as realm:
    for i in (1, 2, 3):
        with realm.write():
            realm.create("Person", {"id": i, "name": "child"})
print("done", flush=True)
"""


@pytest.mark.parametrize("mode", ["thread", "host"])
def test_another_processes_commits_are_delivered(tmp_path, mode):
    path = tmp_path / "shared.realm"
    with atoll.open(path, schema=SCHEMA, notifications=mode) as realm:
        inbox = Inbox()
        token = realm.objects("Person").filter("TRUEPREDICATE SORT(id ASC)").observe(inbox)

        def pump(wait_for: int) -> List[ResultsChange]:
            if mode == "host":
                deadline = time.monotonic() + WAIT
                while len(inbox._items) < wait_for and time.monotonic() < deadline:
                    if wait_readable(realm, 0.5):
                        realm.deliver_notifications()
            return inbox.take(wait_for=wait_for)

        assert [c.initial for c in pump(1)] == [True]
        child = start_python(WRITER_CHILD, str(path))
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        inserted: List[Any] = []
        deadline = time.monotonic() + WAIT
        while len(inserted) < 3 and time.monotonic() < deadline:
            inserted += [k for c in pump(1) for k in c.inserted_keys]
        assert inserted == [1, 2, 3]
        assert [p["name"] for p in realm.objects("Person")] == ["child"] * 3
        token.invalidate()


def test_callbacks_read_the_state_the_change_describes(live):
    results = live.objects("Person")
    seen = Inbox()

    def callback(change: ResultsChange) -> None:
        seen((change.count, len(results), [p["id"] for p in results]))
    token = results.observe(callback)
    assert seen.take(wait_for=1) == [(0, 0, [])]
    people(live, [1, 2])
    assert seen.take(wait_for=1) == [(2, 2, [1, 2])]
    token.invalidate()


def test_a_callback_may_write(host):
    inbox = Inbox()

    def on_person(change: ResultsChange) -> None:
        for key in change.inserted_keys:
            with host.write():
                host.create("Tag", {"name": f"person {key}"})
    tokens = [host.objects("Person").observe(on_person), host.objects("Tag").observe(inbox)]
    host.deliver_notifications()
    inbox.take()
    people(host, [7])
    host.deliver_notifications()            # the callback commits: that makes a delivery due
    assert wait_readable(host)
    host.deliver_notifications()
    assert [c.inserted_keys for c in inbox.take()] == [["person 7"]]
    for t in tokens:
        t.invalidate()


# MARK: - Callbacks that raise

@pytest.mark.parametrize("mode", ["thread", "host"])
def test_a_callback_that_raises_is_reported_and_others_still_get_changes(
        tmp_path, unraisable, mode):
    realm = atoll.open(tmp_path / "r.realm", schema=SCHEMA, notifications=mode)
    calls = Inbox()

    def bad(change: ResultsChange) -> None:
        calls(change)
        raise ValueError(f"boom {change.count}")
    before, after = Inbox(), Inbox()
    tokens = [realm.objects("Person").observe(before), realm.objects("Person").observe(bad),
              realm.objects("Person").observe(after)]

    def settle(n: int) -> None:
        if mode == "host":
            realm.deliver_notifications()
        for inbox in (before, after, calls):
            assert len(inbox.take(wait_for=n)) == n
    settle(1)
    people(realm, [1])
    settle(1)
    people(realm, [2])
    settle(1)
    deadline = time.monotonic() + WAIT
    while len(unraisable) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [(t, str(e)) for t, e, _, _ in unraisable] == \
        [(ValueError, "boom 0"), (ValueError, "boom 1"), (ValueError, "boom 2")]
    assert all(obj is bad and "atoll" in msg for _, _, msg, obj in unraisable)
    for t in tokens:
        t.invalidate()
    realm.close()


def test_keyboard_interrupt_in_a_host_callback_is_raised_after_delivery(host, unraisable):
    after = Inbox()

    def interrupt(change: Any) -> None:
        raise KeyboardInterrupt
    tokens = [host.objects("Person").observe(interrupt), host.objects("Person").observe(after)]
    with pytest.raises(KeyboardInterrupt):
        host.deliver_notifications()
    assert len(after.take()) == 1, "the other callbacks ran first"
    assert unraisable == []
    for t in tokens:
        t.invalidate()


# MARK: - Tokens

def test_invalidating_inside_the_callback_and_afterwards(host):
    box: Dict[str, Any] = {"calls": 0}

    def once(change: Any) -> None:
        box["calls"] += 1
        box["token"].invalidate()
    box["token"] = host.objects("Person").observe(once)
    other = Inbox()
    token = host.objects("Person").observe(other)
    host.deliver_notifications()
    people(host, [1])
    host.deliver_notifications()
    assert box["calls"] == 1, "invalidated inside its first call"
    assert box["token"].invalidated
    assert len(other.take()) == 2, "the other observer still gets both"
    token.invalidate()
    token.invalidate()                      # idempotent
    people(host, [2])
    host.deliver_notifications()
    assert other.take() == []


def test_invalidating_inside_the_callback_on_the_notifier_thread(live):
    calls = Inbox()
    box: Dict[str, Any] = {}
    registered = threading.Event()

    def once(change: Any) -> None:
        calls(threading.get_ident())
        # The initial call may come before observe() has returned the token to this thread.
        assert registered.wait(5)
        box["token"].invalidate()
    box["token"] = live.objects("Person").observe(once)
    registered.set()
    witness = Inbox()
    token = live.objects("Person").observe(witness)
    assert len(witness.take(wait_for=1)) == 1
    people(live, [1])
    assert len(witness.take(wait_for=1)) == 1
    (thread,) = calls.take()
    assert thread != threading.get_ident(), "called on the notifier thread"
    token.invalidate()


def test_freed_tokens_are_never_called_again(live):
    base = registrations()
    dropped, invalidated, ctx, witness = Inbox(), Inbox(), Inbox(), Inbox()
    results = live.objects("Person")
    t1 = results.observe(dropped)
    t2 = results.observe(invalidated)
    with results.observe(ctx):
        w = results.observe(witness)
        assert len(witness.take(wait_for=1)) == 1
    for inbox in (dropped, invalidated, ctx):
        assert len(inbox.take(wait_for=1)) == 1
    assert registrations() == base + 3
    del t1
    gc.collect()                            # dropping the token unregisters too
    t2.invalidate()
    assert registrations() == base + 1, "the library freed the userdata of each token"
    people(live, [1])
    assert [c.inserted_keys for c in witness.take(wait_for=1)] == [[1]]
    people(live, [2])
    assert [c.inserted_keys for c in witness.take(wait_for=1)] == [[2]]
    assert dropped.take() == [] and invalidated.take() == [] and ctx.take() == []
    w.invalidate()
    assert registrations() == base


def test_invalidate_waits_for_a_running_callback(live):
    entered, release = threading.Event(), threading.Event()
    order: List[str] = []

    def slow(change: Any) -> None:
        entered.set()
        release.wait(WAIT)
        order.append("callback returned")
    token = live.objects("Person").observe(slow)
    assert entered.wait(WAIT)

    def invalidate() -> None:
        token.invalidate()
        order.append("invalidated")
    t = threading.Thread(target=invalidate)
    t.start()
    release.set()
    t.join(WAIT)
    assert not t.is_alive()
    assert order == ["callback returned", "invalidated"]


def test_closing_the_realm_invalidates_its_tokens(tmp_path):
    realm = atoll.open(tmp_path / "c.realm", schema=SCHEMA, notifications="host")
    base = registrations()
    token = realm.objects("Person").observe(Inbox())
    object_token = None
    people(realm, [1])
    object_token = realm.observe_object("Person", 1, Inbox())
    assert not token.invalidated and registrations() == base + 2
    realm.close()
    assert token.invalidated and object_token.invalidated
    assert registrations() == base
    token.invalidate()                      # still fine after the realm closed


def test_tokens_outlive_their_realm_when_kept(tmp_path):
    """A token of a realm that another handle closes, freed later: nothing breaks."""
    path = tmp_path / "k.realm"
    a = atoll.open(path, schema=SCHEMA)
    inbox = Inbox()
    token = a.observe(inbox)
    with atoll.open(path) as b:
        people(b, [1])
    assert [c.classes for c in inbox.take(wait_for=1)] == [["Person"]]
    a.close()
    assert token.invalidated
    del token
    gc.collect()


# MARK: - Snapshots and frozen results

def test_reads_see_the_snapshot_until_refresh(tmp_path):
    path = tmp_path / "snap.realm"
    with atoll.open(path, schema=SCHEMA) as writer, atoll.open(path) as reader:
        assert len(reader.objects("Person")) == 0
        people(writer, [1, 2, 3])
        assert len(reader.objects("Person")) == 0, "the reader's snapshot holds"
        assert reader.get("Person", 1) is None
        assert reader.refresh() is True
        assert len(reader.objects("Person")) == 3
        assert reader.refresh() is False, "nothing newer"
        people(writer, [4])
        reader.begin_write()
        try:
            assert len(reader.objects("Person")) == 4, "begin_write refreshes"
            assert reader.refresh() is False, "inside a write transaction it does nothing"
        finally:
            reader.cancel_write()


def test_frozen_results_never_change(tmp_path):
    realm = atoll.open(tmp_path / "f.realm", schema=SCHEMA)
    people(realm, range(1, 2501))
    live = realm.objects("Person").filter("age > $0 SORT(id DESC)", 1000)
    frozen = live.freeze()
    assert isinstance(frozen, atoll.FrozenResults) and frozen.frozen and not live.frozen
    assert frozen.freeze() is frozen
    assert len(frozen) == 1500
    before = frozen.to_list()
    assert [p["id"] for p in frozen][:3] == [2500, 2499, 2498]   # paged iteration
    assert frozen[0]["id"] == 2500 and frozen[-1]["id"] == 1001
    assert [p["id"] for p in frozen[1:3]] == [2499, 2498]

    with realm.write():
        realm.create("Person", {"id": 5000, "age": 5000})
        realm.delete("Person", 2500)
        realm.create("Person", {"id": 2499, "name": "changed"}, update="modified")
    assert len(live) == 1500 and live[0]["id"] == 5000
    assert len(frozen) == 1500
    assert frozen.to_list() == before
    assert list(frozen) == before

    seen: List[Any] = []
    t = threading.Thread(target=lambda: seen.append(len(frozen)))   # from any thread
    t.start()
    t.join(WAIT)
    assert seen == [1500]
    realm.close()
    assert frozen[0] == before[0], "readable after the realm closed"
    assert len(frozen) == 1500
    with pytest.raises(atoll.ClosedError):
        len(live)
    frozen.close()
    with pytest.raises(atoll.ClosedError, match="frozen results"):
        len(frozen)
    assert not hasattr(frozen, "observe") and not hasattr(frozen, "delete_all")


# MARK: - Async streams

def test_async_results_changes_with_host_delivery(host):
    people(host, [1])

    async def main() -> None:
        loop = asyncio.get_running_loop()
        seen: List[ResultsChange] = []
        results = host.objects("Person").filter("TRUEPREDICATE SORT(id ASC)")
        async for change in results.changes():
            seen.append(change)
            if change.initial:
                people(host, [2])           # on the loop's thread; the loop delivers
            elif change.inserted_keys == [2]:
                with host.write():
                    host.create("Person", {"id": 1, "name": "renamed"}, update="modified")
            else:
                break
        assert seen == [ResultsChange(initial=True, count=1),
                        ResultsChange(insertions=[1], inserted_keys=[2], count=2),
                        ResultsChange(modifications=[0], modified_keys=[1], count=2)]
        assert host._readers == {}, "breaking out stopped the polling"
        assert loop.remove_reader(host.notification_fd()) is False

    base = registrations()
    asyncio.run(asyncio.wait_for(main(), WAIT))
    gc.collect()
    assert registrations() == base


def test_async_results_changes_with_the_notifier_thread(tmp_path):
    path = tmp_path / "a.realm"

    async def main() -> List[Any]:
        with atoll.open(path, schema=SCHEMA) as realm, atoll.open(path) as writer:
            got: List[Any] = []
            loop_thread = threading.get_ident()
            stream = realm.objects("Person").changes(key_paths=["name"])
            async with stream:
                async for change in stream:
                    got.append((change.initial, change.inserted_keys, change.modified_keys))
                    assert threading.get_ident() == loop_thread
                    if change.initial:
                        # Another handle commits from another thread.
                        threading.Thread(target=people, args=(writer, [1, 2])).start()
                    elif change.inserted_keys:
                        with writer.write():
                            writer.create("Person", {"id": 1, "age": 99}, update="modified")
                            writer.create("Person", {"id": 2, "name": "two"},
                                          update="modified")
                    else:
                        break
            assert stream.closed
            return got

    assert asyncio.run(asyncio.wait_for(main(), WAIT)) == [
        (True, [], []), (False, [1, 2], []), (False, [], [2])]


def test_async_streams_end_on_aclose_cancellation_and_close(tmp_path):
    realm = atoll.open(tmp_path / "s.realm", schema=SCHEMA, notifications="host")
    base = registrations()

    async def main() -> None:
        # aclose(): the registration is freed and the reader removed, at once.
        stream = realm.objects("Person").changes()
        assert (await stream.__anext__()).initial
        assert realm._readers and registrations() == base + 1
        await stream.aclose()
        assert realm._readers == {} and registrations() == base
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()

        # Two streams share the loop's reader; ending one keeps the other going.
        a = realm.objects("Person").changes()
        b = realm.realm_changes()
        assert (await a.__anext__()).initial
        assert list(realm._readers.values()) == [2]
        await a.aclose()
        assert list(realm._readers.values()) == [1]
        people(realm, [1])
        change = await b.__anext__()
        assert isinstance(change, RealmChange) and change.classes == ["Person"]

        # Cancelling the task that waits for a change ends the stream.
        waiter = asyncio.ensure_future(b.__anext__())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert b.closed and realm._readers == {} and registrations() == base

        # Closing the realm ends a stream after what is already queued.
        objects = realm.object_changes("Person", 1)
        collection = realm.collection_changes("Person", 1, "numbers")
        assert (await collection.__anext__()).initial
        with realm.write():
            realm.create("Person", {"id": 1, "numbers": [5]}, update="modified")
        change = await objects.__anext__()
        assert change.changed_properties == ["numbers"]
        assert (await collection.__anext__()).inserted_keys == [5]
        realm.close()
        with pytest.raises(StopAsyncIteration):
            await objects.__anext__()
        with pytest.raises(StopAsyncIteration):
            await collection.__anext__()
        assert realm._readers == {}

    asyncio.run(asyncio.wait_for(main(), WAIT))
    assert registrations() == base


def test_async_object_stream_ends_with_the_deletion(host):
    people(host, [1])

    async def main() -> List[ObjectChange]:
        got = []
        stream = host.object_changes("Person", 1, key_paths=["name"])
        with host.write():
            host.create("Person", {"id": 1, "age": 5}, update="modified")    # not a name
            host.create("Person", {"id": 1, "name": "one"}, update="modified")
        async for change in stream:
            got.append(change)
            if not change.deleted:
                with host.write():
                    host.delete("Person", 1)
        return got

    got = asyncio.run(asyncio.wait_for(main(), WAIT))
    assert [c.changed_properties for c in got] == [["name"], []]
    assert [c.deleted for c in got] == [False, True]
    assert host._readers == {}


def test_a_stream_needs_a_running_loop(host):
    with pytest.raises(RuntimeError, match="running event loop"):
        host.objects("Person").changes()
    with pytest.raises(RuntimeError, match="running event loop"):
        host.realm_changes()


# MARK: - Misuse

def test_bad_arguments_raise_the_bindings_exceptions(host, live):
    people(host, [1])
    results = host.objects("Person")
    with pytest.raises(TypeError, match="callable"):
        results.observe(None)                               # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key_paths"):
        results.observe(Inbox(), key_paths="name")          # a str is not a list of paths
    with pytest.raises(TypeError, match="key_paths"):
        results.observe(Inbox(), key_paths=[1])             # type: ignore[list-item]
    with pytest.raises(ValueError):
        results.observe(Inbox(), key_paths=["na\x00me"])
    with pytest.raises(atoll.InvalidArgumentError):
        results.observe(Inbox(), key_paths=[""])
    with pytest.raises(atoll.InvalidArgumentError):
        results.observe(Inbox(), key_paths=["dogs..name"])
    with pytest.raises(atoll.NoSuchClassError):
        host.observe_object("Nope", 1, Inbox())
    with pytest.raises(atoll.NotFoundError):
        host.observe_object("Person", 2, Inbox())
    with pytest.raises(atoll.TypeMismatchError):
        host.observe_object("Person", "one", Inbox())
    with pytest.raises(atoll.InvalidArgumentError, match="embedded"):
        host.observe_object("Address", 1, Inbox())
    with pytest.raises(atoll.InvalidArgumentError):
        host.observe_object("Person", 1, Inbox(), key_paths=["nope"])
    with pytest.raises(TypeError):
        host.observe_object(None, 1, Inbox())               # type: ignore[arg-type]
    with pytest.raises(TypeError):
        host.observe_object("Person", object(), Inbox())    # not a storable key
    with pytest.raises(atoll.NoSuchPropertyError):
        host.observe_collection("Person", 1, "nope", Inbox())
    with pytest.raises(atoll.InvalidArgumentError, match="not a list, set or dictionary"):
        host.observe_collection("Person", 1, "name", Inbox())
    with pytest.raises(atoll.InvalidArgumentError, match="key paths"):
        host.observe_collection("Person", 1, "numbers", Inbox(), key_paths=["x"])
    with pytest.raises(atoll.NotFoundError):
        host.observe_collection("Person", 5, "numbers", Inbox())
    with pytest.raises(TypeError, match="callable"):
        host.observe(42)                                    # type: ignore[arg-type]
    with host.write():
        with pytest.raises(atoll.AlreadyInWriteError):
            results.observe(Inbox())
        with pytest.raises(atoll.AlreadyInWriteError):
            host.observe(Inbox())
    with pytest.raises(atoll.InvalidArgumentError, match="own thread"):
        live.notification_fd()
    with pytest.raises(atoll.InvalidArgumentError):
        live.deliver_notifications()
    with pytest.raises(ValueError, match="notifications"):
        atoll.open(in_memory=True, notifications="later")
    with pytest.raises(TypeError, match="notifications"):
        atoll.open(in_memory=True, notifications=True)      # type: ignore[arg-type]
    assert "notifications" in atoll.CONFIG_KEYS and atoll.NOTIFICATION_MODES == ("thread", "host")
    assert registrations() == 0 or all(r.active for r in notifications._live.values())


def test_closed_realms_and_results_raise_closed_error(tmp_path):
    realm = atoll.open(tmp_path / "x.realm", schema=SCHEMA, notifications="host")
    people(realm, [1])
    results = realm.objects("Person")
    results.close()
    with pytest.raises(atoll.ClosedError):
        results.observe(Inbox())
    with pytest.raises(atoll.ClosedError):
        results.freeze()
    results = realm.objects("Person")
    realm.close()
    for call in (lambda: results.observe(Inbox()), lambda: results.freeze(),
                 lambda: realm.observe(Inbox()), lambda: realm.observe_object("Person", 1, len),
                 lambda: realm.observe_collection("Person", 1, "numbers", len),
                 realm.refresh, realm.notification_fd, realm.deliver_notifications):
        with pytest.raises(atoll.ClosedError):
            call()


def test_raw_notification_calls_with_bad_input():
    """The C functions under NULL and misuse, in a child process: errors, never a crash."""
    got = run_raw("""
        from atoll._ffi import TokenPtr, atoll_changes_fn, atoll_free_userdata_fn
        freed = []
        fn = atoll_changes_fn(lambda ud, text: None)
        free = atoll_free_userdata_fn(lambda ud: freed.append(ud))
        null_fn, null_free = atoll_changes_fn(), atoll_free_userdata_fn()
        h = lib.atoll_realm_open(json.dumps({"inMemory": True, "schema": schema}).encode())
        r = lib.atoll_results_query(h, b"Dog", None, None)
        def check(name, token):
            out([name, bool(token), err()[:2]])
        check("results NULL", lib.atoll_results_observe(None, None, fn, 1, free))
        check("fn NULL", lib.atoll_results_observe(r, None, null_fn, 2, free))
        check("key paths not JSON", lib.atoll_results_observe(r, b"[", fn, 3, free))
        check("key paths not an array", lib.atoll_results_observe(r, b'{"a": 1}', fn, 4, free))
        check("key path not a string", lib.atoll_results_observe(r, b"[1]", fn, 5, free))
        check("realm NULL", lib.atoll_realm_observe(None, fn, 6, free))
        check("class NULL", lib.atoll_object_observe(h, None, b"1", None, fn, 7, free))
        check("key NULL", lib.atoll_object_observe(h, b"Dog", None, None, fn, 8, free))
        check("property NULL", lib.atoll_collection_observe(h, b"Dog", b"1", None, None, fn, 9,
                                                            free))
        frozen = lib.atoll_results_freeze(r)
        check("frozen", lib.atoll_results_observe(frozen, None, fn, 10, free))
        check("freeze NULL", lib.atoll_results_freeze(None))
        out(["freed at once on failure", freed])
        out(["fd NULL", lib.atoll_realm_notification_fd(None), err()[:2]])
        out(["refresh NULL", lib.atoll_realm_refresh(None), err()[:2]])
        out(["deliver NULL", lib.atoll_realm_deliver_notifications(None), err()[:2]])
        t = lib.atoll_realm_observe(h, fn, 11, null_free)      # NULL free_userdata is allowed
        out(["no free_userdata", bool(t), err()[:2]])
        lib.atoll_token_free(t)
        lib.atoll_token_free(None)
        lib.atoll_token_free(ctypes.cast(ctypes.c_void_p(0x1235), TokenPtr))  # never a token
        t = lib.atoll_realm_observe(h, fn, 12, free)
        lib.atoll_realm_close(h)
        check("observe on a closed realm", lib.atoll_realm_observe(h, fn, 13, free))
        out(["refresh closed", lib.atoll_realm_refresh(h), err()[:2]])
        lib.atoll_token_free(t)                                 # after the realm: fine
        lib.atoll_token_free(t)                                 # twice: a no-op
        out(["freed", freed])
        lib.atoll_results_free(frozen)
        lib.atoll_results_free(r)
    """)
    assert got == [
        ["results NULL", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["fn NULL", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["key paths not JSON", False, [True, "ATOLL_ERR_INVALID_JSON"]],
        ["key paths not an array", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["key path not a string", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["realm NULL", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["class NULL", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["key NULL", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["property NULL", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["frozen", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["freeze NULL", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["freed at once on failure", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]],
        ["fd NULL", -1, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["refresh NULL", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["deliver NULL", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["no free_userdata", True, [False, "ATOLL_OK"]],
        ["observe on a closed realm", False, [True, "ATOLL_ERR_CLOSED"]],
        ["refresh closed", False, [True, "ATOLL_ERR_CLOSED"]],
        ["freed", [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 13, 12]],   # 12 when its token is freed
    ]


EXIT_CHILD = """
import asyncio, sys, time, atoll
schema = [{"name": "P", "primaryKey": "id", "properties": {"id": "int"}}]
realm = atoll.open(sys.argv[1], schema=schema)
host = atoll.open(sys.argv[1], notifications="host")
def slow(change):
    time.sleep(0.01)
    len(realm.objects("P"))
def closer(change):
    if change.count >= 3:
        other.close()                      # a realm closed inside its own callback
other = atoll.open(sys.argv[1])
tokens = [realm.objects("P").observe(slow), realm.observe(lambda c: None),
          other.objects("P").observe(closer), host.objects("P").observe(lambda c: None)]
kept = []
async def main():
    kept.append(realm.objects("P").changes())
    kept.append(host.realm_changes())       # left open when the loop closes
    assert (await kept[0].__anext__()).initial
asyncio.run(main())
for i in range(20):
    with realm.write():
        realm.create("P", {"id": i})
print("exiting", flush=True)
"""


def test_exiting_with_live_observers_and_streams_is_clean(tmp_path):
    proc = run_python(EXIT_CHILD, str(tmp_path / "exit.realm"))
    assert (proc.returncode, proc.stdout.strip()) == (0, "exiting"), proc.stderr
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr


def test_an_observer_whose_query_no_longer_runs_gets_the_error_once(tmp_path):
    path = tmp_path / "migrated.realm"
    with atoll.open(path, schema=SCHEMA, notifications="host") as realm:
        with realm.write():
            realm.create_many("Person", [{"id": i, "name": f"p{i}", "age": i} for i in range(1, 11)])
        got: List[Any] = []
        token = realm.objects("Person").filter("age > 5").observe(got.append)
        realm.deliver_notifications()
        assert [c.count for c in got] == [5]
        got.clear()
        # Another handle migrates the file: Person loses `age`, which the query reads.
        person = dict(PERSON, properties={k: v for k, v in PERSON["properties"].items() if k != "age"})
        migrated_schema = [person if c is PERSON else c for c in SCHEMA]
        with atoll.open(path, schema=migrated_schema, schema_version=1) as migrated:
            with migrated.write():
                migrated.create("Person", {"id": 11, "name": "new"})
            realm.deliver_notifications()
            assert len(got) == 1
            assert isinstance(got[0].error, atoll.AtollError)
            assert "age" in str(got[0].error)
            assert got[0].insertions == [] and got[0].deletions == []
            with migrated.write():
                migrated.create("Person", {"id": 12, "name": "newer"})
            realm.deliver_notifications()
            assert len(got) == 1, "not called again"
        token.invalidate()


def test_a_change_stream_raises_the_error_that_ends_it(tmp_path):
    path = tmp_path / "migrated-stream.realm"

    async def main() -> None:
        with atoll.open(path, schema=SCHEMA, notifications="host") as realm:
            with realm.write():
                realm.create("Person", {"id": 1, "name": "a", "age": 9})
            person = dict(PERSON, properties={k: v for k, v in PERSON["properties"].items() if k != "age"})
            migrated_schema = [person if c is PERSON else c for c in SCHEMA]
            stream = realm.objects("Person").filter("age > 5").changes()
            first = await asyncio.wait_for(stream.__anext__(), 20)
            assert first.initial and first.count == 1
            with atoll.open(path, schema=migrated_schema, schema_version=1) as migrated:
                with migrated.write():
                    migrated.create("Person", {"id": 2, "name": "b"})
                with pytest.raises(atoll.AtollError, match="age"):
                    await asyncio.wait_for(stream.__anext__(), 20)

    asyncio.run(main())
