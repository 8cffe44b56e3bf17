"""AtollNet against peers nobody here wrote: shared fixtures and helpers for tests/net.

Everything runs the prebuilt `atoll-net-peer` program ($ATOLL_NET_PEER, else
<repo>/.build/release/atoll-net-peer) as a separate process:

* `PeerServer` starts `atoll-net-peer serve` on port 0, reads the URL from its first line and on
  `stop()` checks the graceful shutdown (SIGTERM -> prints "stopped", exits 0).
  $ATOLL_NET_PEER_WRAPPER (e.g. "valgrind --error-exitcode=99 --leak-check=full -q") is split and
  put in front of the server's command; every timeout is then stretched (`SLOW`).
* `PeerClient` drives `atoll-net-peer client` (JSON-line commands in, JSON-line events out);
  `peer_http` runs `atoll-net-peer http` once.
* `RawWebSocket` and `raw_request` speak the protocols by hand over plain sockets.
* `WebSocketsServer` is Python's websockets as a server (own thread and event loop) for our client;
  `Bystander` is a websockets connection kept open while other tests misbehave.

Test modules import the helpers with `from conftest import ...` (run tests/net as its own pytest
invocation, as the README says).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import http.client
import json
import os
import queue
import re
import shlex
import signal
import socket
import ssl
import struct
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
from websockets.asyncio.server import serve as websockets_serve
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect as sync_connect

REPO = Path(__file__).resolve().parents[2]
PEER = Path(os.environ.get("ATOLL_NET_PEER") or REPO / ".build" / "release" / "atoll-net-peer")
WRAPPER = shlex.split(os.environ.get("ATOLL_NET_PEER_WRAPPER", ""))
# Every wait is multiplied by this: a server under valgrind is tens of times slower.
SLOW = 10.0 if WRAPPER else 1.0
STARTUP_TIMEOUT = 60.0 if WRAPPER else 10.0
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


def pytest_report_header(config: Any) -> str:
    wrapper = f" under {' '.join(WRAPPER)}" if WRAPPER else ""
    return f"atoll-net-peer: {PEER}{wrapper}"


def pytest_sessionstart(session: Any) -> None:
    if not PEER.is_file():
        pytest.exit(f"{PEER} not found: build it (swift build -c release --product atoll-net-peer) "
                    "or set ATOLL_NET_PEER", returncode=1)


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
    """Polls `predicate` until it returns something true (returned) or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.1f} s waiting for {what}")
        time.sleep(interval)


def free_port() -> int:
    """A port nothing listens on (bound to port 0, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def text_of_size(size: int) -> str:
    """A text of exactly `size` UTF-8 bytes, with 2-, 3- and 4-byte characters in it."""
    pattern = "héllo wörld ✓ 🌍 "
    encoded = (pattern * (size // len(pattern.encode()) + 1)).encode()[:size]
    text = encoded.decode("utf-8", errors="ignore")
    return text + "x" * (size - len(text.encode()))


# MARK: - the server process


def _pump_lines(stream: Any, lines: List[str], first: Optional[threading.Event] = None) -> None:
    for line in stream:
        lines.append(line.rstrip("\n"))
        if first is not None:
            first.set()
    if first is not None:
        first.set()


class PeerServer:
    """`atoll-net-peer serve --port 0 OPTIONS...`, started at construction."""

    def __init__(self, *options: Any) -> None:
        self.command = [*WRAPPER, str(PEER), "serve", "--port", "0", *map(str, options)]
        self.process = subprocess.Popen(self.command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.stdout: List[str] = []
        self.stderr: List[str] = []
        started = threading.Event()
        self._readers = [
            threading.Thread(target=_pump_lines, args=(self.process.stdout, self.stdout, started), daemon=True),
            threading.Thread(target=_pump_lines, args=(self.process.stderr, self.stderr), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        if not started.wait(STARTUP_TIMEOUT) or not self.stdout:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"{self.command} did not start within {STARTUP_TIMEOUT} s: "
                                 f"stdout {self.stdout}, stderr {self.stderr}")
        match = re.fullmatch(r"listening on (https?)://([0-9.]+):(\d+)", self.stdout[0])
        assert match, f"unexpected first line {self.stdout[0]!r}"
        self.scheme, self.host, self.port = match[1], match[2], int(match[3])
        self.stopped = False

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"

    def ws_url(self, path: str = "/ws/echo") -> str:
        return f"{'wss' if self.scheme == 'https' else 'ws'}://{self.host}:{self.port}{path}"

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def terminate(self) -> None:
        """Sends SIGTERM (the start of the graceful shutdown)."""
        self.process.send_signal(signal.SIGTERM)

    def wait_stopped(self, timeout: float = 15.0) -> None:
        """Waits for the exit after SIGTERM and checks it was clean: status 0 and "stopped" printed."""
        self.stopped = True
        try:
            status = self.process.wait(timeout * SLOW)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"the server did not stop within {timeout * SLOW} s of SIGTERM "
                                 f"(stderr {self.stderr_tail()})")
        for reader in self._readers:
            reader.join(5)
        assert status == 0, f"the server exited with {status}; stderr: {self.stderr_tail()}"
        assert self.stdout[-1:] == ["stopped"], f"the server printed {self.stdout}; stderr: {self.stderr_tail()}"

    def stderr_tail(self, lines: int = 40) -> str:
        """The end of what the server wrote to stderr (a wrapper like valgrind can write a lot)."""
        return "\n".join(self.stderr[-lines:])

    def stop(self) -> None:
        """SIGTERM, then `wait_stopped`'s checks."""
        if self.stopped:
            return
        if self.running:
            self.terminate()
        self.wait_stopped()

    def stats(self) -> Dict[str, int]:
        status, _, body = http_request(self, "GET", "/stats")
        assert status == 200
        return json.loads(body)

    def wait_for_requests(self, count: int, timeout: float = 5.0) -> None:
        """Waits until the server has taken `count` requests besides the /stats requests asking
        (each of which counts itself)."""
        asked = 0

        def counted() -> bool:
            nonlocal asked
            asked += 1
            return self.stats()["requests"] - asked >= count

        wait_for(counted, timeout * SLOW, f"the server to take {count} request(s)")


# MARK: - HTTP


def http_request(server: PeerServer, method: str, path: str, body: Optional[bytes] = None,
                 headers: Optional[Dict[str, str]] = None,
                 ssl_context: Optional[ssl.SSLContext] = None) -> Tuple[int, Dict[str, str], bytes]:
    """One request with Python's http.client: (status, lowercased headers, body)."""
    if server.scheme == "https":
        connection = http.client.HTTPSConnection(server.host, server.port, timeout=10 * SLOW, context=ssl_context)
    else:
        connection = http.client.HTTPConnection(server.host, server.port, timeout=10 * SLOW)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        connection.close()


@dataclass
class RawReply:
    status: int
    reason: str
    headers: Dict[str, str]   # lowercased names
    body: bytes
    closed: Optional[bool]    # the server closed the connection after the reply (None: not checked)


def read_until(sock: socket.socket, marker: bytes, buffer: bytearray) -> bytes:
    """Reads into `buffer` until it holds `marker`; returns and removes what is before it."""
    while marker not in buffer:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed before {marker!r}; got {bytes(buffer)[:200]!r}")
        buffer += chunk
    head, _, rest = bytes(buffer).partition(marker)
    buffer[:] = rest
    return head


def read_exact(sock: socket.socket, count: int, buffer: bytearray) -> bytes:
    while len(buffer) < count:
        chunk = sock.recv(max(65536, count - len(buffer)))
        if not chunk:
            raise AssertionError(f"connection closed after {len(buffer)} of {count} bytes")
        buffer += chunk
    data = bytes(buffer[:count])
    del buffer[:count]
    return data


def read_reply(sock: socket.socket, buffer: bytearray, head_request: bool = False) -> RawReply:
    """Reads one HTTP/1.1 response (Content-Length bodies only, which is what AtollNet sends)."""
    head = read_until(sock, b"\r\n\r\n", buffer).decode("latin-1")
    status_line, *lines = head.split("\r\n")
    match = re.fullmatch(r"HTTP/1\.1 (\d{3}) (.*)", status_line)
    assert match, f"bad status line {status_line!r}"
    headers: Dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = 0 if head_request else int(headers.get("content-length", "0"))
    return RawReply(int(match[1]), match[2], headers, read_exact(sock, length, buffer), None)


def wait_closed(sock: socket.socket, timeout: float) -> bool:
    """True when the peer closes (EOF or reset) within `timeout` s without sending anything more."""
    sock.settimeout(timeout)
    try:
        extra = sock.recv(65536)
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True
    assert extra == b"", f"unexpected bytes after the reply: {extra[:200]!r}"
    return True


def raw_request(server: PeerServer, data: bytes, check_close: bool = True, timeout: float = 5.0) -> RawReply:
    """Sends `data` on a new connection and reads one response; with `check_close`, also whether
    the server then closes the connection (waits up to 2 s for that)."""
    with socket.create_connection((server.host, server.port), timeout=timeout * SLOW) as sock:
        sock.sendall(data)
        buffer = bytearray()
        reply = read_reply(sock, buffer)
        assert not buffer, f"unexpected bytes after the reply: {bytes(buffer)[:200]!r}"
        if check_close:
            reply.closed = wait_closed(sock, 2 * SLOW)
        return reply


# MARK: - WebSocket by hand


def websocket_accept(key: str) -> str:
    return base64.b64encode(hashlib.sha1(key.encode() + WS_GUID).digest()).decode()


def upgrade_request(path: str = "/ws/echo", key: Optional[str] = None, version: Optional[str] = "13",
                    extra: str = "") -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", "Upgrade: websocket", "Connection: Upgrade"]
    if key is not None:
        lines.append(f"Sec-WebSocket-Key: {key}")
    if version is not None:
        lines.append(f"Sec-WebSocket-Version: {version}")
    return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode()


def new_key() -> str:
    return base64.b64encode(os.urandom(16)).decode()


def encode_frame(opcode: int, payload: bytes = b"", fin: bool = True, mask: bool = True, rsv: int = 0) -> bytes:
    """One WebSocket frame; `rsv` is the three RSV bits (0b100 is RSV1)."""
    first = (0x80 if fin else 0) | (rsv & 7) << 4 | opcode
    length = len(payload)
    mask_bit = 0x80 if mask else 0
    if length < 126:
        header = struct.pack("!BB", first, mask_bit | length)
    elif length < 1 << 16:
        header = struct.pack("!BBH", first, mask_bit | 126, length)
    else:
        header = struct.pack("!BBQ", first, mask_bit | 127, length)
    if not mask:
        return header + payload
    key = os.urandom(4)
    return header + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


@dataclass
class Frame:
    fin: bool
    rsv: int
    opcode: int
    payload: bytes
    masked: bool

    @property
    def close_code(self) -> Optional[int]:
        assert self.opcode == 0x8, f"not a close frame: {self}"
        return struct.unpack("!H", self.payload[:2])[0] if len(self.payload) >= 2 else None

    @property
    def close_reason(self) -> str:
        return self.payload[2:].decode()


def read_frame(sock: socket.socket, buffer: bytearray) -> Frame:
    first, second = read_exact(sock, 2, buffer)
    length = second & 0x7F
    if length == 126:
        length = struct.unpack("!H", read_exact(sock, 2, buffer))[0]
    elif length == 127:
        length = struct.unpack("!Q", read_exact(sock, 8, buffer))[0]
    key = read_exact(sock, 4, buffer) if second & 0x80 else None
    payload = read_exact(sock, length, buffer)
    if key:
        payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    return Frame(bool(first & 0x80), (first >> 4) & 7, first & 0x0F, payload, key is not None)


class RawWebSocket:
    """A WebSocket client done by hand: the handshake (Sec-WebSocket-Accept checked) and frames."""

    def __init__(self, server: PeerServer, path: str = "/ws/echo", first_frames: bytes = b"") -> None:
        self.sock = socket.create_connection((server.host, server.port), timeout=5 * SLOW)
        self.buffer = bytearray()
        key = new_key()
        # Frames may ride in the same write as the upgrade request.
        self.sock.sendall(upgrade_request(path, key) + first_frames)
        head = read_until(self.sock, b"\r\n\r\n", self.buffer).decode("latin-1")
        lines = head.split("\r\n")
        assert lines[0] == "HTTP/1.1 101 Switching Protocols", head
        headers = {name.strip().lower(): value.strip()
                   for name, _, value in (line.partition(":") for line in lines[1:])}
        assert headers["upgrade"].lower() == "websocket", head
        assert "upgrade" in headers["connection"].lower(), head
        assert headers["sec-websocket-accept"] == websocket_accept(key), head

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send_frame(self, opcode: int, payload: bytes = b"", **options: Any) -> None:
        self.sock.sendall(encode_frame(opcode, payload, **options))

    def read_frame(self) -> Frame:
        frame = read_frame(self.sock, self.buffer)
        assert not frame.masked, f"a server frame must not be masked (RFC 6455 5.1): {frame}"
        return frame

    def read_message(self) -> Tuple[int, bytes]:
        """The next data message (fragments joined): (opcode of its first frame, payload)."""
        frame = self.read_frame()
        assert frame.opcode in (0x1, 0x2), f"expected a data frame, got {frame}"
        opcode, payload = frame.opcode, frame.payload
        while not frame.fin:
            frame = self.read_frame()
            assert frame.opcode == 0x0, f"expected a continuation frame, got {frame}"
            payload += frame.payload
        return opcode, payload

    def expect_close(self, code: int) -> Frame:
        """Reads the server's close frame, checks its code, then checks that the server closes TCP."""
        frame = self.read_frame()
        assert frame.opcode == 0x8, f"expected a close frame with {code}, got {frame}"
        assert frame.close_code == code, f"expected close code {code}, got {frame.close_code} ({frame.payload!r})"
        assert wait_closed(self.sock, 5 * SLOW), "the server did not close the TCP connection after its close frame"
        return frame

    def close(self) -> None:
        self.sock.close()


# MARK: - Python's websockets


class Bystander:
    """A websockets client connection kept open on /ws/echo: the server must keep serving it
    whatever other connections do. Opening it is not what a test measures: its timeout is long enough
    for a loaded machine (CI once timed out at 10 s with the suite taking four times its usual time)."""

    def __init__(self, server: PeerServer, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        self.server = server
        self._exit = contextlib.ExitStack()
        try:
            self.ws = self._exit.enter_context(sync_connect(server.ws_url("/ws/echo"), proxy=None, ssl=ssl_context,
                                                            open_timeout=30 * SLOW, ping_interval=None))
        except TimeoutError as error:
            raise AssertionError(f"the bystander could not open ({error}); server running: {server.running}; "
                                 f"its stderr: {server.stderr_tail()}") from error
        self.count = 0

    def assert_echoes(self) -> None:
        self.count += 1
        message = f"still there? #{self.count} ✓"
        self.ws.send(message)
        assert self.ws.recv(timeout=5 * SLOW) == message
        payload = os.urandom(300)
        self.ws.send(payload)
        assert self.ws.recv(timeout=5 * SLOW) == payload

    def close(self) -> None:
        self._exit.close()


def assert_serving(server: PeerServer, bystander: Optional[Bystander] = None) -> None:
    """The server keeps serving everyone else: GET /health answers and the bystander echoes."""
    status, _, body = http_request(server, "GET", "/health")
    assert (status, json.loads(body)) == (200, {"ok": True})
    if bystander is not None:
        bystander.assert_echoes()


class WebSocketsServer:
    """Python's websockets serving on 127.0.0.1:<free port> from its own thread and event loop.

    Paths: /fragments answers each message with JSON {"count": frames, "joined": ..., "type": ...}
    (the message read frame by frame); /later echoes each message 0.2 s after it came; anything else
    echoes at once, except the text "close-me", which makes the server close with 4002 "server says bye". `closes` gets (close received, close sent) per
    connection, each (code, reason) or None.
    """

    def __init__(self, ssl_context: Optional[ssl.SSLContext] = None,
                 subprotocols: Optional[List[str]] = None) -> None:
        self.ssl_context = ssl_context
        self.subprotocols = subprotocols
        self.closes: "queue.Queue[Tuple[Any, Any]]" = queue.Queue()
        self.subprotocols_chosen: "queue.Queue[Optional[str]]" = queue.Queue()
        self._ready = threading.Event()
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stop: Optional[asyncio.Future] = None
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "websockets server did not start"
        if self._error:
            raise self._error

    @property
    def scheme(self) -> str:
        return "wss" if self.ssl_context else "ws"

    def url(self, path: str = "/echo") -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}{path}"

    async def _handler(self, ws: Any) -> None:
        self.subprotocols_chosen.put(ws.subprotocol)
        try:
            if ws.request.path == "/fragments":
                while True:
                    parts = [part async for part in ws.recv_streaming()]
                    kind = "text" if isinstance(parts[0], str) else "binary"
                    joined = "".join(parts) if kind == "text" else b"".join(parts).hex()
                    await ws.send(json.dumps({"count": len(parts), "joined": joined, "type": kind}))
            else:
                async for message in ws:
                    if ws.request.path == "/later":
                        await asyncio.sleep(0.2)
                    if message == "close-me":
                        await ws.close(4002, "server says bye")
                    else:
                        await ws.send(message)
        except ConnectionClosed:
            pass
        finally:
            await ws.wait_closed()
            received, sent = ws.protocol.close_rcvd, ws.protocol.close_sent
            self.closes.put(((received.code, received.reason) if received else None,
                             (sent.code, sent.reason) if sent else None))

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = self._loop.create_future()
        try:
            server = await websockets_serve(self._handler, "127.0.0.1", 0, ssl=self.ssl_context,
                                            subprotocols=self.subprotocols, max_size=None, ping_interval=None)
        except BaseException as error:  # reported to the constructor
            self._error = error
            self._ready.set()
            return
        async with server:
            self.port = server.sockets[0].getsockname()[1]
            self._ready.set()
            await self._stop

    def close(self) -> None:
        if self._loop and self._stop and not self._stop.done():
            self._loop.call_soon_threadsafe(self._stop.set_result, None)
        self._thread.join(10)


# MARK: - our client and HTTP client


class PeerClient:
    """`atoll-net-peer client URL OPTIONS...`: `send` writes a command, `event` reads the next event;
    `wait` closes stdin (no more commands) and waits for the exit."""

    def __init__(self, url: str, *options: Any) -> None:
        self.process = subprocess.Popen([str(PEER), "client", url, *map(str, options)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        self.events: "queue.Queue[Optional[Dict[str, Any]]]" = queue.Queue()
        self.stderr: List[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=_pump_lines, args=(self.process.stderr, self.stderr), daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.events.put(json.loads(line))
        self.events.put(None)  # end of output

    def _write(self, line: str) -> None:
        try:
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError):  # the client exited, or stdin is closed
            pass

    def send(self, **command: Any) -> None:
        self._write(json.dumps(command))

    def event(self, timeout: float = 10.0) -> Dict[str, Any]:
        try:
            event = self.events.get(timeout=timeout * SLOW)
        except queue.Empty:
            raise AssertionError(f"no event from the client within {timeout * SLOW} s (stderr {self.stderr})")
        assert event is not None, (f"the client ended its output (status {self.process.poll()}, "
                                   f"stderr {self.stderr})")
        return event

    def expect(self, kind: str, timeout: float = 10.0) -> Dict[str, Any]:
        event = self.event(timeout)
        assert event["event"] == kind, f"expected a {kind} event, got {event}"
        return event

    def wait(self, timeout: float = 10.0) -> int:
        """Closes stdin (no more commands) and waits for the exit status."""
        try:
            self.process.stdin.close()
        except BrokenPipeError:
            pass
        return self.process.wait(timeout * SLOW)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.process.stderr):
            try:
                stream.close()
            except (BrokenPipeError, OSError):
                pass


def peer_http(method: str, url: str, *options: Any, timeout: float = 30.0) -> Tuple[int, Dict[str, Any]]:
    """`atoll-net-peer http METHOD URL OPTIONS...`: (exit status, the JSON line it printed)."""
    done = subprocess.run([str(PEER), "http", method, url, *map(str, options)], capture_output=True,
                          text=True, timeout=timeout * SLOW)
    lines = done.stdout.splitlines()
    assert len(lines) == 1, f"expected one JSON line, got {done.stdout!r} (stderr {done.stderr!r})"
    return done.returncode, json.loads(lines[0])


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# MARK: - fixtures


@pytest.fixture(scope="session")
def server():
    """The shared server with the default limits; its shutdown is checked at the end."""
    peer = PeerServer()
    yield peer
    peer.stop()


@pytest.fixture(scope="session")
def bystander(server: PeerServer):
    """A connection to the shared server that stays open through the whole session."""
    watcher = Bystander(server)
    yield watcher
    watcher.close()


@pytest.fixture
def start_server():
    """Starts extra servers with options; each is stopped (and its clean exit checked) after the test."""
    servers: List[PeerServer] = []

    def start(*options: Any) -> PeerServer:
        servers.append(PeerServer(*options))
        return servers[-1]

    yield start
    for peer in servers:
        peer.stop()


@pytest.fixture
def peer_client():
    """Starts our WebSocket client on a URL; killed after the test if it is still running."""
    clients: List[PeerClient] = []

    def start(url: str, *options: Any) -> PeerClient:
        clients.append(PeerClient(url, *options))
        return clients[-1]

    yield start
    for client in clients:
        client.kill()


@pytest.fixture
def ws_server():
    """Starts a Python websockets server (`WebSocketsServer`); closed after the test."""
    servers: List[WebSocketsServer] = []

    def start(**options: Any) -> WebSocketsServer:
        servers.append(WebSocketsServer(**options))
        return servers[-1]

    yield start
    for started in servers:
        started.close()
