"""The subscribed clients of test_load.py: raw protocol clients in one asyncio loop per worker
process (started with multiprocessing's spawn, so that no library thread is forked).

Each client binds a flexible session to the load app, subscribes to every `Tick`, and from then
on reads its downloads: every `set` of `Tick.stamp` (`"<seq>:<wall time of the upload>"`) is one
delivered change, its latency the wall time on arrival minus the stamp's.

The WebSocket client side is written by hand (RFC 6455: the upgrade, masked frames out, the
server's unmasked frames in, pings answered) on asyncio.Protocol: a thousand clients share two
cores with the server, and Python's websockets spent about 90 µs per message, which made the
clients, not the server, the thing measured. Frames the server sends are parsed strictly; one
that breaks the RFC is an error of the run.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import struct
import time
from typing import Any, Dict, List, Optional
from urllib.parse import urlparse

SUBPROTOCOL = "atoll-sync.1"
TICK = {"name": "Tick", "primaryKey": "_id", "properties": {"_id": "int", "stamp": "string"}}
# Tick.stamp in a download: a `set` of the path ["stamp"] or an object (create, upsert) holding it.
STAMP = re.compile(r'"stamp"(?:\],"value")?:"(\d+):([0-9.]+)"')


def run_worker(url: str, tokens: List[str], expected: int, ready: Any, go: Any,
               results: Any) -> None:
    """Connects `tokens` clients, puts "ready" (or an error) on `ready`, waits for the deadline
    on `go`, and puts its figures on `results`."""
    try:
        results.put(asyncio.run(_work(url, tokens, expected, ready, go)))
    except BaseException as e:  # the parent reports it; a worker must never hang it
        ready.put(f"worker failed: {e!r}")
        results.put({"error": repr(e)})


def frame(opcode: int, payload: bytes) -> bytes:
    """A client frame: FIN, masked (RFC 6455 §5.3)."""
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126:
        head += bytes([0x80 | n])
    elif n < 1 << 16:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload)) if n < 256 else \
        (int.from_bytes(payload, "big") ^ int.from_bytes((mask * (n // 4 + 1))[:n], "big")).to_bytes(n, "big")
    return head + mask + masked


class Client(asyncio.Protocol):
    def __init__(self, head: bytes, expected: int) -> None:
        self.head = head
        self.expected = expected
        self.transport: Optional[asyncio.Transport] = None
        self.buffer = bytearray()
        self.upgraded = False
        self.fragments = bytearray()
        self.seen: set = set()
        self.latencies: List[float] = []
        self.by_seq: List[Any] = []
        self.errors: List[str] = []
        self.bootstrapped: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self.finished: "asyncio.Future[None]" = asyncio.get_running_loop().create_future()
        self.closed = False

    # MARK: asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.transport.write(self.head)

    def connection_lost(self, exc: Optional[Exception]) -> None:
        if not self.closed:
            self.fail(f"connection lost: {exc!r}")
        self.closed = True
        if not self.finished.done():
            self.finished.set_result(None)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.upgraded:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            status = bytes(self.buffer[:end]).split(b"\r\n", 1)[0]
            if not status.startswith(b"HTTP/1.1 101"):
                self.fail(f"upgrade refused: {status!r}")
                return
            del self.buffer[:end + 4]
            self.upgraded = True
            self.send({"type": "bind", "session": 1, "mode": "flexible", "file": None,
                       "downloadCursor": 0, "schema": [TICK]})
            self.send({"type": "query", "session": 1, "version": 1, "queries": [
                {"name": "all", "class": "Tick", "query": "TRUEPREDICATE", "args": []}]})
        self.frames()

    # MARK: frames

    def frames(self) -> None:
        buf = self.buffer
        while len(buf) >= 2:
            b0, b1 = buf[0], buf[1]
            if b1 & 0x80 or b0 & 0x70:
                self.fail(f"a server frame masked or with reserved bits: {b0:#x} {b1:#x}")
                return
            n, at = b1 & 0x7F, 2
            if n == 126:
                if len(buf) < 4:
                    return
                n, at = struct.unpack_from("!H", buf, 2)[0], 4
            elif n == 127:
                if len(buf) < 10:
                    return
                n, at = struct.unpack_from("!Q", buf, 2)[0], 10
            if len(buf) < at + n:
                return
            payload = bytes(buf[at:at + n])
            del buf[:at + n]
            opcode = b0 & 0x0F
            if opcode == 0x9:
                self.transport.write(frame(0xA, payload))
            elif opcode == 0x8:
                code = struct.unpack_from("!H", payload)[0] if len(payload) >= 2 else None
                self.fail(f"closed by the server: {code} {payload[2:]!r}")
                self.closed = True
                self.transport.close()
                return
            elif opcode in (0x1, 0x0):
                self.fragments += payload
                if b0 & 0x80:
                    text = self.fragments.decode()
                    self.fragments = bytearray()
                    self.message(text)
            elif opcode != 0xA:
                self.fail(f"unexpected opcode {opcode}")

    def message(self, text: str) -> None:
        now = time.time()
        if text.startswith('{"type":"download"'):
            for seq, sent in STAMP.findall(text):
                n = int(seq)
                if n > 0 and n not in self.seen:
                    self.seen.add(n)
                    self.latencies.append(now - float(sent))
                    self.by_seq.append((n, now - float(sent)))
            if len(self.seen) >= self.expected and not self.finished.done():
                self.finished.set_result(None)
            return
        m = json.loads(text)
        if m["type"] == "queryComplete" and not self.bootstrapped.done():
            self.bootstrapped.set_result(None)
        elif m["type"] in ("error", "queryError"):
            self.fail(text)

    def send(self, value: Dict[str, Any]) -> None:
        self.transport.write(frame(0x1, json.dumps(value).encode()))

    def fail(self, why: str) -> None:
        self.errors.append(why)
        for f in (self.bootstrapped, self.finished):
            if not f.done():
                f.set_result(None)

    def close(self) -> None:
        if self.transport is not None and not self.closed:
            self.closed = True
            self.transport.write(frame(0x8, struct.pack("!H", 1000)))
            self.transport.close()


async def _work(url: str, tokens: List[str], expected: int, ready: Any, go: Any) -> Dict[str, Any]:
    loop = asyncio.get_running_loop()
    target = urlparse(url)
    gate = asyncio.Semaphore(50)
    clients: List[Client] = []

    async def connect(token: str) -> None:
        key = base64.b64encode(os.urandom(16)).decode()
        head = (f"GET {target.path} HTTP/1.1\r\nHost: {target.netloc}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                f"Sec-WebSocket-Protocol: {SUBPROTOCOL}\r\nAuthorization: Bearer {token}\r\n\r\n").encode()
        async with gate:
            _, client = await loop.create_connection(lambda: Client(head, expected),
                                                     target.hostname, target.port)
            clients.append(client)
            await asyncio.wait_for(client.bootstrapped, 120)
            if client.errors:
                raise RuntimeError(f"bootstrap failed: {client.errors[0]}")

    started = time.monotonic()
    await asyncio.gather(*(connect(t) for t in tokens))
    ready.put(f"ready {len(clients)} in {time.monotonic() - started:.1f} s")
    deadline = await loop.run_in_executor(None, go.get)
    cpu_before = time.process_time()
    await asyncio.wait([asyncio.ensure_future(asyncio.shield(c.finished)) for c in clients],
                       timeout=max(0.0, deadline - time.time()))
    cpu = time.process_time() - cpu_before
    for c in clients:
        c.close()
    await asyncio.sleep(0.2)
    worst: Dict[int, float] = {}
    for c in clients:
        for n, took in c.by_seq:
            if took > worst.get(n, 0.0):
                worst[n] = took
    return {"seen": [len(c.seen) for c in clients],
            "worst_by_change": worst,
            "latencies": [x for c in clients for x in c.latencies],
            "errors": [e for c in clients for e in c.errors][:20],
            "error_count": sum(len(c.errors) for c in clients),
            "cpu_seconds": cpu}
