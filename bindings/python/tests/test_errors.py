"""The exception table cannot drift from the library's status codes."""

from __future__ import annotations

import pickle

import pytest

import atoll
from atoll import _ffi, errors


def test_table_matches_atoll_status_name_for_codes_0_to_30():
    named = {}
    for code in range(0, 31):
        name = _ffi.status_name(code)
        if name is not None:
            named[code] = name
    assert named[0] == "ATOLL_OK"
    assert 0 not in errors.ERRORS_BY_CODE
    # Every code the library names has its class, and every class a code the library names.
    assert set(errors.ERRORS_BY_CODE) == set(named) - {0}
    for code, cls in errors.ERRORS_BY_CODE.items():
        assert cls.status == code
        assert cls.status_name == named[code], (code, cls)
        assert issubclass(cls, atoll.AtollError)


def test_status_name_for_unknown_codes_is_none():
    assert _ffi.status_name(-1) is None
    assert _ffi.status_name(1000) is None
    assert _ffi.status_name(2**31 - 1) is None


def test_tree():
    assert issubclass(atoll.SchemaMismatchError, atoll.SchemaError)
    assert issubclass(atoll.QuerySyntaxError, atoll.QueryError)
    assert issubclass(atoll.QueryInvalidError, atoll.QueryError)
    assert issubclass(atoll.QueryError, atoll.AtollError)
    assert issubclass(atoll.AtollError, Exception)
    assert errors.ERRORS_BY_CODE[5] is atoll.NotFoundError
    assert errors.ERRORS_BY_CODE[12] is atoll.ClosedError


def test_error_for_known_and_unknown_codes():
    e = errors.error_for(5, "no Dog with primary key 7")
    assert type(e) is atoll.NotFoundError
    assert (e.code, e.message, str(e)) == (5, "no Dog with primary key 7",
                                           "no Dog with primary key 7")
    u = errors.error_for(77, "from the future")
    assert type(u) is atoll.AtollError
    assert u.code == 77
    assert "from the future" in u.message and "77" in u.message


def test_errors_pickle():
    e = atoll.TypeMismatchError("bad", 17)
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is atoll.TypeMismatchError and (e2.code, e2.message) == (17, "bad")


def test_raise_last_error_reads_the_threads_last_error(path):
    with pytest.raises(atoll.NoSuchClassError) as info:
        with atoll.open(path, schema=[]) as realm:
            realm.get("Cat", 1)
    assert info.value.code == 15
    assert "Cat" in info.value.message


def test_raise_last_error_without_an_error_is_an_internal_error():
    _ffi.lib.atoll_realm_close(_ffi.lib.atoll_realm_open(b'{"inMemory": true}'))  # clears it
    with pytest.raises(atoll.InternalError) as info:
        errors.raise_last_error("atoll_something")
    assert "atoll_something" in info.value.message
