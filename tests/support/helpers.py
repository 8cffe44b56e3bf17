"""Helpers the Python suites share (tests/admin, tests/hostile, tests/cluster): HTTP requests
with JSON bodies, and polling a condition with a deadline instead of sleeping."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import pytest


def http_json(method: str, url: str, body: Any = None, token: Optional[str] = None,
              raw: Optional[bytes] = None, timeout: float = 15) -> Tuple[int, Any]:
    """(status, the body parsed as JSON, or its text when it is not JSON, or None when empty).
    HTTP errors are answers, not exceptions; `raw` is sent as the body as it is."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, text = resp.status, resp.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text) if text else None
    except json.JSONDecodeError:
        return status, text


def wait_until(check: Callable[[], Any], seconds: float = 10,
               what: Union[str, Callable[[], str]] = "condition") -> Any:
    """Calls `check` until it returns something true, and returns that; fails the test after
    `seconds`, naming `what` (or what `what()` says then)."""
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {seconds} s waiting for "
                        f"{what() if callable(what) else what}", pytrace=False)
        time.sleep(0.05)


def download_instructions(messages: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Every instruction of the `download` messages among `messages`, in order, with each group
    read as the instructions it stands for (docs/protocol.md): an `upserts` group (a bootstrap's
    objects) as `{"op": "upsert", "class", "primaryKey", "object", "clock"}` each, a `creates`
    group (new objects) as `{"op": "create", "class", "primaryKey", "object"}` each."""
    out: List[Dict[str, Any]] = []
    for m in messages:
        if m.get("type") != "download":
            continue
        for changeset in m["changesets"]:
            for i in changeset["instructions"]:
                if i["op"] == "upserts":
                    key = i["fields"].index(i["key"])
                    for row, clock in zip(i["objects"], i["clock"]):
                        out.append({"op": "upsert", "class": i["class"], "primaryKey": row[key],
                                    "object": dict(zip(i["fields"], row)), "clock": i["clocks"][clock]})
                elif i["op"] == "creates":
                    for pk, row in zip(i["primaryKeys"], i["objects"]):
                        out.append({"op": "create", "class": i["class"], "primaryKey": pk,
                                    "object": dict(zip(i["fields"], row))})
                else:
                    out.append(i)
    return out
