"""The admin API (docs/admin-api.md) against a real atoll-server and real sync clients."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import List

import atoll
from conftest import (ADMIN_KEY, OPEN_RULES, OWNER_RULES, Server, admin, config, http, login, ok,
                      open_all, received, start_server, task, wait_until)


# MARK: - The page in the binary

def test_the_embedded_page_is_the_one_in_admin_console() -> None:
    import subprocess
    from conftest import REPO_ROOT
    r = subprocess.run([str(REPO_ROOT / "admin" / "embed.sh"), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# MARK: - The key

def test_a_key_is_made_at_first_start_printed_saved_and_kept(tmp_path: Path) -> None:
    first = start_server(tmp_path, config(admin=False))
    try:
        assert first.lines[1] == f"admin console: {first.url}/admin"
        key_file = first.data / "admin.key"
        key = key_file.read_text().strip()
        assert len(key) == 64 and all(c in "0123456789abcdef" for c in key)
        assert first.lines[2] == f"admin key: {key} (new; saved in {key_file})"
        assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
        assert admin(first, "GET", "/apps", key=key)[0] == 200
    finally:
        first.stop()
    again = start_server(tmp_path, config(admin=False), data=first.data)
    try:
        assert again.lines[2] == f"admin key: in {key_file}"
        assert key not in "\n".join(again.lines)
        assert admin(again, "GET", "/apps", key=key)[0] == 200
    finally:
        again.stop()


def test_the_config_key_is_used_and_not_printed(server: Server) -> None:
    assert server.lines[2] == 'admin key: the one in the config file ("admin": {"key"})'
    assert not (server.data / "admin.key").exists()
    assert ok(server, "GET", "/info")["keySource"] == "config"


def test_a_short_config_key_stops_the_server(tmp_path: Path) -> None:
    conf = config()
    conf["admin"] = {"key": "short"}
    (tmp_path / "c.json").write_text(__import__("json").dumps(conf))
    import subprocess
    from conftest import SERVER
    r = subprocess.run([str(SERVER), "--port", "0", "--data", str(tmp_path / "d"), "--config", str(tmp_path / "c.json")],
                       capture_output=True, text=True, timeout=20)
    assert r.returncode == 2
    assert "admin.key: at least 16 characters" in r.stderr


def test_every_route_refuses_without_the_right_key(server: Server) -> None:
    for method, path in [("GET", "/info"), ("GET", "/apps"), ("GET", "/apps/todo"), ("PUT", "/apps/todo/rules"),
                         ("GET", "/apps/todo/users"), ("GET", "/apps/todo/sync"), ("POST", "/apps/todo/query"),
                         ("PATCH", "/apps/todo/object"), ("GET", "/metrics"), ("DELETE", "/apps/todo/users/x")]:
        status, body = http(method, f"{server.url}/api/admin/v1{path}", {})
        assert (status, body["error_code"]) == (401, "Unauthorized"), (method, path)
        assert "Authorization: Bearer" in body["error"]
        for wrong in ["", ADMIN_KEY + "x", ADMIN_KEY[:-1], "x" * 200]:
            status, body = admin(server, method, path, {}, key=wrong)
            assert status == 401, (method, path, wrong)
    # Basic auth or a user's access token is not the admin key.
    _, user = http("POST", f"{server.api()}/auth/providers/anon-user/login", {})
    assert admin(server, "GET", "/apps", key=user["access_token"])[0] == 401


def test_the_page_is_served_with_a_strict_policy(server: Server) -> None:
    import urllib.request
    with urllib.request.urlopen(f"{server.url}/admin", timeout=10) as r:
        page = r.read().decode()
        assert r.headers["Content-Type"] == "text/html; charset=utf-8"
        assert "script-src 'self'" in r.headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in r.headers["Content-Security-Policy"]
    assert '<script src="/admin/console.js"' in page and "Atoll admin" in page
    with urllib.request.urlopen(f"{server.url}/admin/console.js", timeout=10) as r:
        script = r.read().decode()
    # Data goes into the page as text, never as HTML.
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script and "document.write" not in script


# MARK: - Apps and rules

def test_an_app_shows_providers_schema_sync_and_rules(owner_server: Server) -> None:
    apps = ok(owner_server, "GET", "/apps")
    assert [a["id"] for a in apps] == ["todo"]
    a = ok(owner_server, "GET", "/apps/todo")
    assert a["sync"] == {"mode": "flexible", "partitionKey": "owner_id", "queryableFields": None}
    assert a["developmentMode"] is False
    assert [p["type"] for p in a["auth"]["providers"]] == ["anon-user", "local-userpass", "api-key"]
    assert [c["name"] for c in a["schema"]] == ["Task"]
    assert a["rules"] == OWNER_RULES
    assert a["rulesSavedByAdmin"] is False
    status, body = admin(owner_server, "GET", "/apps/nope")
    assert (status, body["error_code"]) == (404, "AppNotFound")


def test_a_bad_rule_is_refused_with_its_reason_and_nothing_is_saved(owner_server: Server) -> None:
    cases = [
        ({"Task": {"roles": [{"name": "r", "read": "owner_id ==", "write": True}]}}, "rules.Task, role 'r', read 'owner_id =='"),
        ({"Task": {"roles": [{"name": "r", "read": "no_such_field == 1", "write": True}]}}, "no_such_field"),
        ({"Task": {"roles": [{"name": "r", "read": 7, "write": True}]}}, "\"read\" must be true, false"),
        ({"Task": {"roles": [{"name": "r", "read": "owner_id == $0", "write": True}]}}, "use %user"),
        ({"Nope": {"roles": [{"name": "r", "read": True, "write": True}]}}, "there is no class 'Nope'"),
        ({"Task": {}}, "needs \"roles\""),
        ({"default": {"roles": [{"name": "d", "read": "priority >", "write": True}]}}, "role 'd'"),
    ]
    for rules, reason in cases:
        status, body = admin(owner_server, "PUT", "/apps/todo/rules", rules)
        assert (status, body["error_code"]) == (400, "InvalidRule"), (rules, body)
        assert reason in body["error"], (reason, body["error"])
    status, body = admin_raw(owner_server, "PUT", "/apps/todo/rules", b"{not json")
    assert (status, body["error_code"]) == (400, "BadRequest")
    assert ok(owner_server, "GET", "/apps/todo")["rules"] == OWNER_RULES
    assert not (owner_server.data / "todo" / "admin-rules.json").exists()


def admin_raw(server: Server, method: str, path: str, raw: bytes):
    return http(method, f"{server.url}/api/admin/v1{path}", raw=raw, token=ADMIN_KEY)


def test_new_rules_apply_at_once_and_survive_a_restart(tmp_path: Path) -> None:
    s = start_server(tmp_path, config(OWNER_RULES))
    try:
        _, ann = login(s, tmp_path, "ann")
        _, bob = login(s, tmp_path, "bob")
        with open_all(ann, tmp_path / "ann.realm") as ra:
            with ra.write():
                ra.create("Task", task("a1", 1, ann.id))
            ra.sync_session.wait_for_upload(timeout=10)
        with open_all(bob, tmp_path / "bob1.realm") as rb:
            assert len(rb.objects("Task")) == 0
        answer = ok(s, "PUT", "/apps/todo/rules", OPEN_RULES)
        assert answer["saved"] is True
        with open_all(bob, tmp_path / "bob2.realm") as rb:
            wait_until(lambda: rb.refresh() is not None and [t["_id"] for t in rb.objects("Task")] == ["a1"],
                       what="bob to see ann's task under the new rules")
    finally:
        s.stop()
    assert (s.data / "todo" / "admin-rules.json").exists()
    again = start_server(tmp_path, config(OWNER_RULES), data=s.data)
    try:
        a = ok(again, "GET", "/apps/todo")
        assert a["rules"] == OPEN_RULES and a["rulesSavedByAdmin"] is True
    finally:
        again.stop()


def test_connected_devices_gain_and_lose_objects_when_the_rules_change(tmp_path: Path) -> None:
    s = start_server(tmp_path, config(OWNER_RULES))
    try:
        _, ann = login(s, tmp_path, "ann")
        _, bob = login(s, tmp_path, "bob")
        with open_all(ann, tmp_path / "ann.realm") as ra, open_all(bob, tmp_path / "bob.realm") as rb:
            with ra.write():
                ra.create("Task", task("a1", 1, ann.id))
            ra.sync_session.wait_for_upload(timeout=10)
            with rb.write():
                rb.create("Task", task("b1", 1, bob.id))
            rb.sync_session.wait_for_upload(timeout=10)
            rb.sync_session.wait_for_download(timeout=10)
            rb.refresh()
            assert [t["_id"] for t in rb.objects("Task")] == ["b1"]

            ok(s, "PUT", "/apps/todo/rules", OPEN_RULES)
            wait_until(lambda: rb.refresh() is not None and sorted(t["_id"] for t in rb.objects("Task")) == ["a1", "b1"],
                       what="bob, still connected, to get ann's task when the rules open")

            ok(s, "PUT", "/apps/todo/rules", OWNER_RULES)
            wait_until(lambda: rb.refresh() is not None and [t["_id"] for t in rb.objects("Task")] == ["b1"],
                       what="bob, still connected, to lose ann's task when the rules close again")
            # Ann's session is bootstrapped again too, on its own: bob's being done says nothing
            # of hers.
            wait_until(lambda: ra.refresh() is not None and sorted(t["_id"] for t in ra.objects("Task")) == ["a1"],
                       what="ann, still connected, to lose bob's task when the rules close again")
    finally:
        s.stop()


def test_auth_settings_are_checked_applied_at_once_and_saved(server: Server) -> None:
    status, body = admin(server, "PUT", "/apps/todo/auth", {"accessTokenLifetime": -1})
    assert (status, body["error_code"]) == (400, "InvalidAuthConfig")
    assert "accessTokenLifetime" in body["error"]
    assert not (server.data / "todo" / "admin-auth.json").exists()
    status, _ = http("POST", f"{server.api()}/auth/providers/anon-user/login", {})
    assert status == 200
    ok(server, "PUT", "/apps/todo/auth", {"anonymous": False})
    app = ok(server, "GET", "/apps/todo")
    assert app["authSaved"] == {"anonymous": False}
    assert "anon-user" not in [p["type"] for p in app["auth"]["providers"]]
    status, _ = http("POST", f"{server.api()}/auth/providers/anon-user/login", {})
    assert status >= 400, "anonymous login goes off at once"
    ok(server, "PUT", "/apps/todo/auth", {"anonymous": True})
    status, _ = http("POST", f"{server.api()}/auth/providers/anon-user/login", {})
    assert status == 200


# MARK: - Users

def test_users_are_listed_searched_disabled_revoked_and_deleted(server: Server, tmp_path: Path) -> None:
    api = server.api()
    assert http("POST", f"{api}/auth/providers/local-userpass/register", {"email": "Cleo@Example.com", "password": "secret1"})[0] == 201
    _, cleo = http("POST", f"{api}/auth/providers/local-userpass/login", {"username": "cleo@example.com", "password": "secret1"})
    _, anon = http("POST", f"{api}/auth/providers/anon-user/login", {})
    status, key = http("POST", f"{api}/auth/api_keys", {"name": "ci"}, token=cleo["refresh_token"])
    assert status == 201

    users = ok(server, "GET", "/apps/todo/users")
    assert [u["_id"] for u in users] == [cleo["user_id"], anon["user_id"]]
    c = users[0]
    assert (c["email"], c["disabled"], c["apiKeys"], c["sessions"]) == ("cleo@example.com", False, 1, 1)
    assert [i["provider_type"] for i in c["identities"]] == ["local-userpass"]
    assert [u["_id"] for u in ok(server, "GET", "/apps/todo/users?search=CLEO")] == [cleo["user_id"]]
    assert [u["_id"] for u in ok(server, "GET", "/apps/todo/users?search=anon")] == [anon["user_id"]]
    assert ok(server, "GET", "/apps/todo/users?search=nobody") == []

    keys = ok(server, "GET", f"/apps/todo/users/{cleo['user_id']}/api_keys")
    assert [(k["_id"], k["name"], k["disabled"]) for k in keys] == [(key["_id"], "ci", False)]
    assert "key" not in keys[0]

    ok(server, "POST", f"/apps/todo/users/{cleo['user_id']}/disable")
    status, body = http("POST", f"{api}/auth/providers/local-userpass/login", {"username": "cleo@example.com", "password": "secret1"})
    assert (status, body["error_code"]) == (401, "UserDisabled")
    ok(server, "POST", f"/apps/todo/users/{cleo['user_id']}/enable")
    _, cleo = http("POST", f"{api}/auth/providers/local-userpass/login", {"username": "cleo@example.com", "password": "secret1"})

    ok(server, "POST", f"/apps/todo/users/{cleo['user_id']}/revoke_sessions")
    assert http("POST", f"{api}/auth/session", token=cleo["refresh_token"])[0] == 401
    assert ok(server, "GET", "/apps/todo/users?search=cleo")[0]["sessions"] == 0

    ok(server, "DELETE", f"/apps/todo/users/{cleo['user_id']}/api_keys/{key['_id']}")
    assert ok(server, "GET", f"/apps/todo/users/{cleo['user_id']}/api_keys") == []
    status, body = admin(server, "DELETE", f"/apps/todo/users/{cleo['user_id']}/api_keys/{key['_id']}")
    assert (status, body["error_code"]) == (404, "APIKeyNotFound")

    ok(server, "DELETE", f"/apps/todo/users/{cleo['user_id']}")
    assert [u["_id"] for u in ok(server, "GET", "/apps/todo/users")] == [anon["user_id"]]
    for method, path in [("DELETE", ""), ("POST", "/disable"), ("POST", "/revoke_sessions")]:
        status, body = admin(server, method, f"/apps/todo/users/{cleo['user_id']}{path}")
        assert (status, body["error_code"]) == (404, "UserNotFound"), path


def test_disabling_a_user_closes_its_sync_connection(server: Server, tmp_path: Path) -> None:
    _, ann = login(server, tmp_path, "ann")
    with open_all(ann, tmp_path / "ann.realm"):
        wait_until(lambda: ok(server, "GET", "/apps/todo/sync")["connections"], what="ann's connection")
        answer = ok(server, "POST", f"/apps/todo/users/{ann.id}/disable")
        assert answer["closedConnections"] == 1
        # Its reconnection is refused: the list stays empty.
        wait_until(lambda: ok(server, "GET", "/apps/todo/sync")["connections"] == [], what="the connection to close")


# MARK: - Sync

def test_sync_shows_sessions_subscriptions_and_rejected_writes(owner_server: Server, tmp_path: Path) -> None:
    _, ann = login(owner_server, tmp_path, "ann")
    errors: List[atoll.SyncErrorEvent] = []
    with open_all(ann, tmp_path / "ann.realm") as ra:
        sync = wait_until(lambda: ok(owner_server, "GET", "/apps/todo/sync")["connections"], what="a connection")
        assert len(sync) == 1 and sync[0]["user"] == ann.id
        assert sync[0]["address"].startswith("127.0.0.1")
        (session,) = sync[0]["sessions"]
        assert session["mode"] == "flexible" and session["state"] == "active"
        assert session["subscriptions"] == [{"name": "all", "class": "Task", "query": "TRUEPREDICATE", "args": []}]
        with ra.write():
            ra.create("Task", task("evil", 1, "someone-else"))
        ra.sync_session.wait_for_upload(timeout=10)
        errs = wait_until(lambda: ok(owner_server, "GET", "/apps/todo/sync")["errors"], what="the rejected write")
    e = errs[0]
    assert (e["code"], e["user"], e["action"]) == ("writeRejected", ann.id, "warning")
    assert e["compensatingWrites"][0]["class"] == "Task" and e["compensatingWrites"][0]["primaryKey"] == "evil"
    assert "owner" in e["compensatingWrites"][0]["reason"]
    del errors


# MARK: - Data

def test_queries_page_through_results_and_explain_errors(server: Server, tmp_path: Path) -> None:
    _, ann = login(server, tmp_path, "ann")
    with open_all(ann, tmp_path / "ann.realm") as ra:
        with ra.write():
            for i in range(25):
                ra.create("Task", task(f"t{i:02}", i % 5))
        ra.sync_session.wait_for_upload(timeout=10)
    classes = ok(server, "GET", "/apps/todo/classes")
    assert [(c["name"], c["count"], c["primaryKey"]) for c in classes] == [("Task", 25, "_id")]
    page = ok(server, "POST", "/apps/todo/query", {"class": "Task", "query": "priority >= $0 SORT(_id ASC)", "args": [3],
                                                   "offset": 0, "limit": 4})
    assert page["count"] == 10
    assert [o["_id"] for o in page["objects"]] == ["t03", "t04", "t08", "t09"]
    page = ok(server, "POST", "/apps/todo/query", {"class": "Task", "query": "priority >= $0 SORT(_id ASC)", "args": [3],
                                                   "offset": 8, "limit": 4})
    assert [o["_id"] for o in page["objects"]] == ["t23", "t24"]
    assert ok(server, "POST", "/apps/todo/query", {"class": "Task"})["count"] == 25
    for body, code in [({"class": "Task", "query": "priority >"}, "InvalidQuery"),
                       ({"class": "Task", "query": "nope == 1"}, "InvalidQuery"),
                       ({"class": "Task", "query": "priority == $0"}, "InvalidQuery"),
                       ({"class": "Task", "limit": 0}, "BadRequest"),
                       ({"query": "TRUEPREDICATE"}, "BadRequest")]:
        status, answer = admin(server, "POST", "/apps/todo/query", body)
        assert (status, answer["error_code"]) == (400, code), body
    status, answer = admin(server, "POST", "/apps/todo/query", {"class": "Nope"})
    assert (status, answer["error_code"]) == (404, "ClassNotFound")


def test_an_edit_reaches_connected_clients_and_a_bad_one_changes_nothing(server: Server, tmp_path: Path) -> None:
    _, ann = login(server, tmp_path, "ann")
    _, bob = login(server, tmp_path, "bob")
    with open_all(ann, tmp_path / "ann.realm") as ra, open_all(bob, tmp_path / "bob.realm") as rb:
        with ra.write():
            ra.create("Task", task("t1", 1))
        ra.sync_session.wait_for_upload(timeout=10)
        received(rb, "t1", "priority", 1)
        before = ok(server, "GET", "/apps/todo")["serverVersion"]

        answer = ok(server, "PATCH", "/apps/todo/object", {"class": "Task", "primaryKey": "t1",
                                                            "set": {"name": "edited by the admin", "priority": 9}})
        assert answer["object"]["name"] == "edited by the admin" and answer["object"]["priority"] == 9
        assert answer["serverVersion"] == before + 1
        received(ra, "t1", "name", "edited by the admin")
        received(rb, "t1", "priority", 9)

        # One bad field refuses the whole edit.
        for body, code in [({"set": {"name": "x", "priority": "high"}}, "WriteRefused"),
                           ({"set": {"nope": 1}}, "BadRequest"),
                           ({"set": {"_id": "t2"}}, "BadRequest"),
                           ({"set": {"tags": ["a"]}}, "BadRequest"),
                           ({"set": {}}, "BadRequest"),
                           ({"set": 3}, "BadRequest")]:
            status, err = admin(server, "PATCH", "/apps/todo/object", {"class": "Task", "primaryKey": "t1", **body})
            assert (status, err["error_code"]) == (400, code), (body, err)
        status, err = admin(server, "PATCH", "/apps/todo/object", {"class": "Task", "primaryKey": "zz", "set": {"priority": 1}})
        assert (status, err["error_code"]) == (404, "ObjectNotFound")
        obj = ok(server, "POST", "/apps/todo/object", {"class": "Task", "primaryKey": "t1"})
        assert (obj["name"], obj["priority"]) == ("edited by the admin", 9)
        assert ok(server, "GET", "/apps/todo")["serverVersion"] == before + 1

        # A client's later write still wins over the admin's earlier one (last writer wins).
        with rb.write():
            rb.create("Task", {"_id": "t1", "priority": 10}, update="modified")
        rb.sync_session.wait_for_upload(timeout=10)
        received(ra, "t1", "priority", 10)


# MARK: - Metrics

def test_metrics_samples_carry_the_counters_of_slash_metrics(server: Server, tmp_path: Path) -> None:
    _, ann = login(server, tmp_path, "ann")
    with open_all(ann, tmp_path / "ann.realm") as ra:
        with ra.write():
            ra.create("Task", task("m1"))
        ra.sync_session.wait_for_upload(timeout=10)
        m = ok(server, "GET", "/metrics")
        import urllib.request
        with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as r:
            prom = dict(line.rsplit(" ", 1) for line in r.read().decode().splitlines() if line and not line.startswith("#"))
    assert m["interval"] == 5
    last = m["samples"][-1]
    assert last["connections"] == 1 and last["sessions"] == 1
    assert last["uploads"] == int(prom["atoll_uploads_total"]) >= 1
    assert last["bootstraps"] == int(prom["atoll_bootstraps_total"]) >= 1
    assert m["samples"][0]["time"] <= last["time"]
