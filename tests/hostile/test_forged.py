"""A forged client against a real atoll-server: raw WebSocket messages (Python's websockets) that
lie about their identity, break the protocol's grammar, exceed its limits, flood uploads, or
subscribe to and write what the rules deny.

Each attempt must be refused (an `error` with the documented code), rate-limited, or
disconnected with a clear close code, and nobody else may notice: after every test the server
answers /health and the bystander (two ordinary clients of one user, the Python binding) still
syncs a write within a second, without one sync error.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

from conftest import (OWNER_RULES, Bystander, Raw, Server, create_task, login_anonymous,
                      login_email, percentile, report, start_server)
from helpers import download_instructions

MAX_MESSAGE = 65536
UPLOADS_PER_SECOND = 50
QUERIES_PER_SECOND = 20
CONFIG = {"maxMessageBytes": MAX_MESSAGE, "maxUploadsPerSecond": UPLOADS_PER_SECOND,
          "maxQueriesPerSecond": QUERIES_PER_SECOND,
          "apps": [{"id": "owners", "developmentMode": True,
                    "sync": {"mode": "flexible", "partitionKey": "owner_id"},
                    "rules": OWNER_RULES}]}
APP = "owners"

ATTEMPTS = {"n": 0}
FIGURES: Dict[str, Any] = {}


def attempt(n: int = 1) -> None:
    ATTEMPTS["n"] += n


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    directory = tmp_path_factory.mktemp("forged")
    server = start_server(directory, CONFIG)
    bystander = Bystander(server, APP, directory, owner_rules=True)
    bystander.probe()
    tests = {"n": 0}
    yield {"server": server, "bystander": bystander, "tests": tests}
    bystander.close()
    alive = server.proc.poll() is None
    code = server.stop()
    lat = bystander.latencies
    figures = (f"bystander p50 {percentile(lat, .5) * 1000:.1f} ms, p99 "
               f"{percentile(lat, .99) * 1000:.1f} ms over {len(lat)} probes")
    if "flood" in FIGURES:
        figures += "; " + FIGURES["flood"]
    report("hostile-forged", rounds=tests["n"], operations=len(lat), faults=ATTEMPTS["n"],
           lost=0, crashes=0 if alive and code == 0 else 1, figures=figures)
    assert alive and code == 0, f"the server did not stop cleanly ({code})"


@pytest.fixture(autouse=True)
def nobody_notices(world: Dict[str, Any]) -> Iterator[None]:
    server: Server = world["server"]
    bystander: Bystander = world["bystander"]
    yield
    world["tests"]["n"] += 1
    server.assert_alive()
    took = bystander.probe()
    assert took < 1.0, f"the bystander's write took {took:.3f} s to reach its other device"
    assert bystander.errors == [], bystander.errors


@pytest.fixture
def server(world: Dict[str, Any]) -> Server:
    return world["server"]


def token(server: Server) -> str:
    return login_anonymous(server, APP)["access_token"]


def assert_refused(conn: Raw, code: str, close: int = 1002) -> Dict[str, Any]:
    """The server's error `code` and then its close with `close`."""
    got_close, got = conn.closed_with()
    errors = [m for m in got if m["type"] == "error"]
    assert [e["code"] for e in errors] == [code], got
    assert got_close == close, (got_close, got)
    return errors[0]


# MARK: - Grammar

DEEP = "[" * 30_000 + "]" * 30_000  # under maxMessageBytes, far over the parser's depth

NOT_MESSAGES = [
    ("not JSON", "this is not JSON"),
    ("truncated JSON", '{"type": "ping", "timestamp": '),
    ("an array", "[1, 2, 3]"),
    ("a string", '"ping"'),
    ("null", "null"),
    ("no type", "{}"),
    ("type not a string", '{"type": 5}'),
    ("unknown type", '{"type": "teleport", "session": 1}'),
    ("server-only type", '{"type": "download", "session": 1, "changesets": []}'),
    ("bind without session", '{"type": "bind"}'),
    ("session not an integer", '{"type": "bind", "session": "one", "mode": "flexible"}'),
    ("bind with unknown mode", '{"type": "bind", "session": 1, "mode": "telepathic"}'),
    ("upload to no session", '{"type": "upload", "session": 1, "changesets": []}'),
    ("query to no session", '{"type": "query", "session": 7, "version": 1, "queries": []}'),
    ("unbind of no session", '{"type": "unbind", "session": 9223372036854775807}'),
    ("nesting 30,000 deep", DEEP),
    ("a lone surrogate escape", '{"type": "\\ud800"}'),
    ("a NUL in the type", '{"type": "ping\\u0000"}'),
]


@pytest.mark.parametrize("name,text", NOT_MESSAGES, ids=[n for n, _ in NOT_MESSAGES])
def test_a_message_outside_the_grammar_is_badMessage_and_closes(server: Server, name: str,
                                                                 text: str) -> None:
    attempt()
    with Raw(server, APP, token(server)) as conn:
        conn.send(text)
        error = assert_refused(conn, "badMessage")
        assert (error["codeNumber"], error["action"], error["fatal"]) == (
            100, "applicationBug", True)
        assert error["message"]


BAD_UPLOADS = [
    ("changesets not a list", {"changesets": {"clientVersion": 1}}),
    ("clientVersion a string", {"changesets": [{"clientVersion": "1", "clock": [1, 0, 1],
                                                "instructions": []}]}),
    ("clock not a clock", {"changesets": [{"clientVersion": 1, "clock": "now",
                                           "instructions": []}]}),
    ("instructions not a list", {"changesets": [{"clientVersion": 1, "clock": [1, 0, 1],
                                                 "instructions": "drop table"}]}),
    ("unknown op", {"changesets": [{"clientVersion": 1, "clock": [1, 0, 1], "instructions": [
        {"op": "dropTable", "class": "Task", "primaryKey": "a"}]}]}),
    ("path not a list", {"changesets": [{"clientVersion": 1, "clock": [1, 0, 1], "instructions": [
        {"op": "set", "class": "Task", "primaryKey": "a", "path": "name", "value": 1}]}]}),
]


@pytest.mark.parametrize("name,body", BAD_UPLOADS, ids=[n for n, _ in BAD_UPLOADS])
def test_an_upload_of_the_wrong_shape_is_refused_and_stores_nothing(server: Server, name: str,
                                                                     body: Dict[str, Any]) -> None:
    attempt()
    with Raw(server, APP, token(server)) as conn:
        assert [m["type"] for m in conn.bind()] == ["ident", "uploadAck"]
        conn.send({"type": "upload", "session": 1, **body})
        assert_refused(conn, "badMessage")


def test_deep_values_inside_a_valid_upload_do_not_crash(server: Server) -> None:
    """A value nested as deep as the JSON parser allows, where a value may stand."""
    attempt()
    login = login_anonymous(server, APP)
    me = login["user_id"]
    with Raw(server, APP, login["access_token"]) as conn:
        conn.bind()
        conn.subscribe("owner_id == $0", [me])
        for depth in (1000, 2000):
            # Written by hand: Python's json module stops at about 1,000 levels.
            cs = conn.changeset([create_task(f"deep-{depth}", me), {
                "op": "set", "class": "Task", "primaryKey": f"deep-{depth}", "path": ["name"],
                "value": "@"}])
            text = json.dumps({"type": "upload", "session": 1, "changesets": [cs]})
            conn.send(text.replace('"@"', "[" * depth + '"bottom"' + "]" * depth))
            got = conn.until(lambda m: m["type"] == "error")
            # A list is not a string: the write is refused, the object is not stored.
            assert got[-1]["code"] in ("badMessage", "writeRejected"), got
            if got[-1]["code"] == "badMessage":
                assert conn.closed_with()[0] == 1002
                break


def test_a_binary_frame_is_refused_with_1003(server: Server) -> None:
    attempt()
    with Raw(server, APP, token(server)) as conn:
        conn.send(b'{"type": "ping", "timestamp": 1}')
        error = assert_refused(conn, "badMessage", close=1003)
        assert "binary" in error["message"]


def test_invalid_utf8_in_a_text_frame_closes_with_1007(server: Server) -> None:
    attempt()
    with Raw(server, APP, token(server)) as conn:
        conn.conn.send(b'{"type": "ping", "timestamp": "\xff\xfe"}', text=True)
        code, got = conn.closed_with()
        assert (code, got) == (1007, [])


def test_a_message_over_maxMessageBytes_closes_with_1009(server: Server) -> None:
    attempt()
    with Raw(server, APP, token(server)) as conn:
        # At the limit: answered.
        head = '{"type": "ping", "timestamp": "'
        conn.send(head + "x" * (MAX_MESSAGE - len(head) - 2) + '"}')
        assert conn.recv()["type"] == "pong"
        # One byte over: closed, nothing answered.
        conn.send(head + "x" * (MAX_MESSAGE - len(head) - 1) + '"}')
        code, got = conn.closed_with()
        assert (code, got) == (1009, [])


# MARK: - Sessions and identities

def test_session_games_are_refused(server: Server) -> None:
    attempt(3)
    t = token(server)
    with Raw(server, APP, t) as conn:
        conn.bind()
        conn.send({"type": "bind", "session": 1, "mode": "flexible", "file": None,
                   "downloadCursor": 0})
        error = assert_refused(conn, "badMessage")
        assert "bound already" in error["message"]
    with Raw(server, APP, t) as conn:
        conn.bind()
        conn.send({"type": "unbind", "session": 1})
        assert conn.recv()["type"] == "unbound"
        conn.upload([create_task("after-unbind")])
        assert "no session 1" in assert_refused(conn, "badMessage")["message"]
    with Raw(server, APP, t) as conn:
        conn.bind()
        # A download cursor ahead of the server's history (a file the server knows: a new one
        # starts at 0).
        conn.send({"type": "bind", "session": 2, "mode": "flexible", "file": conn.file,
                   "downloadCursor": 10 ** 12})
        got = conn.until(lambda m: m["type"] == "error")
        assert (got[-1]["code"], got[-1]["session"]) == ("badServerVersion", 2)


def test_a_client_file_of_another_user_or_with_a_wrong_salt_is_refused(server: Server) -> None:
    attempt(3)
    with Raw(server, APP, token(server)) as victim:
        victim.bind()
        file = victim.file
    with Raw(server, APP, token(server)) as forger:
        got = forger.bind(file=file)
        assert (got[-1]["type"], got[-1]["code"]) == ("error", "badClientFile"), got
        assert "another user" in got[-1]["message"]
        got = forger.bind(session=2, file={"ident": file["ident"], "salt": file["salt"] ^ 1})
        assert (got[-1]["code"], got[-1]["session"]) == ("badClientFile", 2), got
        assert "salt" in got[-1]["message"] or "does not know" in got[-1]["message"]
        forger.send({"type": "bind", "session": 3, "mode": "flexible",
                     "file": {"ident": str(file["ident"])}, "downloadCursor": 0})
        assert_refused(forger, "badMessage")


# MARK: - Rules

def test_subscribing_to_anothers_objects_gets_nothing_now_or_later(world: Dict[str, Any],
                                                                   server: Server) -> None:
    bystander: Bystander = world["bystander"]
    victim = bystander.user_id
    attempt(2)
    with Raw(server, APP, token(server)) as conn:
        conn.bind()
        got = conn.subscribe("owner_id == $0", [victim])
        assert got[-1]["type"] == "queryComplete", got
        assert [m for m in got if m["type"] == "download"] and download_instructions(got) == []
        # The victim writes on; the forger hears nothing of it.
        bystander.probe()
        bystander.probe()
        conn.send({"type": "mark", "session": 1, "request": 1})
        got = conn.until(lambda m: m["type"] == "mark")
        assert victim not in json.dumps(got), got
        # Classes it has no rule for, and queries subscriptions may not hold.
        got = conn.subscribe("TRUEPREDICATE SORT(name ASC)", version=2)
        assert got[-1]["type"] == "queryError", got
        got = conn.subscribe(cls="Secrets", version=3)
        assert got[-1]["type"] == "queryError" and "Secrets" in got[-1]["message"], got


def test_writes_to_anothers_objects_are_rejected_and_undone(world: Dict[str, Any],
                                                            server: Server) -> None:
    bystander: Bystander = world["bystander"]
    victim = bystander.user_id
    target = f"bystander-{bystander.count}"
    attempt(3)
    login = login_anonymous(server, APP)
    with Raw(server, APP, login["access_token"]) as conn:
        conn.bind()
        conn.subscribe("owner_id == $0", [login["user_id"]])
        for instruction in (
                {"op": "set", "class": "Task", "primaryKey": target, "path": ["name"],
                 "value": "owned"},
                {"op": "erase", "class": "Task", "primaryKey": target},
                {"op": "set", "class": "Task", "primaryKey": target, "path": ["owner_id"],
                 "value": login["user_id"]}):
            conn.upload([instruction])
            got = conn.until(lambda m: m["type"] == "error")
            assert got[-1]["code"] == "writeRejected", got
            assert [(w["class"], w["primaryKey"]) for w in got[-1]["compensatingWrites"]] == [
                ("Task", target)]
    reader = bystander.realms[1]
    bystander.probe()
    kept = reader.get("Task", target)
    assert kept is not None and kept["name"] == target and kept["owner_id"] == victim


# MARK: - Clocks

def test_a_clock_far_ahead_gets_clockAhead_and_stores_nothing(server: Server) -> None:
    """A clock at the end of time would win every conflict for good, and every device that heard
    of it would move its own clock there: the server refuses it (retry, not fatal, with the wait)
    and closes; a clock half a minute ahead, within the limit (a minute), is taken."""
    attempt(2)
    login = login_anonymous(server, APP)
    me = login["user_id"]
    with Raw(server, APP, login["access_token"]) as conn:
        conn.bind()
        conn.subscribe("owner_id == $0", [me])
        conn.clock_ms = int(time.time() * 1000) + 30_000
        conn.upload([create_task("half-a-minute-ahead", me)])
        got = conn.until(lambda m: m["type"] in ("uploadAck", "error"))
        assert got[-1] == {"type": "uploadAck", "session": 1, "clientVersion": 1}, got
        conn.clock_ms = 2**63 - 2
        conn.upload([create_task("end-of-time", me)])
        error = assert_refused(conn, "clockAhead", close=1008)
        assert (error["codeNumber"], error["action"], error["fatal"]) == (235, "retry", False), error
        assert "ahead of the server's" in error["message"] and error["retryAfter"] > 10**12, error
    with Raw(server, APP, login["access_token"]) as conn:
        conn.bind()
        conn.subscribe("owner_id == $0", [me])
        conn.clock_ms = int(time.time() * 1000) + 3 * 60 * 1000
        conn.upload([create_task("three-minutes-ahead", me)])
        error = assert_refused(conn, "clockAhead", close=1008)
        # The default limit is a minute: the upload can go through in about two minutes.
        assert 100 <= error["retryAfter"] <= 121, error
    with Raw(server, APP, login["access_token"]) as check:
        check.bind()
        boot = check.subscribe("owner_id == $0", [me])
        assert {i["primaryKey"] for i in download_instructions(boot)} == {"half-a-minute-ahead"}


def test_a_list_element_newer_than_its_changeset_is_badMessage(server: Server) -> None:
    """An insert names its element by its own clock, a clear the point it has seen: a later one
    would sort before every real insert, or clear inserts not yet made."""
    attempt(2)
    login = login_anonymous(server, APP)
    for instruction in (
            {"op": "listInsert", "class": "Task", "primaryKey": "listy", "path": ["tags"],
             "value": "x", "element": [2**63 - 1, 0, 1, 0]},
            {"op": "listClear", "class": "Task", "primaryKey": "listy", "path": ["tags"],
             "element": [2**63 - 1, 0, 1, 2**63 - 1]}):
        with Raw(server, APP, login["access_token"]) as conn:
            conn.bind()
            conn.subscribe("owner_id == $0", [login["user_id"]])
            conn.upload([instruction])
            error = assert_refused(conn, "badMessage")
            assert "newer than the changeset's clock" in error["message"], error


# MARK: - Floods

def flood(conn: Raw, count: int, send: Callable[[int], None]) -> Tuple[int, Optional[int], List[Dict[str, Any]], float]:
    """Sends `send(i)` for i in 0..<count as fast as possible until the server closes; (messages
    sent, the server's close code, what it sent, seconds from the first message to the close)."""
    from websockets.exceptions import ConnectionClosed
    sent = 0
    started = time.monotonic()
    try:
        for i in range(count):
            send(i)
            sent += 1
    except ConnectionClosed:
        pass
    code, got = conn.closed_with(timeout=20)
    attempt(sent)
    return sent, code, got, time.monotonic() - started


def test_an_upload_flood_gets_tooManyMessages_and_is_closed(server: Server) -> None:
    login = login_anonymous(server, APP)
    me = login["user_id"]
    with Raw(server, APP, login["access_token"]) as conn:
        conn.bind()
        conn.subscribe("owner_id == $0", [me])
        sent, code, got, elapsed = flood(conn, 5000, lambda i: conn.upload([create_task(f"flood-{i}", me)]))
    errors = [m for m in got if m["type"] == "error"]
    assert [(e["code"], e["codeNumber"], e["action"], e["fatal"], e["retryAfter"]) for e in errors] == [
        ("tooManyMessages", 233, "retry", False, 1)], errors
    assert code == 1008
    acked = max([m["clientVersion"] for m in got if m["type"] == "uploadAck"] or [0])
    # The bucket holds a second of uploads and refills at the limit while the flood lasts.
    assert UPLOADS_PER_SECOND <= acked <= UPLOADS_PER_SECOND * (1 + elapsed) + 1, (acked, elapsed)
    # What was acknowledged is stored, and nothing after the refused upload.
    with Raw(server, APP, login["access_token"]) as check:
        check.bind()
        boot = check.subscribe("owner_id == $0", [me])
        keys = {i["primaryKey"] for i in download_instructions(boot)}
        assert keys == {f"flood-{i}" for i in range(acked)}
    FIGURES["flood"] = (f"flood: {sent} uploads sent, {acked} integrated, closed 1008 after "
                        f"{elapsed:.2f} s")


def test_a_flood_of_queries_gets_tooManyMessages_and_is_closed(server: Server) -> None:
    """Each `query` (and `bind`) may start a bootstrap or a catch-up: a connection may send
    maxQueriesPerSecond of them a second, a burst of one second's worth included."""
    login = login_anonymous(server, APP)
    me = login["user_id"]
    with Raw(server, APP, login["access_token"]) as conn:
        conn.bind()
        sent, code, got, elapsed = flood(conn, 1000, lambda i: conn.send(
            {"type": "query", "session": 1, "version": i + 1,
             "queries": [{"name": "mine", "class": "Task", "query": "owner_id == $0", "args": [me]}]}))
    errors = [m for m in got if m["type"] == "error"]
    assert [(e["code"], e["action"], e["fatal"], e["retryAfter"]) for e in errors] == [
        ("tooManyMessages", "retry", False, 1)], errors
    assert "bind and query messages" in errors[0]["message"], errors
    assert code == 1008
    # The bind took one of the bucket's second; every query until it ran dry was answered.
    answered = [m["version"] for m in got if m["type"] == "queryComplete"]
    assert QUERIES_PER_SECOND - 1 <= len(answered) <= QUERIES_PER_SECOND * (1 + elapsed) + 1, (answered, elapsed)
    assert answered == list(range(1, len(answered) + 1)), answered


def test_uploads_under_the_limit_are_never_refused(server: Server) -> None:
    login = login_anonymous(server, APP)
    me = login["user_id"]
    n = int(UPLOADS_PER_SECOND * 2.5)
    with Raw(server, APP, login["access_token"]) as conn:
        conn.bind()
        conn.subscribe("owner_id == $0", [me])
        for i in range(n):
            conn.upload([create_task(f"steady-{i}", me)])
            time.sleep(1.0 / (UPLOADS_PER_SECOND * 0.8))
        got = conn.until(lambda m: m["type"] == "uploadAck" and m["clientVersion"] == n
                         or m["type"] == "error")
        assert [m for m in got if m["type"] == "error"] == []


def test_many_connections_dropped_mid_message_leave_no_trace(server: Server) -> None:
    """Sockets that bind, send half an upload frame's worth of junk and vanish."""
    import socket
    attempt(50)
    t = token(server)
    for _ in range(50):
        conn = Raw(server, APP, t)
        conn.bind()
        sock: socket.socket = conn.conn.socket
        sock.sendall(b"\x81\xfe\x10\x00\x01\x02\x03\x04" + b"x" * 100)  # 4096 B announced
        sock.close()
    server.assert_alive()


def test_an_ordinary_client_over_the_limit_loses_nothing(tmp_path: Path) -> None:
    """The Python binding writing faster than a low limit: it is told `tooManyMessages`, is
    disconnected, reconnects after its backoff and resends; the other device gets every write."""
    import atoll
    from conftest import SCHEMA
    limited = start_server(tmp_path / "limited", dict(CONFIG, maxUploadsPerSecond=5))
    login_email(limited, APP, "fast@example.com")
    apps, tokens, realms, errors = [], [], [], []
    try:
        for name in ("fast", "other"):
            app = atoll.App(APP, limited.url, metadata_dir=tmp_path / f"meta-{name}")
            apps.append(app)
            tokens.append(app.on_error(errors.append))
            user = app.login(atoll.Credentials.email_password("fast@example.com", "secret-1"))
            realm = atoll.open_synced(user, tmp_path / f"{name}.realm", schema=SCHEMA,
                                      initial_subscriptions=[("all", "Task", "TRUEPREDICATE")])
            realm.subscriptions.wait(timeout=10)
            realms.append(realm)
        fast, other = realms
        owner = user.id
        for i in range(40):  # one upload per commit, far more than 5 a second
            with fast.write():
                fast.create("Task", {"_id": f"fast-{i}", "name": "x", "priority": i,
                                     "owner_id": owner})
            time.sleep(0.005)
        fast.sync_session.wait_for_upload(timeout=60)
        other.sync_session.wait_for_download(timeout=30)
        other.refresh()
        got = sorted(t["priority"] for t in other.objects("Task") if t["_id"].startswith("fast-"))
        assert got == list(range(40))
        # The limit did bite: the fast device was told, and nothing else went wrong.
        assert any("tooManyMessages" in repr(e) for e in errors), errors
        assert all("tooManyMessages" in repr(e) or "connection" in repr(e).lower()
                   for e in errors), errors
    finally:
        for r in realms:
            r.close()
        for t in tokens:
            t.cancel()
        for a in apps:
            a.close()
        limited.stop()
