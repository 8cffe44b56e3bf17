"""A user re-subscribing to a large view, again and again, against a real atoll-server.

Each new subscription set sends its whole view (a bootstrap). The server used to read and encode
it on the queue that integrates every user's uploads, so a user who re-subscribed to a 30 MB
view in a loop held everyone's writes for most of the time (each bootstrap about a second of
that queue). Bootstraps now read a snapshot of the store on a worker thread; the queue only
starts them and, when they end, catches the session up with what was integrated meanwhile.

The bystander (two devices of one user, through the Python binding) times how long its writes
take to reach its other device before and during the attack. What the attack may cost it is
measured against the attacker's own bootstraps in the same run: while a bootstrap held the
queue, a write waited for the rest of it, about half a bootstrap on the median.
"""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path
from typing import List

from conftest import SCHEMA, Bystander, Raw, login_anonymous, percentile, plant_blobs, report, start_server

APP = "big"
BLOB = {"name": "Blob", "primaryKey": "_id", "properties": {"_id": "string", "text": "string"}}
OWNER = {"roles": [{"name": "owner", "read": "owner_id == %user.id", "write": "owner_id == %user.id"}]}
PUBLIC = {"roles": [{"name": "everyone", "read": True, "write": True}]}
CONFIG = {"maxSignupsPerAddressPerMinute": 0,
          "apps": [{"id": APP, "developmentMode": False, "schema": SCHEMA + [BLOB], "sync": {"mode": "flexible"},
                    "rules": {"Task": OWNER, "Blob": PUBLIC},
                    # The attacker is not slowed by its bootstrap budget: what is measured is
                    # what its bootstraps cost others while they run.
                    "queryLimits": {"bootstrapSecondsPerMinute": 600}}]}
OBJECTS = 60
OBJECT_BYTES = 500_000


def test_resubscribing_to_a_large_view_does_not_hold_up_others_writes(tmp_path: Path) -> None:
    server = start_server(tmp_path / "server", CONFIG)
    bystander = None
    try:
        plant_blobs(server, APP, SCHEMA + [BLOB], OBJECTS, OBJECT_BYTES)
        bystander = Bystander(server, APP, tmp_path, owner_rules=True, schema=SCHEMA + [BLOB])
        before = [bystander.probe() for _ in range(20)]

        stop = threading.Event()
        bootstraps: List[float] = []
        failures: List[BaseException] = []

        def attack() -> None:
            try:
                attacker = login_anonymous(server, APP)
                with Raw(server, APP, attacker["access_token"]) as conn:
                    conn.bind(schema=SCHEMA + [BLOB])
                    version = 0
                    while not stop.is_set():
                        version += 1
                        # A new set each time (another version of the same view): a whole bootstrap.
                        started = time.monotonic()
                        got = conn.subscribe("_id BEGINSWITH 'b'", [], cls="Blob", version=version)
                        assert got[-1]["type"] == "queryComplete", got[-1]
                        bootstraps.append(time.monotonic() - started)
            except BaseException as e:  # noqa: BLE001 - reported by the test
                failures.append(e)

        thread = threading.Thread(target=attack)
        thread.start()
        during: List[float] = []
        try:
            deadline = time.monotonic() + 120
            while (len(bootstraps) < 2 or len(during) < 40) and time.monotonic() < deadline and not failures:
                if bootstraps:
                    during.append(bystander.probe())
                else:
                    time.sleep(0.05)
        finally:
            stop.set()
            thread.join(120)
        assert not failures, failures
        server.assert_alive()
        assert bystander.errors == [], bystander.errors
    finally:
        if bystander is not None:
            bystander.close()
        alive = server.proc.poll() is None
        code = server.stop()
    bootstrap = statistics.median(bootstraps)
    figures = (f"{len(bootstraps)} bootstraps of a {OBJECTS * OBJECT_BYTES >> 20} MB view in a loop "
               f"(median {bootstrap:.2f} s each): the bystander's writes took p50 {statistics.median(before) * 1000:.0f} ms "
               f"before, p50 {statistics.median(during) * 1000:.0f} ms / p95 {percentile(during, 0.95) * 1000:.0f} ms "
               f"/ max {max(during) * 1000:.0f} ms during ({len(during)} writes)")
    print("\n" + figures)
    report("hostile-bootstrap", rounds=len(bootstraps), operations=len(before) + len(during), faults=0, lost=0,
           crashes=0 if alive and code == 0 else 1, figures=figures)
    assert alive and code == 0, f"the server did not stop cleanly ({code})"
    # While a bootstrap held the queue a write waited for the rest of it: half a bootstrap on
    # the median. Off the queue, the bystander's writes wait for no bootstrap.
    assert bootstrap > 0.2, f"the view is too small to measure anything: {figures}"
    assert statistics.median(during) < bootstrap / 4, figures
