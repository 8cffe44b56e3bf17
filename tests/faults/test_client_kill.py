"""A sync client killed with SIGKILL at random points: mid-transaction, mid-upload and
mid-bootstrap. After each kill the file opens in a new process, holds every transaction the
killed process saw committed (and no part of any other), and everything reaches the server.

One writer file lives through all the rounds (so kills pile up on one file); each round kills a
process of it, then `verify` reopens it, reports what it holds and waits for the upload. At the
end a new client downloads the server's copy and must find every committed transaction whole.

How the kill is made to land where it should:
* mid-transaction: the writer does nothing but large transactions (`create_many` of
  TXN_OBJECTS objects, then commit); it is killed at a random time. A kill that lands in a
  transaction shows as the next transaction missing (it was never committed).
* mid-upload: the writer commits UPLOAD_TXNS transactions of ~250 KB, then waits for the
  upload; the kill comes after the server's `atoll_uploads_total` grew (it integrated part of
  them) plus a random delay, and counts as mid-upload when `wait_for_upload` had not returned.
* mid-bootstrap: a new file subscribes to the seeded data set; the kill comes after the first
  progress event that is not complete, plus a random delay, and counts as mid-bootstrap when the
  subscription set was not complete yet. The same file is then opened again and must complete.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from pathlib import Path
from typing import Dict

from conftest import Client, Server, report, run_client, size

ROUNDS = size(6, 100)
SEED_TXNS = size(16, 30)          # the bootstrap's data set: SEED_TXNS x 500 objects
TXN_OBJECTS = 1000
UPLOAD_TXNS, UPLOAD_OBJECTS, UPLOAD_PAYLOAD = 4, 250, 1000


def integrity(path: Path) -> str:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute("PRAGMA integrity_check").fetchone()[0]


def test_client_killed_at_random_points(server: Server, tmp_path: Path, rng) -> None:
    url = server.url
    run_client("write", url, tmp_path / "seed", "--first-txn", str(-SEED_TXNS),
               "--txns", str(SEED_TXNS), "--per-txn", "500", "--payload", "200")

    writer = tmp_path / "writer"
    expected: Dict[int, int] = {}   # txn -> objects, for every txn known committed
    next_txn = 0
    kills = {"transaction": 0, "upload": 0, "bootstrap": 0}
    landed = {"transaction": 0, "upload": 0, "bootstrap": 0}
    lost = crashes = 0
    started = time.monotonic()

    for r in range(ROUNDS):
        kind = ("transaction", "upload", "bootstrap")[r % 3]
        if kind == "bootstrap":
            directory = tmp_path / f"boot-{r}"
            c = Client("bootstrap", url, directory, "--query", "txn < 0")
            c.wait_for(lambda l: l.startswith("P ") and l.split()[1] != l.split()[2]
                       and l.split()[2] != "0", 60)
            time.sleep(rng.uniform(0, 0.4))
            c.kill()
            kills[kind] += 1
            if not any(l.startswith("HAVE") for l in c.seen):
                landed[kind] += 1
            again = run_client("bootstrap", url, directory, "--query", "txn < 0")
            have = again.have()
            assert have == {t: 500 for t in range(-SEED_TXNS, 0)}, (
                f"round {r}: the bootstrap resumed after a kill holds {have}")
            assert integrity(directory / "client.realm") == "ok"
            shutil.rmtree(directory)
            continue

        per_txn = TXN_OBJECTS if kind == "transaction" else UPLOAD_OBJECTS
        if kind == "transaction":
            c = Client("write", url, writer, "--first-txn", str(next_txn),
                       "--per-txn", str(TXN_OBJECTS), "--payload", "50")
            c.wait_for(lambda l: l == "READY", 60)
            time.sleep(rng.uniform(0.05, 0.8))
            c.kill()
        else:
            before = server.metric("atoll_uploads_total")
            c = Client("write", url, writer, "--first-txn", str(next_txn),
                       "--txns", str(UPLOAD_TXNS), "--per-txn", str(UPLOAD_OBJECTS),
                       "--payload", str(UPLOAD_PAYLOAD))
            last = next_txn + UPLOAD_TXNS - 1
            c.wait_for(lambda l: l == f"C {last}", 60)
            deadline = time.monotonic() + 30
            while server.metric("atoll_uploads_total") <= before:
                assert time.monotonic() < deadline, "the server integrated nothing in 30 s"
                time.sleep(0.01)
            time.sleep(rng.uniform(0, 0.15))
            c.kill()
        kills[kind] += 1
        committed = c.committed()
        for t in committed:
            expected[t] = per_txn

        v = run_client("verify", url, writer)
        have = {t: n for t, n in v.have().items() if t >= 0}
        missing = {t: n for t, n in expected.items() if have.get(t, 0) != n}
        lost += sum(n - have.get(t, 0) for t, n in missing.items())
        assert not missing, f"round {r} ({kind}): committed transactions missing or partial " \
                            f"after the kill: {sorted(missing)[:10]}"
        # A transaction in flight at the kill: there whole (it committed) or not at all.
        for t, n in have.items():
            if t not in expected:
                assert n == per_txn, f"round {r}: transaction {t} is partial ({n} of {per_txn})"
                expected[t] = n
        in_flight = (max(committed) + 1) if committed else next_txn
        if kind == "transaction" and in_flight not in have:
            landed[kind] += 1
        if kind == "upload" and not c.acknowledged():
            landed[kind] += 1
        assert integrity(writer / "client.realm") == "ok"
        next_txn = max(list(expected) + [next_txn - 1]) + 1
        errors = [e for e in v.errors() if e.split()[1] == "clientReset"]
        assert not errors, f"round {r}: {errors}"

    final = run_client("bootstrap", url, tmp_path / "final", "--query", "txn >= 0")
    have = final.have()
    missing = {t: n for t, n in expected.items() if have.get(t, 0) != n}
    lost += sum(n - have.get(t, 0) for t, n in missing.items())
    assert not missing, f"committed transactions missing on the server: {sorted(missing)[:10]}"
    assert server.alive(), f"the server died:\n{server.log_tail()}"

    elapsed = time.monotonic() - started
    objects = sum(expected.values())
    report("client-kill", ROUNDS, len(expected), sum(kills.values()), lost, crashes,
           f"{len(expected)} txns / {objects} objects committed by killed clients, all on the "
           f"server; kills that landed mid-transaction {landed['transaction']}/"
           f"{kills['transaction']}, mid-upload {landed['upload']}/{kills['upload']}, "
           f"mid-bootstrap {landed['bootstrap']}/{kills['bootstrap']}; {elapsed:.0f} s")
