"""The server's own ground against a client with an ordinary or anonymous account, and against
its operator's slips: one server per data directory, files only the server's user may read,
tokens that cannot be stretched or revived, silent sockets that cannot crowd others out, open
WebSockets that follow their tokens, and logins and sign-ups that cannot be hammered. Each test
starts its own atoll-server (real sockets, a free loopback port) with the limits it needs.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import socket
import stat
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from websockets.exceptions import InvalidStatus

from conftest import Raw, Server, http_json, login_anonymous, login_email, start_server
from processes import SERVER


# MARK: - One server per data directory

def test_a_second_server_on_the_same_data_directory_refuses_to_start(tmp_path: Path) -> None:
    first = start_server(tmp_path / "first")
    try:
        second = subprocess.run([str(SERVER), "--port", "0", "--data", str(tmp_path / "first" / "data")],
                                capture_output=True, timeout=30)
        message = second.stderr.decode(errors="replace")
        assert second.returncode != 0, (second.returncode, second.stdout, message)
        assert b"listening on" not in second.stdout, second.stdout
        assert "another atoll-server is using the data directory" in message, message
        # The first one goes on serving.
        assert http_json("GET", f"{first.url}/health")[1]["status"] == "ok"
    finally:
        assert first.stop() == 0
    # Once it stopped, the directory is free again.
    again = start_server(tmp_path / "first")
    assert http_json("GET", f"{again.url}/health")[1]["status"] == "ok"
    assert again.stop() == 0


# MARK: - Files only the server's user may read

def modes(root: Path) -> Dict[str, int]:
    """Every file and directory under `root` (itself included), by path relative to it: its
    permission bits."""
    found = {".": stat.S_IMODE(os.stat(root).st_mode)}
    for path in root.rglob("*"):
        found[str(path.relative_to(root))] = stat.S_IMODE(os.lstat(path).st_mode)
    return found


def test_the_servers_files_are_its_users_only(tmp_path: Path) -> None:
    data = tmp_path / "files" / "data"
    # A directory made by someone else with the usual modes is tightened too.
    data.mkdir(parents=True, mode=0o755)
    os.chmod(data, 0o755)
    old_umask = os.umask(0o022)
    try:
        server = start_server(tmp_path / "files")
    finally:
        os.umask(old_umask)
    try:
        login_email(server, "default", "modes@example.com")
        admin_key = (data / "admin.key").read_text().strip()
        status, body = http_json("PUT", f"{server.url}/api/admin/v1/apps/default/auth", {
            "anonymous": True, "emailPassword": {"autoConfirm": True},
            "customJWT": {"algorithm": "HS256", "secret": "s" * 40}}, token=admin_key)
        assert status == 200, body
        with Raw(server, "default", login_anonymous(server, "default")["access_token"]) as conn:
            assert conn.bind()[-1]["type"] == "uploadAck"
        found = modes(data)
        for name in ("default/data.realm", "default/data.realm-wal", "default/data.realm-shm",
                     "default/auth.realm", "default/auth.realm-wal", "default/auth.realm-shm",
                     "default/auth.key", "default/admin-auth.json", "admin.key", "atoll-server.lock"):
            assert name in found, (name, sorted(found))
        wrong = {name: oct(mode) for name, mode in found.items()
                 if mode != (0o700 if (data / name).is_dir() else 0o600)}
        assert not wrong, wrong
    finally:
        assert server.stop() == 0


# MARK: - Tokens that cannot be stretched or revived

JWT_SECRET = "a-custom-jwt-secret-of-at-least-32-bytes"
ADMIN_KEY = "server-limits-admin-key-0123456789"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def custom_token(claims_json: str, secret: str = JWT_SECRET) -> str:
    """An HS256 JWT over claims given as JSON text (so that `1e400` goes as written)."""
    head = b64(b'{"alg":"HS256","typ":"JWT"}') + "." + b64(claims_json.encode())
    return head + "." + b64(hmac.new(secret.encode(), head.encode(), hashlib.sha256).digest())


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    directory = tmp_path_factory.mktemp("limits-tokens")
    s = start_server(directory, {"admin": {"key": ADMIN_KEY}, "apps": [
        {"id": "main", "developmentMode": True,
         "auth": {"anonymous": True, "emailPassword": {"autoConfirm": True},
                  "customJWT": {"algorithm": "HS256", "secret": JWT_SECRET}}}]})
    yield s
    assert s.stop() == 0


def custom_login(server: Server, claims_json: str) -> Tuple[int, Any]:
    return http_json("POST", f"{server.api('main')}/auth/providers/custom-token/login",
                     {"token": custom_token(claims_json)})


def test_a_custom_jwt_whose_exp_is_no_date_or_years_ahead_is_refused(token_server: Server) -> None:
    now = int(time.time())
    status, body = custom_login(token_server, f'{{"sub":"jwt-user","exp":{now + 600}}}')
    assert status == 200, body
    for exp in ("1e400", "-1e400", "1e300", "1.7976931348623157e308", str(now + 10 * 366 * 86400),
                "NaN", "Infinity", '"never"', "null"):
        status, body = custom_login(token_server, f'{{"sub":"jwt-user","exp":{exp}}}')
        # 1e400 and NaN do not even parse (jansson refuses a real that overflows); 1e300 and ten
        # years ahead are numbers a token must not be good for.
        assert status == 401 and body["error"], (exp, status, body)


def test_the_admin_api_reads_no_key_file(token_server: Server, tmp_path: Path) -> None:
    secret_file = tmp_path / "not-a-key.pem"
    secret_file.write_text("-----BEGIN PUBLIC KEY-----\nTHE-SERVERS-SECRET\n-----END PUBLIC KEY-----\n")
    admin = f"{token_server.url}/api/admin/v1/apps/main/auth"
    for path in (str(secret_file), "/etc/passwd", "/proc/self/environ"):
        status, body = http_json("PUT", admin, {
            "anonymous": True, "emailPassword": {"autoConfirm": True},
            "customJWT": {"algorithm": "RS256", "publicKeyFile": path}}, token=ADMIN_KEY)
        assert status == 400, (path, status, body)
        text = json.dumps(body)
        assert "publicKeyFile" in text and "THE-SERVERS-SECRET" not in text and "root:" not in text, body
    # The settings in force did not change: custom JWT (HS256) still logs in.
    status, body = custom_login(token_server, f'{{"sub":"jwt-user","exp":{int(time.time()) + 600}}}')
    assert status == 200, body


def test_tokens_issued_before_a_disable_or_a_logout_stay_invalid(token_server: Server) -> None:
    users = f"{token_server.url}/api/admin/v1/apps/main/users"
    login = login_email(token_server, "main", "revived@example.com")
    profile = f"{token_server.api('main')}/auth/profile"
    assert http_json("GET", profile, token=login["access_token"])[0] == 200
    status, body = http_json("POST", f"{users}/{login['user_id']}/disable", token=ADMIN_KEY)
    assert status == 200, body
    status, body = http_json("POST", f"{users}/{login['user_id']}/enable", token=ADMIN_KEY)
    assert status == 200, body
    # Enabled again: the access token from before the disable stays refused, here and at sync.
    status, body = http_json("GET", profile, token=login["access_token"])
    assert status == 401 and body["error_code"] == "InvalidSession", (status, body)
    with pytest.raises(InvalidStatus) as refused:
        Raw(token_server, "main", login["access_token"])
    assert refused.value.response.status_code == 401
    # A new login works; its logout ends its access tokens (the login's and a refreshed one).
    again = login_email(token_server, "main", "revived@example.com")
    status, refreshed = http_json("POST", f"{token_server.api('main')}/auth/session",
                                  token=again["refresh_token"])
    assert status == 201, refreshed
    for token in (again["access_token"], refreshed["access_token"]):
        assert http_json("GET", profile, token=token)[0] == 200
    status, _ = http_json("DELETE", f"{token_server.api('main')}/auth/session", token=again["refresh_token"])
    assert status == 204
    for token in (again["access_token"], refreshed["access_token"]):
        status, body = http_json("GET", profile, token=token)
        assert status == 401 and body["error_code"] == "InvalidSession", (status, body)


# MARK: - Silent sockets

FLOOD_ADDRESS = "127.0.0.2"   # another loopback address: the flood's, not the test's own
SILENT_CONFIG = {"headerTimeoutSeconds": 1, "maxConnections": 40, "maxConnectionsPerAddress": 10,
                 "apps": [{"id": "main", "developmentMode": True, "auth": {"anonymous": True}}]}


def silent_socket(server: Server) -> socket.socket:
    """A connection from FLOOD_ADDRESS that sends nothing."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind((FLOOD_ADDRESS, 0))
    s.settimeout(10)
    s.connect((server.host, server.port))
    return s


def closed_by_server(s: socket.socket, timeout: float) -> Tuple[bool, bytes]:
    """Whether the server closed `s` within `timeout` seconds, and what it sent before."""
    s.settimeout(timeout)
    got = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return True, got
            got += chunk
    except ConnectionResetError:
        return True, got
    except socket.timeout:
        return False, got


def timed_health(server: Server) -> Tuple[int, float]:
    started = time.monotonic()
    status, body = http_json("GET", f"{server.url}/health", timeout=30)
    return status, time.monotonic() - started


def test_silent_sockets_from_one_address_neither_stay_nor_crowd_out_others(tmp_path: Path) -> None:
    server = start_server(tmp_path / "silent", SILENT_CONFIG)
    flood: List[socket.socket] = []
    try:
        # 300 silent connections from one address, far over both caps (10 per address, 40 in all).
        started = time.monotonic()
        flood = [silent_socket(server) for _ in range(300)]
        # Others are served meanwhile: /health, an anonymous login.
        status, took = timed_health(server)
        assert status == 200, status
        status, body = http_json("POST", f"{server.api('main')}/auth/providers/anon-user/login", {})
        assert status == 200, body
        # The flood's address got its 10; the rest were answered 503 and closed at once.
        refused = 0
        for s in flood[10:]:
            closed, got = closed_by_server(s, timeout=5)
            assert closed, "a connection over the per-address cap was kept"
            refused += got.startswith(b"HTTP/1.1 503")
        assert refused >= 250, refused
        # The 10 it got are closed after the header timeout (1 s here), not the idle timeout (60 s).
        for s in flood[:10]:
            closed, got = closed_by_server(s, timeout=15)
            assert closed and got == b"", got
        held = time.monotonic() - started
        print(f"\n/health during the flood: {took * 1000:.1f} ms; 10 kept, {refused} answered 503; "
              f"the kept ones closed after {held:.1f} s")
        # Once they are gone, the address may connect again.
        again = silent_socket(server)
        again.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        closed, got = closed_by_server(again, timeout=10)
        assert closed and got.startswith(b"HTTP/1.1 200"), got
        again.close()
    finally:
        for s in flood:
            s.close()
        assert server.stop() == 0


# MARK: - Sockets of one user

def test_one_user_cannot_hold_more_than_its_share_of_sync_connections(tmp_path: Path) -> None:
    """One access token opened 3,000 WebSockets that never bound a session (from one address
    they are bounded per address; from many, or behind a proxy, they were not). A user's open
    sync connections are bounded (`maxConnectionsPerUser`): past it the upgrade is answered 429
    with Retry-After, other users connect all the same, and a connection closed frees its slot."""
    limit = 5
    server = start_server(tmp_path, {"maxConnectionsPerUser": limit, "maxSignupsPerAddressPerMinute": 0,
                                     "apps": [{"id": "main", "developmentMode": True}]})
    held: List[Raw] = []
    try:
        hog = login_anonymous(server, "main")["access_token"]
        held += [Raw(server, "main", hog) for _ in range(limit)]
        for conn in held:
            conn.send({"type": "ping", "timestamp": 1})
            assert conn.recv() == {"type": "pong", "timestamp": 1}
        for _ in range(3):
            with pytest.raises(InvalidStatus) as refused:
                Raw(server, "main", hog)
            assert refused.value.response.status_code == 429
            assert refused.value.response.headers.get("Retry-After") == "10"
        with Raw(server, "main", login_anonymous(server, "main")["access_token"]) as other:
            other.send({"type": "ping", "timestamp": 2})
            assert other.recv() == {"type": "pong", "timestamp": 2}
        # The held ones still work; one closed frees a slot (the server hears of it at once or
        # nearly: it is counted where the socket's end is handled).
        held[0].send({"type": "ping", "timestamp": 3})
        assert held[0].recv() == {"type": "pong", "timestamp": 3}
        held.pop().close()
        deadline = time.monotonic() + 5
        while True:
            try:
                held.append(Raw(server, "main", hog))
                break
            except InvalidStatus as e:
                assert e.response.status_code == 429 and time.monotonic() < deadline, e
                time.sleep(0.05)
        server.assert_alive()
    finally:
        for conn in held:
            conn.close()
        assert server.stop() == 0


# MARK: - Open WebSockets follow their tokens

SHORT = 2  # seconds: the access tokens of the "short" app


@pytest.fixture(scope="module")
def session_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    directory = tmp_path_factory.mktemp("limits-sessions")
    s = start_server(directory, {"admin": {"key": ADMIN_KEY}, "apps": [
        {"id": "main", "developmentMode": True,
         "auth": {"anonymous": True, "emailPassword": {"autoConfirm": True}}},
        {"id": "short", "developmentMode": True,
         "auth": {"anonymous": True, "accessTokenLifetime": SHORT}}]})
    yield s
    assert s.stop() == 0


def test_a_connection_closes_when_its_access_token_expires(session_server: Server) -> None:
    login = login_anonymous(session_server, "short")
    bound = Raw(session_server, "short", login["access_token"])
    assert bound.bind()[-1]["type"] == "uploadAck"
    idle = Raw(session_server, "short", login["access_token"])
    idle.send({"type": "ping", "timestamp": 1})
    assert idle.recv() == {"type": "pong", "timestamp": 1}
    opened = time.monotonic()
    for conn in (bound, idle):
        code, got = conn.closed_with(timeout=SHORT + 8)
        assert code == 1008 and got == [], (code, got)
        conn.close()
    # Not before the token's exp (whole seconds from its iat, so up to a second early).
    assert time.monotonic() - opened >= SHORT - 1.1
    # A fresh token (a refresh) connects again.
    status, body = http_json("POST", f"{session_server.api('short')}/auth/session",
                             token=login["refresh_token"])
    assert status == 201, body
    with Raw(session_server, "short", body["access_token"]) as again:
        again.send({"type": "ping", "timestamp": 2})
        assert again.recv() == {"type": "pong", "timestamp": 2}


def test_a_logout_closes_the_connections_of_its_session_only(session_server: Server) -> None:
    phone = login_email(session_server, "main", "two-devices@example.com")
    laptop = login_email(session_server, "main", "two-devices@example.com")
    assert phone["user_id"] == laptop["user_id"]
    on_phone = Raw(session_server, "main", phone["access_token"])
    assert on_phone.bind()[-1]["type"] == "uploadAck"
    on_laptop = Raw(session_server, "main", laptop["access_token"])
    assert on_laptop.bind()[-1]["type"] == "uploadAck"
    status, _ = http_json("DELETE", f"{session_server.api('main')}/auth/session",
                          token=phone["refresh_token"])
    assert status == 204
    code, got = on_phone.closed_with()
    assert code == 1008, (code, got)
    on_phone.close()
    # The other device's session goes on.
    on_laptop.send({"type": "ping", "timestamp": 3})
    assert on_laptop.until(lambda m: m["type"] == "pong")[-1] == {"type": "pong", "timestamp": 3}
    on_laptop.close()


# MARK: - Logins and sign-ups that cannot be hammered

def post_raw(server: Server, route: str, body: Dict[str, Any], source: str = "127.0.0.1"
             ) -> Tuple[int, Dict[str, str], Any]:
    """POST from a chosen loopback address: (status, headers, body)."""
    import http.client
    conn = http.client.HTTPConnection(server.host, server.port, timeout=30,
                                      source_address=(source, 0))
    try:
        conn.request("POST", f"/api/client/v2.0/app/main/{route}", json.dumps(body),
                     {"Content-Type": "application/json"})
        response = conn.getresponse()
        text = response.read().decode()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, json.loads(text or "null")
    finally:
        conn.close()


def test_failed_logins_and_sign_ups_are_limited_with_retry_after(tmp_path: Path) -> None:
    server = start_server(tmp_path / "logins", {
        "maxFailedLoginsPerAccountPerMinute": 5, "maxFailedLoginsPerAddressPerMinute": 8,
        "maxSignupsPerAddressPerMinute": 6,
        "apps": [{"id": "main", "developmentMode": True,
                  "auth": {"anonymous": True, "emailPassword": {"autoConfirm": True}}}]})
    try:
        login = "auth/providers/local-userpass/login"
        register = "auth/providers/local-userpass/register"
        for email in ("victim@example.com", "other@example.com"):
            status, _, body = post_raw(server, register, {"email": email, "password": "right-1"},
                                       source="127.0.0.3")
            assert status == 201, body
        # One account: five wrong passwords are answered 401, the sixth try 429 with Retry-After,
        # also with the right password (guessing stops), from another address too.
        for _ in range(5):
            status, _, body = post_raw(server, login, {"username": "victim@example.com", "password": "wrong-1"})
            assert status == 401 and body["error_code"] == "InvalidPassword", body
        for password, source in (("wrong-1", "127.0.0.1"), ("right-1", "127.0.0.4")):
            status, headers, body = post_raw(server, login, {"username": "Victim@example.com",
                                                             "password": password}, source=source)
            assert status == 429 and body["error_code"] == "TooManyRequests", (status, body)
            assert 1 <= int(headers["retry-after"]) <= 12, headers
        # Another account from the same address still logs in; three more failures use up the
        # address's eight, after which its logins wait too, while another address's go on.
        status, _, body = post_raw(server, login, {"username": "other@example.com", "password": "right-1"})
        assert status == 200, body
        for i in range(3):
            status, _, body = post_raw(server, login, {"username": f"nobody-{i}@example.com", "password": "x-123456"})
            assert status == 401, body
        status, headers, body = post_raw(server, login, {"username": "other@example.com", "password": "right-1"})
        assert status == 429 and int(headers["retry-after"]) >= 1, (status, body)
        status, _, body = post_raw(server, login, {"username": "other@example.com", "password": "right-1"},
                                   source="127.0.0.5")
        assert status == 200, body
        # New users: six anonymous logins (with the two registrations above from another
        # address) from 127.0.0.6, then 429; another address goes on.
        for _ in range(6):
            status, _, body = post_raw(server, "auth/providers/anon-user/login", {}, source="127.0.0.6")
            assert status == 200, body
        status, headers, body = post_raw(server, "auth/providers/anon-user/login", {}, source="127.0.0.6")
        assert status == 429 and body["error_code"] == "TooManyRequests", (status, body)
        assert 1 <= int(headers["retry-after"]) <= 11, headers
        status, _, body = post_raw(server, register, {"email": "late@example.com", "password": "right-1"},
                                   source="127.0.0.6")
        assert status == 429, body
        status, _, body = post_raw(server, "auth/providers/anon-user/login", {}, source="127.0.0.7")
        assert status == 200, body
        # Once Retry-After has passed, the address may make a user again.
        time.sleep(int(headers["retry-after"]) + 0.2)
        status, _, body = post_raw(server, "auth/providers/anon-user/login", {}, source="127.0.0.6")
        assert status == 200, body
    finally:
        assert server.stop() == 0


def test_password_hashing_does_not_hold_up_other_routes(tmp_path: Path) -> None:
    """Forty email/password logins at once (about 50 ms of scrypt each): /health and anonymous
    logins sent after them are answered before most of them."""
    from concurrent.futures import ThreadPoolExecutor
    server = start_server(tmp_path / "hashing", {
        "maxFailedLoginsPerAccountPerMinute": 0, "maxFailedLoginsPerAddressPerMinute": 0,
        "maxSignupsPerAddressPerMinute": 0,
        "apps": [{"id": "main", "developmentMode": True,
                  "auth": {"anonymous": True, "emailPassword": {"autoConfirm": True}}}]})
    try:
        login_email(server, "main", "hasher@example.com")
        done: List[Tuple[str, float]] = []

        def password_login(_: int) -> None:
            status, body = http_json("POST", f"{server.api('main')}/auth/providers/local-userpass/login",
                                     {"username": "hasher@example.com", "password": "secret-1"}, timeout=60)
            assert status == 200, body
            done.append(("password", time.monotonic()))

        with ThreadPoolExecutor(max_workers=48) as pool:
            logins = [pool.submit(password_login, i) for i in range(40)]
            time.sleep(0.3)  # the logins are in: the server is hashing
            started = time.monotonic()
            for _ in range(5):
                assert http_json("GET", f"{server.url}/health")[0] == 200
                assert http_json("POST", f"{server.api('main')}/auth/providers/anon-user/login", {})[0] == 200
            others_done = time.monotonic()
            for f in logins:
                f.result()
        last_password = max(t for _, t in done)
        before = sum(1 for _, t in done if t < others_done)
        print(f"\n/health and anonymous logins, 5 each: {(others_done - started) * 1000:.0f} ms, "
              f"answered before {before} of the 40 password logins; those ended "
              f"{(last_password - started) * 1000:.0f} ms after they started")
        # Served beside the hashing, not after it: most password logins are still under way.
        assert before < 20, f"the other routes waited for {before} of 40 password hashes"
    finally:
        assert server.stop() == 0
