"""Three devices write to the same objects through the C ABI (the Python binding) while their
sessions are paused and resumed, then settle: every device holds exactly what the others hold.

The writes are what an app does: whole objects with `update="all"` (on a deleted key the object
comes back), one field with `update="modified"`, the list replaced, deletes; over few keys, so
that they collide, from three threads at once. The devices are of one user, or of three users.
`make test` runs a few rounds; ATOLL_STRESS=1 runs 100 (docs/testing.md).
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from conftest import Server, atoll, report, size

SCHEMA = [{"name": "Item", "primaryKey": "_id",
           "properties": {"_id": "string", "text": "string", "n": "int", "tags": "string[]"}}]
ALL = ("all", "Item", "TRUEPREDICATE")
KEYS = 50
TRANSACTIONS = 300


def write(realm: atoll.Realm, r: random.Random, device: int, i: int) -> None:
    """One transaction: 20% a whole object, 50% one field, 15% the list replaced, 15% a delete."""
    k = f"k{r.randrange(KEYS)}"
    p = r.random()
    with realm.write():
        exists = len(realm.objects("Item").filter("_id == $0", k)) > 0
        if p < 0.20:
            realm.create("Item", {"_id": k, "text": f"d{device}-{i}", "n": i,
                                  "tags": [f"t{device}", f"u{i % 3}"]}, update="all")
        elif not exists:
            return
        elif p < 0.70:
            field = {"text": f"d{device}-{i}"} if r.random() < 0.5 else {"n": i}
            realm.create("Item", {"_id": k, **field}, update="modified")
        elif p < 0.85:
            realm.create("Item", {"_id": k, "tags": [f"x{device}", f"y{i % 5}"]}, update="modified")
        else:
            realm.delete("Item", k)


def state(realm: atoll.Realm) -> Dict[str, Tuple[str, int, List[str]]]:
    realm.refresh()
    return {o["_id"]: (o["text"], o["n"], list(o["tags"])) for o in realm.objects("Item")}


def run_round(tmp: Path, seed: int, same_user: bool) -> Tuple[List[str], int, int]:
    """One round on a fresh server: returns the differences (empty when the devices agree), the
    writes made and the pauses."""
    tmp.mkdir(parents=True, exist_ok=True)
    server = Server(tmp / "server-data", tmp / "server.log")
    server.start()
    apps: List[atoll.App] = []
    realms: List[atoll.Realm] = []
    errors: List[Any] = []
    tokens = []
    try:
        for d in range(3):
            app = atoll.App("default", server.url, metadata_dir=tmp / f"meta{d}")
            if same_user:
                if d == 0:
                    app.register_email("devices@example.com", "password1")
                user = app.login(atoll.Credentials.email_password("devices@example.com", "password1"))
            else:
                user = app.login(atoll.Credentials.anonymous())
            tokens.append(app.on_error(lambda e, *_: errors.append(e)))
            realms.append(atoll.open_synced(user, tmp / f"d{d}.realm", schema=SCHEMA, initial_subscriptions=[ALL],
                                            download_before_open="always", timeout=30))
            apps.append(app)
        pauses = [0, 0, 0]
        failures: List[BaseException] = []

        def device(d: int) -> None:
            r = random.Random(seed * 10 + d)
            realm = realms[d]
            try:
                for i in range(TRANSACTIONS):
                    write(realm, r, d, i)
                    if r.random() < 1 / 60:
                        pauses[d] += 1
                        realm.sync_session.pause()
                        time.sleep(r.uniform(0.05, 0.25))
                        realm.sync_session.resume()
                    time.sleep(r.uniform(0, 0.004))
            except BaseException as e:  # reported below, on the test's thread
                failures.append(e)

        threads = [threading.Thread(target=device, args=(d,)) for d in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failures:
            raise failures[0]
        # Settle: every device uploads, then downloads, a few times over.
        for _ in range(3):
            for realm in realms:
                realm.sync_session.resume()
                realm.sync_session.wait_for_upload(timeout=60)
            for realm in realms:
                realm.sync_session.wait_for_download(timeout=60)
        states = [state(realm) for realm in realms]
        differences = []
        for key in sorted(set().union(*states)):
            values = [s.get(key) for s in states]
            if any(v != values[0] for v in values):
                differences.append(f"{key}: " + " | ".join(f"d{d} {v}" for d, v in enumerate(values)))
        for realm in realms:
            realm.close()
        realms = []
        return differences, 3 * TRANSACTIONS, sum(pauses)
    finally:
        for realm in realms:
            realm.close()
        for app in apps:
            app.close()
        server.stop()


@pytest.mark.parametrize("same_user", [True, False], ids=["one-user", "three-users"])
def test_three_devices_that_delete_and_recreate_converge(tmp_path: Path, rng: random.Random, same_user: bool) -> None:
    rounds = size(2, 50)
    diverged = 0
    writes = pauses = 0
    for n in range(rounds):
        seed = rng.randrange(1 << 30)
        differences, w, p = run_round(tmp_path / f"round{n}", seed, same_user)
        writes += w
        pauses += p
        if differences:
            diverged += 1
            print(f"round {n} (seed {seed}): {len(differences)} object(s) differ:\n  " + "\n  ".join(differences[:10]))
    who = "one user" if same_user else "three users"
    report(f"three devices, {who}", rounds, writes, pauses, diverged, 0,
           f"{rounds} rounds of 3 x {TRANSACTIONS} transactions over {KEYS} keys; {diverged} diverged")
    assert diverged == 0, f"{diverged} of {rounds} rounds diverged"
