"""Tokens against a real atoll-server: expired, tampered, wrongly signed, `alg: none`, another
app's, the wrong kind, revoked and expired refresh tokens, a deleted or disabled user's. Each
is refused at the app API (`GET auth/profile`, `POST auth/session`: 401 with the error body of
docs/app-api.md) and at the sync WebSocket (401 before the upgrade, by header and by
`?access_token=`). Every case has its valid twin checked first, so that a refusal means the
token was refused, not that the test's request was wrong.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import pytest

from conftest import Raw, Server, http_json, login_anonymous, login_email, report, start_server

ADMIN_KEY = "hostile-tests-admin-key-0123456789"
LIFETIME = 2  # seconds, access and refresh tokens of the "short" app
CONFIG = {"admin": {"key": ADMIN_KEY}, "apps": [
    {"id": "main", "developmentMode": True,
     "auth": {"anonymous": True, "emailPassword": {"autoConfirm": True}}},
    {"id": "other", "developmentMode": True, "auth": {"anonymous": True}},
    {"id": "short", "developmentMode": True,
     "auth": {"anonymous": True, "accessTokenLifetime": LIFETIME,
              "refreshTokenLifetime": LIFETIME}},
]}

COUNT = {"refused": 0, "accepted": 0, "cases": 0}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    directory = tmp_path_factory.mktemp("tokens")
    s = start_server(directory, CONFIG)
    s.data = directory / "data"  # type: ignore[attr-defined]
    yield s
    alive = s.proc.poll() is None
    code = s.stop()
    report("hostile-tokens", rounds=COUNT["cases"], operations=COUNT["accepted"] + COUNT["refused"],
           faults=COUNT["refused"], lost=0, crashes=0 if alive and code == 0 else 1,
           figures=f"{COUNT['refused']} forged/stale tokens refused (HTTP and WebSocket), "
                   f"{COUNT['accepted']} valid twins accepted")
    assert alive and code == 0


# MARK: - JWT by hand

def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def claims(token: str) -> Dict[str, Any]:
    return json.loads(unb64(token.split(".")[1]))


def sign(header: Dict[str, Any], body: Dict[str, Any], key: bytes) -> str:
    head = b64(json.dumps(header).encode()) + "." + b64(json.dumps(body).encode())
    return head + "." + b64(hmac.new(key, head.encode(), hashlib.sha256).digest())


def server_key(server: Server, app: str) -> bytes:
    key = (server.data / app / "auth.key").read_bytes()  # type: ignore[attr-defined]
    assert len(key) == 32
    return key


# MARK: - Checks

def http_refused(server: Server, app: str, method: str, route: str, token: Optional[str],
                 code: str = "InvalidSession") -> Dict[str, Any]:
    status, body = http_json(method, f"{server.api(app)}/{route}", token=token)
    assert status == 401, (status, body)
    assert body["error_code"] == code and body["status"] == 401 and body["error"], body
    COUNT["refused"] += 1
    return body


def ws_refused(server: Server, app: str, token: Optional[str]) -> None:
    from websockets.exceptions import InvalidStatus
    for query in (False, True):
        with pytest.raises(InvalidStatus) as refused:
            Raw(server, app, token, query_token=query)
        assert refused.value.response.status_code == 401
        COUNT["refused"] += 1


def accepted(server: Server, app: str, token: str) -> None:
    """The token's valid use: its profile, and a sync connection that answers a ping."""
    status, body = http_json("GET", f"{server.api(app)}/auth/profile", token=token)
    assert status == 200, body
    for query in (False, True):
        with Raw(server, app, token, query_token=query) as conn:
            conn.send({"type": "ping", "timestamp": 7})
            assert conn.recv() == {"type": "pong", "timestamp": 7}
    COUNT["accepted"] += 1


def refused_everywhere(server: Server, app: str, token: Optional[str]) -> None:
    http_refused(server, app, "GET", "auth/profile", token)
    ws_refused(server, app, token)


@pytest.fixture(autouse=True)
def count_case() -> Iterator[None]:
    yield
    COUNT["cases"] += 1


# MARK: - Access tokens

def test_missing_and_garbage_tokens(server: Server) -> None:
    refused_everywhere(server, "main", None)
    for junk in ("", "a.b", "a.b.c", "!!!.???.***", "x" * 4000, "Bearer", b64(b"[1]") + ".e30."):
        refused_everywhere(server, "main", junk or None)


def test_tampered_and_wrongly_signed_access_tokens(server: Server) -> None:
    mine = login_anonymous(server, "main")
    theirs = login_anonymous(server, "main")
    token = mine["access_token"]
    accepted(server, "main", token)
    head, body, signature = token.split(".")
    # Another user's id in the claims, the signature kept.
    forged_claims = dict(claims(token), sub=theirs["user_id"])
    refused_everywhere(server, "main", f"{head}.{b64(json.dumps(forged_claims).encode())}.{signature}")
    # A later expiry, the signature kept.
    later = dict(claims(token), exp=claims(token)["exp"] + 10 ** 6)
    refused_everywhere(server, "main", f"{head}.{b64(json.dumps(later).encode())}.{signature}")
    # The signature changed in one bit, and cut off.
    flipped = bytearray(unb64(signature))
    flipped[0] ^= 1
    refused_everywhere(server, "main", f"{head}.{body}.{b64(bytes(flipped))}")
    refused_everywhere(server, "main", f"{head}.{body}.")
    # Signed with another key; unsigned (alg none); an HS256 token signed with the key's hash.
    refused_everywhere(server, "main", sign({"alg": "HS256", "typ": "JWT"}, claims(token), b"k" * 32))
    refused_everywhere(server, "main", b64(b'{"alg":"none","typ":"JWT"}') + "." + body + ".")
    refused_everywhere(server, "main", sign({"alg": "HS256", "typ": "JWT"}, claims(token),
                                            hashlib.sha256(b"").digest()))


def test_correctly_signed_tokens_with_wrong_claims(server: Server) -> None:
    """Signed with the server's own key (read from its data directory, as an insider would):
    only the claims are wrong."""
    key = server_key(server, "main")
    login = login_anonymous(server, "main")
    valid = claims(login["access_token"])
    header = {"alg": "HS256", "typ": "JWT"}
    accepted(server, "main", sign(header, valid, key))
    now = int(time.time())
    refused_everywhere(server, "main", sign(header, dict(valid, iat=now - 7200, exp=now - 3600), key))
    refused_everywhere(server, "main", sign(header, dict(valid, aud="other"), key))
    refused_everywhere(server, "main", sign(header, dict(valid, typ="refresh"), key))
    refused_everywhere(server, "main", sign(header, {k: v for k, v in valid.items() if k != "exp"}, key))
    refused_everywhere(server, "main", sign(header, dict(valid, sub="0" * 24), key))
    refused_everywhere(server, "main", sign(header, dict(valid, exp="never"), key))


def test_another_apps_token(server: Server) -> None:
    other = login_anonymous(server, "other")
    accepted(server, "other", other["access_token"])
    refused_everywhere(server, "main", other["access_token"])


def test_an_expired_access_token_is_refused_and_a_refreshed_one_works(server: Server) -> None:
    login = login_anonymous(server, "short")
    accepted(server, "short", login["access_token"])
    time.sleep(LIFETIME + 1.1)
    refused_everywhere(server, "short", login["access_token"])
    # The refresh token has the same short life here: it is gone too.
    http_refused(server, "short", "POST", "auth/session", login["refresh_token"])
    fresh = login_anonymous(server, "short")
    status, body = http_json("POST", f"{server.api('short')}/auth/session",
                             token=fresh["refresh_token"])
    assert status == 201, body
    accepted(server, "short", body["access_token"])


# MARK: - Refresh tokens

def test_refresh_tokens_revoked_or_used_as_the_wrong_kind(server: Server) -> None:
    login = login_email(server, "main", "revoked@example.com")
    api = server.api("main")
    # The wrong kind each way.
    http_refused(server, "main", "POST", "auth/session", login["access_token"])
    refused_everywhere(server, "main", login["refresh_token"])
    status, body = http_json("POST", f"{api}/auth/session", token=login["refresh_token"])
    assert status == 201, body
    # Revoked (logout): no new access token, no second logout.
    status, _ = http_json("DELETE", f"{api}/auth/session", token=login["refresh_token"])
    assert status == 204
    http_refused(server, "main", "POST", "auth/session", login["refresh_token"])
    http_refused(server, "main", "DELETE", "auth/session", login["refresh_token"])
    # A tampered refresh token.
    token = login_email(server, "main", "revoked@example.com")["refresh_token"]
    http_refused(server, "main", "POST", "auth/session", token[:-2] + ("AA" if token[-2:] != "AA" else "BB"))


def test_a_deleted_or_disabled_users_tokens_are_refused_and_its_connection_closed(
        server: Server) -> None:
    admin = f"{server.url}/api/admin/v1/apps/main/users"
    for action in ("disable", "delete"):
        login = login_email(server, "main", f"{action}d@example.com")
        accepted(server, "main", login["access_token"])
        # One connection with a bound session, one that has not bound anything yet (it could
        # bind after the user was disabled if it were left open).
        bound = Raw(server, "main", login["access_token"])
        assert bound.bind()[-1]["type"] == "uploadAck"
        idle = Raw(server, "main", login["access_token"])
        idle.send({"type": "ping", "timestamp": 1})
        assert idle.recv()["type"] == "pong"
        if action == "disable":
            status, body = http_json("POST", f"{admin}/{login['user_id']}/disable", token=ADMIN_KEY)
        else:
            status, body = http_json("DELETE", f"{admin}/{login['user_id']}", token=ADMIN_KEY)
        assert status == 200 and body["closedConnections"] == 2, body
        for conn in (bound, idle):
            code, _ = conn.closed_with()
            assert code == 1008, code
            conn.close()
        code_name = "UserDisabled" if action == "disable" else "InvalidSession"
        http_refused(server, "main", "GET", "auth/profile", login["access_token"], code_name)
        ws_refused(server, "main", login["access_token"])
        # Disabling revoked the refresh tokens; deleting deleted them.
        http_refused(server, "main", "POST", "auth/session", login["refresh_token"])
