"""TLS (https and wss) with a self-signed certificate made by the openssl command.

Our server with curl, Python's websockets and our own clients; our WebSocket client against a
Python websockets wss server; and verification failures (no trusted root, wrong host name), which
must fail cleanly while the server keeps serving.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import struct
import subprocess
import time
from pathlib import Path
from typing import Tuple

import pytest
from websockets.sync.client import connect

from conftest import SLOW, Bystander, PeerServer, cpu_seconds, http_request, peer_http, sha256, wait_for


def make_certificate(directory: Path, name: str, san: str) -> Tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key),
                    "-out", str(cert), "-subj", f"/CN={name}", "-addext", f"subjectAltName={san}", "-days", "1"],
                   check=True, capture_output=True, timeout=60)
    return cert, key


@pytest.fixture(scope="module")
def certificate(tmp_path_factory) -> Tuple[Path, Path]:
    """A self-signed certificate for localhost and 127.0.0.1, and its key."""
    return make_certificate(tmp_path_factory.mktemp("tls"), "localhost", "IP:127.0.0.1,DNS:localhost")


@pytest.fixture(scope="module")
def trusting(certificate) -> ssl.SSLContext:
    """A client context that trusts (only) the certificate."""
    return ssl.create_default_context(cafile=str(certificate[0]))


@pytest.fixture(scope="module")
def tls_server(certificate):
    peer = PeerServer("--tls-cert", certificate[0], "--tls-key", certificate[1])
    yield peer
    peer.stop()


@pytest.fixture
def tls_bystander(tls_server: PeerServer, trusting: ssl.SSLContext):
    """A wss connection open during the test, checked by `assert_serving_tls`."""
    watcher = Bystander(tls_server, trusting)
    yield watcher
    watcher.close()


def server_context(certificate) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(certificate[0]), str(certificate[1]))
    return context


def curl(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(["curl", "-sS", "--noproxy", "*", "--max-time", str(20 * SLOW), *map(str, args)],
                          capture_output=True, text=True, timeout=30 * SLOW)


# MARK: - our TLS server


def test_first_line_says_https(tls_server: PeerServer) -> None:
    assert tls_server.stdout[0] == f"listening on https://127.0.0.1:{tls_server.port}"
    assert tls_server.ws_url().startswith("wss://")


def test_curl_with_the_certificate(tls_server: PeerServer, certificate) -> None:
    done = curl("--cacert", certificate[0], "-w", "[%{http_code} %{ssl_verify_result}]", f"{tls_server.url}/health")
    assert done.returncode == 0, done.stderr
    assert done.stdout == '{"ok":true}[200 0]'
    # By name too (the certificate's DNS name).
    done = curl("--cacert", certificate[0], "--resolve", f"localhost:{tls_server.port}:127.0.0.1",
                f"https://localhost:{tls_server.port}/items/1")
    assert done.returncode == 0 and done.stdout == '{"id":"1"}', done.stderr


def test_curl_without_the_certificate_fails_verification(tls_server: PeerServer, tls_bystander: Bystander,
                                                         trusting: ssl.SSLContext) -> None:
    done = curl(f"{tls_server.url}/health")
    assert done.returncode == 60, (done.returncode, done.stderr)  # CURLE_PEER_FAILED_VERIFICATION
    assert "certificate" in done.stderr.lower()
    assert_serving_tls(tls_server, tls_bystander, trusting)


def test_websockets_wss_client_echoes(tls_server: PeerServer, trusting: ssl.SSLContext) -> None:
    with connect(tls_server.ws_url(), ssl=trusting, proxy=None, max_size=None, ping_interval=None) as ws:
        assert ws.socket.version() in ("TLSv1.2", "TLSv1.3")
        ws.send("over TLS ✓")
        assert ws.recv(timeout=5 * SLOW) == "over TLS ✓"
        payload = os.urandom(1 << 20)
        ws.send(payload)
        assert ws.recv(timeout=10 * SLOW) == payload
        ws.send("fragments:4:abcdefgh")
        assert ws.recv(timeout=5 * SLOW) == "abcdefgh"


def test_python_https_client(tls_server: PeerServer, trusting: ssl.SSLContext) -> None:
    body = json.dumps({"secure": True}).encode()
    status, _, reply = http_request(tls_server, "POST", "/echo", body, {"Content-Type": "application/json"},
                                    ssl_context=trusting)
    assert status == 200 and json.loads(reply)["body"] == {"secure": True}


def test_our_http_client_with_the_certificate(tls_server: PeerServer, certificate) -> None:
    status, reply = peer_http("GET", f"{tls_server.url}/health", "--ca", certificate[0])
    assert status == 0 and reply["status"] == 200 and json.loads(reply["body"]) == {"ok": True}


def test_our_http_client_without_the_certificate_fails(tls_server: PeerServer) -> None:
    status, reply = peer_http("GET", f"{tls_server.url}/health")
    assert status == 2 and "certificate" in reply["error"].lower(), reply


def test_our_client_against_our_tls_server(tls_server: PeerServer, certificate, peer_client) -> None:
    client = peer_client(tls_server.ws_url(), "--ca", certificate[0])
    client.expect("open")
    client.send(repeat=0x42, size=1 << 20, type="binary")
    event = client.expect("binary", timeout=20)
    assert event["length"] == 1 << 20 and event["sha256"] == sha256(b"B" * (1 << 20))
    client.send(close=1000, reason="bye")
    assert client.expect("closed")["code"] == 1000
    assert client.wait() == 0


def test_our_client_without_the_certificate_fails(tls_server: PeerServer, tls_bystander: Bystander,
                                                  trusting: ssl.SSLContext, peer_client) -> None:
    client = peer_client(tls_server.ws_url())
    event = client.expect("error")
    assert "certificate" in event["message"].lower(), event
    assert client.wait() == 2
    assert_serving_tls(tls_server, tls_bystander, trusting)


def test_plain_http_on_the_tls_port_is_dropped(tls_server: PeerServer, tls_bystander: Bystander,
                                               trusting: ssl.SSLContext) -> None:
    with socket.create_connection((tls_server.host, tls_server.port), timeout=5 * SLOW) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        try:
            answer = sock.recv(65536)
        except ConnectionResetError:
            answer = b""
        assert not answer.startswith(b"HTTP/1.1 200"), answer
    assert_serving_tls(tls_server, tls_bystander, trusting)


def test_a_client_that_hangs_up_during_the_handshake_harms_no_one(tls_server: PeerServer, tls_bystander: Bystander,
                                                                   trusting: ssl.SSLContext) -> None:
    # The smallest bad TLS peer: connect, send nothing, close (a port check, a load balancer probe).
    socket.create_connection((tls_server.host, tls_server.port), timeout=5 * SLOW).close()
    status, _, _ = http_request(tls_server, "GET", "/stats", ssl_context=trusting)  # the server saw it
    assert status == 200
    assert_serving_tls(tls_server, tls_bystander, trusting)


@pytest.mark.parametrize("secure", [False, True], ids=["plain", "tls"])
def test_a_client_that_resets_at_once_does_not_kill_the_server(start_server, certificate,
                                                              trusting: ssl.SSLContext, secure: bool) -> None:
    # The client finishes its side of the handshake, sends a request and resets the connection
    # (RST) at once: the server's next write fails, which must end that connection, not the process.
    options = ["--tls-cert", certificate[0], "--tls-key", certificate[1]] if secure else []
    peer = start_server(*options)
    context = trusting if secure else None
    for _ in range(3):
        raw = socket.create_connection((peer.host, peer.port), timeout=5 * SLOW)
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close() sends RST
        sock = context.wrap_socket(raw, server_hostname="127.0.0.1") if context else raw
        sock.sendall(b"GET /slow?ms=100 HTTP/1.1\r\nHost: x\r\n\r\n")
        sock.close()
        # Only the /stats connection asking is left once the server dropped the reset one.
        wait_for(lambda: dropped_or_dead(peer, context), 5 * SLOW, "the server to drop the reset connection")
        if not peer.running:
            peer.stopped = True  # reported here; the fixture need not report the exit again
            pytest.fail(f"the server died (status {peer.process.returncode}; -13 is SIGPIPE)")


def dropped_or_dead(server: PeerServer, context) -> bool:
    """True when only the asking /stats connection is open, or when the server is gone."""
    try:
        return peer_stats(server, context)["connections"] == 1
    except OSError:  # refused or cut off (ssl.SSLError is an OSError): dead or dying
        return not server.running


def test_a_stalled_tls_handshake_does_not_spin(tls_server: PeerServer) -> None:
    # A client that sends the first bytes of a ClientHello and then nothing (a slow or hostile peer)
    # must cost nothing while the server waits for the rest.
    with socket.create_connection((tls_server.host, tls_server.port), timeout=5 * SLOW) as sock:
        sock.sendall(b"\x16\x03\x01")
        time.sleep(0.2)  # let the server read them
        before = cpu_seconds(tls_server.process.pid)
        time.sleep(1.0)  # the measured interval
        used = cpu_seconds(tls_server.process.pid) - before
    assert used < 0.3, f"the server used {used:.2f} s of CPU in 1 s while a TLS handshake waited"


def peer_stats(server: PeerServer, context) -> dict:
    status, _, body = http_request(server, "GET", "/stats", ssl_context=context)
    assert status == 200
    return json.loads(body)


def assert_serving_tls(server: PeerServer, bystander: Bystander, context: ssl.SSLContext) -> None:
    """The TLS server answers, and the wss bystander that was open the whole time still echoes."""
    bystander.assert_echoes()
    status, _, body = http_request(server, "GET", "/health", ssl_context=context)
    assert (status, body) == (200, b'{"ok":true}')


# MARK: - our client against Python's websockets over TLS


def test_our_client_against_a_websockets_wss_server(certificate, ws_server, peer_client) -> None:
    python = ws_server(ssl_context=server_context(certificate))
    client = peer_client(python.url(), "--ca", certificate[0])
    client.expect("open")
    client.send(text="wss ✓")
    assert client.expect("text")["data"] == "wss ✓"
    client.send(repeat=0x5A, size=1 << 20, type="binary")
    event = client.expect("binary", timeout=20)
    assert event["length"] == 1 << 20 and event["sha256"] == sha256(b"Z" * (1 << 20))
    client.send(close=4000, reason="done")
    assert client.expect("closed")["code"] == 4000
    assert python.closes.get(timeout=5 * SLOW)[0] == (4000, "done")
    assert client.wait() == 0


def test_our_client_without_the_certificate_fails_against_websockets(certificate, ws_server, peer_client) -> None:
    python = ws_server(ssl_context=server_context(certificate))
    client = peer_client(python.url())
    event = client.expect("error")
    assert "certificate" in event["message"].lower(), event
    assert client.wait() == 2


def test_our_client_checks_the_host_name(tmp_path: Path, ws_server, peer_client) -> None:
    # Trusted, but issued to another name: connecting to 127.0.0.1 must fail.
    other = make_certificate(tmp_path, "example.test", "DNS:example.test")
    python = ws_server(ssl_context=server_context(other))
    client = peer_client(python.url(), "--ca", other[0])
    event = client.expect("error")
    assert "tls" in event["message"].lower(), event
    assert client.wait() == 2
