"""Bad input over raw sockets, and the RFC corners a friendly client never reaches.

HTTP (RFC 9110/9112): malformed request lines, oversized heads and targets, unsupported versions,
Host rules, absolute-form targets, request smuggling shapes, Expect: 100-continue, slowloris.
WebSocket server (RFC 6455), after a handshake done by hand: masking, reserved opcodes and bits,
UTF-8 (also split across fragments), size limits, control-frame rules, close codes, truncated
frames. WebSocket client: our `atoll-net-peer client` against a raw server that misbehaves.

After every test the server still answers GET /health and a "bystander" WebSocket that stayed open
the whole time still echoes: one bad peer must not hurt anyone else.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from dataclasses import dataclass
from typing import Callable, List, Optional

import pytest

from conftest import (SLOW, Bystander, PeerServer, RawWebSocket, assert_serving, cpu_seconds, encode_frame, raw_request,
                      read_frame, read_reply, read_until, upgrade_request, wait_closed, wait_for, websocket_accept)

TEXT, BINARY, CLOSE, PING, PONG, CONTINUATION = 0x1, 0x2, 0x8, 0x9, 0xA, 0x0


@dataclass
class Limited:
    """A server with small limits (1 KB messages, 2 s header timeout) and its own bystander."""
    server: PeerServer
    bystander: Bystander


@pytest.fixture(scope="module")
def limited():
    peer = PeerServer("--max-message", 1024, "--header-timeout", 2)
    watcher = Bystander(peer)
    yield Limited(peer, watcher)
    watcher.close()
    peer.stop()


@pytest.fixture(autouse=True)
def server_keeps_serving(request, server: PeerServer, bystander: Bystander):
    """Checks before (the baseline) and after each test that the servers it used serve everyone else."""
    others = [request.getfixturevalue("limited")] if "limited" in request.fixturenames else []
    assert_serving(server, bystander)
    yield
    assert_serving(server, bystander)
    for other in others:
        assert_serving(other.server, other.bystander)


def assert_rejected(reply, status: int) -> None:
    """`status` with the JSON error body, and the connection closed after it."""
    assert reply.status == status, reply
    assert json.loads(reply.body)["status"] == status
    assert reply.headers.get("connection") == "close"
    assert reply.closed, "the server kept the connection open after rejecting the request"


# MARK: - HTTP


@pytest.mark.parametrize("data", [
    b"GARBAGE\r\n\r\n",
    b"GET\r\n\r\n",
    b"get /health HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /health HTTX/1.1\r\nHost: x\r\n\r\n",
    b"GET /he alth HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost: x\r\nX-Nul: a\x00b\r\n\r\n",
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(32) + b"\r\n\r\n",  # a TLS hello on plain HTTP
], ids=["garbage", "no-target", "lowercase-method", "bad-protocol", "space-in-target", "header-without-colon",
        "nul-in-header", "tls-hello"])
def test_malformed_request_is_400_and_closed(server: PeerServer, data: bytes) -> None:
    assert_rejected(raw_request(server, data), 400)


def test_oversized_header_is_431_and_closed(server: PeerServer) -> None:
    data = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n"
    assert_rejected(raw_request(server, data), 431)
    many = b"".join(b"X-%d: %s\r\n" % (i, b"b" * 100) for i in range(200))
    assert_rejected(raw_request(server, b"GET /health HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n"), 431)


def test_too_long_target_is_414_and_closed(server: PeerServer) -> None:
    reply = raw_request(server, b"GET /" + b"a" * 20_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
    assert_rejected(reply, 414)
    assert reply.reason == "URI Too Long", f"status line 'HTTP/1.1 414 {reply.reason}' (RFC 9110 15.5.15)"


@pytest.mark.parametrize("version", [b"HTTP/9.9", b"HTTP/2.0", b"HTTP/0.9"])
def test_unsupported_version_is_505_and_closed(server: PeerServer, version: bytes) -> None:
    assert_rejected(raw_request(server, b"GET /health " + version + b"\r\nHost: x\r\n\r\n"), 505)


def test_http11_without_host_is_400(server: PeerServer) -> None:
    assert_rejected(raw_request(server, b"GET /health HTTP/1.1\r\n\r\n"), 400)
    # HTTP/1.0 needs no Host.
    reply = raw_request(server, b"GET /health HTTP/1.0\r\n\r\n")
    assert reply.status == 200 and reply.closed


def test_two_host_headers_are_400(server: PeerServer) -> None:
    # RFC 9112 3.2: a server MUST respond 400 to a request with more than one Host field line.
    assert_rejected(raw_request(server, b"GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400)


def test_absolute_form_target_is_accepted(server: PeerServer) -> None:
    # RFC 9112 3.2.2: "a server MUST accept the absolute-form in requests".
    target = f"http://{server.host}:{server.port}/items/5".encode()
    reply = raw_request(server, b"GET " + target + b" HTTP/1.1\r\nHost: x\r\n\r\n", check_close=False)
    assert (reply.status, reply.body) == (200, b'{"id":"5"}'), reply


@pytest.mark.parametrize("headers", [
    b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
    b"Content-Length: 2\r\nContent-Length: 3\r\n",
    b"Transfer-Encoding: gzip\r\n",
], ids=["length-and-chunked", "two-lengths", "unknown-coding"])
def test_ambiguous_body_framing_is_400(server: PeerServer, headers: bytes) -> None:
    # Request smuggling shapes (RFC 9112 6.1, 6.3): refuse and close, never guess.
    data = b"POST /echo HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n0\r\n\r\n"
    assert_rejected(raw_request(server, data), 400)


def test_expect_100_continue_gets_an_interim_response(server: PeerServer) -> None:
    with socket.create_connection((server.host, server.port), timeout=5 * SLOW) as sock:
        sock.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 7\r\n\r\n")
        buffer = bytearray()
        head = read_until(sock, b"\r\n\r\n", buffer)
        assert head == b"HTTP/1.1 100 Continue"
        sock.sendall(b'[1,2,3]')
        reply = read_reply(sock, buffer)
        assert reply.status == 200 and json.loads(reply.body)["body"] == [1, 2, 3]


def test_pipelined_requests_are_answered_in_order(server: PeerServer) -> None:
    requests = b"".join(b"GET /items/%d HTTP/1.1\r\nHost: x\r\n\r\n" % i for i in range(5))
    with socket.create_connection((server.host, server.port), timeout=5 * SLOW) as sock:
        sock.sendall(requests + b"GET /slow?ms=50 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        buffer = bytearray()
        for i in range(5):
            assert json.loads(read_reply(sock, buffer).body) == {"id": str(i)}
        last = read_reply(sock, buffer)
        assert last.status == 200 and last.headers["connection"] == "close"
        assert wait_closed(sock, 2 * SLOW)


def test_slowloris_gets_408_and_is_closed(limited: Limited) -> None:
    # The head trickles in one byte every 0.5 s; the server allows 2 s for a whole head.
    server = limited.server
    with socket.create_connection((server.host, server.port), timeout=5 * SLOW) as sock:
        started = time.monotonic()
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        sock.settimeout(0.5)
        answer = b""
        for byte in b"X-Slow: " + b"z" * 40:
            try:
                answer = sock.recv(65536)
                break
            except socket.timeout:
                pass
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
        elapsed = time.monotonic() - started
        sock.settimeout(5 * SLOW)
        buffer = bytearray(answer)
        reply = read_reply(sock, buffer)
        assert reply.status == 408 and reply.headers.get("connection") == "close"
        assert 1.9 <= elapsed <= 5 * SLOW, f"408 after {elapsed:.2f} s with a 2 s header timeout"
        assert wait_closed(sock, 2 * SLOW)


def test_idle_keep_alive_connection_is_not_a_slowloris(limited: Limited) -> None:
    # Between requests a connection may sit idle: the header timeout starts with a request's first byte.
    server = limited.server
    with socket.create_connection((server.host, server.port), timeout=5 * SLOW) as sock:
        buffer = bytearray()
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_reply(sock, buffer).status == 200
        assert not wait_closed(sock, 2.5), "the idle connection was closed within 2.5 s"
        sock.settimeout(5 * SLOW)
        sock.sendall(b"GET /items/3 HTTP/1.1\r\nHost: x\r\n\r\n")
        assert read_reply(sock, buffer).body == b'{"id":"3"}'


# MARK: - WebSocket handshake


def test_bad_websocket_version_is_426_with_the_supported_version(server: PeerServer) -> None:
    reply = raw_request(server, upgrade_request(key="dGhlIHNhbXBsZSBub25jZQ==", version="8"))
    assert_rejected(reply, 426)
    assert reply.headers["sec-websocket-version"] == "13"


@pytest.mark.parametrize("key", [None, "", "dG9vIHNob3J0", "not base64 at all!!!!!!!"],
                         ids=["missing", "empty", "8-bytes", "not-base64"])
def test_missing_or_invalid_websocket_key_is_400(server: PeerServer, key: Optional[str]) -> None:
    assert_rejected(raw_request(server, upgrade_request(key=key)), 400)


def test_handshake_matches_rfc_6455_example(server: PeerServer) -> None:
    # RFC 6455 1.3: key "dGhlIHNhbXBsZSBub25jZQ==" -> accept "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=".
    assert websocket_accept("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    with socket.create_connection((server.host, server.port), timeout=5 * SLOW) as sock:
        sock.sendall(upgrade_request(key="dGhlIHNhbXBsZSBub25jZQ=="))
        head = read_until(sock, b"\r\n\r\n", bytearray()).decode()
        assert head.startswith("HTTP/1.1 101 Switching Protocols\r\n")
        assert "\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in head


# MARK: - WebSocket frames from a bad client


@pytest.fixture
def raw_ws(server: PeerServer):
    """Opens hand-made WebSockets on the shared server (closed after the test)."""
    sockets: List[RawWebSocket] = []

    def open_(path: str = "/ws/echo", on: Optional[PeerServer] = None, first_frames: bytes = b"") -> RawWebSocket:
        sockets.append(RawWebSocket(on or server, path, first_frames))
        return sockets[-1]

    yield open_
    for ws in sockets:
        ws.close()


@pytest.mark.parametrize("frame", [
    encode_frame(TEXT, b"unmasked", mask=False),
    encode_frame(0x3, b"reserved data opcode"),
    encode_frame(0xB, b"reserved control opcode"),
    encode_frame(TEXT, b"rsv1", rsv=0b100),
    encode_frame(TEXT, b"rsv2", rsv=0b010),
    encode_frame(TEXT, b"rsv3", rsv=0b001),
    encode_frame(CONTINUATION, b"continuation with nothing to continue"),
], ids=["unmasked", "opcode-3", "opcode-B", "rsv1", "rsv2", "rsv3", "lone-continuation"])
def test_protocol_violation_closes_with_1002(raw_ws, frame: bytes) -> None:
    ws = raw_ws()
    ws.send(frame)
    ws.expect_close(1002)


def test_new_message_inside_a_fragmented_one_closes_with_1002(raw_ws) -> None:
    ws = raw_ws()
    ws.send(encode_frame(TEXT, b"first half", fin=False) + encode_frame(TEXT, b"not a continuation"))
    ws.expect_close(1002)


@pytest.mark.parametrize("frame", [
    encode_frame(PING, b"x" * 126),
    encode_frame(PING, b"fragmented ping", fin=False),
    b"\x82\xfe\x00\x05" + bytes(4) + b"hello",         # 16-bit length for 5 bytes (not minimal)
    b"\x82\xff\x80" + bytes(7) + bytes(4),               # 64-bit length with the top bit set
], ids=["ping-over-125-bytes", "fragmented-ping", "non-minimal-length", "length-top-bit"])
def test_malformed_frame_fails_the_connection(raw_ws, frame: bytes) -> None:
    # RFC 6455 5.2, 5.5, 7.1.7: fail the connection; a close frame (1002) is optional.
    ws = raw_ws()
    ws.send(frame)
    ws.sock.settimeout(5 * SLOW)
    try:
        reply = ws.read_frame()
    except (AssertionError, ConnectionResetError):  # closed without a close frame
        return
    assert reply.opcode == CLOSE and reply.close_code == 1002, reply
    assert wait_closed(ws.sock, 5 * SLOW)


@pytest.mark.parametrize("frames", [
    [encode_frame(TEXT, b"\xff\xfe")],
    [encode_frame(TEXT, "café".encode()[:-1])],                              # cut inside a character
    [encode_frame(TEXT, b"ok \xc3", fin=False), encode_frame(CONTINUATION, b"\x28")],  # bad across frames
    [encode_frame(TEXT, b"\xed\xa0\x80")],                                      # a UTF-16 surrogate
    [encode_frame(TEXT, b"\xf4\x90\x80\x80")],                                  # over U+10FFFF
    [encode_frame(CLOSE, struct.pack("!H", 1000) + b"\xff")],                   # close reason
], ids=["ff-fe", "truncated", "split-invalid", "surrogate", "too-large", "close-reason"])
def test_invalid_utf8_closes_with_1007(raw_ws, frames: List[bytes]) -> None:
    ws = raw_ws()
    ws.send(b"".join(frames))
    ws.expect_close(1007)


def test_utf8_split_across_fragments_is_echoed(raw_ws) -> None:
    ws = raw_ws()
    text = "café ✓ 🌍".encode()
    # Cut inside "é", inside "✓" and inside "🌍": each frame alone is not UTF-8, the message is.
    cuts = [4, 8, 13, len(text)]
    pieces = [text[a:b] for a, b in zip([0] + cuts, cuts)]
    ws.send(b"".join(encode_frame(TEXT if i == 0 else CONTINUATION, piece, fin=i == len(pieces) - 1)
                     for i, piece in enumerate(pieces)))
    assert ws.read_message() == (TEXT, text)


def test_ping_between_fragments_is_answered_first(raw_ws) -> None:
    # RFC 6455 5.4: control frames may come in the middle of a fragmented message.
    ws = raw_ws()
    ws.send(encode_frame(TEXT, b"caf\xc3", fin=False) + encode_frame(PING, b"mid")
            + encode_frame(CONTINUATION, b"\xa9"))
    pong = ws.read_frame()
    assert (pong.opcode, pong.payload) == (PONG, b"mid")
    assert ws.read_message() == (TEXT, "café".encode())


def test_ping_is_answered_with_the_same_payload(raw_ws) -> None:
    ws = raw_ws()
    for payload in (b"", b"abc", bytes(range(125))):
        ws.send_frame(PING, payload)
        pong = ws.read_frame()
        assert (pong.opcode, pong.payload) == (PONG, payload)


def test_frames_sent_with_the_upgrade_request_are_not_lost(raw_ws) -> None:
    ws = raw_ws(first_frames=encode_frame(TEXT, b"right behind the head") + encode_frame(BINARY, b"\x00\x01"))
    assert ws.read_message() == (TEXT, b"right behind the head")
    assert ws.read_message() == (BINARY, b"\x00\x01")


def test_message_over_max_message_closes_with_1009(raw_ws, limited: Limited) -> None:
    ws = raw_ws(on=limited.server)
    ws.send_frame(BINARY, b"x" * 1024)  # at the limit: fine
    assert ws.read_message() == (BINARY, b"x" * 1024)
    ws.send_frame(BINARY, b"x" * 1025)
    ws.expect_close(1009)


def test_fragmented_message_over_max_message_closes_with_1009(raw_ws, limited: Limited) -> None:
    ws = raw_ws(on=limited.server)
    ws.send(encode_frame(TEXT, b"a" * 600, fin=False) + encode_frame(CONTINUATION, b"b" * 600))
    ws.expect_close(1009)


def test_server_pings_an_idle_client(start_server) -> None:
    # --ping-interval: a connection quiet for that long gets a ping. The echo route reports each pong
    # it gets as the text "pong:PAYLOAD".
    peer = start_server("--ping-interval", 0.3)
    ws = RawWebSocket(peer)
    try:
        started = time.monotonic()
        ping = ws.read_frame()
        assert ping.opcode == PING and time.monotonic() - started < 3 * SLOW, ping
        ws.send_frame(PONG, ping.payload)
        ws.send_frame(TEXT, b"after the ping")
        texts = []
        while not texts or texts[-1] != b"after the ping":
            frame = ws.read_frame()
            if frame.opcode == PING:  # another round may start meanwhile
                ws.send_frame(PONG, frame.payload)
            else:
                assert frame.opcode == TEXT, frame
                texts.append(frame.payload)
        assert b"pong:" + ping.payload in texts
    finally:
        ws.close()


@pytest.mark.parametrize("code", [1000, 1001, 1003, 1007, 1011, 3000, 3999, 4000, 4999])
def test_valid_close_code_is_echoed(raw_ws, code: int) -> None:
    ws = raw_ws()
    ws.send_frame(CLOSE, struct.pack("!H", code) + b"done")
    ws.expect_close(code)


@pytest.mark.parametrize("code", [0, 999, 1004, 1005, 1006, 1016, 2999, 5000, 65535])
def test_invalid_close_code_closes_with_1002(raw_ws, code: int) -> None:
    # RFC 6455 7.4: 1004-1006 and 1015 must not be sent; under 1000 and over 4999 are not codes.
    ws = raw_ws()
    ws.send_frame(CLOSE, struct.pack("!H", code))
    ws.expect_close(1002)


def test_close_without_a_body_is_answered(raw_ws) -> None:
    ws = raw_ws()
    ws.send_frame(CLOSE)
    reply = ws.read_frame()
    assert reply.opcode == CLOSE and reply.close_code in (None, 1000), reply
    assert wait_closed(ws.sock, 5 * SLOW)


def test_close_with_a_one_byte_body_closes_with_1002(raw_ws) -> None:
    # RFC 6455 5.5.1: a close body starts with a 2-byte code; 1 byte is a protocol error, which
    # fails the connection (1002, or no close frame at all) rather than closing it normally.
    ws = raw_ws()
    ws.send_frame(CLOSE, b"\x03")
    ws.sock.settimeout(5 * SLOW)
    try:
        reply = ws.read_frame()
    except (AssertionError, ConnectionResetError):  # dropped without a close frame: acceptable
        return
    assert reply.opcode == CLOSE and reply.close_code == 1002, \
        f"answered a 1-byte close body with close code {reply.close_code} (payload {reply.payload!r})"


@pytest.mark.parametrize("cut", [1, 5, 100], ids=["in-header", "in-mask", "in-payload"])
def test_truncated_frame_then_hang_up(server: PeerServer, raw_ws, cut: int) -> None:
    before = server.stats()["websockets"]
    ws = raw_ws()
    wait_for(lambda: server.stats()["websockets"] == before + 1, 5 * SLOW, "the server to count the WebSocket")
    ws.send(encode_frame(BINARY, b"y" * 1000)[:cut])
    ws.sock.shutdown(socket.SHUT_RDWR)
    ws.close()
    wait_for(lambda: server.stats()["websockets"] == before, 5 * SLOW, "the server to drop the half-sent WebSocket")


# MARK: - our WebSocket client against a bad server


class RawServer:
    """Accepts one connection, reads the upgrade request and answers with `respond(key)` (the
    response bytes, frames may follow); then keeps what the client sends until it hangs up."""

    def __init__(self, respond: Callable[[str], bytes]) -> None:
        self.respond = respond
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = self.listener.getsockname()[1]
        self.received = bytearray()
        self.done = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        try:
            conn, _ = self.listener.accept()
            with conn:
                conn.settimeout(10 * SLOW)
                buffer = bytearray()
                head = read_until(conn, b"\r\n\r\n", buffer).decode()
                key = next(line.split(":", 1)[1].strip() for line in head.split("\r\n")
                           if line.lower().startswith("sec-websocket-key:"))
                conn.sendall(self.respond(key))
                self.received += buffer
                while chunk := conn.recv(65536):
                    self.received += chunk
        except OSError:
            pass
        finally:
            self.done.set()

    def client_frames(self) -> List:
        """The frames our client sent after the handshake (waits for it to hang up)."""
        assert self.done.wait(10 * SLOW), "the client did not hang up"
        frames, buffer = [], bytearray(self.received)
        while buffer:
            frames.append(read_frame(NothingMore(), buffer))
        return frames

    def close(self) -> None:
        self.listener.close()


class NothingMore:
    """A socket stand-in for `read_frame` on bytes already received: a frame cut short fails."""

    def recv(self, size: int) -> bytes:
        return b""


def switching(key: str, *extra: str, connection: bool = True, accept: Optional[str] = None) -> bytes:
    lines = ["HTTP/1.1 101 Switching Protocols", "Upgrade: websocket"]
    if connection:
        lines.append("Connection: Upgrade")
    lines.append(f"Sec-WebSocket-Accept: {accept or websocket_accept(key)}")
    return ("\r\n".join([*lines, *extra]) + "\r\n\r\n").encode()


@pytest.fixture
def raw_server():
    servers: List[RawServer] = []

    def start(respond: Callable[[str], bytes]) -> RawServer:
        servers.append(RawServer(respond))
        return servers[-1]

    yield start
    for started in servers:
        started.close()


@pytest.mark.parametrize("respond, expected", [
    (lambda key: switching(key, accept="AAAAAAAAAAAAAAAAAAAAAAAAAAA="), "not a valid websocket handshake"),
    (lambda key: b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nno", "refused with http 200"),
    (lambda key: switching(key, "Sec-WebSocket-Extensions: permessage-deflate"), "extension"),
    (lambda key: switching(key, "Sec-WebSocket-Protocol: never.offered"), "subprotocol"),
    (lambda key: switching(key, connection=False), ""),  # RFC 6455 4.1: no "Connection: Upgrade"
    (lambda key: b"this is not HTTP at all\r\n\r\n", "bad http response"),
], ids=["wrong-accept", "status-200", "extension-not-offered", "subprotocol-not-offered",
        "no-connection-upgrade", "not-http"])
def test_client_refuses_a_bad_handshake(raw_server, peer_client, respond, expected: str) -> None:
    bad = raw_server(respond)
    client = peer_client(f"ws://127.0.0.1:{bad.port}/", "--connect-timeout", 5)
    event = client.event()
    assert event["event"] == "error", f"the client accepted the handshake: {event}"
    assert expected in event["message"].lower()
    assert client.wait() == 2


@pytest.mark.parametrize("frame, code", [
    (encode_frame(TEXT, b"masked by the server", mask=True), 1002),
    (encode_frame(TEXT, b"\xff\xfe", mask=False), 1007),
    (encode_frame(0x3, b"reserved", mask=False), 1002),
], ids=["masked", "invalid-utf8", "reserved-opcode"])
def test_client_fails_on_a_bad_frame(raw_server, peer_client, frame: bytes, code: int) -> None:
    bad = raw_server(lambda key: switching(key) + frame)
    client = peer_client(f"ws://127.0.0.1:{bad.port}/")
    client.expect("open")
    closed = client.expect("closed")
    assert closed["code"] in (code, 1006), closed
    frames = bad.client_frames()
    assert frames and frames[-1].opcode == CLOSE and frames[-1].close_code == code, frames
    assert all(f.masked for f in frames), "client frames must be masked (RFC 6455 5.3)"
    assert client.wait() == 0


def test_a_client_reset_while_its_request_is_handled_does_not_spin(start_server) -> None:
    # While a handler runs the connection does not read; a reset then shows as EPOLLHUP/EPOLLERR,
    # which epoll reports whatever the interest: the server must close, not wake up without end.
    server = start_server()
    sock = socket.create_connection((server.host, server.port), timeout=5 * SLOW)
    sock.sendall(b"GET /slow?ms=2000 HTTP/1.1\r\nHost: x\r\n\r\n")
    time.sleep(0.2)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    time.sleep(0.2)
    before = cpu_seconds(server.process.pid)
    time.sleep(1.0)
    used = cpu_seconds(server.process.pid) - before
    assert used < 0.3, f"the server used {used:.2f} s of CPU in 1 s after a client reset during a handler"
    assert_serving(server)
