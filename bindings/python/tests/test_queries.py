"""Realm Query Language through realm.objects(...).filter(...), and the Results sequence."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import pytest

import atoll
from atoll import ObjectId

UTC = dt.timezone.utc

PEOPLE = [{"_id": 1, "name": "Ann", "age": 30}, {"_id": 2, "name": "Bob", "age": 40}]
DOGS = [
    {"_id": 1, "name": "Rex", "age": 3, "owner": 1, "tags": ["a", "b"], "w": 1.5},
    {"_id": 2, "name": "Fido", "age": 5, "owner": 2, "tags": ["b"]},
    {"_id": 3, "name": "rex", "age": 7, "owner": 1, "tags": []},
    {"_id": 4, "name": "Max", "age": None, "owner": None, "tags": ["a", "b", "c"]},
    {"_id": 5, "name": "Bella", "age": 1, "owner": 2, "tags": ["c"]},
    {"_id": 6, "name": "Ace", "age": 3, "owner": None, "tags": ["b", "b"]},
]


@pytest.fixture
def dogs(realm):
    with realm.write():
        realm.create_many("Person", PEOPLE)
        realm.create_many("Dog", DOGS)
    return realm


def ids(results):
    return sorted(d["_id"] for d in results)


def ordered(results):
    return [d["_id"] for d in results]


@pytest.mark.parametrize("rql, args, expected", [
    ("TRUEPREDICATE", (), [1, 2, 3, 4, 5, 6]),
    ("FALSEPREDICATE", (), []),
    ("age > 2", (), [1, 2, 3, 6]),
    ("age >= 3 AND age < 7", (), [1, 2, 6]),
    ("age == 1 OR name == 'Max'", (), [4, 5]),
    ("age != 3", (), [2, 3, 4, 5]),
    ("age <= 3", (), [1, 5, 6]),
    ("NOT (age > 2)", (), [4, 5]),
    ("!(age > 2) AND name != 'Max'", (), [5]),
    ("age == nil", (), [4]),
    ("age == null", (), [4]),
    ("age != nil", (), [1, 2, 3, 5, 6]),
    ("(age > 4 OR age < 2) AND NOT name BEGINSWITH 'F'", (), [3, 5]),
    ("name == 'rex'", (), [3]),
    ("name ==[c] 'REX'", (), [1, 3]),
    ("name != 'Rex'", (), [2, 3, 4, 5, 6]),
    ("name BEGINSWITH 'R'", (), [1]),
    ("name BEGINSWITH[c] 'r'", (), [1, 3]),
    ("name ENDSWITH 'x'", (), [1, 3, 4]),
    ("name ENDSWITH[c] 'X'", (), [1, 3, 4]),
    ("name CONTAINS 'el'", (), [5]),
    ("name CONTAINS[c] 'EL'", (), [5]),
    ("name CONTAINS 'EL'", (), []),
    ("name LIKE 'R?x'", (), [1]),
    ("name LIKE[c] '*x'", (), [1, 3, 4]),
    ("name LIKE 'B*a'", (), [5]),
    ("age IN {1, 5}", (), [2, 5]),
    ("name IN {'Max', 'Ace', 'Nobody'}", (), [4, 6]),
    ("age BETWEEN {3, 5}", (), [1, 2, 6]),
    ("owner.name == 'Ann'", (), [1, 3]),
    ("owner.age > 35", (), [2, 5]),
    ("owner == nil", (), [4, 6]),
    ("owner._id == 2", (), [2, 5]),
    ("ANY tags == 'a'", (), [1, 4]),
    ("tags == 'a'", (), [1, 4]),
    ("ALL tags == 'b'", (), [2, 3, 6]),
    ("NONE tags == 'a'", (), [2, 3, 5, 6]),
    ("tags.@count > 2", (), [4]),
    ("tags.@count == 0", (), [3]),
    ("tags.@size == 2", (), [1, 6]),
    ("ANY tags BEGINSWITH[c] 'C'", (), [4, 5]),
    ("age > $0", (2,), [1, 2, 3, 6]),
    ("age > $0 AND name BEGINSWITH[c] $1", (2, "r"), [1, 3]),
    ("age == $0", (None,), [4]),
    ("age IN {$0, $1}", (1, 7), [3, 5]),
    ("age BETWEEN {$0, $1}", (5, 7), [2, 3]),
    ("owner.name == $0", ("Bob",), [2, 5]),
    ("w == $0", (1.5,), [1]),
])
def test_query(dogs, rql, args, expected):
    results = dogs.objects("Dog").filter(rql, *args)
    assert ids(results) == expected
    assert len(results) == len(expected)


def test_sort(dogs):
    r = dogs.objects("Dog")
    assert ordered(r.filter("age != nil AND age < 7 SORT(name ASC)")) == [6, 5, 2, 1]
    assert ordered(r.filter("age != nil AND age != 3 SORT(age DESC)")) == [3, 2, 5]
    assert ordered(r.filter("age BETWEEN {3, 5} SORT(age ASC, name DESC)")) == [1, 6, 2]
    assert ordered(r.filter("age BETWEEN {3, 5} SORT(age ASC, name ASC)")) == [6, 1, 2]
    assert ordered(r.filter("TRUEPREDICATE SORT(_id DESC)")) == [6, 5, 4, 3, 2, 1]


def test_sort_through_link(dogs):
    r = dogs.objects("Dog").filter("owner != nil SORT(owner.name DESC, _id ASC)")
    assert ordered(r) == [2, 5, 1, 3]


def test_distinct_and_limit(dogs):
    r = dogs.objects("Dog")
    d = r.filter("age != nil SORT(age ASC) DISTINCT(age)")
    assert [x["age"] for x in d] == [1, 3, 5, 7]
    assert len(d) == 4
    assert ordered(r.filter("TRUEPREDICATE SORT(_id ASC) LIMIT(2)")) == [1, 2]
    assert len(r.filter("TRUEPREDICATE LIMIT(2)")) == 2
    assert len(r.filter("TRUEPREDICATE LIMIT(0)")) == 0
    assert ordered(r.filter("age > 2 SORT(age DESC, _id ASC) LIMIT(3)")) == [3, 2, 1]
    assert [x["name"] for x in r.filter("name ==[c] 'rex' SORT(_id ASC) DISTINCT(owner)")] \
        == ["Rex"]


def test_arguments_of_every_ejson_type(realm):
    base = dt.datetime(2024, 1, 1, tzinfo=UTC)
    oids = [ObjectId(bytes([i]) * 12) for i in range(1, 4)]
    uuids = [uuid.UUID(int=i) for i in range(1, 4)]
    things = [{"_id": oids[i], "b": i % 2 == 0, "i": i * 10, "f": i + 0.5, "d": i * 1.25,
               "s": f"s{i}", "data": bytes([i, i]), "date": base + dt.timedelta(days=i),
               "oid": oids[i], "u": uuids[i], "dec": decimal.Decimal(i) / 4}
              for i in range(3)]
    with realm.write():
        realm.create_many("Thing", things)
    t = realm.objects("Thing")

    def q(rql, *args):
        return sorted(x["i"] for x in t.filter(rql, *args))

    assert q("b == $0", True) == [0, 20]
    assert q("i >= $0", 10) == [10, 20]
    assert q("f > $0", 1.0) == [10, 20]
    assert q("d < $0", 2.0) == [0, 10]
    assert q("s == $0", "s2") == [20]
    assert q("data == $0", bytes([1, 1])) == [10]
    assert q("date > $0", base + dt.timedelta(days=1)) == [20]
    assert q("date BETWEEN {$0, $1}", base, base + dt.timedelta(days=1)) == [0, 10]
    assert q("date > $0", dt.datetime(1960, 1, 1, tzinfo=UTC)) == [0, 10, 20]  # $numberLong
    assert q("date < $0", dt.datetime(1960, 1, 1, tzinfo=UTC)) == []
    assert q("oid == $0", oids[2]) == [20]
    assert q("_id IN {$0, $1}", oids[0], oids[2]) == [0, 20]
    assert q("u == $0", uuids[1]) == [10]
    assert q("dec >= $0", decimal.Decimal("0.25")) == [10, 20]
    assert q("dec == $0", decimal.Decimal("0.5")) == [20]
    assert q("s == $0 OR i == $1", "s0", 20) == [0, 20]


@pytest.mark.parametrize("rql, args, exc", [
    ("age >", (), atoll.QuerySyntaxError),
    ("age > > 3", (), atoll.QuerySyntaxError),
    ("name == 'unterminated", (), atoll.QuerySyntaxError),
    ("age > 3 SORT(", (), atoll.QuerySyntaxError),
    ("wings > 1", (), atoll.QueryInvalidError),
    ("owner.wings == 1", (), atoll.QueryInvalidError),
    ("age > $0", (), atoll.QueryInvalidError),
    ("age > $1", (1,), atoll.QueryInvalidError),
    ("age > $0", ("old",), atoll.QueryInvalidError),
    ("name BEGINSWITH 5", (), atoll.QueryInvalidError),
    ("TRUEPREDICATE SORT(wings ASC)", (), atoll.QueryInvalidError),
])
def test_query_errors(dogs, rql, args, exc):
    with pytest.raises(exc) as info:
        dogs.objects("Dog").filter(rql, *args)
    assert type(info.value) is exc
    assert info.value.message


def test_query_error_messages(dogs):
    with pytest.raises(atoll.QueryInvalidError) as info:
        dogs.objects("Dog").filter("wings > 1")
    assert "wings" in info.value.message
    with pytest.raises(atoll.QuerySyntaxError) as info:
        dogs.objects("Dog").filter("age > > 3")
    assert any(ch.isdigit() for ch in info.value.message)   # gives the position
    with pytest.raises(atoll.NoSuchClassError) as info:
        dogs.objects("Cat")
    assert "Cat" in info.value.message


def test_filter_argument_types(dogs):
    with pytest.raises(TypeError):
        dogs.objects("Dog").filter(None)
    with pytest.raises(TypeError):
        dogs.objects("Dog").filter("age > $0", object())
    with pytest.raises(ValueError):
        dogs.objects("Dog").filter("age > 1\x00")


# MARK: - filter() on filtered Results

def test_filter_combines_with_and_and_renumbers_arguments(dogs):
    base = dogs.objects("Dog").filter("age > $0", 2)
    narrowed = base.filter("name BEGINSWITH[c] $0", "r")
    assert narrowed.query == "(age > $0) AND (name BEGINSWITH[c] $1)"
    assert narrowed.args == (2, "r")
    assert ids(narrowed) == [1, 3]
    sorted_ = base.filter("owner.name == $0 SORT(_id DESC)", "Ann")
    assert sorted_.query == "(age > $0) AND (owner.name == $1) SORT(_id DESC)"
    assert ordered(sorted_) == [3, 1]
    # $n inside string literals is left alone
    lit = dogs.objects("Dog").filter("age > $0", 0).filter("name == '$0' OR age == $0", 7)
    assert lit.query == "(age > $0) AND (name == '$0' OR age == $1)"
    assert ids(lit) == [3]
    only_sort = base.filter("SORT(age DESC)")
    assert only_sort.query == "(age > $0) AND (TRUEPREDICATE) SORT(age DESC)"
    assert ordered(only_sort)[0] == 3


def test_filter_on_sorted_results_is_not_implemented(dogs):
    s = dogs.objects("Dog").filter("age > 1 SORT(age ASC)")
    with pytest.raises(NotImplementedError, match="SORT"):
        s.filter("age < 5")
    for suffix in ("DISTINCT(age)", "LIMIT(2)"):
        with pytest.raises(NotImplementedError):
            dogs.objects("Dog").filter(f"TRUEPREDICATE {suffix}").filter("age < 5")
    # a SORT inside a string literal is not a suffix
    assert ids(dogs.objects("Dog").filter("name != 'SORT(x)'").filter("age == 3")) == [1, 6]


def test_filter_checks_the_query_immediately(dogs):
    base = dogs.objects("Dog").filter("age > 1")
    with pytest.raises(atoll.QueryInvalidError):
        base.filter("wings == 2")


# MARK: - The Results sequence

def test_results_are_a_sequence(dogs):
    r = dogs.objects("Dog").filter("TRUEPREDICATE SORT(_id ASC)")
    assert len(r) == 6
    assert r[0]["_id"] == 1 and r[5]["_id"] == 6
    assert r[-1]["_id"] == 6 and r[-6]["_id"] == 1
    with pytest.raises(IndexError):
        r[6]
    with pytest.raises(IndexError):
        r[-7]
    with pytest.raises(TypeError):
        r["0"]
    assert [d["_id"] for d in r[1:3]] == [2, 3]
    assert [d["_id"] for d in r[4:]] == [5, 6]
    assert [d["_id"] for d in r[:2]] == [1, 2]
    assert [d["_id"] for d in r[-2:]] == [5, 6]
    assert r[3:3] == [] and r[10:20] == [] and r[5:1] == []
    assert [d["_id"] for d in r[::2]] == [1, 3, 5]
    assert [d["_id"] for d in r[::-1]] == [6, 5, 4, 3, 2, 1]
    assert [d["_id"] for d in r[1:6:2]] == [2, 4, 6]
    assert [d["name"] for d in r] == ["Rex", "Fido", "rex", "Max", "Bella", "Ace"]
    assert r.to_list() == list(r)
    assert bool(r) is True
    assert bool(dogs.objects("Dog").filter("age > 100")) is False
    assert r[0] == dogs.get("Dog", 1)


def test_results_are_live(dogs):
    r = dogs.objects("Dog").filter("age > $0", 4)
    assert ids(r) == [2, 3]
    with dogs.write():
        dogs.create("Dog", {"_id": 7, "name": "Zed", "age": 9})
        assert ids(r) == [2, 3, 7]                   # uncommitted writes are seen
    assert len(r) == 3
    with dogs.write():
        dogs.delete("Dog", 2)
    assert ids(r) == [3, 7]


def test_iteration_reads_in_pages(realm):
    n = 2500
    with realm.write():
        assert realm.create_many("Person", [{"_id": i, "name": f"p{i:05d}"}
                                            for i in range(n)]) == n
    r = realm.objects("Person").filter("TRUEPREDICATE SORT(_id ASC)")
    calls = []
    original = r._fetch

    def spy(offset, limit):
        calls.append((offset, limit))
        return original(offset, limit)
    r._fetch = spy
    assert [p["_id"] for p in r] == list(range(n))
    assert calls == [(0, 1000), (1000, 1000), (2000, 1000)]
    assert len(r) == n
    assert r[1234] == {"_id": 1234, "name": "p01234", "age": None}


@pytest.mark.change_log_values
def test_delete_all(dogs):
    r = dogs.objects("Dog").filter("age > $0", 2)
    with pytest.raises(atoll.NotInWriteError):
        r.delete_all()
    v = dogs.version
    with dogs.write():
        assert r.delete_all() == 4
        assert len(r) == 0
        assert r.delete_all() == 0
    assert ids(dogs.objects("Dog")) == [4, 5]
    log = dogs.changes(after_version=v)
    assert len(log) == 1
    assert sorted(i["primaryKey"] for i in log[0]["instructions"] if i["op"] == "erase") == \
        [1, 2, 3, 6]


def test_many_results_open_at_once(dogs):
    results = [dogs.objects("Dog").filter("age > $0", i % 5) for i in range(300)]
    assert [len(r) for r in results[:5]] == [5, 4, 4, 2, 2]
    for r in results:
        r.close()
    assert len(dogs._results) == 0
