"""The admin console's page in a real headless Chromium (Debian's `chromium`, driven by
Playwright's Python package with executable_path: no browser download), against a real
atoll-server with real sync clients. Screenshots of each view go to ATOLL_SCREENSHOTS (default
build/admin-screenshots), printed at the start of the test.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from conftest import (ADMIN_KEY, REPO_ROOT, Server, config, login, ok, open_all, received, start_server, task,
                      wait_until)

SCREENSHOTS = Path(os.environ.get("ATOLL_SCREENSHOTS", REPO_ROOT / "build" / "admin-screenshots"))
OWNER_RULES = {"Task": {"roles": [
    {"name": "admin", "applyWhen": {"%%user.data.isAdmin": True}, "read": True, "write": True},
    {"name": "everyone", "read": True, "write": "priority < 100"}]}}


def chromium_path() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if not path:
        pytest.fail("chromium not found: install Debian's chromium package (make deps) or set CHROMIUM", pytrace=False)
    return path


@pytest.fixture
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        # --no-sandbox: the tests may run as root (CI does), where Chromium's sandbox cannot start.
        b = p.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        yield b
        b.close()


def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_the_console_end_to_end(browser: Browser, tmp_path: Path) -> None:
    print(f"\nadmin console screenshots: {SCREENSHOTS}")
    server = start_server(tmp_path, config(OWNER_RULES))
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    errors: list = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        run(server, page, tmp_path)
    finally:
        page.close()
        server.stop()
    assert errors == [], errors


def run(server: Server, page: Page, tmp_path: Path) -> None:
    # Data and users: an email user, two devices connected; one object named with markup, to
    # see that the page shows it as text.
    import urllib.request
    import json
    req = urllib.request.Request(f"{server.api()}/auth/providers/local-userpass/register",
                                 data=json.dumps({"email": "dana@example.com", "password": "secret1"}).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    urllib.request.urlopen(req, timeout=10).read()
    _, ann = login(server, tmp_path, "ann")
    _, bob = login(server, tmp_path, "bob")
    ra = open_all(ann, tmp_path / "ann.realm")
    rb = open_all(bob, tmp_path / "bob.realm")
    try:
        with ra.write():
            for i in range(30):
                ra.create("Task", task(f"t{i:02}", i % 7, ann.id))
            ra.create("Task", task("xss", 1, ann.id, name="<img src=x onerror=alert(1)><b>bold</b>"))
        ra.sync_session.wait_for_upload(timeout=10)
        received(rb, "t05", "priority", 5)
        with rb.write():
            rb.create("Task", task("too-high", 500, bob.id))  # refused by the write rule
        rb.sync_session.wait_for_upload(timeout=10)
        wait_until(lambda: ok(server, "GET", "/apps/todo/sync")["errors"], what="the rejected write")

        # Sign in: a wrong key is refused, the right one opens the console.
        page.goto(f"{server.url}/admin")
        page.fill("#login-key", "not-the-key-at-all")
        page.click("#login-submit")
        expect(page.locator("#login-error")).to_contain_text("wrong admin key")
        shot(page, "0-login-refused")
        page.fill("#login-key", ADMIN_KEY)
        page.click("#login-submit")
        expect(page.locator("#console")).to_be_visible()

        # App: providers, sync mode, schema, rules; a bad rule is refused with its reason.
        expect(page.locator("#app-sync-mode")).to_have_text("flexible (partition key owner_id)")
        expect(page.locator("#app-providers")).to_have_text("anon-user, local-userpass, api-key")
        rules_before = page.input_value("#rules-text")
        assert json.loads(rules_before) == OWNER_RULES
        bad = {"Task": {"roles": [{"name": "broken", "read": "priority >", "write": True}]}}
        page.fill("#rules-text", json.dumps(bad, indent=2))
        page.click("#rules-save")
        expect(page.locator("#rules-message")).to_contain_text("Refused: rules.Task, role 'broken', read 'priority >'")
        shot(page, "1-app-bad-rule-refused")
        assert ok(server, "GET", "/apps/todo")["rules"] == OWNER_RULES

        # Users: the three users, searchable.
        page.click("nav button[data-view=users]")
        expect(page.locator("#users tbody tr")).to_have_count(3)
        expect(page.locator(f"#users tr[data-user='{ann.id}']")).to_be_visible()
        page.fill("#user-search", "dana")
        page.click("#user-search-form button")
        expect(page.locator("#users tbody tr")).to_have_count(1)
        expect(page.locator("#users tbody tr td").nth(1)).to_have_text("dana@example.com")
        page.fill("#user-search", "")
        page.click("#user-search-form button")
        expect(page.locator("#users tbody tr")).to_have_count(3)
        shot(page, "2-users")

        # Sync: both clients with their subscription, and the rejected write with its reason;
        # a client that connects now appears.
        page.click("nav button[data-view=sync]")
        expect(page.locator(f"#connections tr[data-user='{ann.id}']")).to_have_count(1)
        expect(page.locator(f"#connections tr[data-user='{bob.id}']")).to_contain_text("all: Task where TRUEPREDICATE")
        expect(page.locator("#sync-errors tr[data-code=writeRejected]")).to_contain_text("too-high")
        _, cleo = login(server, tmp_path, "cleo")
        rc = open_all(cleo, tmp_path / "cleo.realm")
        try:
            expect(page.locator(f"#connections tr[data-user='{cleo.id}']")).to_have_count(1, timeout=10000)
            expect(page.locator("#connection-count")).to_have_text("3 connections")
            shot(page, "3-sync")
        finally:
            rc.close()

        # Data: a query with an argument, pages, the markup shown as text.
        page.click("nav button[data-view=data]")
        expect(page.locator("#query-count")).to_have_text("1–20 of 31")
        page.fill("#query-text", "priority >= $0 SORT(_id ASC)")
        page.fill("#query-args", "[5]")
        page.click("#query-run")
        expect(page.locator("#query-count")).to_have_text("1–8 of 8")
        page.fill("#query-text", "TRUEPREDICATE SORT(_id ASC)")
        page.fill("#query-args", "[]")
        page.click("#query-run")
        page.click("#page-next")
        expect(page.locator("#query-count")).to_have_text("21–31 of 31")
        cell = page.locator("#results-table tr[data-pk='\"xss\"'] td").nth(1)
        expect(cell).to_have_text("<img src=x onerror=alert(1)><b>bold</b>")
        assert page.locator("#results-table img, #results-table b").count() == 0
        page.click("#page-prev")
        page.fill("#query-text", "priority > $0")
        page.fill("#query-args", "[")
        page.click("#query-run")
        expect(page.locator("#query-message")).to_contain_text("Arguments are not a JSON array")
        page.fill("#query-text", "priority >")
        page.fill("#query-args", "[]")
        page.click("#query-run")
        expect(page.locator("#query-message")).to_contain_text("expected a value or property at the end of the query")
        page.fill("#query-text", "_id == $0")
        page.fill("#query-args", '["t05"]')
        page.click("#query-run")
        expect(page.locator("#query-count")).to_have_text("1–1 of 1")

        # Edit an object: both connected clients receive it.
        page.click("#results-table tr[data-pk='\"t05\"']")
        expect(page.locator("#object-editor input[data-field=name]")).to_have_value("task t05")
        page.fill("#object-editor input[data-field=name]", "renamed in the console")
        page.fill("#object-editor input[data-field=priority]", "42")
        page.click("#object-save")
        expect(page.locator("#object-message")).to_contain_text("Saved at server version")
        received(ra, "t05", "name", "renamed in the console")
        received(rb, "t05", "priority", 42)
        expect(page.locator("#results-table tr[data-pk='\"t05\"']")).to_contain_text("renamed in the console")
        # A bad value is refused and changes nothing.
        page.fill("#object-editor input[data-field=priority]", '"high"')
        page.click("#object-save")
        expect(page.locator("#object-message")).to_contain_text("Refused:")
        shot(page, "4-data-edit")
        assert ok(server, "POST", "/apps/todo/object", {"class": "Task", "primaryKey": "t05"})["priority"] == 42

        # Metrics: four graphs from the samples.
        page.click("nav button[data-view=metrics]")
        expect(page.locator("#metrics-totals")).to_contain_text("uploads")
        page.wait_for_timeout(600)
        shot(page, "5-metrics")
        drawn = page.evaluate("""() => ['chart-connections', 'chart-transfers', 'chart-latency', 'chart-bootstrap'].map(id => {
            const c = document.getElementById(id), d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; })""")
        assert all(n > 500 for n in drawn), drawn

        # Back to the app view: a good rule is saved and shown.
        page.click("nav button[data-view=apps]")
        good = {"Task": {"roles": [{"name": "everyone", "read": True, "write": True}]}}
        page.fill("#rules-text", json.dumps(good))
        page.click("#rules-save")
        expect(page.locator("#rules-message")).to_have_text("Rules saved and in force.")
        assert ok(server, "GET", "/apps/todo")["rules"] == good
        shot(page, "6-app-rules-saved")

        # Sign out: the key is forgotten.
        page.click("#sign-out")
        expect(page.locator("#login")).to_be_visible()
        page.reload()
        expect(page.locator("#login")).to_be_visible()
    finally:
        ra.close()
        rb.close()
