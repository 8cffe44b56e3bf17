"""curl against AtollNet's HTTP/1.1 server, and our HTTP client (`atoll-net-peer http`) against our
server and against Python's http.server.

curl covers: routes and JSON, keep-alive (two URLs on one connection), chunked request bodies,
Expect: 100-continue, 404/405, the body and header limits (413/431) at and over the limit, HEAD.
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict

import pytest

from conftest import SLOW, PeerServer, free_port, peer_http, read_reply

CURL_TIMEOUT = 20 * SLOW


@dataclass
class CurlResult:
    status: int
    headers: Dict[str, str]   # lowercased names
    body: bytes
    verbose: str              # curl's stderr (-v)


def curl(*args: Any) -> subprocess.CompletedProcess:
    return subprocess.run(["curl", "-sS", "--noproxy", "*", "--max-time", str(CURL_TIMEOUT), *map(str, args)],
                          capture_output=True, timeout=CURL_TIMEOUT + 5)


def curl_request(url: str, *args: Any) -> CurlResult:
    """One request with `curl -i -v`: the final response's status, headers and body."""
    done = curl("-i", "-v", *args, url)
    assert done.returncode == 0, f"curl failed ({done.returncode}): {done.stderr.decode()}"
    output = done.stdout
    while True:  # skip interim responses (100 Continue)
        head, _, output = output.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        status = int(status_line.split()[1])
        if status >= 200:
            break
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines)}
    return CurlResult(status, headers, output, done.stderr.decode("latin-1"))


def json_file(path: Path, size: int) -> bytes:
    """Writes a JSON document of about `size` bytes to `path`; returns its bytes."""
    items = [{"index": i, "name": f"item {i} ✓", "tags": ["a", "b", "c"]} for i in range(size // 60)]
    data = json.dumps({"items": items}).encode()
    path.write_bytes(data)
    return data


# MARK: - curl against our server


def test_health(server: PeerServer) -> None:
    result = curl_request(f"{server.url}/health")
    assert result.status == 200
    assert result.headers["content-type"] == "application/json"
    assert int(result.headers["content-length"]) == len(result.body)
    assert json.loads(result.body) == {"ok": True}


def test_post_json_is_echoed(server: PeerServer) -> None:
    document = {"name": "Ann ✓", "tags": ["x", "y"], "n": 42, "nested": {"ok": True, "none": None}}
    body = json.dumps(document)
    result = curl_request(f"{server.url}/echo?x=1&y=two", "-H", "Content-Type: application/json", "--data", body)
    assert result.status == 200
    assert json.loads(result.body) == {"method": "POST", "path": "/echo", "query": "x=1&y=two",
                                       "length": len(body.encode()), "body": document}


def test_route_parameters_and_request_headers(server: PeerServer) -> None:
    assert json.loads(curl_request(f"{server.url}/items/42").body) == {"id": "42"}
    assert json.loads(curl_request(f"{server.url}/items/hello%20world").body) == {"id": "hello world"}
    headers = json.loads(curl_request(f"{server.url}/headers", "-H", "X-Custom: some value").body)
    assert headers["x-custom"] == "some value"
    assert headers["host"] == f"{server.host}:{server.port}"


def test_keep_alive_reuses_the_connection(server: PeerServer) -> None:
    done = curl("-v", "-w", "[%{http_code} connects=%{num_connects}]\n",
                f"{server.url}/health", f"{server.url}/items/7")
    assert done.returncode == 0, done.stderr.decode()
    assert "Re-using existing connection" in done.stderr.decode()
    assert done.stdout.decode().splitlines() == ['{"ok":true}[200 connects=1]', '{"id":"7"}[200 connects=0]']


def test_chunked_request_body_is_echoed(server: PeerServer, tmp_path: Path) -> None:
    data = json_file(tmp_path / "body.json", 1 << 20)
    result = curl_request(f"{server.url}/echo", "-H", "Content-Type: application/json",
                          "-H", "Transfer-Encoding: chunked", "--data-binary", f"@{tmp_path / 'body.json'}")
    assert "Transfer-Encoding: chunked" in result.verbose  # it really went chunked
    assert result.status == 200
    echoed = json.loads(result.body)
    assert echoed["length"] == len(data)
    assert echoed["body"] == json.loads(data)


def test_large_body_with_expect_100_continue_is_not_delayed(server: PeerServer, tmp_path: Path) -> None:
    # curl sends "Expect: 100-continue" with a body over 1 MB and waits 1 s for the 100 before it
    # sends the body anyway. RFC 9110 10.1.1: the server MUST answer at once, with 100 or a final status.
    data = json_file(tmp_path / "body.json", 2 << 20)
    started = time.monotonic()
    result = curl_request(f"{server.url}/echo", "-H", "Content-Type: application/json",
                          "--data-binary", f"@{tmp_path / 'body.json'}")
    elapsed = time.monotonic() - started
    assert "Expect: 100-continue" in result.verbose
    assert result.status == 200 and json.loads(result.body)["length"] == len(data)
    assert "Done waiting for 100-continue" not in result.verbose, \
        f"the server never answered Expect: 100-continue; curl gave up waiting ({elapsed:.2f} s)"


def test_unknown_path_is_404(server: PeerServer) -> None:
    result = curl_request(f"{server.url}/no/such/path")
    assert result.status == 404
    assert json.loads(result.body)["status"] == 404


# A GET route also serves HEAD, so its Allow lists both.
@pytest.mark.parametrize("method, path, allowed", [("DELETE", "/health", "GET, HEAD"), ("PUT", "/echo", "POST"),
                                                   ("GET", "/echo", "POST")])
def test_wrong_method_is_405_with_allow(server: PeerServer, method: str, path: str, allowed: str) -> None:
    result = curl_request(f"{server.url}{path}", "-X", method)
    assert result.status == 405
    assert [m.strip() for m in result.headers["allow"].split(",")] == [m.strip() for m in allowed.split(",")]


@pytest.fixture(scope="module")
def small_body_server():
    peer = PeerServer("--max-body", 1024)
    yield peer
    peer.stop()


def body_of_size(size: int) -> str:
    """A JSON string literal of exactly `size` bytes."""
    return json.dumps("x" * (size - 2))


def test_body_at_the_limit_is_accepted(small_body_server: PeerServer) -> None:
    result = curl_request(f"{small_body_server.url}/echo", "--data-binary", body_of_size(1024))
    assert result.status == 200 and json.loads(result.body)["length"] == 1024


@pytest.mark.parametrize("chunked", [False, True])
def test_body_over_the_limit_is_413(small_body_server: PeerServer, chunked: bool) -> None:
    extra = ["-H", "Transfer-Encoding: chunked"] if chunked else []
    result = curl_request(f"{small_body_server.url}/echo", *extra, "--data-binary", body_of_size(1025))
    assert result.status == 413
    assert result.headers.get("connection") == "close"
    # The server is fine afterwards.
    assert curl_request(f"{small_body_server.url}/health").status == 200


def test_headers_under_the_limit_are_accepted(server: PeerServer) -> None:
    result = curl_request(f"{server.url}/headers", "-H", "X-Big: " + "a" * 15_000)
    assert result.status == 200 and json.loads(result.body)["x-big"] == "a" * 15_000


def test_oversized_headers_are_431(server: PeerServer) -> None:
    result = curl_request(f"{server.url}/health", "-H", "X-Big: " + "a" * 20_000)
    assert result.status == 431
    assert json.loads(result.body)["status"] == 431


def test_head_has_the_headers_and_no_body(server: PeerServer) -> None:
    done = curl("-I", "-w", "[downloaded %{size_download}]", f"{server.url}/health")
    assert done.returncode == 0, done.stderr.decode()
    head = done.stdout.decode()
    assert head.startswith("HTTP/1.1 200 OK\r\n")
    assert "Content-Length: 11\r\n" in head  # the length a GET would have
    assert head.endswith("\r\n\r\n[downloaded 0]")


def test_head_sends_no_body_bytes_on_a_kept_alive_connection(server: PeerServer) -> None:
    # A body after a HEAD response would be read as the start of the next response.
    with socket.create_connection((server.host, server.port), timeout=5 * SLOW) as sock:
        sock.sendall(b"HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /items/9 HTTP/1.1\r\nHost: x\r\n\r\n")
        buffer = bytearray()
        head = read_reply(sock, buffer, head_request=True)
        assert (head.status, head.headers["content-length"], head.body) == (200, "11", b"")
        following = read_reply(sock, buffer)
        assert following.status == 200 and json.loads(following.body) == {"id": "9"}


# MARK: - our HTTP client against our server


def test_our_client_against_our_server(server: PeerServer) -> None:
    status, reply = peer_http("GET", f"{server.url}/health")
    assert status == 0 and reply["status"] == 200 and json.loads(reply["body"]) == {"ok": True}
    assert reply["headers"]["content-type"] == "application/json"

    status, reply = peer_http("POST", f"{server.url}/echo?q=1", "--body", '{"a": [1, "✓"]}')
    assert status == 0 and reply["status"] == 200
    assert json.loads(reply["body"]) == {"method": "POST", "path": "/echo", "query": "q=1",
                                         "length": len('{"a": [1, "✓"]}'.encode()), "body": {"a": [1, "✓"]}}

    status, reply = peer_http("GET", f"{server.url}/missing")
    assert status == 0 and reply["status"] == 404

    status, reply = peer_http("HEAD", f"{server.url}/health")
    assert status == 0 and reply["status"] == 200 and reply["body"] == ""
    assert reply["headers"]["content-length"] == "11"


def test_our_client_to_a_closed_port_fails() -> None:
    status, reply = peer_http("GET", f"http://127.0.0.1:{free_port()}/health")
    assert status == 2 and "refused" in reply["error"].lower()


# MARK: - our HTTP client against Python's http.server


class Handler(BaseHTTPRequestHandler):
    """GET /json: the request as JSON; GET /chunked: a chunked body; GET /until-close: an HTTP/1.0
    body ended by closing; POST /echo: the body back; HEAD /json: headers only; GET /empty: 204."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, headers: Dict[str, str], head: bool = False) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _request_json(self) -> bytes:
        return json.dumps({"method": self.command, "path": self.path,
                           "headers": {k.lower(): v for k, v in self.headers.items()}}).encode()

    def do_HEAD(self) -> None:
        body = self._request_json()
        self._send(200, body, {"Content-Type": "application/json", "Content-Length": str(len(body))}, head=True)

    def do_GET(self) -> None:
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for piece in (b"first,", b"second,", b"third \xe2\x9c\x93"):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/until-close":
            self.close_connection = True
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"the body ends when the connection does")
        elif self.path == "/empty":
            self._send(204, b"", {})
        else:
            body = self._request_json()
            self._send(200, body, {"Content-Type": "application/json", "Content-Length": str(len(body))})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._send(201, body, {"Content-Type": "application/json", "Content-Length": str(len(body)),
                               "X-Seen-Length": self.headers.get("Content-Length", "none")})


@pytest.fixture(scope="module")
def python_http_server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_our_client_against_python_http_server(python_http_server: str) -> None:
    status, reply = peer_http("GET", f"{python_http_server}/json?a=1")
    assert status == 0 and reply["status"] == 200
    seen = json.loads(reply["body"])
    assert seen["method"] == "GET" and seen["path"] == "/json?a=1"
    assert seen["headers"]["host"] == python_http_server.removeprefix("http://")

    status, reply = peer_http("POST", f"{python_http_server}/echo", "--body", '{"k": "v ✓"}')
    assert status == 0 and reply["status"] == 201 and json.loads(reply["body"]) == {"k": "v ✓"}
    assert reply["headers"]["x-seen-length"] == str(len('{"k": "v ✓"}'.encode()))

    status, reply = peer_http("HEAD", f"{python_http_server}/json")
    assert status == 0 and reply["status"] == 200 and reply["body"] == ""


def test_our_client_decodes_a_chunked_response(python_http_server: str) -> None:
    status, reply = peer_http("GET", f"{python_http_server}/chunked")
    assert status == 0 and reply["status"] == 200
    assert reply["body"] == "first,second,third ✓"


def test_our_client_reads_a_body_ended_by_close(python_http_server: str) -> None:
    status, reply = peer_http("GET", f"{python_http_server}/until-close")
    assert status == 0 and reply["status"] == 200
    assert reply["body"] == "the body ends when the connection does"


def test_our_client_takes_a_204(python_http_server: str) -> None:
    status, reply = peer_http("GET", f"{python_http_server}/empty")
    assert status == 0 and reply["status"] == 204 and reply["body"] == ""
