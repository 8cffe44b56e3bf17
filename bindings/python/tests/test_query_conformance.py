"""The query conformance suite (Tests/conformance/README.md) through the Python binding.

Every case of Tests/conformance/queries.json is one test, named after the case; all run on one
in-memory realm holding the file's data set. ATOLL_CONFORMANCE_FILE names another file of the
same shape to run instead.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List

import pytest

import atoll
from atoll import ejson
from atoll.errors import QueryInvalidError, QuerySyntaxError
from conftest import REPO_ROOT

SUITE_FILE = Path(os.environ.get("ATOLL_CONFORMANCE_FILE")
                  or REPO_ROOT / "Tests" / "conformance" / "queries.json")

# Read as plain JSON: Extended JSON values ({"$oid": ...}) stay as they are and go to the
# library unchanged, as a host that stores JSON documents would pass them.
with open(SUITE_FILE, encoding="utf-8") as f:
    SUITE: Dict[str, Any] = json.load(f)

CASES: List[Dict[str, Any]] = SUITE["cases"]
PRIMARY_KEYS = {cls["name"]: cls.get("primaryKey") for cls in SUITE["schema"]}
ERRORS = {"querySyntax": QuerySyntaxError, "queryInvalid": QueryInvalidError}


@pytest.fixture(scope="module")
def realm():
    r = atoll.open(in_memory=True, schema=SUITE["schema"])
    try:
        with r.write():
            for class_name, objects in SUITE["objects"].items():
                r.create_many(class_name, objects)
    except atoll.AtollError as e:
        r.close()
        pytest.fail(f"the data set of {SUITE_FILE.name} does not load: {e}", pytrace=False)
    yield r
    r.close()


def canonical(value: Any) -> str:
    """One text per value, whichever side it came from (decoded results or raw Extended JSON)."""
    return ejson.dumps(value)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_query(realm, case: Dict[str, Any]) -> None:
    class_name, query, args = case["class"], case["query"], case.get("args", [])
    label = f"{class_name}: {query}"
    if "error" in case:
        with pytest.raises(ERRORS[case["error"]]):
            realm.objects(class_name).filter(query, *args).to_list()
        return
    results = realm.objects(class_name).filter(query, *args)
    key = PRIMARY_KEYS[class_name]
    got = [canonical(obj[key]) for obj in results]
    expected = [canonical(ejson.decode(v)) for v in case["expect"]]
    if not case.get("ordered", False):
        got.sort()
        expected.sort()
    assert got == expected, label
    assert len(results) == len(expected), f"{label}: len()"
