"""The admin console's tests: a real atoll-server (ATOLL_SERVER, default
.build/release/atoll-server) on a free port, real sync clients (the Python binding, with
ATOLL_LIBRARY), and for the page a real headless Chromium (CHROMIUM, default `chromium` on PATH)
driven by Playwright. A missing server, library or browser fails the tests; it does not skip them.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO_ROOT / "bindings" / "python" / "src"))
sys.path.insert(0, str(REPO_ROOT / "tests" / "support"))
os.environ.setdefault("ATOLL_LIBRARY", str(REPO_ROOT / ".build" / "release" / "libatoll.so"))

import atoll  # noqa: E402
# The tests import these from here.
from helpers import http_json as http, wait_until  # noqa: E402,F401
from processes import terminate  # noqa: E402

SERVER = Path(os.environ.get("ATOLL_SERVER", REPO_ROOT / ".build" / "release" / "atoll-server"))
ADMIN_KEY = "test-admin-key-0123456789"

TASK = {"name": "Task", "primaryKey": "_id",
        "properties": {"_id": "string", "name": "string", "priority": "int", "owner_id": "string?",
                       "done": "bool", "tags": "string[]"}}
SCHEMA = [TASK]
ALL = ("all", "Task", "TRUEPREDICATE")
OWNER_RULES = {"Task": {"roles": [{"name": "owner", "read": "owner_id == %user.id",
                                   "write": "owner_id == %user.id"}]}}
OPEN_RULES = {"default": {"roles": [{"name": "all", "read": True, "write": True}]}}


def config(rules: Dict[str, Any] = OPEN_RULES, admin: bool = True) -> Dict[str, Any]:
    """One app, "todo": a fixed Task schema, flexible sync, the given rules."""
    c: Dict[str, Any] = {"apps": [{
        "id": "todo", "schema": SCHEMA,
        "sync": {"mode": "flexible", "partitionKey": "owner_id"},
        "auth": {"anonymous": True, "emailPassword": {"autoConfirm": True}, "apiKeys": True},
        "rules": rules}]}
    if admin:
        c["admin"] = {"key": ADMIN_KEY}
    return c


class Server:
    """A running atoll-server and what it printed at start."""

    def __init__(self, proc: subprocess.Popen, lines: List[str], data: Path, stderr: Path) -> None:
        self.proc = proc
        self.lines = lines
        self.data = data
        self.stderr = stderr
        m = re.fullmatch(r"listening on (http://\S+)", lines[0])
        assert m, lines
        self.url = m.group(1).rstrip("/")

    def api(self, app_id: str = "todo") -> str:
        return f"{self.url}/api/client/v2.0/app/{app_id}"

    def stop(self) -> None:
        terminate(self.proc, timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def start_server(tmp_path: Path, conf: Optional[Dict[str, Any]], data: Optional[Path] = None) -> Server:
    if not SERVER.is_file() or not os.access(SERVER, os.X_OK):
        pytest.fail(f"atoll-server not found at {SERVER}: build it (`swift build -c release`) "
                    "or set ATOLL_SERVER", pytrace=False)
    data = data or tmp_path / "server-data"
    args = [str(SERVER), "--port", "0", "--data", str(data), "--log-level", "warning"]
    if conf is not None:
        path = tmp_path / "server-config.json"
        path.write_text(json.dumps(conf))
        args += ["--config", str(path)]
    stderr = tmp_path / f"server-stderr-{time.monotonic_ns()}.log"
    with open(stderr, "wb") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err)
    assert proc.stdout is not None
    # Three lines: where it listens, the console's address, the admin key (or where it is).
    # Read from the descriptor itself: a buffered reader could hold lines that select cannot see.
    fd = proc.stdout.fileno()
    out = b""
    deadline = time.monotonic() + 15
    while out.count(b"\n") < 3 and time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(fd, 4096) if ready else b""
        if not chunk:
            break
        out += chunk
    lines = [line.strip() for line in out.decode("utf-8", "replace").splitlines()]
    if len(lines) < 3 or not lines[0].startswith("listening on "):
        proc.kill()
        proc.wait()
        pytest.fail(f"atoll-server did not start (printed {lines!r}):\n{stderr.read_text(errors='replace')}",
                    pytrace=False)
    return Server(proc, lines, data, stderr)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    s = start_server(tmp_path, config())
    yield s
    s.stop()


@pytest.fixture
def owner_server(tmp_path: Path) -> Iterator[Server]:
    s = start_server(tmp_path, config(OWNER_RULES))
    yield s
    s.stop()


# MARK: - HTTP

def admin(server: Server, method: str, path: str, body: Any = None, key: str = ADMIN_KEY) -> Tuple[int, Any]:
    return http(method, f"{server.url}/api/admin/v1{path}", body, token=key)


def ok(server: Server, method: str, path: str, body: Any = None) -> Any:
    status, answer = admin(server, method, path, body)
    assert status == 200, (status, answer)
    return answer


# MARK: - Clients

def login(server: Server, tmp_path: Path, name: str) -> Tuple[atoll.App, atoll.User]:
    app = atoll.App("todo", server.url, metadata_dir=tmp_path / f"meta-{name}")
    return app, app.login(atoll.Credentials.anonymous())


def open_all(user: atoll.User, path: Path) -> atoll.Realm:
    realm = atoll.open_synced(user, path, schema=SCHEMA, initial_subscriptions=[ALL])
    realm.subscriptions.wait(timeout=10)
    return realm


def task(pk: str, priority: int = 0, owner: Optional[str] = None, name: Optional[str] = None) -> Dict[str, Any]:
    return {"_id": pk, "name": name or f"task {pk}", "priority": priority, "owner_id": owner, "done": False,
            "tags": []}


def received(realm: atoll.Realm, pk: str, field: str, value: Any, seconds: float = 10) -> None:
    """Waits until the client's realm has `value` in `field` of Task `pk`, from the server."""
    def check() -> bool:
        realm.refresh()
        obj = realm.get("Task", pk)
        return obj is not None and obj[field] == value
    wait_until(check, seconds, f"Task {pk}.{field} == {value!r} on the client")
