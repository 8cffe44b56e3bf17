"""Memory an attacker can make the server hold, against a real atoll-server.

Two ways it was done: connections that subscribe to a large view and never read what the server
sends (each one's downloads queued in the server), and several connections uploading a
changeset as large as a message may be, at once (each one parsed in memory). The server must
bound both: what one user's connections together have queued (`maxQueuedBytesPerUser`; past it
the connection that would queue more is closed with 1008 and resumes from its cursor when it
comes back), and how many large messages are parsed ahead of the queue that handles them (one
budget per app, not per connection). The figures (the server's resident memory before, during
and after) are printed and go to ATOLL_STRESS_REPORT.

The clients here are raw sockets speaking WebSocket by hand (RFC 6455 framing is a few lines),
so that "never reads" means exactly that: the receive buffer is small and nothing is read.
"""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from conftest import Raw, Server, login_anonymous, plant_blobs, report, start_server
from helpers import download_instructions

APP = "blobs"
SCHEMA = [{"name": "Blob", "primaryKey": "_id", "properties": {"_id": "string", "text": "string"}}]
PUBLIC = {"roles": [{"name": "everyone", "read": True, "write": True}]}
PER_USER = 24 << 20
PER_APP = 32 << 20
CONFIG = {"maxQueuedBytesPerUser": PER_USER, "maxPendingBytesPerApp": PER_APP, "maxSignupsPerAddressPerMinute": 0,
          "apps": [{"id": APP, "developmentMode": False, "schema": SCHEMA, "sync": {"mode": "flexible"},
                    "rules": {"Blob": PUBLIC},
                    # Each bootstrap here costs the user its time on the queue too: room for all
                    # twelve, so that what is measured is the bound on memory alone.
                    "queryLimits": {"bootstrapSecondsPerMinute": 600}}]}
OBJECTS = 40
CONNECTIONS = 12
OBJECT_BYTES = 500_000
FIGURES: Dict[str, str] = {}


def status_kb(server: Server, field: str) -> int:
    for line in Path(f"/proc/{server.proc.pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field}")


class SilentSocket:
    """A WebSocket client by hand that sends and never reads (a small receive buffer)."""

    def __init__(self, server: Server, token: str) -> None:
        host, port = server.url.split("//")[1].split(":")
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect((host, int(port)))
        key = base64.b64encode(os.urandom(16)).decode()
        path = server.ws_url(APP).split(port, 1)[1]
        self.sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                           f"Sec-WebSocket-Protocol: atoll-sync.1\r\nAuthorization: Bearer {token}\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.sock.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def send(self, message: Dict[str, Any]) -> None:
        payload = json.dumps(message).encode()
        n = len(payload)
        header = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                  bytes([0x80 | 126]) + struct.pack("!H", n) if n < 65536 else
                                  bytes([0x80 | 127]) + struct.pack("!Q", n))
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def closed_by_server(self, timeout: float = 10) -> bool:
        """Reads everything now (the test is over): true when the server closed the socket."""
        self.sock.settimeout(timeout)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        try:
            while self.sock.recv(1 << 20):
                pass
            return True
        except (socket.timeout, TimeoutError):
            return False
        except OSError:
            return True

    def close(self) -> None:
        self.sock.close()


def quiet(server: Server, timeout: float = 60) -> None:
    """Waits until the server has used no CPU for a second (at most `timeout`)."""
    deadline = time.monotonic() + timeout
    last = server.cpu_seconds()
    while time.monotonic() < deadline:
        time.sleep(1)
        now = server.cpu_seconds()
        if now - last < 0.05:
            return
        last = now


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    directory = tmp_path_factory.mktemp("memory")
    server = start_server(directory, CONFIG)
    yield server
    alive = server.proc.poll() is None
    code = server.stop()
    report("hostile-memory", rounds=len(FIGURES), operations=0, faults=0, lost=0,
           crashes=0 if alive and code == 0 else 1, figures="; ".join(FIGURES.values()))
    assert alive and code == 0, f"the server did not stop cleanly ({code})"


def plant(server: Server) -> None:
    """OBJECTS objects of OBJECT_BYTES each."""
    plant_blobs(server, APP, SCHEMA, OBJECTS, OBJECT_BYTES)


def test_large_uploads_at_once_wait_within_one_budget_per_app(server: Server) -> None:
    """Six connections (six users) each upload a changeset of 12 MB at once. Each connection
    may have 64 MB of messages waiting, so together they held any amount (+270 MB at the peak
    here, before the bound). The app's connections together may have `maxPendingBytesPerApp`
    waiting (32 MB here): the uploads past it get `tooManyMessages` (with `retryAfter`) and
    their connections close, the others are integrated, and nothing refused is stored."""
    users = [login_anonymous(server, APP) for _ in range(6)]
    conns = [Raw(server, APP, u["access_token"]) for u in users]
    answers: List[str] = []
    try:
        for n, c in enumerate(conns):
            c.bind(schema=SCHEMA)
            c.subscribe(f"_id BEGINSWITH 'u{n}-'", [], cls="Blob")
        time.sleep(0.5)
        before = status_kb(server, "VmRSS")
        for n, c in enumerate(conns):
            c.upload([{"op": "create", "class": "Blob", "primaryKey": f"u{n}-{i}",
                       "object": {"text": chr(ord("a") + i % 26) * 240_000}} for i in range(50)])
        for c in conns:
            got = c.until(lambda m: m["type"] == "error" or (m["type"] == "uploadAck" and m["clientVersion"] == 1), 120)
            answers.append(got[-1]["type"] if got[-1]["type"] == "uploadAck" else got[-1]["code"])
        peak = status_kb(server, "VmHWM")
        server.assert_alive()
    finally:
        for c in conns:
            c.close()
    grew = max(0, peak - before)
    FIGURES["uploads"] = (f"6 uploads of 12 MB at once: {answers.count('uploadAck')} integrated, "
                          f"{answers.count('tooManyMessages')} refused (bound {PER_APP >> 20} MB per app); "
                          f"the server's peak grew {grew >> 10} MB")
    print("\n" + FIGURES["uploads"])
    assert set(answers) <= {"uploadAck", "tooManyMessages"}, answers
    assert answers.count("tooManyMessages") >= 2 and answers.count("uploadAck") >= 1, answers
    with Raw(server, APP, login_anonymous(server, APP)["access_token"]) as check:
        check.bind(schema=SCHEMA)
        got = check.subscribe("_id BEGINSWITH 'u'", [], cls="Blob")
        stored = {i["primaryKey"].split("-")[0] for i in download_instructions(got)}
    assert stored == {f"u{n}" for n, a in enumerate(answers) if a == "uploadAck"}, (stored, answers)


def test_connections_that_never_read_hold_at_most_the_users_bound(server: Server) -> None:
    """Twelve connections of one user, one every half second, subscribe to a 20 MB view and
    never read. Without a bound per user the server held each one's bootstrap (its memory grew
    with every connection: +275 MB for twelve, measured before the bound); with it the user's
    connections together hold at most `maxQueuedBytesPerUser`, those past it are dropped at
    once (their queues freed), and the server's memory stops growing after the first few (what
    is left is the bootstraps' working memory, which the allocator keeps for the next)."""
    plant(server)
    user = login_anonymous(server, APP)
    time.sleep(0.5)
    before = status_kb(server, "VmRSS")
    grown: List[int] = []
    sockets: List[SilentSocket] = []
    try:
        for n in range(CONNECTIONS):
            s = SilentSocket(server, user["access_token"])
            s.send({"type": "bind", "session": 1, "mode": "flexible", "file": None, "downloadCursor": 0,
                    "schema": SCHEMA})
            s.send({"type": "query", "session": 1, "version": 1,
                    "queries": [{"name": "all", "class": "Blob", "query": "_id BEGINSWITH 'b'", "args": []}]})
            sockets.append(s)
            time.sleep(0.5)
            grown.append(status_kb(server, "VmRSS") - before)
        # The bootstraps run one after another on the app's queue, behind the connections:
        # reading any socket before they are all done would let a later one through.
        quiet(server)
        grown.append(status_kb(server, "VmRSS") - before)
        server.assert_alive()
        closed = [s.closed_by_server(timeout=2) for s in sockets]
    finally:
        for s in sockets:
            s.close()
    view_kb = OBJECTS * OBJECT_BYTES // 1024
    late = grown[-1] - grown[3]
    FIGURES["never-read"] = (f"{CONNECTIONS} never-reading connections of one user on a {view_kb >> 10} MB view: "
                             f"the server grew {grown[-1] >> 10} MB ({late >> 10} MB over the last "
                             f"{CONNECTIONS - 4}), {sum(closed)} closed (bound {PER_USER >> 20} MB per user)")
    print("\n" + FIGURES["never-read"])
    assert sum(closed) >= CONNECTIONS - 2, FIGURES["never-read"]
    assert late < view_kb, FIGURES["never-read"]
