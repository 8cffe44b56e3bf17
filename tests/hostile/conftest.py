"""Shared setup of tests/hostile: a real atoll-server per test module, users, raw protocol
clients, a bystander (an ordinary client that must not notice the attacks) and the summary line
of ATOLL_STRESS_REPORT.

Environment: ATOLL_SERVER (the server program, default .build/release/atoll-server),
ATOLL_LIBRARY (libatoll.so, for the bystander's Python binding), ATOLL_STRESS_REPORT (a file
each suite appends one JSON line to), ATOLL_LOAD_CLIENTS / ATOLL_LOAD_SECONDS (test_load.py).
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(REPO_ROOT / "bindings" / "python" / "src"))
sys.path.insert(0, str(REPO_ROOT / "tests" / "support"))
os.environ.setdefault("ATOLL_LIBRARY", str(REPO_ROOT / ".build" / "release" / "libatoll.so"))

# The tests import http_json from here.
from helpers import http_json  # noqa: E402
from processes import LaunchedServer, launch_server  # noqa: E402

SUBPROTOCOL = "atoll-sync.1"

TASK = {"name": "Task", "primaryKey": "_id",
        "properties": {"_id": "string", "name": "string", "priority": "int",
                       "owner_id": "string?"}}
SCHEMA = [TASK]
OWNER_RULES = {"Task": {"roles": [{"name": "owner", "read": "owner_id == %user.id",
                                   "write": "owner_id == %user.id"}]}}


# MARK: - The server

class Server(LaunchedServer):
    """A running atoll-server, with what the hostile tests measure of it."""

    def rss_kb(self) -> int:
        """The server's resident set (VmRSS, kB)."""
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise AssertionError("no VmRSS")

    def cpu_seconds(self) -> float:
        """User and system CPU time the server has used."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def assert_alive(self) -> None:
        assert self.proc.poll() is None, (
            f"atoll-server exited with {self.proc.returncode}:\n"
            f"{self.stderr_path.read_text(errors='replace')[-4000:]}")
        assert http_json("GET", f"{self.url}/health")[1]["status"] == "ok"


def start_server(directory: Path, config: Optional[Dict[str, Any]] = None,
                 log_level: str = "warning") -> Server:
    return launch_server(directory / "data", directory, config, log_level, kind=Server)


# MARK: - HTTP

def login_anonymous(server: Server, app_id: str) -> Dict[str, Any]:
    status, body = http_json("POST", f"{server.api(app_id)}/auth/providers/anon-user/login", {})
    assert status == 200, body
    return body


def login_email(server: Server, app_id: str, email: str,
                password: str = "secret-1") -> Dict[str, Any]:
    api = server.api(app_id)
    status, body = http_json("POST", f"{api}/auth/providers/local-userpass/register",
                             {"email": email, "password": password})
    assert status in (201, 409), body
    status, body = http_json("POST", f"{api}/auth/providers/local-userpass/login",
                             {"username": email, "password": password})
    assert status == 200, body
    return body


# MARK: - Raw protocol clients

class Raw:
    """A raw sync client over Python's websockets (docs/protocol.md), speaking by hand."""

    def __init__(self, server: Server, app_id: str, token: Optional[str],
                 query_token: bool = False) -> None:
        from websockets.sync.client import connect
        url = server.ws_url(app_id)
        headers = {}
        if token is not None and query_token:
            url += f"?access_token={token}"
        elif token is not None:
            headers["Authorization"] = f"Bearer {token}"
        self.conn = connect(url, subprotocols=[SUBPROTOCOL], additional_headers=headers,
                            proxy=None, compression=None, open_timeout=10,
                            max_size=None, ping_interval=None).__enter__()
        self.clock_ms = int(time.time() * 1000)
        self.client_version = 0
        self.ident = 0
        # The clock's node before the server hands out a file (a bind with a known file): a
        # device's own random one, as a real client's. A test may set `node` to borrow one.
        self._node = random.randint(1 << 40, 1 << 62)
        self.node_override: Optional[int] = None

    def send(self, message: Any) -> None:
        self.conn.send(message if isinstance(message, (str, bytes)) else json.dumps(message))

    def recv(self, timeout: float = 10) -> Dict[str, Any]:
        return json.loads(self.conn.recv(timeout=timeout))

    def until(self, done: Callable[[Dict[str, Any]], bool],
              timeout: float = 10) -> List[Dict[str, Any]]:
        """Messages up to and including the first one `done` accepts."""
        got: List[Dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while not got or not done(got[-1]):
            left = deadline - time.monotonic()
            assert left > 0, f"timed out; got {got}"
            got.append(self.recv(left))
        return got

    def closed_with(self, timeout: float = 10) -> Tuple[Optional[int], List[Dict[str, Any]]]:
        """Reads until the server closes; (close code it sent, messages read before)."""
        from websockets.exceptions import ConnectionClosed
        got: List[Dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                assert left > 0, f"the server did not close the connection; got {got}"
                text = self.conn.recv(timeout=left)
                got.append(json.loads(text))
        except ConnectionClosed as e:
            return (e.rcvd.code if e.rcvd is not None else None), got

    def bind(self, session: int = 1, file: Optional[Dict[str, int]] = None,
             schema: Optional[List[Dict[str, Any]]] = None, **extra: Any) -> List[Dict[str, Any]]:
        """Binds a flexible session; returns what came up to its first uploadAck (or error)."""
        self.send({"type": "bind", "session": session, "mode": "flexible", "file": file,
                   "downloadCursor": 0, "schema": SCHEMA if schema is None else schema, **extra})
        got = self.until(lambda m: m["type"] in ("uploadAck", "error"))
        for m in got:
            if m["type"] == "ident":
                self.ident = m["file"]["ident"]
                self.file = m["file"]
        return got

    def subscribe(self, query: str = "TRUEPREDICATE", args: Optional[List[Any]] = None,
                  session: int = 1, version: int = 1, cls: str = "Task") -> List[Dict[str, Any]]:
        self.send({"type": "query", "session": session, "version": version, "queries": [
            {"name": "q", "class": cls, "query": query, "args": args or []}]})
        return self.until(lambda m: m["type"] in ("queryComplete", "queryError", "error"))

    @property
    def node(self) -> int:
        """The node of this client's clocks: its file's ident once it has one."""
        return self.node_override or self.ident or self._node

    @node.setter
    def node(self, value: int) -> None:
        self.node_override = value

    def changeset(self, instructions: List[Dict[str, Any]]) -> Dict[str, Any]:
        self.client_version += 1
        self.clock_ms = max(self.clock_ms + 1, int(time.time() * 1000))
        return {"clientVersion": self.client_version, "lastServerVersion": 0,
                "clock": [self.clock_ms, 0, self.node], "instructions": instructions}

    def upload(self, instructions: List[Dict[str, Any]], session: int = 1) -> None:
        self.send({"type": "upload", "session": session,
                   "changesets": [self.changeset(instructions)]})

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Raw":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def plant_blobs(server: Server, app_id: str, schema: List[Dict[str, Any]], count: int, size: int) -> None:
    """`count` objects `b0`... of class `Blob` whose `text` is `size` bytes, uploaded ten at a
    time by an ordinary anonymous raw client."""
    writer = login_anonymous(server, app_id)
    with Raw(server, app_id, writer["access_token"]) as conn:
        conn.bind(schema=schema)
        conn.subscribe("TRUEPREDICATE", [], cls="Blob")
        for start in range(0, count, 10):
            conn.upload([{"op": "create", "class": "Blob", "primaryKey": f"b{i}",
                          "object": {"text": chr(ord("a") + i % 26) * size}}
                         for i in range(start, min(start + 10, count))])
            conn.until(lambda m: m["type"] == "uploadAck" and m["clientVersion"] == conn.client_version, 60)


def create_task(pk: str, owner: Optional[str] = None, priority: int = 0) -> Dict[str, Any]:
    return {"op": "create", "class": "Task", "primaryKey": pk,
            "object": {"name": f"task {pk}", "priority": priority, "owner_id": owner}}


# MARK: - The bystander

class Bystander:
    """Two ordinary clients (the Python binding) of one user pair on the server: `probe()` writes
    on one and times until the other has it. Errors either reports are kept in `errors`."""

    def __init__(self, server: Server, app_id: str, directory: Path, owner_rules: bool,
                 schema: Optional[List[Dict[str, Any]]] = None) -> None:
        import atoll
        self.atoll = atoll
        self.errors: List[Any] = []
        self.latencies: List[float] = []
        self.apps = []
        self.realms = []
        self.tokens = []
        self.owner_rules = owner_rules
        users = []
        for name in ("writer", "reader"):
            app = atoll.App(app_id, server.url, metadata_dir=directory / f"meta-{name}")
            self.tokens.append(app.on_error(self.errors.append))
            user = app.login(atoll.Credentials.email_password(*self._account(server, app_id, name)))
            self.apps.append(app)
            users.append(user)
        # With owner rules both clients are one user (two devices); otherwise two users.
        self.user_id = users[0].id
        for name, user in zip(("writer", "reader"), users):
            realm = atoll.open_synced(user, directory / f"{name}.realm", schema=schema or SCHEMA,
                                      initial_subscriptions=[("all", "Task", "TRUEPREDICATE")])
            realm.subscriptions.wait(timeout=10)
            self.realms.append(realm)
        self.count = 0

    def _account(self, server: Server, app_id: str, name: str) -> Tuple[str, str]:
        email = "bystander@example.com" if self.owner_rules else f"bystander-{name}@example.com"
        login_email(server, app_id, email)
        return email, "secret-1"

    def probe(self, timeout: float = 10) -> float:
        """One write on the writer until the reader has it; seconds."""
        writer, reader = self.realms
        self.count += 1
        pk = f"bystander-{self.count}"
        started = time.monotonic()
        with writer.write():
            writer.create("Task", {"_id": pk, "name": pk, "priority": self.count,
                                   "owner_id": self.user_id})
        while True:
            reader.refresh()
            if reader.get("Task", pk) is not None:
                break
            assert time.monotonic() - started < timeout, f"{pk} did not reach the reader"
            time.sleep(0.002)
        took = time.monotonic() - started
        self.latencies.append(took)
        return took

    def close(self) -> None:
        for r in self.realms:
            r.close()
        for t in self.tokens:
            t.cancel()
        for a in self.apps:
            a.close()


# MARK: - The attack table

# Every hostile test is an attack that the server must refuse (or survive without anyone else
# noticing). Each one's outcome is kept here, and at the end of the session written to
# ATOLL_STRESS_REPORT as {"attack": test, "held": bool, "seconds": ...} lines, from which
# tests/stress/summary.py prints the table of attacks tried and held.
OUTCOMES: List[Dict[str, Any]] = []


def pytest_runtest_logreport(report: Any) -> None:
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        OUTCOMES.append({"attack": report.nodeid.split("/")[-1], "held": report.outcome == "passed",
                         "skipped": report.outcome == "skipped", "seconds": round(report.duration, 3)})


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    target = os.environ.get("ATOLL_STRESS_REPORT")
    if target and OUTCOMES:
        with open(target, "a") as f:
            for row in OUTCOMES:
                f.write(json.dumps(row) + "\n")


# MARK: - The summary line

def report(suite: str, rounds: int, operations: int, faults: int, lost: int, crashes: int,
           figures: str) -> None:
    """Appends the suite's line to ATOLL_STRESS_REPORT (when set) and prints it."""
    line = {"suite": suite, "rounds": rounds, "operations": operations, "faults": faults,
            "lost": lost, "crashes": crashes, "figures": figures}
    print("\n" + json.dumps(line))
    target = os.environ.get("ATOLL_STRESS_REPORT")
    if target:
        with open(target, "a") as f:
            f.write(json.dumps(line) + "\n")


def percentile(values: List[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("hostile")
