"""Three atoll-server instances on one PostgreSQL database, behind nginx: clients fail over when
an instance dies, writes reach the clients of other instances, tokens work everywhere.

- **Failover**: WRITERS sync clients (tests/faults/driver.py, each its own process, anonymous
  user and realm file, all subscribed to every Item) commit transactions through nginx and wait
  for each upload (`A <txn>`: acknowledged). Once every instance's admin API shows where each
  client is connected, the instance with the most of them is killed with SIGKILL while they
  write. Its clients must reconnect through nginx to the other instances (their admin APIs show
  them) and be acknowledged again, with no client reset. Then every client's file is reopened
  (what was committed and not acknowledged uploads), every client settles (downloads), and a
  new client bootstraps from each surviving instance directly: every acknowledged and every
  committed transaction is there whole, and every replica — each client's file and what each
  surviving instance serves — holds the same objects (the same digest of every field).
- **Propagation**: a write through instance A reaches a client connected to instance B while
  that client stays connected (the same connection: it was pushed, not fetched at a
  reconnect), and the other way round; a new client of instance C bootstraps both.
- **Tokens**: a user registered and logged in on A logs in on B, its access token is accepted
  by B and C, its refresh token by C, a logout on B revokes it for C; a Python client logged in
  on A syncs with B on the same stored user; a logout through A closes the sync connection its
  session opened on B (and not the user's other session's).

An instance that ignored "store" (each on its own SQLite) fails all three: B never sees A's
write, A's token means nothing to B, and the database has no tables.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, List

import atoll
from conftest import (APP, Instance, Nginx, assert_history_gapless, assert_stored_in_postgres,
                      http_json, last_ack, settle_and_compare, start_writers, wait_acked_past,
                      wait_until, where)
from driver import ALL, SCHEMA
from processes import Client

WRITERS = 6
PER_TXN = 5


def test_clients_fail_over_when_an_instance_is_killed(tmp_path: Path, database: str,
                                                     instances: List[Instance],
                                                     nginx: Nginx) -> None:
    started = time.monotonic()
    writers: List[Client] = []
    try:
        writers += start_writers(WRITERS, nginx.url, tmp_path, PER_TXN)
        assert_stored_in_postgres(database)
        users = {c.user(): c for c in writers}
        assert len(users) == WRITERS, f"the writers share users: {sorted(users)}"

        placed = wait_until(lambda: where(instances, set(users)), 20,
                            "every writer to show in an instance's admin API")
        spread = {s.name: sorted(users[u].directory.name for u, p in placed.items() if p is s)
                  for s in instances}
        print(f"\nwriters per instance before the kill: {spread}")
        victim = max(instances, key=lambda s: len(spread[s.name]))
        survivors = [s for s in instances if s is not victim]
        moved = [users[u] for u, p in placed.items() if p is victim]

        # Mid-stream: every writer acknowledged again since we looked, and goes on writing.
        for c in writers:
            c.poll_lines()
        wait_acked_past(writers, {id(c): last_ack(c) for c in writers}, 30)
        for c in writers:
            c.poll_lines()
        in_flight = sum(1 for c in moved if max(c.committed(), default=-1) > last_ack(c))
        marks = {id(c): last_ack(c) for c in writers}
        victim.kill()
        killed_at = time.monotonic()
        print(f"killed instance {victim.name} with {len(moved)} writers "
              f"({in_flight} with an upload in flight)")

        # The victim's writers come back through nginx on the other instances, and everyone
        # goes on being acknowledged.
        wait_acked_past(writers, marks, 60)
        back = time.monotonic() - killed_at
        moved_users = {c.user() for c in moved}
        again = wait_until(lambda: where(survivors, moved_users), 30,
                           f"the writers of instance {victim.name} to show on "
                           f"{[s.name for s in survivors]}")
        print(f"its writers acknowledged again within {back:.1f} s, now on "
              f"{sorted(p.name for p in again.values())}")
    finally:
        for c in writers:
            c.kill()

    summary = settle_and_compare(tmp_path, writers, nginx.url, survivors, PER_TXN)
    # Three instances integrated concurrently under one advisory lock: no version skipped or twice.
    versions = assert_history_gapless(database)
    print(f"{summary}; {versions} history versions, gapless; {time.monotonic() - started:.0f} s")


# MARK: - Propagation between instances

def open_on(instance: Instance, directory: Path) -> atoll.Realm:
    """A new anonymous user's realm, synced with `instance` directly, subscribed to all Items."""
    app = atoll.App(APP, instance.url, metadata_dir=directory / "meta", connect_timeout=2)
    user = app.login(atoll.Credentials.anonymous())
    realm = atoll.open_synced(user, directory / "client.realm", schema=SCHEMA,
                              initial_subscriptions=[ALL])
    realm.subscriptions.wait(timeout=20)
    return realm


def item(pk: str, txn: int) -> Dict[str, object]:
    return {"_id": pk, "txn": txn, "n": 0, "payload": f"written through {pk}"}


def receive(realm: atoll.Realm, pk: str, seconds: float) -> float:
    """Waits until `realm` has Item `pk` from the server; the seconds it took."""
    began = time.monotonic()

    def there() -> bool:
        realm.refresh()
        return realm.get("Item", pk) is not None
    wait_until(there, seconds, f"Item {pk!r} to reach {realm.sync_session.path}")
    return time.monotonic() - began


def test_a_write_through_one_instance_reaches_the_clients_of_another(
        tmp_path: Path, database: str, instances: List[Instance]) -> None:
    a, b, c = instances
    on_a = open_on(a, tmp_path / "client-a")
    on_b = open_on(b, tmp_path / "client-b")
    try:
        ids = {a.name: on_a.sync_session.user.id, b.name: on_b.sync_session.user.id}
        before = {s.name: wait_until(lambda s=s: s.connections().get(ids[s.name]), 10,
                                     f"the client of {s.name} in its admin API")
                  for s in (a, b)}
        for s, other in ((a, b), (b, a)):
            assert ids[other.name] not in s.connections(), (
                f"the client of {other.name} is connected to {s.name} too")

        with on_a.write():
            on_a.create("Item", item("from-a", 1))
        on_a.sync_session.wait_for_upload(timeout=20)
        assert_stored_in_postgres(database)
        a_to_b = receive(on_b, "from-a", 15)

        with on_b.write():
            on_b.create("Item", item("from-b", 2))
        on_b.sync_session.wait_for_upload(timeout=20)
        b_to_a = receive(on_a, "from-b", 15)

        after = {s.name: s.connections().get(ids[s.name]) for s in (a, b)}
        assert after == before, (f"the clients were reconnected (connection ids {before} then "
                                 f"{after}): the writes were not pushed to them")
        wait_until(lambda: c.count() == 2, 15,
                   lambda: f"instance {c.name} to find 2 Items (it finds {c.count()})")
        on_c = open_on(c, tmp_path / "client-c")
        try:
            on_c.refresh()
            got = sorted(o["_id"] for o in on_c.objects("Item"))
            assert got == ["from-a", "from-b"], f"a new client of {c.name} bootstrapped {got}"
        finally:
            on_c.close()
        print(f"\nafter the writer's upload was acknowledged, the other instance's client had "
              f"it within {a_to_b * 1000:.0f} ms (A to B), {b_to_a * 1000:.0f} ms (B to A)")
    finally:
        on_a.close()
        on_b.close()


# MARK: - Tokens

def test_a_user_of_one_instance_is_a_user_of_every_instance(
        tmp_path: Path, database: str, instances: List[Instance]) -> None:
    a, b, c = instances
    email, password = "ada@example.com", "correct horse"
    status, answer = http_json("POST", a.api("auth/providers/local-userpass/register"),
                          {"email": email, "password": password})
    assert status == 201, f"register on {a.name}: {status} {answer}"
    logins = {}
    for s in (a, b):
        status, answer = http_json("POST", s.api("auth/providers/local-userpass/login"),
                              {"username": email, "password": password})
        assert status == 200, f"login on {s.name} of the user registered on {a.name}: " \
                              f"{status} {answer}"
        logins[s.name] = answer
    assert logins[a.name]["user_id"] == logins[b.name]["user_id"], logins

    session = logins[a.name]
    for s in (b, c):
        status, profile = http_json("GET", s.api("auth/profile"), token=session["access_token"])
        assert status == 200, f"{s.name} refuses the access token of {a.name}: {status} {profile}"
        assert profile["user_id"] == session["user_id"], profile
    forged = session["access_token"][:-4] + ("AAAA" if not session["access_token"].endswith(
        "AAAA") else "BBBB")
    status, _ = http_json("GET", b.api("auth/profile"), token=forged)
    assert status == 401, f"{b.name} accepts a forged access token: {status}"

    status, fresh = http_json("POST", c.api("auth/session"), token=session["refresh_token"])
    assert status == 201, f"{c.name} refuses the refresh token of {a.name}: {status} {fresh}"
    status, profile = http_json("GET", b.api("auth/profile"), token=fresh["access_token"])
    assert status == 200 and profile["user_id"] == session["user_id"], (status, profile)
    status, answer = http_json("DELETE", b.api("auth/session"), token=session["refresh_token"])
    assert status == 204, f"logout on {b.name}: {status} {answer}"
    status, answer = http_json("POST", c.api("auth/session"), token=session["refresh_token"])
    assert status == 401, (f"{c.name} still refreshes with a token revoked on {b.name}: "
                           f"{status} {answer}")

    # The Python client: logged in on A, its stored user syncs with B.
    meta = tmp_path / "meta"
    with atoll.App(APP, a.url, metadata_dir=meta) as app_a:
        user_id = app_a.login(atoll.Credentials.email_password(email, password)).id
    with atoll.App(APP, b.url, metadata_dir=meta, connect_timeout=2) as app_b:
        user = app_b.current_user
        assert user is not None and user.id == user_id, user
        realm = atoll.open_synced(user, tmp_path / "client.realm", schema=SCHEMA,
                                  initial_subscriptions=[ALL])
        try:
            realm.subscriptions.wait(timeout=20)
            with realm.write():
                realm.create("Item", item("ada", 3))
            realm.sync_session.wait_for_upload(timeout=20)
            assert user_id in b.connections(), f"the client is not connected to {b.name}"
        finally:
            realm.close()
    assert_stored_in_postgres(database)
    wait_until(lambda: c.count("_id == $0", "ada") == 1, 15,
               f"{c.name} to find the Item written on {b.name}")


# MARK: - Admin

def test_a_user_disabled_through_one_instance_is_disconnected_from_another(
        tmp_path: Path, instances: List[Instance]) -> None:
    a, b, _ = instances
    on_b = open_on(b, tmp_path / "client-b")
    try:
        user = on_b.sync_session.user.id
        wait_until(lambda: b.connections().get(user), 10, f"the client in {b.name}'s admin API")
        answer = a.admin("POST", f"/apps/{APP}/users/{user}/disable")
        assert answer["disabled"] is True and answer["closedConnections"] == 0, answer
        # B hears of it (NOTIFY) and closes the connection; the client's reconnect is refused.
        wait_until(lambda: user not in b.connections(), 10,
                   f"{b.name} to close the connection of the user disabled through {a.name}")
        time.sleep(1)
        assert user not in b.connections(), f"{b.name} let the disabled user connect again"
    finally:
        on_b.close()


def test_a_logout_through_one_instance_closes_the_connections_it_opened_on_another(
        instances: List[Instance]) -> None:
    """A logout (the refresh token deleted) through A: B closes the sync connection the
    session's access token opened on B, and only that one (another session of the same user
    stays)."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect
    a, b, _ = instances
    status, first = http_json("POST", a.api("auth/providers/local-userpass/register"),
                              {"email": "grace@example.com", "password": "secret-1"})
    assert status == 201, (status, first)
    sessions = []
    for _ in range(2):
        status, login = http_json("POST", a.api("auth/providers/local-userpass/login"),
                                  {"username": "grace@example.com", "password": "secret-1"})
        assert status == 200, (status, login)
        sessions.append(login)
    url = b.url.replace("http://", "ws://") + f"/api/client/v2.0/app/{APP}/realm-sync"
    # Open once the upgrade is answered: B has the connection, with the token's session.
    sockets = [connect(url, subprotocols=["atoll-sync.1"], proxy=None, open_timeout=10,
                       additional_headers={"Authorization": f"Bearer {s['access_token']}"}).__enter__()
               for s in sessions]
    try:
        status, answer = http_json("DELETE", a.api("auth/session"), token=sessions[0]["refresh_token"])
        assert status == 204, f"logout on {a.name}: {status} {answer}"
        try:
            sockets[0].recv(timeout=10)
            raise AssertionError(f"{b.name} sent a message instead of closing the logged-out connection")
        except ConnectionClosed as e:
            assert e.rcvd is not None and e.rcvd.code == 1008, e
        except TimeoutError:
            raise AssertionError(f"{b.name} kept the connection of a session logged out on {a.name}")
        # The user's other session is not logged out: its connection stays.
        assert sockets[1].ping().wait(5), f"{b.name} closed the connection of the session still logged in"
    finally:
        for s in sockets:
            s.close()
