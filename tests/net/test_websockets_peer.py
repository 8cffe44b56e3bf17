"""Python's websockets against AtollNet, both ways.

First half: websockets as the CLIENT of our server (`atoll-net-peer serve`, /ws/echo and /ws/strict):
echo at the frame-length boundaries up to 16 MB, fragments both ways, pings both ways, close codes
both ways, subprotocols, compression offered and declined, 200 connections at once, and the
graceful shutdown (1001).

Second half: websockets as the SERVER for our client (`atoll-net-peer client`): the same checks
from the other side, plus connect failures (closed port, a server that never answers the upgrade).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import socket
import threading
import time
from typing import Any

import pytest
from websockets.asyncio.client import connect as async_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from conftest import SLOW, PeerServer, free_port, sha256, text_of_size, wait_for

SIZES = [0, 1, 125, 126, 65535, 65536, 1 << 20, 16 << 20]


def open_ws(server: PeerServer, path: str = "/ws/echo", **options: Any):
    """A websockets sync client on our server (no proxy, no size limit, no keepalive pings)."""
    options.setdefault("max_size", None)
    return connect(server.ws_url(path), proxy=None, open_timeout=10 * SLOW, ping_interval=None, **options)


# MARK: - websockets as the client of our server


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", ["text", "binary"])
def test_echo_at_every_length_boundary(server: PeerServer, kind: str, size: int) -> None:
    # 125/126 and 65535/65536 are where the frame header switches to 16- and 64-bit lengths.
    message = text_of_size(size) if kind == "text" else os.urandom(size)
    with open_ws(server) as ws:
        ws.send(message)
        echoed = ws.recv(timeout=30 * SLOW)
    assert type(echoed) is type(message)
    assert len(echoed) == len(message) and echoed == message


def test_fragmented_messages_from_the_client_are_reassembled(server: PeerServer) -> None:
    with open_ws(server) as ws:
        ws.send(["Hello, ", "fragmented ", "wörld ✓"])  # an iterable: one frame per item
        assert ws.recv(timeout=5 * SLOW) == "Hello, fragmented wörld ✓"
        parts = [b"\x00\x01", b"", os.urandom(70_000), b"\xff"]
        ws.send(parts)
        assert ws.recv(timeout=5 * SLOW) == b"".join(parts)


def test_fragments_sent_by_the_server_are_reassembled(server: PeerServer) -> None:
    text = "abcdefghijklmnopqrstuvwxy"  # 25 bytes -> 5 frames of 5
    with open_ws(server) as ws:
        ws.send(f"fragments:5:{text}")
        frames = list(ws.recv_streaming())  # one item per frame
        assert frames == [text[i:i + 5] for i in range(0, 25, 5)]
        ws.send(f"fragments:3:{text}")
        assert ws.recv(timeout=5 * SLOW) == text


def test_client_ping_is_answered_with_a_pong(server: PeerServer) -> None:
    with open_ws(server) as ws:
        for payload in (b"", b"hello", os.urandom(125)):
            assert ws.ping(payload).wait(5 * SLOW), f"no pong for a ping with {len(payload)} bytes"
        ws.send("after the pings")
        assert ws.recv(timeout=5 * SLOW) == "after the pings"


def test_server_ping_is_answered_by_the_client(server: PeerServer) -> None:
    with open_ws(server) as ws:
        ws.send("ping:x")  # the server pings with "x" and reports the pong as text
        assert ws.recv(timeout=5 * SLOW) == "pong:x"
        ws.send("ping:payload ✓")
        assert ws.recv(timeout=5 * SLOW) == "pong:payload ✓"


def test_client_close_code_is_answered(server: PeerServer) -> None:
    with open_ws(server) as ws:
        ws.close(4000, "client done")
    # RFC 6455 5.5.1: the answering close frame typically echoes the code.
    assert ws.protocol.close_sent.code == 4000
    assert ws.close_code == 4000, f"server answered close 4000 with {ws.close_code} {ws.close_reason!r}"


def test_server_close_code_reaches_the_client(server: PeerServer) -> None:
    with open_ws(server) as ws:
        ws.send("close:4001:bye")
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=5 * SLOW)
        assert (ws.close_code, ws.close_reason) == (4001, "bye")


def test_strict_route_negotiates_its_subprotocol(server: PeerServer) -> None:
    with open_ws(server, "/ws/strict", subprotocols=["other.v9", "atoll.v1"]) as ws:
        assert ws.subprotocol == "atoll.v1"
        ws.send("strict")
        assert ws.recv(timeout=5 * SLOW) == "strict"


@pytest.mark.parametrize("offered", [None, ["other.v9"]])
def test_strict_route_refuses_a_client_without_its_subprotocol(server: PeerServer, offered: Any) -> None:
    with pytest.raises(InvalidStatus) as refused:
        open_ws(server, "/ws/strict", subprotocols=offered)
    assert refused.value.response.status_code == 400


def test_echo_route_without_subprotocol(server: PeerServer) -> None:
    with open_ws(server) as ws:
        assert ws.subprotocol is None
        assert "sec-websocket-protocol" not in {k.lower() for k in ws.response.headers}


def test_echo_route_offers_its_documented_optional_subprotocols(server: PeerServer) -> None:
    # tests/net/peer/main.swift documents "WS /ws/echo  subprotocols echo.v2, echo.v1 (optional)".
    with open_ws(server, subprotocols=["echo.v1"]) as ws:
        assert ws.subprotocol == "echo.v1"


def test_offered_compression_is_declined_and_messages_still_flow(server: PeerServer) -> None:
    with open_ws(server, compression="deflate") as ws:
        assert "Sec-WebSocket-Extensions" in ws.request.headers  # the offer went out
        assert "Sec-WebSocket-Extensions" not in ws.response.headers
        assert ws.protocol.extensions == []
        compressible = "all work and no play " * 10_000
        ws.send(compressible)
        assert ws.recv(timeout=5 * SLOW) == compressible


def test_many_concurrent_connections_each_echo(server: PeerServer) -> None:
    count = 200

    async def one(index: int) -> None:
        async with async_connect(server.ws_url(), proxy=None, open_timeout=30 * SLOW, ping_interval=None) as ws:
            for round in range(3):
                message = f"connection {index} round {round}"
                await ws.send(message)
                assert await ws.recv() == message
            await ws.send(os.urandom(1000 + index))
            assert len(await ws.recv()) == 1000 + index

    async def run_all() -> None:
        await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(count))), 60 * SLOW)

    before = server.stats()["websockets"]
    asyncio.run(run_all())
    # Every one of them closed on the server side too (nothing leaks).
    wait_for(lambda: server.stats()["websockets"] == before, 10 * SLOW, "the 200 WebSockets to be closed")


def test_graceful_shutdown_closes_websockets_with_1001(start_server) -> None:
    peer = start_server()

    async def scenario() -> None:
        clients = [await async_connect(peer.ws_url(), proxy=None, ping_interval=None) for _ in range(3)]
        for ws in clients:
            await ws.send("before shutdown")
            assert await ws.recv() == "before shutdown"
        peer.terminate()
        for ws in clients:
            with pytest.raises(ConnectionClosed):
                await asyncio.wait_for(ws.recv(), 10 * SLOW)
            assert ws.close_code == 1001, f"closed with {ws.close_code} {ws.close_reason!r}"

    asyncio.run(scenario())
    peer.wait_stopped()


def test_graceful_shutdown_lets_a_request_in_progress_finish(start_server) -> None:
    peer = start_server()
    connection = http.client.HTTPConnection(peer.host, peer.port, timeout=10 * SLOW)
    connection.request("GET", "/slow?ms=800")
    peer.wait_for_requests(1)  # the slow one is being handled
    peer.terminate()
    response = connection.getresponse()
    assert response.status == 200 and json.loads(response.read()) == {"slept_ms": 800}
    connection.close()
    peer.wait_stopped()


# MARK: - websockets as the server of our client


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", ["text", "binary"])
def test_client_echo_at_every_length_boundary(ws_server, peer_client, kind: str, size: int) -> None:
    python = ws_server()
    client = peer_client(python.url())
    assert client.expect("open")["subprotocol"] is None
    byte = 0x61 if kind == "text" else 0xA5
    client.send(repeat=byte, size=size, type=kind)
    event = client.expect(kind, timeout=30)
    assert event["length"] == size
    assert event["sha256"] == sha256(bytes([byte]) * size)
    if size <= 1024:
        assert event["data"] == (chr(byte) * size if kind == "text" else bytes([byte] * size).hex())
    client.send(close=1000)
    assert client.expect("closed")["code"] == 1000
    assert client.wait() == 0


def test_client_exact_text_and_binary(ws_server, peer_client) -> None:
    client = peer_client(ws_server().url())
    client.expect("open")
    client.send(text="héllo wörld ✓ 🌍")
    assert client.expect("text")["data"] == "héllo wörld ✓ 🌍"
    payload = bytes(range(256))
    client.send(binary_hex=payload.hex())
    event = client.expect("binary")
    assert event["data"] == payload.hex() and event["sha256"] == sha256(payload)


@pytest.mark.parametrize("kind", ["text", "binary"])
def test_client_sends_fragments(ws_server, peer_client, kind: str) -> None:
    # The websockets server reads the message frame by frame and reports how many frames it got.
    client = peer_client(ws_server().url("/fragments"))
    client.expect("open")
    parts = ["frag", "ment", "ed ✓"]
    client.send(fragments=parts, type=kind)
    report = json.loads(client.expect("text")["data"])
    joined = "".join(parts)
    assert report == {"count": 3, "type": kind,
                      "joined": joined if kind == "text" else joined.encode().hex()}


def test_client_ping_gets_a_pong(ws_server, peer_client) -> None:
    client = peer_client(ws_server().url())
    client.expect("open")
    client.send(ping="are you there")
    assert client.expect("pong")["data"] == b"are you there".hex()
    client.send(text="still open")
    assert client.expect("text")["data"] == "still open"


def test_client_close_code_reaches_the_server(ws_server, peer_client) -> None:
    python = ws_server()
    client = peer_client(python.url())
    client.expect("open")
    client.send(close=4000, reason="client done")
    closed = client.expect("closed")
    received, sent = python.closes.get(timeout=5 * SLOW)
    assert received == (4000, "client done")
    assert (closed["code"], closed["reason"]) == sent
    assert client.wait() == 0


def test_client_gets_the_close_code_of_the_server(ws_server, peer_client) -> None:
    python = ws_server()
    client = peer_client(python.url())
    client.expect("open")
    client.send(text="close-me")
    closed = client.expect("closed")
    assert (closed["code"], closed["reason"]) == (4002, "server says bye")
    received, _ = python.closes.get(timeout=5 * SLOW)
    assert received is not None and received[0] == 4002, f"our client answered the close with {received}"
    assert client.wait() == 0


def test_client_takes_the_subprotocol_the_server_chose(ws_server, peer_client) -> None:
    python = ws_server(subprotocols=["b.v2", "a.v1"])  # the server prefers b.v2
    client = peer_client(python.url(), "--subprotocol", "a.v1", "--subprotocol", "b.v2")
    assert client.expect("open")["subprotocol"] == "b.v2"
    assert python.subprotocols_chosen.get(timeout=5) == "b.v2"
    client.send(text="with b.v2")
    assert client.expect("text")["data"] == "with b.v2"


def test_client_refused_without_a_common_subprotocol(ws_server, peer_client) -> None:
    client = peer_client(ws_server(subprotocols=["b.v2"]).url(), "--subprotocol", "z.v0")
    assert "400" in client.expect("error")["message"]
    assert client.wait() == 2


def test_client_to_a_closed_port_reports_an_error(peer_client) -> None:
    client = peer_client(f"ws://127.0.0.1:{free_port()}/")
    assert "refused" in client.expect("error")["message"].lower()
    assert client.wait() == 2


def test_client_connect_timeout_when_the_upgrade_is_never_answered(peer_client) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted = []
    # Accepts, reads nothing and never writes.
    threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True).start()
    try:
        started = time.monotonic()
        client = peer_client(f"ws://127.0.0.1:{listener.getsockname()[1]}/", "--connect-timeout", "1")
        message = client.expect("error", timeout=10)["message"]
        elapsed = time.monotonic() - started
        assert "timed out" in message.lower(), message
        assert 0.9 <= elapsed < 5 * SLOW, f"gave up after {elapsed:.2f} s"
        assert client.wait() == 2
        assert accepted, "the client never connected"
    finally:
        for sock in accepted:
            sock.close()
        listener.close()


def test_client_prints_events_while_it_waits_for_a_command(ws_server, peer_client) -> None:
    # The echoes come 0.2 s late, when the client's command thread is
    # surely idle in readLine() again: that is how any interactive user drives the client.
    client = peer_client(ws_server().url("/later"))
    client.expect("open")
    for index in range(5):
        client.send(text=f"message {index}")
        assert client.expect("text", timeout=5)["data"] == f"message {index}"
