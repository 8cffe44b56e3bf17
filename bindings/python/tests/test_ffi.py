"""The ctypes layer: loading, declarations, ownership, and the raw C functions under bad input.

Raw calls that could crash a faulty library run in a child process (conftest.run_raw), so that
a crash fails one test instead of the whole run.
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import pytest

import atoll
from atoll import _ffi
from conftest import REPO_ROOT, run_python, run_raw

HEADER = REPO_ROOT / "include" / "atoll.h"


def header_functions():
    text = HEADER.read_text()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return sorted(set(re.findall(r"\b(atoll_[a-z0-9_]+)\s*\(", text)))


def test_every_header_function_is_declared_except_the_jansson_twins():
    names = header_functions()
    assert len(names) >= 25
    src = (Path(_ffi.__file__)).read_text()
    for name in names:
        if name.endswith("_j"):
            assert f"{name}(...);" in src and f'_declare("{name}"' not in src, name
            continue
        fn = getattr(_ffi.lib, name)
        assert fn.argtypes is not None, f"{name} has no argtypes"
        assert f"_declare(\"{name}\"" in src, name


def test_owned_strings_are_declared_void_pointers():
    for name in ("atoll_realm_schema", "atoll_realm_changes", "atoll_object_create",
                 "atoll_object_get", "atoll_results_json"):
        assert getattr(_ffi.lib, name).restype is ctypes.c_void_p, name
    for name in ("atoll_libversion", "atoll_status_name"):
        assert getattr(_ffi.lib, name).restype is ctypes.c_char_p, name


def test_version_matches_the_header():
    header = HEADER.read_text()
    number = int(re.search(r"#define ATOLL_VERSION_NUMBER (\d+)", header).group(1))
    text = re.search(r'#define ATOLL_VERSION "([^"]+)"', header).group(1)
    assert _ffi.BINDING_VERSION_NUMBER == number
    assert _ffi.BINDING_VERSION == text
    assert _ffi.libversion() == text
    assert _ffi.libversion_number() == number
    major, minor, patch = (int(p) for p in text.split("."))
    assert number == major * 1_000_000 + minor * 1_000 + patch
    assert atoll.library_version() == text


def test_status_codes_match_the_header():
    header = HEADER.read_text()
    for name, value in re.findall(r"\b(ATOLL_(?:OK|ERR_[A-Z_]+))\s*=\s*(\d+)", header):
        assert getattr(_ffi, name) == int(value), name
        assert _ffi.status_name(int(value)) == name
    for name, value in re.findall(r"\b(ATOLL_UPDATE_[A-Z]+)\s*=\s*(\d+)", header):
        assert getattr(_ffi, name) == int(value), name


def test_import_error_names_every_place_tried(tmp_path):
    proc = run_python("""
        import os, sys
        os.environ["ATOLL_LIBRARY"] = sys.argv[1]
        import ctypes.util
        ctypes.util.find_library = lambda name: None
        try:
            import atoll
        except ImportError as e:
            print("IMPORTERROR", e)
        else:
            print("LOADED", atoll.library_path())
    """, str(tmp_path / "missing" / "libatoll.so"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "IMPORTERROR" in out, out
    assert "bundled copy" in out and "libatoll.so" in out
    assert str(tmp_path / "missing" / "libatoll.so") in out
    assert "find_library('atoll')" in out


def test_loads_from_atoll_library_env_var():
    proc = run_python("import atoll; print(atoll.library_path())")
    assert proc.returncode == 0, proc.stderr
    import os
    assert proc.stdout.strip() == os.environ["ATOLL_LIBRARY"] or \
        proc.stdout.strip().endswith("src/atoll/libatoll.so")


# MARK: - Raw calls with bad input (in a child process)

def test_raw_library_calls_and_null_destructors():
    got = run_raw("""
        lib.atoll_free(None)
        lib.atoll_realm_close(None)
        lib.atoll_results_free(None)
        out(lib.atoll_last_error(None))
        out(lib.atoll_status_name(0).decode())
        out(lib.atoll_status_name(19).decode())
        out(lib.atoll_status_name(12345))
    """)
    assert got == [False, "ATOLL_OK", "ATOLL_ERR_INTERNAL", None]


def test_raw_last_error_is_set_then_cleared_by_a_successful_call():
    got = run_raw("""
        out([bool(lib.atoll_realm_open(None)), err()])
        out(lib.atoll_last_error(None))
        h = lib.atoll_realm_open(b'{"inMemory": true}')
        e = _ffi.atoll_error_t()
        out([bool(h), lib.atoll_last_error(ctypes.byref(e)), e.code,
             None if e.message is None else e.message.decode()])
        lib.atoll_realm_close(h)
    """)
    assert got[0][0] is False
    assert got[0][1][:2] == [True, "ATOLL_ERR_INVALID_ARGUMENT"]
    assert got[0][1][2] != ""
    assert got[1] is True                        # asking does not clear it
    assert got[2] == [True, False, 0, ""]


def test_raw_calls_that_cannot_fail_leave_the_last_error_alone():
    """The header: the calls that cannot fail leave the last error as it is; calls that can
    fail clear it when they succeed."""
    got = run_raw("""
        for name, call in [("atoll_libversion_number", lambda: lib.atoll_libversion_number()),
                           ("atoll_libversion", lambda: lib.atoll_libversion()),
                           ("atoll_status_name", lambda: lib.atoll_status_name(1)),
                           ("atoll_free", lambda: lib.atoll_free(None)),
                           ("atoll_realm_close", lambda: lib.atoll_realm_close(None)),
                           ("atoll_results_free", lambda: lib.atoll_results_free(None))]:
            lib.atoll_realm_open(None)
            call()
            out([name, err()[:2]])
        h = lib.atoll_realm_open(b'{"inMemory": true}')
        out(["atoll_realm_open", err()[:2]])
        lib.atoll_realm_close(h)
    """)
    assert got == [[name, [True, "ATOLL_ERR_INVALID_ARGUMENT"]] for name in (
        "atoll_libversion_number", "atoll_libversion", "atoll_status_name", "atoll_free",
        "atoll_realm_close", "atoll_results_free")] + [["atoll_realm_open", [False, "ATOLL_OK"]]]


def test_raw_last_error_is_per_thread():
    got = run_raw("""
        import threading
        lib.atoll_realm_open(b"not json")
        seen = []
        def other():
            lib.atoll_libversion_number()
            seen.append(err())
        t = threading.Thread(target=other); t.start(); t.join()
        out(seen[0])
        out(err()[:2])
    """)
    assert got == [[False, "ATOLL_OK", ""], [True, "ATOLL_ERR_INVALID_JSON"]]


@pytest.mark.parametrize("config, expected", [
    (None, "ATOLL_ERR_INVALID_ARGUMENT"),
    (b"", "ATOLL_ERR_INVALID_JSON"),
    (b"not json", "ATOLL_ERR_INVALID_JSON"),
    (b"{\"path\": \"x.realm\"", "ATOLL_ERR_INVALID_JSON"),
    (b"\xff\xfe\x00garbage", "ATOLL_ERR_INVALID_JSON"),
    (b"{\"path\": \"caf\xe9.realm\"}", "ATOLL_ERR_INVALID_JSON"),  # Latin-1, not UTF-8
    (b"[1, 2]", "ATOLL_ERR_INVALID_JSON"),
    (b"{}", "ATOLL_ERR_INVALID_ARGUMENT"),                       # no path, not in memory
    (b"{\"path\": 5}", "ATOLL_ERR_INVALID_ARGUMENT"),
    (b"{\"inMemory\": true, \"schemaVersion\": -1}", "ATOLL_ERR_INVALID_ARGUMENT"),
    (b"{\"inMemory\": true, \"writeTimeoutMs\": \"soon\"}", "ATOLL_ERR_INVALID_ARGUMENT"),
    (b"{\"inMemory\": true, \"schema\": [{\"name\": \"A\", \"properties\": {\"x\": \"nope\"}}]}",
     "ATOLL_ERR_SCHEMA"),
    (b"{\"inMemory\": true, \"schema\": [{\"name\": \"A\", \"properties\": {\"x\": \"B?\"}}]}",
     "ATOLL_ERR_SCHEMA"),
    (b"{\"inMemory\": true, \"schema\": [{\"name\": \"A\", \"primaryKey\": \"id\", "
     b"\"properties\": {\"x\": \"int\"}}]}", "ATOLL_ERR_SCHEMA"),
])
def test_raw_open_rejects(config, expected):
    got = run_raw(f"""
        h = lib.atoll_realm_open({config!r})
        out([bool(h), err()])
        lib.atoll_realm_close(h)
    """)
    assert got[0][0] is False
    assert got[0][1][:2] == [True, expected], got
    assert got[0][1][2], "the error has no message"


def test_raw_open_file_errors(tmp_path):
    got = run_raw("""
        import json
        missing_dir = sys.argv[1] + "/no/such/dir/x.realm"
        h = lib.atoll_realm_open(json.dumps({"path": missing_dir}).encode())
        out([bool(h), err()[:2]])
        h = lib.atoll_realm_open(json.dumps({"path": sys.argv[1] + "/absent.realm",
                                             "readOnly": True}).encode())
        out([bool(h), err()[:2]])
    """, str(tmp_path))
    assert got == [[False, [True, "ATOLL_ERR_FILE"]], [False, [True, "ATOLL_ERR_FILE"]]]




def test_raw_null_realm_handle_is_invalid_argument():
    got = run_raw("""
        b = ctypes.c_bool(); u = ctypes.c_uint64(); n = ctypes.c_size_t()
        calls = {
          "begin_write": lambda: lib.atoll_realm_begin_write(None),
          "commit": lambda: lib.atoll_realm_commit(None),
          "cancel_write": lambda: lib.atoll_realm_cancel_write(None),
          "is_in_write": lambda: lib.atoll_realm_is_in_write(None, ctypes.byref(b)),
          "schema": lambda: lib.atoll_realm_schema(None),
          "schema_version": lambda: lib.atoll_realm_schema_version(None, ctypes.byref(u)),
          "version": lambda: lib.atoll_realm_version(None, ctypes.byref(u)),
          "changes": lambda: lib.atoll_realm_changes(None, 0, 0),
          "object_create": lambda: lib.atoll_object_create(None, b"Dog", b"{}", 0),
          "objects_create_many": lambda: lib.atoll_objects_create_many(None, b"Dog", b"[]", 0, ctypes.byref(n)),
          "object_get": lambda: lib.atoll_object_get(None, b"Dog", b"1"),
          "object_delete": lambda: lib.atoll_object_delete(None, b"Dog", b"1"),
          "results_query": lambda: lib.atoll_results_query(None, b"Dog", None, None),
          "results_count": lambda: lib.atoll_results_count(None, ctypes.byref(n)),
          "results_json": lambda: lib.atoll_results_json(None, 0, 0),
          "results_delete_all": lambda: lib.atoll_results_delete_all(None, ctypes.byref(n)),
        }
        for name, call in calls.items():
            r = call()
            out([name, bool(r), err()[:2]])
    """)
    assert len(got) == 16
    for name, ok, e in got:
        assert (name, ok, e) == (name, False, [True, "ATOLL_ERR_INVALID_ARGUMENT"])


def test_raw_null_and_garbage_arguments_on_an_open_realm(tmp_path):
    got = run_raw("""
        h = open_realm(sys.argv[1] + "/raw.realm", schema)
        n = ctypes.c_size_t()
        def check(name, r):
            out([name, bool(r), err()[:2]])
            if r and name.startswith("get") or r and name.startswith("create"):
                lib.atoll_free(r)
        check("is_in_write NULL out", lib.atoll_realm_is_in_write(h, None))
        check("schema_version NULL out", lib.atoll_realm_schema_version(h, None))
        check("version NULL out", lib.atoll_realm_version(h, None))
        check("create outside a write", lib.atoll_object_create(h, b"Dog", b'{"_id": 1, "name": "a"}', 0))
        check("create_many outside a write", lib.atoll_objects_create_many(h, b"Dog", b'[]', 0, None))
        check("delete outside a write", lib.atoll_object_delete(h, b"Dog", b'1'))
        check("commit outside a write", lib.atoll_realm_commit(h))
        check("cancel outside a write", lib.atoll_realm_cancel_write(h))
        r = lib.atoll_results_query(h, b"Dog", None, None)
        check("delete_all outside a write", lib.atoll_results_delete_all(r, None))
        lib.atoll_results_free(r)
        assert lib.atoll_realm_begin_write(h), err()
        check("begin twice", lib.atoll_realm_begin_write(h))
        check("create NULL class", lib.atoll_object_create(h, None, b'{"_id": 1, "name": "a"}', 0))
        check("create NULL json", lib.atoll_object_create(h, b"Dog", None, 0))
        check("create garbage json", lib.atoll_object_create(h, b"Dog", b"{\\"_id\\": 1,", 0))
        check("create non-utf8 json", lib.atoll_object_create(h, b"Dog", b'{"_id": 1, "name": "\\xff\\xfe"}', 0))
        check("create array", lib.atoll_object_create(h, b"Dog", b'[1]', 0))
        check("create bad policy", lib.atoll_object_create(h, b"Dog", b'{"_id": 1, "name": "a"}', 7))
        check("create negative policy", lib.atoll_object_create(h, b"Dog", b'{"_id": 1, "name": "a"}', -1))
        check("create unknown class", lib.atoll_object_create(h, b"Cat", b'{"_id": 1}', 0))
        check("create unknown property", lib.atoll_object_create(h, b"Dog", b'{"_id": 1, "name": "a", "wings": 2}', 0))
        check("create wrong type", lib.atoll_object_create(h, b"Dog", b'{"_id": "one", "name": "a"}', 0))
        check("create missing pk", lib.atoll_object_create(h, b"Dog", b'{"name": "a"}', 0))
        check("create null required", lib.atoll_object_create(h, b"Dog", b'{"_id": 1, "name": null}', 0))
        check("create_many NULL array", lib.atoll_objects_create_many(h, b"Dog", None, 0, ctypes.byref(n)))
        check("create_many not an array", lib.atoll_objects_create_many(h, b"Dog", b'{"_id": 1}', 0, ctypes.byref(n)))
        check("create_many garbage", lib.atoll_objects_create_many(h, b"Dog", b'\\x00\\x01', 0, None))
        check("get NULL key", lib.atoll_object_get(h, b"Dog", None))
        check("get garbage key", lib.atoll_object_get(h, b"Dog", b"{{"))
        check("get wrong key type", lib.atoll_object_get(h, b"Dog", b'"one"'))
        check("get no pk class", lib.atoll_object_get(h, b"Note", b'1'))
        check("get unknown class", lib.atoll_object_get(h, b"Cat", b'1'))
        check("get missing", lib.atoll_object_get(h, b"Dog", b'404'))
        check("delete missing", lib.atoll_object_delete(h, b"Dog", b'404'))
        check("delete garbage key", lib.atoll_object_delete(h, b"Dog", b'nope'))
        check("delete NULL class", lib.atoll_object_delete(h, None, b'1'))
        check("query NULL class", lib.atoll_results_query(h, None, None, None))
        check("query unknown class", lib.atoll_results_query(h, b"Cat", None, None))
        check("query syntax", lib.atoll_results_query(h, b"Dog", b"age >", None))
        check("query unknown property", lib.atoll_results_query(h, b"Dog", b"wings > 1", None))
        check("query missing arg", lib.atoll_results_query(h, b"Dog", b"age > $0", None))
        check("query garbage args", lib.atoll_results_query(h, b"Dog", b"age > $0", b"[1"))
        check("query args not array", lib.atoll_results_query(h, b"Dog", b"age > $0", b'{"a": 1}'))
        check("query wrong arg type", lib.atoll_results_query(h, b"Dog", b"age > $0", b'["old"]'))
        r = lib.atoll_results_query(h, b"Dog", None, None)
        check("count NULL out", lib.atoll_results_count(r, None))
        lib.atoll_results_free(r)
        assert lib.atoll_realm_cancel_write(h), err()
        lib.atoll_realm_close(h)
    """, str(tmp_path))
    expected = {
        "is_in_write NULL out": "ATOLL_ERR_INVALID_ARGUMENT",
        "schema_version NULL out": "ATOLL_ERR_INVALID_ARGUMENT",
        "version NULL out": "ATOLL_ERR_INVALID_ARGUMENT",
        "create outside a write": "ATOLL_ERR_NOT_IN_WRITE",
        "create_many outside a write": "ATOLL_ERR_NOT_IN_WRITE",
        "delete outside a write": "ATOLL_ERR_NOT_IN_WRITE",
        "commit outside a write": "ATOLL_ERR_NOT_IN_WRITE",
        "cancel outside a write": "ATOLL_ERR_NOT_IN_WRITE",
        "delete_all outside a write": "ATOLL_ERR_NOT_IN_WRITE",
        "begin twice": "ATOLL_ERR_ALREADY_IN_WRITE",
        "create NULL class": "ATOLL_ERR_INVALID_ARGUMENT",
        "create NULL json": "ATOLL_ERR_INVALID_ARGUMENT",
        "create garbage json": "ATOLL_ERR_INVALID_JSON",
        "create non-utf8 json": "ATOLL_ERR_INVALID_JSON",
        "create array": "ATOLL_ERR_INVALID_JSON",
        "create bad policy": "ATOLL_ERR_INVALID_ARGUMENT",
        "create negative policy": "ATOLL_ERR_INVALID_ARGUMENT",
        "create unknown class": "ATOLL_ERR_NO_SUCH_CLASS",
        "create unknown property": "ATOLL_ERR_NO_SUCH_PROPERTY",
        "create wrong type": "ATOLL_ERR_TYPE_MISMATCH",
        "create missing pk": "ATOLL_ERR_MISSING_VALUE",
        "create null required": "ATOLL_ERR_MISSING_VALUE",
        "create_many NULL array": "ATOLL_ERR_INVALID_ARGUMENT",
        "create_many not an array": "ATOLL_ERR_INVALID_JSON",
        "create_many garbage": "ATOLL_ERR_INVALID_JSON",
        "get NULL key": "ATOLL_ERR_INVALID_ARGUMENT",
        "get garbage key": "ATOLL_ERR_INVALID_JSON",
        "get wrong key type": "ATOLL_ERR_TYPE_MISMATCH",
        "get no pk class": "ATOLL_ERR_TYPE_MISMATCH",
        "get unknown class": "ATOLL_ERR_NO_SUCH_CLASS",
        "get missing": "ATOLL_ERR_NOT_FOUND",
        "delete missing": "ATOLL_ERR_NOT_FOUND",
        "delete garbage key": "ATOLL_ERR_INVALID_JSON",
        "delete NULL class": "ATOLL_ERR_INVALID_ARGUMENT",
        "query NULL class": "ATOLL_ERR_INVALID_ARGUMENT",
        "query unknown class": "ATOLL_ERR_NO_SUCH_CLASS",
        "query syntax": "ATOLL_ERR_QUERY_SYNTAX",
        "query unknown property": "ATOLL_ERR_QUERY_INVALID",
        "query missing arg": "ATOLL_ERR_QUERY_INVALID",
        "query garbage args": "ATOLL_ERR_INVALID_JSON",
        "query args not array": "ATOLL_ERR_INVALID_JSON",
        "query wrong arg type": "ATOLL_ERR_QUERY_INVALID",
        "count NULL out": "ATOLL_ERR_INVALID_ARGUMENT",
    }
    actual = {name: (ok, e) for name, ok, e in got}
    assert list(actual) == list(expected)
    wrong = {name: actual[name][1][1] for name in expected
             if actual[name] != (False, [True, expected[name]])}
    assert wrong == {}, f"expected {[expected[k] for k in wrong]}"


def test_raw_non_utf8_class_name_and_query_do_not_crash(tmp_path):
    got = run_raw("""
        h = open_realm(sys.argv[1] + "/raw.realm", schema)
        r = lib.atoll_object_get(h, b"D\\xffog", b"1")
        out([bool(r), err()[:2]])
        r = lib.atoll_results_query(h, b"Dog", b"name == '\\xff'", None)
        out([bool(r), err()[:2]])
        lib.atoll_results_free(r)
        lib.atoll_realm_close(h)
    """, str(tmp_path))
    # The header does not say which code a non-UTF-8 class name or query gets; it must fail
    # cleanly with one that describes bad input.
    assert got[0][0] is False
    assert got[0][1][1] in ("ATOLL_ERR_INVALID_ARGUMENT", "ATOLL_ERR_NO_SUCH_CLASS")
    assert got[1][0] is False
    assert got[1][1][1] in ("ATOLL_ERR_INVALID_ARGUMENT", "ATOLL_ERR_QUERY_SYNTAX")


def test_raw_pointers_that_never_were_handles(tmp_path):
    got = run_raw("""
        buf = ctypes.create_string_buffer(256)          # zeroed memory, not a handle
        fake_realm = ctypes.cast(buf, RealmPtr)
        fake_results = ctypes.cast(buf, ResultsPtr)
        n = ctypes.c_size_t()
        out(["begin_write", bool(lib.atoll_realm_begin_write(fake_realm)), err()[:2]])
        out(["schema", bool(lib.atoll_realm_schema(fake_realm)), err()[:2]])
        out(["get", bool(lib.atoll_object_get(fake_realm, b"Dog", b"1")), err()[:2]])
        out(["count", bool(lib.atoll_results_count(fake_results, ctypes.byref(n))), err()[:2]])
        out(["json", bool(lib.atoll_results_json(fake_results, 0, 0)), err()[:2]])
        lib.atoll_realm_close(fake_realm)
        lib.atoll_results_free(fake_results)
        out(["survived", True, None])
    """)
    assert got == [
        ["begin_write", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["schema", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["get", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["count", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["json", False, [True, "ATOLL_ERR_INVALID_ARGUMENT"]],
        ["survived", True, None],
    ]


def test_raw_closed_realm_and_its_results(tmp_path):
    got = run_raw("""
        h = open_realm(sys.argv[1] + "/raw.realm", schema)
        r = lib.atoll_results_query(h, b"Dog", None, None)
        assert r, err()
        lib.atoll_realm_close(h)
        lib.atoll_realm_close(h)                     # a realm closed already: no-op
        b = ctypes.c_bool(); u = ctypes.c_uint64(); n = ctypes.c_size_t()
        calls = {
          "begin_write": lambda: lib.atoll_realm_begin_write(h),
          "commit": lambda: lib.atoll_realm_commit(h),
          "cancel_write": lambda: lib.atoll_realm_cancel_write(h),
          "is_in_write": lambda: lib.atoll_realm_is_in_write(h, ctypes.byref(b)),
          "schema": lambda: lib.atoll_realm_schema(h),
          "schema_version": lambda: lib.atoll_realm_schema_version(h, ctypes.byref(u)),
          "version": lambda: lib.atoll_realm_version(h, ctypes.byref(u)),
          "changes": lambda: lib.atoll_realm_changes(h, 0, 0),
          "object_create": lambda: lib.atoll_object_create(h, b"Dog", b'{"_id": 1, "name": "a"}', 0),
          "objects_create_many": lambda: lib.atoll_objects_create_many(h, b"Dog", b"[]", 0, ctypes.byref(n)),
          "object_get": lambda: lib.atoll_object_get(h, b"Dog", b"1"),
          "object_delete": lambda: lib.atoll_object_delete(h, b"Dog", b"1"),
          "results_query": lambda: lib.atoll_results_query(h, b"Dog", None, None),
          "results_count": lambda: lib.atoll_results_count(r, ctypes.byref(n)),
          "results_json": lambda: lib.atoll_results_json(r, 0, 0),
          "results_delete_all": lambda: lib.atoll_results_delete_all(r, ctypes.byref(n)),
        }
        for name, call in calls.items():
            out([name, bool(call()), err()[:2]])
        lib.atoll_results_free(r)                    # must still be freed, and can be
        out(["freed", True, None])
    """, str(tmp_path))
    assert len(got) == 17
    for name, ok, e in got[:-1]:
        assert (name, ok, e) == (name, False, [True, "ATOLL_ERR_CLOSED"])
    assert got[-1] == ["freed", True, None]


def test_raw_results_json_offsets_and_ownership(tmp_path):
    got = run_raw("""
        h = open_realm(sys.argv[1] + "/raw.realm", schema)
        assert lib.atoll_realm_begin_write(h), err()
        n = ctypes.c_size_t(99)
        ok = lib.atoll_objects_create_many(h, b"Dog", json.dumps(
            [{"_id": i, "name": f"d{i}"} for i in range(5)]).encode(), 0, ctypes.byref(n))
        out([ok, n.value])
        out(lib.atoll_objects_create_many(h, b"Dog", b'[{"_id": 9, "name": "x"}]', 0, None))
        assert lib.atoll_realm_commit(h), err()
        for rql in (None, b"", b"TRUEPREDICATE"):              # all objects
            r = lib.atoll_results_query(h, b"Dog", rql, None)
            assert r, err()
            assert lib.atoll_results_count(r, ctypes.byref(n)), err()
            out(n.value)
            lib.atoll_results_free(r)
        r = lib.atoll_results_query(h, b"Dog", b"TRUEPREDICATE SORT(_id ASC)", b"[]")
        assert r, err()
        for offset, limit in [(0, 0), (3, 0), (4, 1), (6, 0), (100, 5), (1, 2)]:
            p = lib.atoll_results_json(r, offset, limit)
            out([offset, limit, [d["_id"] for d in json.loads(_ffi.take_string(p))]])
        lib.atoll_results_free(r)
        lib.atoll_realm_close(h)
    """, str(tmp_path))
    assert got == [
        [True, 5], True, 6, 6, 6,
        [0, 0, [0, 1, 2, 3, 4, 9]], [3, 0, [3, 4, 9]], [4, 1, [4]], [6, 0, []], [100, 5, []],
        [1, 2, [1, 2]],
    ]


def test_raw_one_handle_many_threads_one_write_transaction(tmp_path):
    got = run_raw("""
        import threading
        h = open_realm(sys.argv[1] + "/raw.realm", schema)
        start = threading.Barrier(8); tried = threading.Barrier(8)
        results = [None] * 8
        def worker(i):
            start.wait()
            ok = bool(lib.atoll_realm_begin_write(h))
            results[i] = [ok, err()[1]]
            tried.wait()
        ts = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        [t.start() for t in ts]; [t.join() for t in ts]
        out(sorted(results))
        b = ctypes.c_bool()
        lib.atoll_realm_is_in_write(h, ctypes.byref(b))
        out(b.value)
        out(bool(lib.atoll_realm_commit(h)))
        lib.atoll_realm_close(h)
    """, str(tmp_path))
    assert got[0] == [[False, "ATOLL_ERR_ALREADY_IN_WRITE"]] * 7 + [[True, "ATOLL_OK"]]
    assert got[1:] == [True, True]
