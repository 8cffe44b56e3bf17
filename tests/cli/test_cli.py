"""The atoll command, run as a program: every subcommand, exit statuses and messages, piping
and progress, export -> import -> export byte for byte, and `info` against SQLite's own counts.

The program is $ATOLL_CLI (`make test` sets it to build/bin/atoll), else build/bin/atoll, else
SwiftPM's .build/release/atoll-cli. Realms with history (deletes, several transactions) are
written with the Python binding (bindings/python, $ATOLL_LIBRARY).
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bindings" / "python" / "src"))
os.environ.setdefault("ATOLL_LIBRARY", str(REPO / ".build" / "release" / "libatoll.so"))

import atoll  # noqa: E402  (after the path setup above)


def _find_cli() -> Path:
    candidates = [os.environ.get("ATOLL_CLI"), REPO / "build" / "bin" / "atoll",
                  REPO / ".build" / "release" / "atoll-cli"]
    for c in candidates:
        if c and Path(c).is_file():
            return Path(c)
    pytest.exit(f"the atoll program was not found (tried {[str(c) for c in candidates if c]}); "
                "run `make build` or set ATOLL_CLI", returncode=1)


CLI = _find_cli()


def run(*args: Any, stdin: Optional[bytes] = None, tmpdir: Optional[Path] = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    """Runs atoll with pipes for stdin, stdout and stderr (bytes); `tmpdir` is its $TMPDIR."""
    env = dict(os.environ, TMPDIR=str(tmpdir)) if tmpdir else None
    return subprocess.run([str(CLI), *map(str, args)], input=stdin if stdin is not None else b"",
                          capture_output=True, timeout=timeout, env=env)


def ok(*args: Any, stdin: Optional[bytes] = None) -> bytes:
    """Runs atoll, expecting success and nothing on stderr; returns stdout."""
    proc = run(*args, stdin=stdin)
    assert proc.returncode == 0, (args, proc.stderr.decode())
    assert proc.stderr == b"", proc.stderr.decode()
    return proc.stdout


def fails(status: int, *args: Any, stdin: Optional[bytes] = None, tmpdir: Optional[Path] = None) -> str:
    """Runs atoll, expecting exit `status`, nothing on stdout and one `atoll: ` line on stderr;
    returns that message."""
    proc = run(*args, stdin=stdin, tmpdir=tmpdir)
    err = proc.stderr.decode()
    assert proc.returncode == status, (args, proc.returncode, err)
    assert proc.stdout == b"", proc.stdout
    assert err.startswith("atoll: ") and err.endswith("\n") and err.count("\n") == 1, err
    assert "Fatal error" not in err and "Traceback" not in err
    return err[len("atoll: "):-1]


# MARK: - Realms

EJSON_NAN = {"$numberDouble": "NaN"}
EJSON_INF = {"$numberDouble": "Infinity"}
OID = {"$oid": "0123456789abcdef01234567"}
UUID = {"$uuid": "e621e1f8-c36c-495a-93fc-0c247a3e6e5f"}

STRANGE = ["", "héllo ✓ 😀", "quote \" backslash \\ slash /", "\u0001\u001f\t\n\r", "\uffff\U0010ffff",
           "a\u2028b", "e\u0301 vs é", '{"$oid": "no"}', "日本語"]

# Every type the store has, in an export that `atoll import` turns into a realm.
EVERY_TYPE_SCHEMA = [
    {"name": "All", "primaryKey": "_id", "properties": {
        "_id": "objectId", "b": "bool", "i": "int", "f": "float", "d": "double", "s": "string",
        "bin": "data", "t": "date", "oid": "objectId", "u": "uuid", "dec": "decimal128",
        "oi": "int?", "od": "double?", "os": "string?", "ot": "date?", "odec": "decimal128?",
        "li": "int[]", "ls": "string[]", "lf": "float[]", "si": "int<>", "di": "int{}", "dos": "string?{}",
        "m": "mixed", "lm": "mixed[]", "sm": "mixed<>", "dm": "mixed{}",
        "person": "Person?", "people": "Person[]", "peopleSet": "Person<>", "peopleMap": "Person{}",
        "note": "Note?", "notes": "Note[]",
        "place": "Place?", "places": "Place[]", "placeMap": "Place{}",
        "mixedDefault": {"type": "mixed", "default": 5}}},
    {"name": "Person", "primaryKey": "id", "properties": {
        "id": "int", "name": "string", "friend": "Person?",
        "fans": {"type": "linkingObjects", "objectType": "All", "property": "person"}}},
    {"name": "Note", "properties": {"text": "string", "next": "Note?", "about": "mixed"}},
    {"name": "Place", "embedded": True, "properties": {"city": "string", "geo": "Geo?", "visitors": "Person[]"}},
    {"name": "Geo", "embedded": True, "properties": {"lat": "double", "near": "Note?"}},
    {"name": "Tag", "primaryKey": "name", "properties": {"name": "string"}},
]

EVERY_TYPE_OBJECTS = {
    "All": [
        {"_id": OID, "b": True, "i": -9223372036854775808, "f": 0.1, "d": EJSON_NAN, "s": STRANGE[1],
         "bin": {"$binary": {"base64": "AAF/gP8=", "subType": "00"}}, "t": {"$date": {"$numberLong": "-62135596800001"}},
         "oid": OID, "u": UUID, "dec": {"$numberDecimal": "-1.5E+100"},
         "oi": 9223372036854775807, "od": -0.0, "os": "", "ot": {"$date": "1969-12-31T23:59:59.999Z"},
         "odec": {"$numberDecimal": "NaN"},
         "li": [3, 1, 3], "ls": STRANGE, "lf": [-0.0, {"$numberDouble": "-Infinity"}, 1e-45], "si": [2, 1],
         "di": {"z": 1, "a": -2}, "dos": {"k": None, "ü": "v"},
         "m": {"$numberFloat": "-0.0"},
         "lm": [None, True, 1, {"$numberFloat": "1.5"}, 1.5, "s", UUID, {"$ref": "Person", "$id": 2},
                {"$ref": "Note", "$id": 3}, [1, [EJSON_INF]], {"k": {"$ref": "Tag", "$id": "b"}}],
        "sm": [1, 1.0, "1", None], "dm": {"a": {"$ref": "All", "$id": OID}, "n": None},
        "person": 2, "people": [1, 2, 1], "peopleSet": [2, 1], "peopleMap": {"x": 1, "none": None},
         "note": 3, "notes": [3, 1],
         "place": {"city": "Oslo", "geo": {"lat": -0.0, "near": 1}, "visitors": [1]},
         "places": [{"city": "A"}, {"city": "B", "visitors": [2, 2]}],
         "placeMap": {"home": {"city": "C", "geo": {"lat": 1.5}}},
         "mixedDefault": None},
        {"_id": {"$oid": "0123456789abcdef01234568"}, "s": "\n".join(STRANGE)},
    ],
    # Forward links (All comes first), a cycle, a link to itself.
    "Person": [{"id": 1, "name": "Ann", "friend": 2}, {"id": 2, "name": "Bob", "friend": 1},
               {"id": 3, "name": "Cy", "friend": 3}],
    # No primary key: row keys with a gap, links between notes in a cycle.
    "Note": [{"_atoll_key": 1, "text": "first", "next": 3, "about": {"$ref": "Note", "$id": 3}},
             {"_atoll_key": 3, "text": "second", "next": 1, "about": [{"$numberFloat": "2.5"}]}],
    "Tag": [{"name": "b"}, {"name": "a"}],
}


def export_document(schema: List[Dict[str, Any]], objects: Dict[str, List[Any]], version: int = 3) -> bytes:
    return json.dumps({"format": "atoll-export", "version": 1, "schemaVersion": version,
                       "schema": schema, "objects": objects}, ensure_ascii=False).encode()


@pytest.fixture
def every_type(tmp_path: Path) -> Path:
    """A realm holding every type, written by `atoll import`."""
    source = tmp_path / "every-type-source.json"
    source.write_bytes(export_document(EVERY_TYPE_SCHEMA, EVERY_TYPE_OBJECTS))
    path = tmp_path / "every.realm"
    out = ok("import", path, source).decode()
    assert out == f"imported 9 objects into '{path}' (All 2, Person 3, Note 2, Tag 2)\n"
    return path


DOGS_SCHEMA = [
    {"name": "Dog", "primaryKey": "_id",
     "properties": {"_id": "int", "name": "string", "age": "int?", "owner": "Person?", "born": "date?"}},
    {"name": "Person", "primaryKey": "_id", "properties": {"_id": "string", "name": "string"}},
    {"name": "Note", "properties": {"text": "string", "blob": "data"}},
]


@pytest.fixture
def dogs(tmp_path: Path) -> Path:
    """A realm written with the Python binding in several transactions, with deletions (free
    pages, several change-log entries)."""
    path = tmp_path / "dogs.realm"
    with atoll.open(path, schema=DOGS_SCHEMA, schema_version=2) as realm:
        with realm.write():
            realm.create("Person", {"_id": "p1", "name": "Ann"})
            realm.create_many("Dog", [{"_id": i, "name": f"Dog {i}", "age": i % 15, "owner": "p1"}
                                      for i in range(1, 3001)])
        with realm.write():
            realm.create_many("Note", [{"text": f"note {i}", "blob": bytes(2000)} for i in range(300)])
        with realm.write():
            realm.objects("Note").filter("text ENDSWITH '5'").delete_all()
            realm.objects("Dog").filter("_id > 2000").delete_all()
    return path


def sqlite_counts(path: Path) -> Dict[str, int]:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        one = lambda sql: db.execute(sql).fetchone()[0]  # noqa: E731
        return {"page_size": one("PRAGMA page_size"), "page_count": one("PRAGMA page_count"),
                "freelist_count": one("PRAGMA freelist_count"),
                "changes": one("SELECT count(*) FROM _atoll_changes"),
                "versions": one("SELECT count(*) FROM _atoll_versions"),
                "bytes": one("SELECT coalesce(sum(length(instructions)), 0) FROM _atoll_changes"),
                "keeps_values": one("SELECT count(*) FROM _atoll_meta WHERE key = 'changeLog' AND value = 'values'"),
                "Dog": one('SELECT count(*) FROM "Dog"'), "Note": one('SELECT count(*) FROM "Note"')}
    finally:
        db.close()


# MARK: - help, version, usage

def test_help_and_version():
    out = ok("--help").decode()
    assert out.startswith("usage: atoll COMMAND")
    for command in ["schema", "query", "export", "import", "info", "compact"]:
        assert f"\n  {command} " in out
        assert ok(command, "--help").decode().startswith(f"usage: atoll {command}")
        assert ok("help", command) == ok(command, "--help")
    header = (REPO / "include" / "atoll.h").read_text()
    version = re.search(r'#define ATOLL_VERSION "([0-9.]+)"', header).group(1)
    assert ok("--version").decode() == f"atoll {version}\n"


def test_usage_errors_exit_with_2():
    proc = run()
    assert proc.returncode == 2 and proc.stdout == b""
    assert proc.stderr.decode().startswith("usage: atoll COMMAND")
    assert fails(2, "frobnicate") == "unknown command 'frobnicate' (see 'atoll --help')"
    assert fails(2, "query") == "query: missing arguments: REALM CLASS (see 'atoll query --help')"
    assert fails(2, "schema", "a.realm", "b") == "schema: too many arguments: 'b' (see 'atoll schema --help')"
    assert fails(2, "query", "a.realm", "Dog", "--bogus") == "query: unknown option '--bogus' (see 'atoll query --help')"
    assert fails(2, "query", "--limit", "x", "a.realm", "Dog") == \
        "query: --limit needs a whole number >= 0, not 'x' (see 'atoll query --help')"
    assert fails(2, "query", "a.realm", "Dog", "--limit") == \
        "query: option '--limit' needs a value (see 'atoll query --help')"
    assert fails(2, "export", "-o") == "export: option '-o' needs a value (see 'atoll export --help')"
    assert fails(2, "info", "--json=1", "a.realm") == "info: option '--json' takes no value (see 'atoll info --help')"
    assert fails(2, "help", "nope") == "no help for 'nope' (see 'atoll --help')"


# MARK: - schema

def test_schema_prints_the_schema_version_and_the_schema(every_type: Path):
    out = ok("schema", every_type).decode()
    assert out.startswith('{\n  "schemaVersion": 3,\n  "schema": [\n')
    printed = json.loads(out)
    assert printed["schemaVersion"] == 3
    assert [c["name"] for c in printed["schema"]] == [c["name"] for c in EVERY_TYPE_SCHEMA]
    person = printed["schema"][1]
    assert person["primaryKey"] == "id"
    assert person["properties"]["friend"] == {"type": "object", "objectType": "Person", "optional": True,
                                              "indexed": False}
    assert person["properties"]["fans"]["type"] == "linkingObjects"
    assert printed["schema"][3]["embedded"] is True
    # The same as the binding reads.
    with atoll.open(every_type, read_only=True) as realm:
        assert printed["schema"] == realm.schema


# MARK: - query

def test_query_prints_one_object_per_line(dogs: Path):
    out = ok("query", dogs, "Dog", "_id <= $0 SORT(_id DESC)", "[3]").decode()
    lines = out.split("\n")
    assert len(lines) == 4 and lines[-1] == ""
    assert lines[0].startswith("[{") and lines[1].startswith("{") and lines[2].endswith("}]")
    assert [d["_id"] for d in json.loads(out)] == [3, 2, 1]
    assert json.loads(out)[0] == {"_id": 3, "name": "Dog 3", "age": 3, "owner": "p1", "born": None}
    # Every object without a query; none as [].
    assert len(json.loads(ok("query", dogs, "Dog"))) == 2000
    assert ok("query", dogs, "Dog", "age > 100") == b"[]\n"
    assert ok("query", dogs, "Dog", "FALSEPREDICATE", "--pretty") == b"[]\n"


def test_query_count_limit_pretty(dogs: Path):
    assert ok("query", "--count", dogs, "Dog") == b"2000\n"
    assert ok("query", dogs, "Dog", "age == $0", "[0]", "--count") == b"%d\n" % len(range(15, 2001, 15))
    assert ok("query", "--count", "--limit", "5", dogs, "Dog") == b"5\n"
    limited = json.loads(ok("query", "--limit=5", dogs, "Dog", "SORT(_id DESC)"))
    assert [d["_id"] for d in limited] == [2000, 1999, 1998, 1997, 1996]
    assert json.loads(ok("query", "--limit", "0", dogs, "Dog")) == []
    pretty = ok("query", "--pretty", "--limit", "2", dogs, "Dog").decode()
    assert pretty.startswith('[\n  {\n    "_id": 1,\n    "name": "Dog 1",')
    assert pretty.endswith("\n  }\n]\n")
    assert json.loads(pretty) == json.loads(ok("query", "--limit", "2", dogs, "Dog"))


def test_query_values_in_extended_json(every_type: Path):
    notes = json.loads(ok("query", every_type, "Note"))
    assert notes == EVERY_TYPE_OBJECTS["Note"], "objects without primary key carry _atoll_key"
    first = json.loads(ok("query", every_type, "All", "_id == $0", json.dumps([OID])))[0]
    assert first["d"] == EJSON_NAN and first["u"] == UUID and first["oid"] == OID
    assert first["m"] == {"$numberFloat": "-0.0"}
    assert first["place"]["geo"] == {"lat": -0.0, "near": 1}
    assert "fans" not in json.loads(ok("query", every_type, "Person"))[0]
    assert ok("query", every_type, "Tag", "name BEGINSWITH[c] $0", '["B"]') == b'[{"name":"b"}]\n'


# MARK: - errors

def test_bad_input_fails_with_a_message(dogs: Path, tmp_path: Path):
    missing = tmp_path / "missing.realm"
    for command in [["schema"], ["query"], ["export"], ["info"], ["compact"]]:
        args = command + [missing] + (["Dog"] if command == ["query"] else [])
        assert fails(1, *args) == f"'{missing}': no such file"
    assert not missing.exists()
    assert fails(1, "schema", tmp_path) == f"'{tmp_path}' is a directory, not a realm file"
    assert fails(1, "query", dogs, "Cat") == "no class named 'Cat' in the schema (classes: Dog, Person, Note)"
    assert fails(1, "query", dogs, "Dog", "age >") == "expected a value or property at the end of the query"
    assert fails(1, "query", dogs, "Dog", "age 42") == "expected a comparison operator at position 4 near '42'"
    assert fails(1, "query", dogs, "Dog", "nme == 'x'") == "class 'Dog' has no property 'nme' (in 'nme' at position 0)"
    assert fails(1, "query", dogs, "Dog", "age > $0", "[1").startswith("the query arguments: invalid JSON: ")
    assert fails(1, "query", dogs, "Dog", "age > $0", '{"a": 1}') == \
        "the query arguments must be a JSON array, such as '[3, \"Rex\"]'"
    assert "$1" in fails(1, "query", dogs, "Dog", "age > $1", "[1]")
    assert fails(1, "query", dogs, "Dog", "age > $0", '["x"]').startswith("cannot compare 'age' (int?) with string 'x'")
    # Files that are not realms.
    junk = tmp_path / "junk.realm"
    junk.write_bytes(b"not a database at all" * 100)
    assert "not a database" in fails(1, "info", junk)
    plain = tmp_path / "plain.db"
    sqlite3.connect(plain).execute("CREATE TABLE t (x)").connection.commit()
    assert fails(1, "schema", plain) == f"'{plain}' is not an Atoll realm (it has no Atoll tables)"
    assert fails(1, "compact", plain) == f"'{plain}' is not an Atoll realm (it has no Atoll tables)"
    assert fails(1, "export", dogs, "-o", tmp_path / "no" / "such" / "dir.json").startswith("cannot write ")


def test_read_only_commands_leave_the_file_alone(dogs: Path, tmp_path: Path):
    before = dogs.read_bytes()
    ok("schema", dogs)
    ok("query", dogs, "Dog", "age > 3")
    ok("export", dogs, "-o", tmp_path / "out.json")
    ok("info", dogs)
    assert dogs.read_bytes() == before


# MARK: - export and import

def test_export_import_export_is_byte_identical(every_type: Path, tmp_path: Path):
    first = ok("export", every_type)
    (tmp_path / "first.json").write_bytes(first)
    copy = tmp_path / "copy.realm"
    assert ok("import", copy, tmp_path / "first.json") == \
        f"imported 9 objects into '{copy}' (All 2, Person 3, Note 2, Tag 2)\n".encode()
    assert ok("export", copy) == first
    # From standard input, and to a file with -o.
    piped = tmp_path / "piped.realm"
    ok("import", piped, "-", stdin=first)
    ok("export", "-o", tmp_path / "again.json", piped)
    assert (tmp_path / "again.json").read_bytes() == first
    # The documented shape.
    text = first.decode()
    assert text.startswith('{"format": "atoll-export", "version": 1, "schemaVersion": 3,\n "schema": [\n  {"name":"All",')
    assert text.endswith("\n  ]\n }\n}\n")
    doc = json.loads(text)
    assert list(doc["objects"]) == ["All", "Person", "Note", "Tag"]
    assert doc["objects"]["Note"] == EVERY_TYPE_OBJECTS["Note"]
    assert doc["objects"]["Tag"] == [{"name": "b"}, {"name": "a"}]
    assert doc["objects"]["All"][0]["lm"][3] == {"$numberFloat": "1.5"}
    assert doc["objects"]["All"][0]["mixedDefault"] is None
    assert doc["objects"]["All"][1]["mixedDefault"] == 5


def test_a_realm_written_by_the_binding_round_trips(dogs: Path, tmp_path: Path):
    first = ok("export", dogs)
    copy = tmp_path / "copy.realm"
    ok("import", copy, "-", stdin=first)
    assert ok("export", copy) == first
    with atoll.open(copy, read_only=True) as realm:
        assert realm.schema_version == 2
        assert len(realm.objects("Dog")) == 2000
        assert realm.get("Dog", 7) == {"_id": 7, "name": "Dog 7", "age": 7, "owner": "p1", "born": None}


def test_empty_realms_round_trip(tmp_path: Path):
    for schema in [DOGS_SCHEMA, []]:
        empty = tmp_path / f"empty-{len(schema)}.realm"
        atoll.open(empty, schema=schema, schema_version=1).close()
        first = ok("export", empty)
        copy = tmp_path / f"copy-{len(schema)}.realm"
        assert ok("import", copy, "-", stdin=first) == f"imported 0 objects into '{copy}'".encode() + \
            (b" (Dog 0, Person 0, Note 0)\n" if schema else b"\n")
        assert ok("export", copy) == first
    assert json.loads(first) == {"format": "atoll-export", "version": 1, "schemaVersion": 1, "schema": [],
                                 "objects": {}}


def test_import_refuses_an_existing_realm(dogs: Path, every_type: Path, tmp_path: Path):
    export = tmp_path / "export.json"
    export.write_bytes(ok("export", every_type))
    before = dogs.read_bytes()
    assert fails(1, "import", dogs, export) == \
        f"'{dogs}' exists and is not empty: import writes a new realm; remove it or choose another path"
    assert dogs.read_bytes() == before
    assert fails(1, "import", tmp_path / "new.realm", tmp_path / "nothing.json") == \
        f"'{tmp_path / 'nothing.json'}': no such file"
    assert not (tmp_path / "new.realm").exists()


@pytest.mark.parametrize("text, message", [
    (b"", "invalid JSON at byte 0: expected '{' (an export is a JSON object), found the end of the file"),
    (b"[]", "invalid JSON at byte 0: expected '{' (an export is a JSON object), found '['"),
    (b'{"format": "csv"}', 'not an Atoll export: its "format" is "csv", not "atoll-export"'),
    (b'{"format": "atoll-export", "version": 9}',
     "the export is format version 9; this version of Atoll reads version 1"),
    (b'{"format": "atoll-export", "version": 1, "schemaVersion": 1, "schema": [], "objects": {"Dog": []}}',
     "the export's objects name class 'Dog', which is not in its schema"),
    (b'{"format": "atoll-export", "version": 1, "schemaVersion": 1, '
     b'"schema": [{"name": "Dog", "primaryKey": "id", "properties": {"id": "int", "age": "int"}}], '
     b'"objects": {"Dog": [{"id": 1, "age": 1}, {"id": 2, "age": "old"}]}}',
     "object 1 of class 'Dog': property 'Dog.age' is int; got string 'old'"),
    (b'{"format": "atoll-export", "version": 1, "schemaVersion": 1, '
     b'"schema": [{"name": "Dog", "primaryKey": "id", "properties": {"id": "int", "friend": "Dog?"}}], '
     b'"objects": {"Dog": [{"id": 1, "friend": 1}, {"id": 2, "friend": 5}]}}',
     "object 1 of class 'Dog': property 'Dog.friend': no Dog with primary key 5"),
    (b'{"format": "atoll-export", "version": 1, "schemaVersion": 1, '
     b'"schema": [{"name": "Dog", "primaryKey": "id", "properties": {"id": "int"}}], '
     b'"objects": {"Dog": [{"id": 1}, {"id": 2]}}',
     "invalid JSON at byte 178: '}' expected near ']'"),
])
def test_a_failed_import_leaves_no_file(tmp_path: Path, text: bytes, message: str):
    realm = tmp_path / "new.realm"
    assert fails(1, "import", realm, "-", stdin=text, tmpdir=tmp_path) == message
    assert list(tmp_path.iterdir()) == [], "nothing left: no realm, no -wal, no spooled input"
    # From a file, into an empty file: the file is left empty.
    source = tmp_path / "export.json"
    source.write_bytes(text)
    realm.touch()
    assert fails(1, "import", realm, source) == message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.json", "new.realm"]
    assert realm.stat().st_size == 0


# MARK: - info

def test_info_agrees_with_sqlite(dogs: Path):
    info = json.loads(ok("info", "--json", dogs))
    expected = sqlite_counts(dogs)
    assert info["pageSize"] == expected["page_size"]
    assert info["pageCount"] == expected["page_count"]
    assert info["freePages"] == expected["freelist_count"] > 0
    assert info["usedBytes"] == (expected["page_count"] - expected["freelist_count"]) * expected["page_size"]
    assert info["freeBytes"] == expected["freelist_count"] * expected["page_size"]
    assert info["changeLog"] == {"entries": expected["versions"], "chunks": expected["changes"],
                                 "bytes": expected["bytes"], "keepsValues": expected["keeps_values"] == 1}
    assert info["changeLog"]["entries"] == 3 and info["version"] == 3
    assert info["fileSize"] == dogs.stat().st_size
    wal = Path(str(dogs) + "-wal")
    assert info["walSize"] == (wal.stat().st_size if wal.exists() else 0)
    assert info["schemaVersion"] == 2
    assert info["objects"] == {"Dog": expected["Dog"], "Person": 1, "Note": expected["Note"]}
    assert info["objects"]["Note"] == 270
    assert info["path"] == str(dogs)


def test_info_as_text(dogs: Path, every_type: Path):
    text = ok("info", dogs).decode()
    expected = sqlite_counts(dogs)
    assert re.search(rf"^page size +{expected['page_size']} bytes$", text, re.M)
    assert re.search(rf"^pages +{expected['page_count']} \(\d+ used, {expected['freelist_count']} free\)$", text, re.M)
    values = ", values kept" if expected["keeps_values"] else ", without values"
    assert re.search(rf"^change log +3 entries, {expected['changes']} chunks, {expected['bytes']} bytes( \([^)]*\))?{values}$",
                     text, re.M)
    assert re.search(r"^schema version +2$", text, re.M)
    assert re.search(r"^objects +2271$", text, re.M)
    assert re.search(r"^  Dog +2000$", text, re.M)
    embedded = ok("info", every_type).decode()
    assert re.search(r"^  Place +4 \(embedded\)$", embedded, re.M)
    assert re.search(r"^objects +9$", embedded, re.M)


# MARK: - compact

def test_compact_gives_free_pages_back(dogs: Path):
    before = sqlite_counts(dogs)
    size_before = dogs.stat().st_size
    out = ok("compact", dogs).decode()
    after = sqlite_counts(dogs)
    assert after["freelist_count"] == 0
    assert after["page_count"] < before["page_count"]
    size_after = dogs.stat().st_size
    assert size_after < size_before
    assert out == f"compacted '{dogs}': {size_before} -> {size_after} bytes (freed " + \
        f"{size_before - size_after} bytes ({(size_before - size_after) / 1024:.1f} KiB))\n"
    assert json.loads(ok("info", "--json", dogs))["freePages"] == 0
    assert ok("query", "--count", dogs, "Dog") == b"2000\n"


# MARK: - pipes and terminals

def test_no_progress_when_piped(dogs: Path, tmp_path: Path):
    # A few thousand objects: the export and import report progress many times over.
    export = run("export", dogs)
    assert export.returncode == 0 and export.stderr == b""
    imported = run("import", tmp_path / "copy.realm", "-", stdin=export.stdout)
    assert imported.returncode == 0 and imported.stderr == b""
    compacted = run("compact", tmp_path / "copy.realm")
    assert compacted.returncode == 0 and compacted.stderr == b""


def run_with_terminal_stderr(*args: Any) -> tuple:
    """Runs atoll with stderr on a pseudo-terminal (stdout a pipe); returns (status, stdout,
    what the terminal showed)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([str(CLI), *map(str, args)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=slave)
    os.close(slave)
    shown = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
        elif proc.poll() is not None:
            break
    out = proc.stdout.read()
    proc.wait()
    os.close(master)
    return proc.returncode, out, shown


def test_progress_on_a_terminal(dogs: Path, tmp_path: Path):
    status, out, shown = run_with_terminal_stderr("export", dogs, "-o", tmp_path / "dogs.json")
    assert status == 0 and out == b""
    assert re.search(rb"\r\x1b\[Kexport: Dog \d+/2000", shown), shown
    assert shown.endswith(b"\r\x1b[K"), "the line is cleared at the end"
    status, out, shown = run_with_terminal_stderr("import", tmp_path / "copy.realm", tmp_path / "dogs.json")
    assert status == 0 and out.startswith(b"imported 2271 objects")
    assert b"\r\x1b[Kimport: creating Dog 0" in shown, "the first update is shown at once"
    assert shown.endswith(b"\r\x1b[K")
    assert (tmp_path / "dogs.json").read_bytes() == ok("export", tmp_path / "copy.realm")


def test_export_into_a_closed_pipe_stops_quietly(dogs: Path):
    # `atoll export r | head -c 100`: the reader goes away; atoll ends like other Unix tools.
    proc = subprocess.Popen([str(CLI), "export", str(dogs)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    head = proc.stdout.read(100)
    proc.stdout.close()
    err = proc.stderr.read()
    status = proc.wait(timeout=60)
    assert head.startswith(b'{"format": "atoll-export"')
    assert status in (0, -13), status   # -13: SIGPIPE
    assert err == b""
