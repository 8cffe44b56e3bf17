"""Test setup: finds the library built by `swift build`, and shared fixtures and helpers.

The tests exercise the real libatoll through ctypes, on real files in tmp_path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, List

import pytest

PYTHON_DIR = Path(__file__).resolve().parent.parent          # bindings/python
REPO_ROOT = PYTHON_DIR.parent.parent                         # the repository
SRC_DIR = PYTHON_DIR / "src"

# Prefer the binding's source tree over any installed copy, and the library that
# `swift build` makes when none is named.
sys.path.insert(0, str(SRC_DIR))
os.environ.setdefault("ATOLL_LIBRARY", str(REPO_ROOT / ".build" / "debug" / "libatoll.so"))

import atoll  # noqa: E402  (after the path setup above)
from atoll import _ffi  # noqa: E402


def pytest_report_header(config: Any) -> str:
    return (f"atoll: libatoll {atoll.library_version()} "
            f"({_ffi.libversion_number()}) from {atoll.library_path()}")


# MARK: - Schemas

PERSON = {"name": "Person", "primaryKey": "_id",
          "properties": {"_id": "int", "name": "string", "age": "int?"}}
TOY = {"name": "Toy", "primaryKey": "_id",
       "properties": {"_id": "string", "name": "string", "price": "double?"}}
ADDRESS = {"name": "Address", "embedded": True,
           "properties": {"street": "string", "city": "string?"}}
DOG = {"name": "Dog", "primaryKey": "_id", "properties": {
    "_id": "int", "name": "string", "age": "int?", "owner": "Person?", "tags": "string[]",
    "toys": "Toy[]", "born": "date?", "oid": "objectId?", "u": "uuid?",
    "price": "decimal128?", "blob": "data?", "w": "float?", "h": "double?", "ok": "bool?",
    "address": "Address?", "vets": "Address[]",
}}
# Every type, required.
THING = {"name": "Thing", "primaryKey": "_id", "properties": {
    "_id": "objectId", "b": "bool", "i": "int", "f": "float", "d": "double", "s": "string",
    "data": "data", "date": "date", "oid": "objectId", "u": "uuid", "dec": "decimal128",
}}
GADGET = {"name": "Gadget", "primaryKey": "_id",
          "properties": {"_id": "uuid", "label": "string"}}
KEYED = {"name": "Keyed", "primaryKey": "_id",
         "properties": {"_id": "string", "n": {"type": "int", "default": 5, "indexed": True}}}
NOTE = {"name": "Note", "properties": {"text": "string"}}  # no primary key

SCHEMA: List[Dict[str, Any]] = [PERSON, TOY, ADDRESS, DOG, THING, GADGET, KEYED, NOTE]


@pytest.fixture
def schema() -> List[Dict[str, Any]]:
    return json.loads(json.dumps(SCHEMA))


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "test.realm"


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", "change_log_values: the realm fixture's change log keeps values "
        "(for tests that read realm.changes())")


def wants_change_log_values(request: Any) -> bool:
    """Whether the test asking for a realm fixture is marked ``change_log_values``."""
    return request.node.get_closest_marker("change_log_values") is not None


@pytest.fixture
def realm(request: Any, path: Path, schema: List[Dict[str, Any]]):
    r = atoll.open(path, schema=schema, schema_version=1, change_log_values=wants_change_log_values(request))
    yield r
    r.close()


# MARK: - Subprocesses

def child_env() -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC_DIR), env.get("PYTHONPATH")]))
    return env


def run_python(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """Runs a Python snippet in a fresh interpreter (with atoll importable)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args],
                          env=child_env(), capture_output=True, text=True, timeout=timeout)


def start_python(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-u", "-c", textwrap.dedent(code), *args],
                            env=child_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


RAW_PRELUDE = '''
import ctypes, json, sys
from atoll import _ffi
from atoll._ffi import lib, RealmPtr, ResultsPtr
def err():
    failed, code, message = _ffi.last_error()
    return [failed, _ffi.status_name(code) if code else "ATOLL_OK", message]
def out(value):
    print("RESULT " + json.dumps(value))
schema = [{"name": "Dog", "primaryKey": "_id",
           "properties": {"_id": "int", "name": "string", "age": "int?"}},
          {"name": "Note", "properties": {"text": "string"}}]
def open_realm(path, schema=None):
    cfg = {"path": path}
    if schema is not None:
        cfg["schema"] = schema
    h = lib.atoll_realm_open(json.dumps(cfg).encode())
    assert h, err()
    return h
'''


def run_raw(code: str, *args: str) -> Any:
    """Runs raw _ffi calls in a child process, so that a crash of the library fails one test
    instead of killing the test run. The snippet reports with out(value); returns the values
    (one per out() call)."""
    proc = run_python(RAW_PRELUDE + textwrap.dedent(code), *args)
    if proc.returncode != 0:
        how = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
               else f"exited with {proc.returncode}")
        pytest.fail(f"the child process {how}\n--- stdout\n{proc.stdout}\n--- stderr\n"
                    f"{proc.stderr}")
    results = [json.loads(line[len("RESULT "):]) for line in proc.stdout.splitlines()
               if line.startswith("RESULT ")]
    return results
