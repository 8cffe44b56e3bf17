"""Sync, end to end: the binding against a real atoll-server.

Each test starts its own `atoll-server --port 0` (path from $ATOLL_SERVER, default
.build/release/atoll-server) in a temporary data directory, so that tests share no users, files
or objects. A missing server binary fails the tests (it does not skip them).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sqlite3
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import pytest

import atoll
from atoll import _ffi
from conftest import REPO_ROOT, run_python, run_raw


# `make test` runs this file a second time with the servers' data in PostgreSQL
# (ATOLL_SYNC_STORE=postgres, ATOLL_TEST_POSTGRES=URL of a throwaway cluster): each server gets a
# new database.
SYNC_ON_POSTGRES = os.environ.get("ATOLL_SYNC_STORE") == "postgres"
sys.path.insert(0, str(REPO_ROOT / "tests" / "postgres"))
sys.path.insert(0, str(REPO_ROOT / "tests" / "support"))
import cluster as pg_cluster  # noqa: E402  (tests/postgres/cluster.py)
from processes import LaunchedServer, launch_server  # noqa: E402  (tests/support/processes.py)

TASK = {"name": "Task", "primaryKey": "_id",
        "properties": {"_id": "string", "name": "string", "priority": "int",
                       "owner_id": "string?"}}
SCHEMA = [TASK]
ALL = ("all", "Task", "TRUEPREDICATE")

OWNER_RULES = {"Task": {"roles": [{"name": "owner", "read": "owner_id == %user.id",
                                   "write": "owner_id == %user.id"}]}}
RULES_CONFIG = {"apps": [
    {"id": "owners", "developmentMode": True,
     "sync": {"mode": "flexible", "partitionKey": "owner_id"}, "rules": OWNER_RULES},
    {"id": "parts", "developmentMode": True,
     "sync": {"mode": "partition", "partitionKey": "owner_id"}, "rules": OWNER_RULES},
]}


# MARK: - The server

class Server(LaunchedServer):
    """A running atoll-server; `database` is its PostgreSQL database in a run on PostgreSQL."""

    database: Optional[str] = None


def start_server(tmp_path: Path, config: Optional[Dict[str, Any]] = None,
                 database: Optional[str] = None) -> Server:
    """`database`: on PostgreSQL, the database of an earlier server (default: a new one)."""
    if SYNC_ON_POSTGRES:
        base = os.environ.get("ATOLL_TEST_POSTGRES")
        if not base:
            pytest.fail("ATOLL_SYNC_STORE=postgres needs ATOLL_TEST_POSTGRES (make test sets both)",
                        pytrace=False)
        database = database or pg_cluster.fresh_database(base)
        config = dict(config or {})
        config["store"] = {"postgres": database}
    server = launch_server(tmp_path / "server-data", tmp_path, config, kind=Server)
    server.database = database
    return server


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """A server with the default app ("default": development mode, open rules)."""
    s = start_server(tmp_path)
    yield s
    s.stop()


@pytest.fixture
def rules_server(tmp_path: Path) -> Iterator[Server]:
    """A server with the owner-only apps "owners" (flexible) and "parts" (partition)."""
    s = start_server(tmp_path, RULES_CONFIG)
    yield s
    s.stop()


# MARK: - Helpers

def new_app(server: Server, tmp_path: Path, name: str, app_id: str = "default") -> atoll.App:
    return atoll.App(app_id, server.url, metadata_dir=tmp_path / f"meta-{name}")


def anonymous(server: Server, tmp_path: Path, name: str, app_id: str = "default"
              ) -> "tuple[atoll.App, atoll.User]":
    app = new_app(server, tmp_path, name, app_id)
    return app, app.login(atoll.Credentials.anonymous())


def open_all(user: atoll.User, path: Path, **kwargs: Any) -> atoll.Realm:
    """A flexible realm subscribed to every Task, its subscriptions complete."""
    realm = atoll.open_synced(user, path, schema=SCHEMA, initial_subscriptions=[ALL], **kwargs)
    realm.subscriptions.wait(timeout=10)
    return realm


def task(pk: str, priority: int = 0, owner: Optional[str] = None) -> Dict[str, Any]:
    return {"_id": pk, "name": f"task {pk}", "priority": priority, "owner_id": owner}


def download(realm: atoll.Realm) -> None:
    realm.sync_session.wait_for_download(timeout=10)
    realm.refresh()


def ids(realm: atoll.Realm) -> List[str]:
    return sorted(t["_id"] for t in realm.objects("Task"))


def closed_port() -> int:
    """A local port nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def released_within(path: Path, seconds: float) -> float:
    """Waits until the realm's files can be deleted (no handle of this process has the file
    open any more); returns how long that took."""
    started = time.monotonic()
    while True:
        try:
            atoll.delete_files(path)
            return time.monotonic() - started
        except atoll.BusyError:
            if time.monotonic() - started > seconds:
                pytest.fail(f"{path} was still open {seconds} s after the open was cancelled")
            time.sleep(0.05)


def http_json(method: str, url: str, body: Optional[Dict[str, Any]] = None,
              token: Optional[str] = None) -> Dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(req, timeout=10) as resp:
        text = resp.read().decode()
    return json.loads(text) if text else {}


# MARK: - Users

def test_login_anonymous_and_email_password(server: Server, tmp_path: Path) -> None:
    app = new_app(server, tmp_path, "a")
    assert app.current_user is None and app.all_users == []

    anon = app.login(atoll.Credentials.anonymous())
    assert re.fullmatch(r"[0-9a-f]{24}", anon.id)
    assert (anon.state, anon.provider) == ("loggedIn", "anon-user")
    assert anon.profile["user_id"] == anon.id
    assert app.current_user == anon

    app.register_email("ann@example.com", "secret-1")
    with pytest.raises(atoll.AuthError) as taken:
        app.register_email("ann@example.com", "secret-2")
    assert taken.value.code == _ffi.ATOLL_ERR_AUTH
    ann = app.login(atoll.Credentials.email_password("ann@example.com", "secret-1"))
    assert (ann.state, ann.provider) == ("loggedIn", "local-userpass")
    assert ann != anon and app.current_user == ann
    assert [u.id for u in app.all_users] == [ann.id, anon.id]      # most recently used first

    with pytest.raises(atoll.AuthError) as wrong:
        app.login(atoll.Credentials.email_password("ann@example.com", "not-the-password"))
    assert isinstance(wrong.value, atoll.SyncError)
    assert "invalid username/password" in wrong.value.message
    assert app.current_user == ann                                 # a failed login changes nothing

    app.switch_user(anon)
    assert app.current_user == anon
    anon.log_out()
    assert anon.state == "loggedOut"
    with pytest.raises(atoll.AuthError):
        app.switch_user(anon)
    with pytest.raises(atoll.AuthError):
        atoll.open_synced(anon, tmp_path / "out.realm", schema=SCHEMA)
    assert app.current_user == ann
    assert {(u.id, u.state) for u in app.all_users} == {(ann.id, "loggedIn"),
                                                        (anon.id, "loggedOut")}
    ann.remove()
    assert [u.id for u in app.all_users] == [anon.id]
    assert app.current_user is None


def test_current_user_persists_across_app_objects(server: Server, tmp_path: Path) -> None:
    first = new_app(server, tmp_path, "shared")
    first.register_email("bob@example.com", "secret-1")
    bob = first.login(atoll.Credentials.email_password("bob@example.com", "secret-1"))
    bob_id = bob.id
    bob.close()
    first.close()
    with pytest.raises(atoll.ClosedError):
        first.current_user

    again = new_app(server, tmp_path, "shared")
    user = again.current_user
    assert user is not None
    assert (user.id, user.state, user.provider) == (bob_id, "loggedIn", "local-userpass")
    # Its stored tokens still work: it syncs.
    realm = open_all(user, tmp_path / "bob.realm")
    realm.sync_session.wait_for_download(timeout=10)
    realm.close()
    assert new_app(server, tmp_path, "elsewhere").current_user is None


def test_closing_the_app_keeps_its_users_and_realms_usable(server: Server,
                                                           tmp_path: Path) -> None:
    app, ann = anonymous(server, tmp_path, "ann")
    errors: List[atoll.SyncErrorEvent] = []
    token = app.on_error(errors.append)
    with open_all(ann, tmp_path / "ann.realm") as realm:
        app.close()
        assert app.closed and token.cancelled
        with pytest.raises(atoll.ClosedError):
            app.login(atoll.Credentials.anonymous())
        with realm.write():
            realm.create("Task", task("after", 1))
        realm.sync_session.wait_for_upload(timeout=10)
        assert ann.state == "loggedIn"
        ann.log_out()
        assert ann.state == "loggedOut"
    del app, ann, realm, token
    import gc
    gc.collect()                                    # frees the app's handle now
    assert errors == []


def test_raw_user_outlives_its_freed_app_handle(server: Server) -> None:
    """The header: atoll_app_free leaves "users and realms opened through it" usable."""
    got = run_raw("""
        app = lib.atoll_app_new(json.dumps({"appId": "default", "baseUrl": sys.argv[1],
                                            "metadataDir": sys.argv[2]}).encode())
        user = lib.atoll_app_login(app, b'{"provider": "anonymous"}')
        out(bool(user))
        lib.atoll_app_free(app)
        out(json.loads(_ffi.take_string(lib.atoll_user_json(user)))["state"])
        out(lib.atoll_user_logout(user))
        out(json.loads(_ffi.take_string(lib.atoll_user_json(user)))["state"])
        lib.atoll_user_free(user)
    """, server.url, str(server.stderr_path.parent / "raw-meta"))
    assert got == [True, "loggedIn", True, "loggedOut"]


# MARK: - Syncing data

def test_two_users_share_data(server: Server, tmp_path: Path) -> None:
    _, ann = anonymous(server, tmp_path, "ann")
    _, bob = anonymous(server, tmp_path, "bob")
    with open_all(ann, tmp_path / "ann.realm") as r1, open_all(bob, tmp_path / "bob.realm") as r2:
        assert r1.synced and r1.user == ann
        with r1.write():
            r1.create("Task", task("t1", 3))
        r1.sync_session.wait_for_upload(timeout=10)
        download(r2)
        assert r2.get("Task", "t1") == task("t1", 3)
        with r2.write():
            r2.create("Task", {"_id": "t1", "priority": 4}, update="modified")
        r2.sync_session.wait_for_upload(timeout=10)
        download(r1)
        assert r1.get("Task", "t1")["priority"] == 4


def test_offline_writes_upload_after_resume(server: Server, tmp_path: Path) -> None:
    _, ann = anonymous(server, tmp_path, "ann")
    _, bob = anonymous(server, tmp_path, "bob")
    with open_all(ann, tmp_path / "ann.realm") as r1, open_all(bob, tmp_path / "bob.realm") as r2:
        session = r1.sync_session
        events: List[Dict[str, Any]] = []
        token = session.observe(events.append)
        session.pause()
        assert session.state == "paused"
        with r1.write():
            r1.create("Task", task("offline", 1))
        with pytest.raises(atoll.SyncTimeoutError) as timed_out:
            session.wait_for_upload(timeout=0.3)
        assert isinstance(timed_out.value, TimeoutError)
        download(r2)
        assert r2.get("Task", "offline") is None

        session.resume()
        assert session.state == "active"
        session.wait_for_upload(timeout=10)
        assert session.connection_state == "connected"
        download(r2)
        assert r2.get("Task", "offline") == task("offline", 1)

        session.reconnect()                        # drops the connection, connects again
        with r1.write():
            r1.create("Task", task("reconnected", 2))
        session.wait_for_upload(timeout=10)
        download(r2)
        assert r2.get("Task", "reconnected") == task("reconnected", 2)

        token.cancel()
        assert token.cancelled
        assert {"event": "state", "state": "paused"} in events
        assert {"event": "state", "state": "active"} in events
        assert {"event": "connection", "connection": "connected"} in events
        seen = len(events)
        session.pause()
        session.resume()
        session.wait_for_upload(timeout=10)
        assert len(events) == seen                 # a cancelled observer hears nothing more


def test_subscription_changes_bootstrap_and_evict(server: Server, tmp_path: Path) -> None:
    _, ann = anonymous(server, tmp_path, "ann")
    _, bob = anonymous(server, tmp_path, "bob")
    with open_all(ann, tmp_path / "ann.realm") as writer:
        with writer.write():
            writer.create_many("Task", [task(f"p{i}", i) for i in range(10)])
        writer.sync_session.wait_for_upload(timeout=10)

        reader = atoll.open_synced(bob, tmp_path / "bob.realm", schema=SCHEMA,
                                   initial_subscriptions=[("big", "Task", "priority > $0", 5)])
        with reader:
            subs = reader.subscriptions
            assert subs.wait(timeout=10) == 1
            assert (subs.version, subs.state, subs.error) == (1, "complete", None)
            assert list(subs) == [atoll.Subscription("big", "Task", "priority > $0", (5,))]
            reader.refresh()
            assert ids(reader) == ["p6", "p7", "p8", "p9"]

            with subs.update() as batch:
                batch.update("big", "priority > $0", 1)
            assert batch.version == 2
            subs.wait(batch.version, timeout=10)
            reader.refresh()
            assert ids(reader) == [f"p{i}" for i in range(2, 10)]
            assert subs.find("big") == atoll.Subscription("big", "Task", "priority > $0", (1,))

            with subs.update() as batch:
                assert batch.remove("big") is True
                assert batch.remove("big") is False
            subs.wait(timeout=10)
            assert (subs.version, len(subs), subs.state) == (3, 0, "complete")
            reader.refresh()
            assert ids(reader) == []
            # Evicted here only: the server and the writer keep them.
            download(writer)
            assert len(writer.objects("Task")) == 10


def test_refused_and_duplicate_subscriptions(server: Server, tmp_path: Path) -> None:
    _, ann = anonymous(server, tmp_path, "ann")
    with open_all(ann, tmp_path / "ann.realm") as realm:
        subs = realm.subscriptions
        with pytest.raises(atoll.SubscriptionExistsError) as exists:
            with subs.update() as batch:
                batch.add("all", "Task", "priority > 1")
        assert exists.value.code == _ffi.ATOLL_ERR_SUBSCRIPTION_EXISTS
        assert subs.version == 1                   # the block raised: nothing was sent
        # The library refuses it too (the binding checks first).
        assert not _ffi.lib.atoll_subscriptions_update(
            realm._h(), b'{"add": [{"name": "all", "class": "Task", "query": "TRUEPREDICATE"}]}',
            None)
        assert _ffi.last_error()[1] == _ffi.ATOLL_ERR_SUBSCRIPTION_EXISTS
        with pytest.raises(atoll.NotFoundError):
            with subs.update() as batch:
                batch.update("nope", "priority > 1")

        with subs.update() as batch:
            batch.add("sorted", "Task", "priority > 1 SORT(name ASC)")
        with pytest.raises(atoll.SubscriptionError) as refused:
            subs.wait(batch.version, timeout=10)
        assert refused.value.code == _ffi.ATOLL_ERR_SUBSCRIPTION
        assert "SORT" in refused.value.message
        assert (subs.version, subs.state) == (2, "error")
        assert "SORT" in subs.error
        # The previous set stays in force: writes still sync.
        with realm.write():
            realm.create("Task", task("still", 1))
        realm.sync_session.wait_for_upload(timeout=10)


# MARK: - Rules

def test_owner_rules_hide_and_reject(rules_server: Server, tmp_path: Path) -> None:
    app_a, ann = anonymous(rules_server, tmp_path, "ann", "owners")
    _, bob = anonymous(rules_server, tmp_path, "bob", "owners")
    errors: List[atoll.SyncErrorEvent] = []
    rejected = threading.Event()

    def on_error(e: atoll.SyncErrorEvent) -> None:
        errors.append(e)
        if e.code == "writeRejected":
            rejected.set()

    token = app_a.on_error(on_error)
    with open_all(ann, tmp_path / "ann.realm") as ra, open_all(bob, tmp_path / "bob.realm") as rb:
        with ra.write():
            ra.create("Task", task("a1", 1, ann.id))
        with rb.write():
            rb.create("Task", task("b1", 1, bob.id))
        ra.sync_session.wait_for_upload(timeout=10)
        rb.sync_session.wait_for_upload(timeout=10)
        download(ra)
        download(rb)
        assert ids(ra) == ["a1"]
        assert ids(rb) == ["b1"]

        with ra.write():
            ra.create("Task", task("evil", 9, bob.id))
        ra.sync_session.wait_for_upload(timeout=10)
        assert rejected.wait(10), f"no writeRejected error; got {errors}"
        e = next(e for e in errors if e.code == "writeRejected")
        assert (e.code_number, e.action, e.fatal) == (231, "warning", False)
        assert [(w.class_name, w.primary_key) for w in e.compensating_writes] == [("Task", "evil")]
        assert e.path == os.path.abspath(tmp_path / "ann.realm")
        download(ra)
        assert ra.get("Task", "evil") is None
        download(rb)
        assert ids(rb) == ["b1"]
    token.cancel()


def test_partition_sync_with_owner_partitions(rules_server: Server, tmp_path: Path) -> None:
    _, ann = anonymous(rules_server, tmp_path, "ann", "parts")
    _, bob = anonymous(rules_server, tmp_path, "bob", "parts")
    ra = atoll.open_synced(ann, tmp_path / "ann.realm", schema=SCHEMA, mode="partition",
                           partition_value=ann.id)
    rb = atoll.open_synced(bob, tmp_path / "bob.realm", schema=SCHEMA, mode="partition",
                           partition_value=bob.id)
    with ra, rb:
        with ra.write():
            ra.create("Task", task("a1", 1, ann.id))
        with rb.write():
            rb.create("Task", task("b1", 1, bob.id))
        ra.sync_session.wait_for_upload(timeout=10)
        rb.sync_session.wait_for_upload(timeout=10)
        download(ra)
        download(rb)
        assert ids(ra) == ["a1"] and ids(rb) == ["b1"]
        with pytest.raises(atoll.SyncError) as no_subscriptions:
            with ra.subscriptions.update() as batch:
                batch.add("x", "Task")
        assert type(no_subscriptions.value) is atoll.SyncError
        assert no_subscriptions.value.code == _ffi.ATOLL_ERR_SYNC

    # Another file of ann's partition gets ann's objects when it opens.
    with atoll.open_synced(ann, tmp_path / "ann-2.realm", schema=SCHEMA, mode="partition",
                           partition_value=ann.id, download_before_open="always",
                           timeout=10) as again:
        assert ids(again) == ["a1"]
    # Opened again in a new process (an app's next launch): the file resumes from its cursor,
    # and waiting for the server ends when it has answered, not at the timeout (a partition
    # file's set was once never complete after a resume).
    script = f"""
import time, atoll
app = atoll.App("parts", {rules_server.url!r}, metadata_dir={str(tmp_path / "meta-ann")!r})
user = app.current_user
started = time.monotonic()
with atoll.open_synced(user, {str(tmp_path / "ann-2.realm")!r}, schema={SCHEMA!r}, mode="partition",
                       partition_value=user.id, download_before_open="always", timeout=10) as realm:
    print(sorted(t["_id"] for t in realm.objects("Task")), round(time.monotonic() - started, 1) < 5)
"""
    reopened = run_python(script)
    assert reopened.stdout.strip() == "['a1'] True", reopened.stderr


# MARK: - Opening

def test_download_before_open_without_a_server(server: Server, tmp_path: Path) -> None:
    app, ann = anonymous(server, tmp_path, "ann")
    with open_all(ann, tmp_path / "ann.realm") as realm:
        with realm.write():
            realm.create("Task", task("kept", 1))
        realm.sync_session.wait_for_upload(timeout=10)

    # The same user, its app now pointing at a port nobody listens on.
    offline_app = atoll.App("default", f"http://127.0.0.1:{closed_port()}",
                            metadata_dir=tmp_path / "meta-ann", connect_timeout=1)
    offline_user = offline_app.current_user
    assert offline_user == ann
    started = time.monotonic()
    with pytest.raises(atoll.SyncTimeoutError) as info:
        atoll.open_synced(offline_user, tmp_path / "ann.realm", schema=SCHEMA,
                          download_before_open="always", timeout=1.0)
    assert 0.9 <= time.monotonic() - started < 5
    assert info.value.code == _ffi.ATOLL_ERR_TIMEOUT
    assert "timed out" in info.value.message

    with atoll.open_synced(offline_user, tmp_path / "ann.realm", schema=SCHEMA,
                           download_before_open="always", timeout=1.0,
                           offline_fallback=True) as realm:
        assert ids(realm) == ["kept"]
        assert realm.sync_session.connection_state != "connected"


def test_async_open_reports_progress(server: Server, tmp_path: Path) -> None:
    _, ann = anonymous(server, tmp_path, "ann")
    _, bob = anonymous(server, tmp_path, "bob")
    with open_all(ann, tmp_path / "ann.realm") as writer:
        with writer.write():
            writer.create_many("Task", [task(f"t{i:03}", i) for i in range(300)])
        writer.sync_session.wait_for_upload(timeout=10)

    progress: List[tuple] = []
    threads = set()

    def on_progress(transferred: int, transferable: int, estimate: float) -> None:
        progress.append((transferred, transferable, estimate))
        threads.add(threading.get_ident())

    async def main() -> atoll.Realm:
        return await atoll.async_open(bob, tmp_path / "bob.realm", schema=SCHEMA,
                                      initial_subscriptions=[ALL], on_progress=on_progress,
                                      timeout=10)

    realm = asyncio.run(main())
    with realm:
        assert realm.synced and len(realm.objects("Task")) == 300
        assert realm.subscriptions.state == "complete"
    assert progress, "no progress reported"
    assert progress[-1][2] == 1.0
    assert all(0.0 <= p[2] <= 1.0 for p in progress)
    assert threads == {threading.get_ident()}      # on the loop's thread


def test_async_open_fails_and_cancels(server: Server, tmp_path: Path) -> None:
    _, ann = anonymous(server, tmp_path, "ann")
    offline_app = atoll.App("default", f"http://127.0.0.1:{closed_port()}",
                            metadata_dir=tmp_path / "meta-ann", connect_timeout=1)
    offline = offline_app.current_user
    assert offline == ann

    async def fails() -> None:
        await atoll.async_open(offline, tmp_path / "a.realm", schema=SCHEMA, timeout=1.0)

    with pytest.raises(atoll.SyncTimeoutError):
        asyncio.run(fails())

    path = tmp_path / "b.realm"

    async def cancelled() -> float:
        opening = asyncio.ensure_future(atoll.async_open(offline, path, schema=SCHEMA,
                                                         timeout=60.0))
        await asyncio.sleep(0.3)
        started = time.monotonic()
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        return time.monotonic() - started

    assert asyncio.run(cancelled()) < 1.0
    released_within(path, 5)                   # the cancelled open let go of the file
    assert not atoll.file_exists(path)


def test_async_open_cancelled_at_once_lets_go_of_the_file(server: Server,
                                                         tmp_path: Path) -> None:
    """Cancelled before it connects, the open frees the file at once (not after its timeout).

    In a child process: the library's lingering session must not take the test run down."""
    _, ann = anonymous(server, tmp_path, "ann")
    proc = run_python("""
        import asyncio, json, sys, time
        import atoll
        schema, base = json.loads(sys.argv[1]), sys.argv[2]
        offline = atoll.App("default", sys.argv[3], metadata_dir=base + "/meta-ann").current_user
        for i in range(3):
            path = f"{base}/c{i}.realm"

            async def cancel_at_once():
                opening = asyncio.ensure_future(atoll.async_open(offline, path, schema=schema,
                                                                 timeout=2.0))
                await asyncio.sleep(0)           # it has started; cancel before it connects
                opening.cancel()
                try:
                    await opening
                except asyncio.CancelledError:
                    pass

            started = time.monotonic()
            asyncio.run(cancel_at_once())
            time.sleep(0.5)     # time for the open to open the file, if it still does
            while True:
                try:
                    atoll.delete_files(path)
                    break
                except atoll.BusyError:
                    time.sleep(0.02)
            print("RESULT", round(time.monotonic() - started, 2), flush=True)
    """, json.dumps(SCHEMA), str(tmp_path), f"http://127.0.0.1:{closed_port()}", timeout=60)
    released = [float(line.split()[1]) for line in proc.stdout.splitlines()
                if line.startswith("RESULT ")]
    assert proc.returncode == 0 and len(released) == 3, (
        f"the child exited with {proc.returncode}:\n{proc.stdout}\n{proc.stderr[-3000:]}")
    assert max(released) < 1.5, f"seconds from the cancel until the file was released: {released}"


def test_raw_async_open_freed_while_connecting_lets_go_of_the_file(server: Server,
                                                                  tmp_path: Path) -> None:
    """The header: atoll_async_open_free cancels an open still running. Freed while it reports
    "connecting" (before its session exists), it must not keep the file open until its
    timeout."""
    _, ann = anonymous(server, tmp_path, "ann")
    got = run_raw("""
        import threading, time
        import atoll
        offline = atoll.App("default", sys.argv[1], metadata_dir=sys.argv[2] + "/meta-ann")
        user = offline.current_user
        path = sys.argv[2] + "/raw.realm"
        connecting, freed = threading.Event(), threading.Event()
        states = []
        def on_state(_userdata, text):
            states.append(json.loads(text)["state"])
            if states[-1] == "connecting":
                connecting.set()
                freed.wait(5)   # the task goes on only once the host has freed it
        fn = _ffi.atoll_changes_fn(on_state)
        free = _ffi.atoll_free_userdata_fn(lambda _userdata: None)
        config = {"path": path, "schema": schema[:1], "sync": {"mode": "flexible", "timeoutMs": 4000}}
        task = lib.atoll_realm_async_open(user._h(), json.dumps(config).encode(), fn, None, free)
        assert task, err()
        out(connecting.wait(5))
        lib.atoll_async_open_free(task)
        started = time.monotonic()
        freed.set()
        time.sleep(0.5)         # time for the task to open the file, if it still does
        while True:
            try:
                atoll.delete_files(path)
                break
            except atoll.BusyError:
                time.sleep(0.02)
        out(time.monotonic() - started < 1.5)
        out(states)
    """, f"http://127.0.0.1:{closed_port()}", str(tmp_path))
    assert got[0] is True
    assert got[1] is True, f"the file stayed open after atoll_async_open_free (states {got[2]})"


# MARK: - Client reset

def test_client_reset_recovers_unsynced_changes(tmp_path: Path) -> None:
    first = start_server(tmp_path)
    try:
        app, ann = anonymous(first, tmp_path, "ann")
        with open_all(ann, tmp_path / "ann.realm", client_reset_mode="recoverUnsyncedChanges") as realm:
            with realm.write():
                realm.create("Task", task("synced", 1))
            realm.sync_session.wait_for_upload(timeout=10)
            realm.sync_session.pause()
            with realm.write():
                realm.create("Task", task("unsynced", 2))
    finally:
        first.stop()
    # The server comes back without its data (its users kept): it does not know the file.
    if first.database is not None:
        pg_cluster.psql(first.database, "DELETE FROM atoll_sync_history WHERE app = 'default'; "
                        "DELETE FROM atoll_sync_objects WHERE app = 'default'; "
                        "DELETE FROM atoll_sync_files WHERE app = 'default'; "
                        "UPDATE atoll_sync_apps SET schema = NULL, schema_version = schema_version + 1 "
                        "WHERE app = 'default'")
    else:
        (tmp_path / "server-data" / "default" / "data.realm").unlink()
    second = start_server(tmp_path, database=first.database)
    try:
        app2 = new_app(second, tmp_path, "ann")           # the same users file, the new server
        kept = app2.current_user
        assert kept is not None and kept.id == ann.id
        events: List[Any] = []
        token = app2.on_error(events.append)
        with atoll.open_synced(kept, tmp_path / "ann.realm", schema=SCHEMA, initial_subscriptions=[ALL],
                               client_reset_mode="recoverUnsyncedChanges") as realm:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                realm.sync_session.wait_for_upload(timeout=5)
                download(realm)
                if ids(realm) == ["unsynced"]:
                    break
                time.sleep(0.05)
            # The server's state (which lost "synced") plus the recovered change.
            assert ids(realm) == ["unsynced"]
        assert any(e.code == "clientReset" for e in events)
        token.cancel()
        _, bob = anonymous(second, tmp_path, "bob")
        with open_all(bob, tmp_path / "bob.realm") as other:
            download(other)
            assert ids(other) == ["unsynced"]
    finally:
        second.stop()


# MARK: - Copies

def test_write_copy_synced_both_ways(server: Server, tmp_path: Path) -> None:
    _, ann = anonymous(server, tmp_path, "ann")
    _, bob = anonymous(server, tmp_path, "bob")
    with atoll.open(tmp_path / "local.realm", schema=SCHEMA) as local:
        with local.write():
            local.create_many("Task", [task("c1", 1), task("c2", 2)])
        local.write_copy_synced(tmp_path / "copy.realm", user=ann, initial_subscriptions=[ALL])
        with pytest.raises(atoll.InvalidArgumentError):       # the target has objects
            local.write_copy_synced(tmp_path / "copy.realm", user=ann,
                                    initial_subscriptions=[ALL])
    with atoll.open_synced(ann, tmp_path / "copy.realm", schema=SCHEMA) as synced:
        assert ids(synced) == ["c1", "c2"]
        synced.sync_session.wait_for_upload(timeout=10)
        with open_all(bob, tmp_path / "bob.realm") as other:
            download(other)
            assert ids(other) == ["c1", "c2"]

        synced.write_copy_synced(tmp_path / "plain.realm")
    with atoll.open(tmp_path / "plain.realm") as plain:
        assert not plain.synced
        assert ids(plain) == ["c1", "c2"]
        with pytest.raises(atoll.InvalidArgumentError):
            plain.sync_session
    db = sqlite3.connect(tmp_path / "plain.realm")
    try:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_schema WHERE name LIKE "
                                           "'\\_atoll\\_sync%' ESCAPE '\\'")]
    finally:
        db.close()
    assert tables == []


def test_a_query_version_sent_twice_is_bootstrapped_once(server: Server, tmp_path: Path) -> None:
    from websockets.sync.client import connect

    app = new_app(server, tmp_path, "a", "default")
    user = app.login(atoll.Credentials.anonymous())
    realm = open_all(user, tmp_path / "a.realm")
    with realm.write():
        for i in range(3):
            realm.create("Task", task(f"t{i}", i, None))
    realm.sync_session.wait_for_upload(timeout=10)
    realm.close()

    login = http_json("POST", f"{server.api('default')}/auth/providers/anon-user/login", {})
    with connect(server.ws_url("default"), subprotocols=["atoll-sync.1"], proxy=None, compression=None,
                 additional_headers={"Authorization": f"Bearer {login['access_token']}"}, open_timeout=5) as conn:
        conn.send(json.dumps({"type": "bind", "session": 1, "mode": "flexible", "file": None,
                              "downloadCursor": 0, "schema": SCHEMA}))
        query = {"type": "query", "session": 1, "version": 1,
                 "queries": [{"name": "all", "class": "Task", "query": "TRUEPREDICATE"}]}
        got: List[Dict[str, Any]] = []
        for _ in range(2):
            conn.send(json.dumps(query))
            while True:
                m = json.loads(conn.recv(timeout=10))
                got.append(m)
                if m["type"] == "queryComplete":
                    break
        boots = [m for m in got if m["type"] == "download" and "bootstrap" in m]
        assert [m["type"] for m in got].count("queryComplete") == 2
        # Objects, counting each of an `upserts` group (docs/protocol.md).
        assert sum(len(i["objects"]) if i["op"] == "upserts" else 1
                   for m in boots for cs in m["changesets"] for i in cs["instructions"]) == 3, \
            "the second send of version 1 bootstraps nothing"


# MARK: - A forged client

def test_forged_client_cannot_read_or_write_others_objects(rules_server: Server,
                                                           tmp_path: Path) -> None:
    from websockets.exceptions import ConnectionClosed, InvalidStatus
    from websockets.sync.client import connect

    api = rules_server.api("owners")
    logins = {}
    for who in ("a", "b"):
        email = f"{who}@example.com"
        http_json("POST", f"{api}/auth/providers/local-userpass/register",
                  {"email": email, "password": "secret-1"})
        logins[who] = http_json("POST", f"{api}/auth/providers/local-userpass/login",
                                {"username": email, "password": "secret-1"})
    a_id, b_id = logins["a"]["user_id"], logins["b"]["user_id"]
    token_a = logins["a"]["access_token"]

    # B's ordinary client, with an object of its own on the server.
    app_b = new_app(rules_server, tmp_path, "b", "owners")
    bob = app_b.login(atoll.Credentials.email_password("b@example.com", "secret-1"))
    assert bob.id == b_id
    rb = open_all(bob, tmp_path / "bob.realm")
    with rb.write():
        rb.create("Task", task("b1", 1, b_id))
    rb.sync_session.wait_for_upload(timeout=10)

    def ws(token: Optional[str]):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return connect(rules_server.ws_url("owners"), subprotocols=["atoll-sync.1"],
                       additional_headers=headers, proxy=None, compression=None,
                       open_timeout=5)

    def receive(conn, until, timeout: float = 10) -> List[Dict[str, Any]]:
        got: List[Dict[str, Any]] = []
        deadline = time.monotonic() + timeout
        while not any(until(m) for m in got):
            left = deadline - time.monotonic()
            assert left > 0, f"timed out; got {got}"
            got.append(json.loads(conn.recv(timeout=left)))
        return got

    with ws(token_a) as conn:
        conn.send(json.dumps({"type": "bind", "session": 1, "mode": "flexible", "file": None,
                              "downloadCursor": 0, "schema": SCHEMA}))
        conn.send(json.dumps({"type": "query", "session": 1, "version": 1, "queries": [
            {"name": "all", "class": "Task", "query": "TRUEPREDICATE"}]}))
        got = receive(conn, lambda m: m["type"] == "queryComplete")
        assert [m for m in got if m["type"] == "error"] == []
        assert got[0]["type"] == "ident"
        boot = [m for m in got if m["type"] == "download"]
        assert boot and all("bootstrap" in m for m in boot)
        assert boot[-1]["bootstrap"]["last"] is True
        sent = json.dumps([m["changesets"] for m in boot])
        assert "b1" not in sent and b_id not in sent

        conn.send(json.dumps({"type": "upload", "session": 1, "changesets": [{
            "clientVersion": 1, "lastServerVersion": 0,
            "clock": [int(time.time() * 1000), 0, 12345],
            "instructions": [
                {"op": "create", "class": "Task", "primaryKey": "x"},
                {"op": "set", "class": "Task", "primaryKey": "x", "path": ["owner_id"],
                 "value": b_id}]}]}))
        got = receive(conn, lambda m: m["type"] == "error")
        error = next(m for m in got if m["type"] == "error")
        assert (error["code"], error["codeNumber"], error["session"]) == ("writeRejected", 231, 1)
        assert [(w["class"], w["primaryKey"]) for w in error["compensatingWrites"]] == [
            ("Task", "x")]

        # The same write with the values folded into the create (docs/protocol.md).
        conn.send(json.dumps({"type": "upload", "session": 1, "changesets": [{
            "clientVersion": 2, "lastServerVersion": 0,
            "clock": [int(time.time() * 1000), 1, 12345],
            "instructions": [
                {"op": "create", "class": "Task", "primaryKey": "y",
                 "object": {"owner_id": b_id}}]}]}))
        got = receive(conn, lambda m: m["type"] == "error")
        error = next(m for m in got if m["type"] == "error")
        assert (error["code"], error["session"]) == ("writeRejected", 1)
        assert [(w["class"], w["primaryKey"]) for w in error["compensatingWrites"]] == [
            ("Task", "y")]

        # Two new objects in one `creates` group (docs/protocol.md): only the one that breaks
        # the rule is refused; the other is stored.
        conn.send(json.dumps({"type": "upload", "session": 1, "changesets": [{
            "clientVersion": 3, "lastServerVersion": 0,
            "clock": [int(time.time() * 1000), 2, 12345],
            "instructions": [
                {"op": "creates", "class": "Task", "fields": ["owner_id"],
                 "primaryKeys": ["z1", "z2"], "objects": [[a_id], [b_id]]}]}]}))
        got = receive(conn, lambda m: m["type"] == "uploadAck" and m["clientVersion"] == 3)
        error = next(m for m in got if m["type"] == "error")
        assert [(w["class"], w["primaryKey"]) for w in error["compensatingWrites"]] == [
            ("Task", "z2")]
    download(rb)
    assert rb.get("Task", "x") is None and rb.get("Task", "y") is None
    assert ids(rb) == ["b1"]
    alice = new_app(rules_server, tmp_path, "a", "owners").login(
        atoll.Credentials.email_password("a@example.com", "secret-1"))
    ra = open_all(alice, tmp_path / "alice.realm")
    download(ra)
    assert ids(ra) == ["z1"]
    ra.close()
    rb.close()
    assert a_id != b_id

    with pytest.raises(InvalidStatus) as refused:
        ws(None)
    assert refused.value.response.status_code == 401

    with ws(token_a) as conn:
        conn.send("this is not JSON")
        error = json.loads(conn.recv(timeout=10))
        assert (error["type"], error["code"]) == ("error", "badMessage")
        with pytest.raises(ConnectionClosed):
            conn.recv(timeout=10)


def test_subscriptions_wait_returns_for_a_version_completed_before_the_reopen(
        server: Server, tmp_path: Path) -> None:
    """A file whose subscription set completed in an earlier process is resumed by the server
    from its cursor, with no second queryComplete: the wait must see the file's state (it used
    to time out; found by tests/faults)."""
    app, user = anonymous(server, tmp_path, "a")
    path = tmp_path / "a.realm"
    realm = open_all(user, path)
    with realm.write():
        realm.create("Task", task("t1"))
    realm.sync_session.wait_for_upload(timeout=10)
    download(realm)  # the file's download cursor moves past 0: the server resumes it
    version = realm.subscriptions.version
    realm.close()

    done = run_python(f"""
        import atoll
        app = atoll.App("default", {server.url!r}, metadata_dir={str(tmp_path / 'meta-a')!r})
        realm = atoll.open_synced(app.current_user, {str(path)!r}, schema={SCHEMA!r},
                                  initial_subscriptions=[{ALL!r}])
        assert realm.subscriptions.state == "complete", realm.subscriptions.state
        assert realm.subscriptions.wait(timeout=5) == {version}
        assert [t["_id"] for t in realm.objects("Task")] == ["t1"]
        realm.close()
        print("ok")
    """)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
